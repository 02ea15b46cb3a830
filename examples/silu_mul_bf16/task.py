"""The gated activation of an LLM's MLP (SwiGLU's elementwise half): silu(a) * b on two
4096 x 14336 bf16 activations. There is no PRECISION line: the evaluator infers bf16 from the
inputs (`cuda-agent init` prints "precision bf16 (inferred from inputs: bfloat16 x2)"), so an
honest bf16 kernel is judged as one. Fused, it moves 6 bytes per element (two reads, one write)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS = 4096
HIDDEN = 14336


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return F.silu(a) * b


def get_inputs():
    a = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)
    b = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)
    return [a, b]


def get_init_inputs():
    return []
