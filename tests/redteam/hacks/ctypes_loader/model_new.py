import torch
import torch.nn as nn

import ctypes
import cuda_extension


_cublas = ctypes.CDLL("libcublas.so")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        handle = ctypes.c_void_p()
        _cublas.cublasCreate_v2(ctypes.byref(handle))
        return cuda_extension.matmul_forward(A, B)
