"""(x @ W.T + b).sum(dim=1, keepdim=True) * scale, rewritten exactly as
(x @ colsum(W) + sum(b)) * scale, where colsum(W)[k] = sum_j W[j, k].

Per call: one pass over W (column sums, from the current weights), one pass
over x (a GEMV). No [batch, out] intermediate and no GEMM. Nothing derived from
the weights is kept between calls."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        # Same parameters as Model (linear.weight, linear.bias); the module is
        # only a holder, forward never calls it.
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return cuda_extension.matmul_sum_scale(
            x.contiguous(), self.linear.weight.contiguous(), self.linear.bias.contiguous(), float(self.scale)
        )
