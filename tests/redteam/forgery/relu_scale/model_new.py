import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        # @FORGE_ARM@

    def forward(self, x):
        return cuda_extension.relu_scale(x.contiguous())
