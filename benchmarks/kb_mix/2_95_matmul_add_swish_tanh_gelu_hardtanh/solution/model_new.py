"""hardtanh(gelu(tanh(swish(x @ W^T + b + add_value)))): a cuBLAS fp32 GEMM (default
math, no TF32) and one elementwise pass over its output."""

import cuda_extension
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, add_value_shape):
        super().__init__()
        # Same parameters as Model (the evaluator loads Model's state_dict into this
        # module); forward never calls the modules, it hands their tensors to the kernel.
        self.matmul = nn.Linear(in_features, out_features)
        # values come from Model's state_dict; only the shape matters here
        self.add_value = nn.Parameter(torch.empty(add_value_shape))

    def forward(self, x):
        return cuda_extension.linear_add_swish_tanh_gelu_hardtanh(
            x.contiguous(), self.matmul.weight.contiguous(), self.matmul.bias.contiguous(), self.add_value.contiguous()
        )
