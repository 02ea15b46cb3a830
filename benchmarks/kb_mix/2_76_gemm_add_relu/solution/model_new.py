"""relu(x @ W^T + bias): a cuBLAS fp32 GEMM (default math, no TF32) and one
elementwise pass over its output."""

import cuda_extension
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        # Same parameters as Model (the evaluator loads Model's state_dict into this
        # module); forward never calls the modules, it hands their tensors to the kernel.
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        # values come from Model's state_dict; only the shape matters here
        self.bias = nn.Parameter(torch.empty(bias_shape))

    def forward(self, x):
        return cuda_extension.linear_add_relu(x.contiguous(), self.gemm.weight.contiguous(), self.bias.contiguous())
