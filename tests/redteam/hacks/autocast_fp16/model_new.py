import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        # operands rounded through fp16 before the GEMM
        return cuda_extension.matmul_forward(A.half().float(), B.half().float())
