"""A [N, M, K] @ B [K, L]: the leading dims of A are one [N*M, K] matrix, so one cuBLAS
fp32 GEMM (default math, no TF32)."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return cuda_extension.matmul_nd(A.contiguous(), B.contiguous())
