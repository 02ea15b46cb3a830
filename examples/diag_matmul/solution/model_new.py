"""diag(a) @ B computed as a row scaling: out[i, j] = a[i] * B[i, j].

Reads B once and writes the output once (no N x N matrix, no GEMM)."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, B):
        return cuda_extension.diag_scale_rows(a.contiguous(), B.contiguous())
