"""Softmax over the last dimension of a [256, 4096] fp32 matrix (reduction + elementwise)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(256, 4096)]


def get_init_inputs():
    return []
