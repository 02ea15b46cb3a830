"""leaky_relu((x @ W^T + b) * multiplier): a cuBLAS fp32 GEMM (default math, no TF32)
and one elementwise pass over its output."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        # Same parameters as Model (the evaluator loads Model's state_dict into this
        # module); forward never calls the modules, it hands their tensors to the kernel.
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        # Model keeps an nn.LeakyReLU, which has no parameters: only its slope is needed here.
        self.negative_slope = negative_slope

    def forward(self, x):
        return cuda_extension.linear_mul_leaky_relu(
            x.contiguous(), self.gemm.weight.contiguous(), self.gemm.bias.contiguous(), self.multiplier, self.negative_slope
        )
