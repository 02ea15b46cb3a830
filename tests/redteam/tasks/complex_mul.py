"""Elementwise product of two complex64 tensors: an output with real and imaginary parts."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a * b


def get_inputs():
    return [torch.randn(1 << 20, dtype=torch.complex64), torch.randn(1 << 20, dtype=torch.complex64)]


def get_init_inputs():
    return []
