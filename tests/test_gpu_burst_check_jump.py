"""The clock's output check on a real GPU generator: the reference's digests of sampled calls, reached by
the CUDA generator's offset (`child.burst._jumped_digests`), equal those of the sequence drawn call by call
and those of the candidate's graph replays; draws from another generator are drawn call by call.
Skips without a CUDA GPU; tests/test_burst_check_jump.py checks the logic on the CPU."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from cuda_agent.eval.channel import messages as P
from cuda_agent.eval.child import burst, hashed

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

GPU = torch.device("cuda", 0)
N = (1 << 20) + 7


def _inputs_torch():
    return [torch.randn(N), torch.rand(N // 2, dtype=torch.bfloat16), 3]


def _inputs_sized():  # a size drawn each call (eager only: not capturable); torch's offset step is the same
    n = int(torch.randint(1000, 5000, (1,)))
    return [torch.randn(N), torch.randn(n).mean() + torch.zeros(N // 2), 3]


def _inputs_cpu():  # drawn on the CPU's generator, then moved: no offset to jump
    return [torch.randn(N, device="cpu"), torch.rand(N // 2, device="cpu"), 3]


def fn(x, y, s):
    return [torch.relu(x) * 1.5, y.float() * s]


def _st(get_inputs):
    return SimpleNamespace(
        device=GPU, task=SimpleNamespace(get_inputs=get_inputs), role="reference", model=fn, bursts={}
    )


@pytest.mark.parametrize("get_inputs", [_inputs_torch, _inputs_sized])
@pytest.mark.parametrize(("digest", "draws"), [("hash", "fast"), ("hash", "torch"), ("dense", "torch")])
def test_jumped_digests_equal_the_sequence_and_the_graphs(get_inputs, digest, draws):
    if draws == "fast" or digest == "hash":
        hashed.ready(GPU)
    st = _st(get_inputs)
    numels = [N, N // 2]
    only = {0, 7, 19, 30}
    with torch.no_grad():
        want, _ = burst._sequence_digests(st, fn, 4242, 31, 1, numels, only, digest, draws)  # type: ignore[arg-type]
        got, _ = burst._jumped_digests(st, fn, 4242, numels, only, digest, draws)  # type: ignore[arg-type]
        rows = sorted(only)
        assert not torch.isnan(want[rows][:, :4]).any()
        assert torch.equal(got[rows][:, :4], want[rows][:, :4])
        if get_inputs is _inputs_sized:
            return
        plan = burst.Plan(fn, 16, numels, burst._weight_buffers(numels, GPU, digest), digest=digest, draws=draws)
        assert burst._capture(st, plan) is None  # type: ignore[arg-type]
        replayed = burst._run(st, plan, 4242, 2)  # type: ignore[arg-type]  # what the candidate's burst computes
        torch.cuda.synchronize()
        for c in (0, 7, 19, 30):
            scale = float(want[c, :4].abs().max()) * 1e-4 + 1e-6
            assert torch.allclose(replayed[c, :4], want[c, :4], rtol=1e-4, atol=scale), c


def test_the_reference_says_it_jumped_and_an_exact_request_draws_every_call():
    hashed.ready(GPU)
    st = _st(_inputs_torch)
    req = P.Digests(99, [2, 9, 25], 1e-2, 1e-2, "hash", "fast")
    jumped = burst.cmd_digests(st, req)  # type: ignore[arg-type]
    exact = burst.cmd_digests(st, P.Digests(99, [2, 9, 25], 1e-2, 1e-2, "hash", "fast", True))  # type: ignore[arg-type]
    assert jumped["jumped"] is True and exact["jumped"] is False
    assert jumped["digests"] == exact["digests"] and jumped["scales"] == exact["scales"]
    with pytest.raises(burst._NoJump):
        burst._jumped_digests(_st(_inputs_cpu), fn, 99, [N, N // 2], {2, 9}, "hash", "torch")  # type: ignore[arg-type]
    assert burst.cmd_digests(_st(_inputs_cpu), req)["jumped"] is False  # type: ignore[arg-type]
