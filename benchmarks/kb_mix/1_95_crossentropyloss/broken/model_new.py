"""Deliberately wrong variant (the sum of the row losses instead of their mean (missing 1/B)).

Mean cross-entropy of logits against int64 class indices: one block per row for
logsumexp minus the target's logit, one block for the mean (in double)."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return cuda_extension.cross_entropy(predictions.contiguous(), targets.contiguous())
