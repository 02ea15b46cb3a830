"""C = A @ B: one cuBLAS fp32 GEMM (default math, no TF32)."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return cuda_extension.matmul(A.contiguous(), B.contiguous())
