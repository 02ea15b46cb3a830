"""sigmoid(y) * scaling_factor + y with y = x @ W^T + b: a cuBLAS fp32 GEMM (default
math, no TF32) and one elementwise pass over its output."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        # Same parameters as Model (the evaluator loads Model's state_dict into this
        # module); forward never calls the modules, it hands their tensors to the kernel.
        self.gemm = nn.Linear(input_size, hidden_size)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        return cuda_extension.linear_sigmoid_scale_residual(
            x.contiguous(), self.gemm.weight.contiguous(), self.gemm.bias.contiguous(), self.scaling_factor
        )
