"""Softmax over the last dimension of a wide fp32 matrix (64 KiB per row) of sharp logits.

The logits are standard normal times 4 (attention scores at a low temperature): every row then
has entries far above the 1e-2 tolerance, so the correctness check sees the values. With plain
randn logits every output of a 16384-wide row is below 1e-2 and all-zeros, a constant or another
input's output missed the elementwise bound by only 1.1x (issue 17: a weak task).
"""

import torch
import torch.nn as nn

ROWS = 4096
COLS = 16384
SCALE = 4.0


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLS) * SCALE]


def get_init_inputs():
    return []
