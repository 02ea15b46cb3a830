"""Your optimized model. Rules (see SKILL.md): keep the constructor signature of
Model, compute everything through the compiled `cuda_extension`, and use torch
only to allocate tensors or read their properties."""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        raise NotImplementedError("write ModelNew: same parameters as Model, forward calls cuda_extension")

    def forward(self, *inputs):
        raise NotImplementedError
