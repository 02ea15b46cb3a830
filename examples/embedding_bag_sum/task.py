"""An EmbeddingBag-style gather-sum, as in a recommender's or a bag-of-words model's lookup: each of
16384 bags sums 32 rows of a 1M x 128 fp32 table, picked by int64 indices. The inputs are indices
only; the task's precision is fp32 (its table's), and the floor is the 268 MB of rows it gathers."""

import torch
import torch.nn as nn

NUM_EMBEDDINGS = 1 << 20
DIM = 128
BAGS = 16384
BAG_SIZE = 32


class Model(nn.Module):
    def __init__(self, num_embeddings, dim):
        super().__init__()
        self.bag = nn.EmbeddingBag(num_embeddings, dim, mode="sum")

    def forward(self, indices):
        return self.bag(indices)


def get_inputs():
    return [torch.randint(0, NUM_EMBEDDINGS, (BAGS, BAG_SIZE))]


def get_init_inputs():
    return [NUM_EMBEDDINGS, DIM]
