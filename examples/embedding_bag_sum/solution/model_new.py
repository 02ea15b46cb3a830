"""The bags' sums in one kernel: a warp per bag, each lane holding 4 of the 128 columns (one float4),
the bag's indices read once by the warp and shared with shuffles, 8 rows in flight per lane. It
reads each gathered 512-byte row once and writes the [bags, 128] output once."""

import cuda_extension
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num_embeddings, dim):
        super().__init__()
        # Same parameter as Model (bag.weight); its values come from Model's state_dict, so the
        # table is left uninitialised here instead of drawing 128M normals for nothing.
        self.bag = nn.EmbeddingBag(num_embeddings, dim, mode="sum", _weight=torch.empty(num_embeddings, dim))

    def forward(self, indices):
        return cuda_extension.bag_sum(indices.contiguous(), self.bag.weight.contiguous())
