"""softmax(gelu(x @ W^T + b), dim=1): a cuBLAS fp32 GEMM (default math, no TF32), then
one block per row for GELU and the softmax, in place."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        # Same parameters as Model (the evaluator loads Model's state_dict into this
        # module); forward never calls the modules, it hands their tensors to the kernel.
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return cuda_extension.linear_gelu_softmax(
            x.contiguous(), self.linear.weight.contiguous(), self.linear.bias.contiguous()
        )
