"""relu(x @ W.T + b) through nn.Linear, with many rows and outputs and a short
reduction dimension, so the output pass after the GEMM is a visible share of
the time."""

import torch
import torch.nn as nn

BATCH = 16384
IN_FEATURES = 256
OUT_FEATURES = 4096


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
