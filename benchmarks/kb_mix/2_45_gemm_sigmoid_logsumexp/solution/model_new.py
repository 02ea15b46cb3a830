"""logsumexp over features of sigmoid(x @ W1^T + b1) @ W2^T + b2: two cuBLAS fp32 GEMMs
(default math, no TF32), an elementwise bias+sigmoid pass between them, one block per
row for the logsumexp."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        # Same parameters as Model (the evaluator loads Model's state_dict into this
        # module); forward never calls the modules, it hands their tensors to the kernel.
        self.linear1 = nn.Linear(input_size, hidden_size)
        self.linear2 = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        return cuda_extension.gemm_sigmoid_gemm_lse(
            x.contiguous(),
            self.linear1.weight.contiguous(),
            self.linear1.bias.contiguous(),
            self.linear2.weight.contiguous(),
            self.linear2.bias.contiguous(),
        )
