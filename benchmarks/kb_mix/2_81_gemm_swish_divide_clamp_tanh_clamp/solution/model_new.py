"""clamp(tanh(clamp(swish(x @ W^T + b) / 2, -1, 1)), -1, 1): a cuBLAS fp32 GEMM (default
math, no TF32) and one elementwise pass over its output. (The task's Linear has a bias.)"""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        # Same parameters as Model (the evaluator loads Model's state_dict into this
        # module); forward never calls the modules, it hands their tensors to the kernel.
        self.gemm = nn.Linear(in_features, out_features, bias=bias)

    def forward(self, x):
        return cuda_extension.linear_swish_div_clamp_tanh(
            x.contiguous(), self.gemm.weight.contiguous(), self.gemm.bias.contiguous()
        )
