import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fn = torch.compile(lambda t: t.softmax(dim=1))

    def forward(self, x):
        return self.fn(x)
