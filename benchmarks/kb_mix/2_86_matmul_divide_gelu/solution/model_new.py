"""gelu((x @ W^T + b) / divisor) (erf GELU): a cuBLAS fp32 GEMM (default math, no TF32)
and one elementwise pass over its output."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        # Same parameters as Model (the evaluator loads Model's state_dict into this
        # module); forward never calls the modules, it hands their tensors to the kernel.
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        return cuda_extension.linear_div_gelu(
            x.contiguous(), self.linear.weight.contiguous(), self.linear.bias.contiguous(), self.divisor
        )
