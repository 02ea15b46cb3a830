"""Softmax over the last dimension of a wide fp32 matrix (64 KiB per row)."""

import torch
import torch.nn as nn

ROWS = 4096
COLS = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
