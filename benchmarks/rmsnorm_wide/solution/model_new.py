"""RMSNorm with one 512-thread block per row holding the row in registers (up
to 32768 channels): x is read from HBM once and y written once. Other widths or
layouts use a two-pass kernel."""

import cuda_extension
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))  # overwritten by the loaded state_dict
        self.eps = eps

    def forward(self, x):
        return cuda_extension.rmsnorm(x.contiguous(), self.weight.contiguous(), float(self.eps))
