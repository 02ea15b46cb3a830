"""silu(a) * b in one bf16 kernel: 16-byte loads of 8 bf16 from each input, the math in fp32
(a / (1 + exp(-a)) * b), one rounding to bf16 per output. Eager PyTorch rounds silu(a) to bf16
before the product, so the two differ by about one bf16 ulp (2^-8 relative) at most."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return cuda_extension.silu_mul(a.contiguous(), b.contiguous())
