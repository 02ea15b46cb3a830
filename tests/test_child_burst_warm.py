"""The digest path's start-up warm-up (`child_burst.warm_digest_path`) runs on the CPU lane too and
draws from no generator a task relies on: the task's inputs are seeded per draw, but a warm-up that
consumed the default generator would still make a child's state depend on whether it was a spare.
Its effect (the first burst no slower than the second) is a GPU figure: benchmarks/defence_trace.py."""

from __future__ import annotations

import torch

from cuda_agent.eval.child_burst import warm_digest_path


def test_warm_digest_path_leaves_the_default_generator_alone():
    torch.manual_seed(1234)
    before = torch.get_rng_state()
    warm_digest_path(torch.device("cpu"))
    assert torch.equal(torch.get_rng_state(), before)
    torch.manual_seed(1234)
    a = torch.rand(4)
    torch.manual_seed(1234)
    warm_digest_path(torch.device("cpu"))
    assert torch.equal(torch.rand(4), a)
