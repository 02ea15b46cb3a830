"""l * mish(l) with l the row logsumexp of clamp(2 * scale * (x @ W^T + b)): a cuBLAS
fp32 GEMM (default math, no TF32), then one block per row (max pass, sum-of-exp pass)."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scale_factor, clamp_min, clamp_max):
        super().__init__()
        # Same parameters as Model (the evaluator loads Model's state_dict into this
        # module); forward never calls the modules, it hands their tensors to the kernel.
        self.matmul = nn.Linear(input_size, hidden_size)
        self.scale_factor = scale_factor
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        return cuda_extension.linear_lse_mish(
            x.contiguous(), self.matmul.weight.contiguous(), self.matmul.bias.contiguous(), self.scale_factor,
            self.clamp_min, self.clamp_max
        )
