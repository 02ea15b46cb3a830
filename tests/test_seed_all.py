"""child_state.seed_all: the evaluator's one seeding of a child's generators. It must leave every
generator a task can draw from (Python's, NumPy's, torch's CPU and each GPU's) exactly where
torch.manual_seed and friends would, because the reference child, the candidate child and the
cached baselines all draw their inputs by it. The GPU test covers the fast path (CUDA started)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from cuda_agent.eval.child.state import seed_all


def draws(device: str) -> tuple[float, float, list[float]]:
    return random.random(), float(np.random.rand()), torch.randn(4, device=device).tolist()


def test_seed_all_leaves_the_cpu_generators_where_manual_seed_does():
    seed = 0x2F00_0000_0001  # seeds from derive_seed are up to 62 bits
    seed_all(seed)
    got = draws("cpu")
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    assert draws("cpu") == got
    seed_all(seed + 1)
    assert draws("cpu") != got  # the seed reaches every generator


@pytest.mark.gpu
def test_seed_all_seeds_the_gpu_generator_as_manual_seed_does():
    torch.cuda.init()
    assert torch.cuda.is_initialized()
    for seed in (7, (1 << 62) - 3):
        torch.manual_seed(seed)
        want = (torch.randn(8, device="cuda").tolist(), torch.randn(3).tolist())
        torch.manual_seed(seed + 99)  # move every generator away first
        torch.randn(8, device="cuda")
        seed_all(seed)
        assert (torch.randn(8, device="cuda").tolist(), torch.randn(3).tolist()) == want
