"""kl_div(log(predictions), targets, reduction="batchmean"): one grid-stride pass
summing t * (log t - log p) per block in double, one block for the total / batch."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return cuda_extension.kl_div_batchmean(predictions.contiguous(), targets.contiguous())
