"""Deliberately wrong variant (missing square root: divides by the variance instead of the standard deviation).

nn.LayerNorm over (features, dim1, dim2) with its weight and bias: chunked row sums in
double (the rows are few and 4M elements long), per-row mean and rstd, one elementwise pass."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        # Same parameters as Model (the evaluator loads Model's state_dict into this
        # module); forward never calls the modules, it hands their tensors to the kernel.
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        return cuda_extension.layer_norm(
            x.contiguous(), self.ln.weight.contiguous(), self.ln.bias.contiguous(), self.ln.eps
        )
