"""relu(x @ W.T + b) as one cuBLASLt fp32 GEMM (CUBLAS_COMPUTE_32F, no TF32)
whose epilogue adds the bias and applies the ReLU, so the [batch, out] output
is written once and never read back."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        # Same parameters as Model; forward never calls the module.
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return cuda_extension.linear_bias_relu(
            x.contiguous(), self.linear.weight.contiguous(), self.linear.bias.contiguous()
        )
