"""C = A @ B.T: one cuBLAS fp32 GEMM that reads B transposed in place (default math,
no TF32); forward does not transpose anything."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return cuda_extension.matmul_bt(A.contiguous(), B.contiguous())
