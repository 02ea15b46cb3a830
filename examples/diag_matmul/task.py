"""diag(a) @ B with a dense diagonal matrix: the reference builds an N x N
matrix and runs a full GEMM, although the result is only B with each row
scaled by one entry of a."""

import torch
import torch.nn as nn

N = 4096
M = 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, B):
        return torch.diag(a) @ B


def get_inputs():
    return [torch.randn(N), torch.randn(N, M)]


def get_init_inputs():
    return []
