"""Row sums of x @ W^T + b, shape [batch, 1]: the reference's max, mean and two
logsumexps over a dimension of size 1 return their input. A cuBLAS fp32 GEMM
(default math, no TF32) and one block per row for the sum."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        # Same parameters as Model (the evaluator loads Model's state_dict into this
        # module); forward never calls the modules, it hands their tensors to the kernel.
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return cuda_extension.linear_row_sum(
            x.contiguous(), self.linear.weight.contiguous(), self.linear.bias.contiguous()
        )
