"""Deliberately wrong variant (missing the 0.5 scaling).

minGPT's tanh GELU, one elementwise kernel (precise tanhf)."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return cuda_extension.new_gelu(x.contiguous())
