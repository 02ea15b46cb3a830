"""Deliberately wrong variant (the residual add is missing: returns y * s instead of y * s + y).

y * scaling_factor + y with y = x @ W^T + b (the reference's residual add of its own
unscaled output): a cuBLAS fp32 GEMM (default math, no TF32) and one elementwise pass."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        # Same parameters as Model (the evaluator loads Model's state_dict into this
        # module); forward never calls the modules, it hands their tensors to the kernel.
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        return cuda_extension.linear_scale_residual(
            x.contiguous(), self.matmul.weight.contiguous(), self.matmul.bias.contiguous(), self.scaling_factor
        )
