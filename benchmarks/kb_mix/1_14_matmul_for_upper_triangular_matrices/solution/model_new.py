"""triu(A @ B): one cuBLAS fp32 GEMM (default math, no TF32) and a pass that zeroes the
strictly lower triangle. (The triangular inputs would allow skipping work; this one does not.)"""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return cuda_extension.triu_matmul(A.contiguous(), B.contiguous())
