"""Row softmax with a warp-per-row kernel.

Deliberately not torch.nn.functional.softmax, not torch.softmax, not self.act(x):
those names appear here only in a docstring, which the static checks must ignore."""
import torch
import torch.nn as nn

import cuda_extension  # F.softmax(x, dim=1) would be the fallback; it is not used


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        # torch.cuda.Stream() and threading.Thread are not used either.
        label = "torch.relu and os.system in a string are harmless"
        del label
        return cuda_extension.softmax_forward(x.contiguous())
