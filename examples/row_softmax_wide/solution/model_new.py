"""Row softmax with one 512-thread block per row that keeps the whole row in
registers (up to 32768 columns): HBM is read once and written once. Other
widths or layouts use a two-pass online-softmax kernel."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return cuda_extension.row_softmax(x.contiguous())
