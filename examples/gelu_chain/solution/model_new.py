"""One fused elementwise kernel for the whole chain, using the GPU's special
function unit (ex2/lg2/rcp/tanh approximations, 6 per element) instead of
precise library math, with 16-byte loads and stores. Accuracy: about 5e-3
absolute worst case (the tanh approximation's 2^-11 relative error), checked
by emulation against a float64 reference; the tolerance is 1e-2 + 1e-2*|ref|."""

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return cuda_extension.gelu_chain(x.contiguous())
