"""The clock's output check reaches sampled calls by the generator's offset (`child.burst._jumped_digests`).

The reference used to draw every call of a burst's sequence up to the last sampled one; it now sets the
device generator's offset to where the sequence puts each sampled call. What must hold: the digests are
those of the sequence drawn call by call; draws that step the offset unevenly, or move another generator,
are found and the calls are drawn one by one; and the parent never calls a candidate wrong on a jumped
reply alone (`timing.timed.check_burst_outputs` asks for the exact sequence first). The CPU generator has
no offset, so here a counter stands in for the GPU's (tests/test_gpu_burst_check_jump.py runs the real one).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from cuda_agent.eval.channel import messages as P
from cuda_agent.eval.channel.exchange import Stop
from cuda_agent.eval.child import burst
from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.judge.result import EvalResult, Status
from cuda_agent.eval.timing import timed
from cuda_agent.task.taskfile import Task

CPU = torch.device("cpu")
N = 1000


class Counter:
    """A counter-based generator: each draw is a function of the offset, which it then steps."""

    def __init__(self, step=lambda offset: 4):
        self.offset, self.step, self.drawn = 0, step, 0

    def get_offset(self) -> int:
        return self.offset

    def set_offset(self, o: int) -> None:
        self.offset = o

    def draw(self, n: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.offset * 7919 + 1)
        self.offset += self.step(self.offset)
        self.drawn += 1
        return torch.randn(n, generator=g)


@pytest.fixture
def counter(monkeypatch):
    gen = Counter()
    others = {"state": 0}
    real_seed = burst.seed_all

    def seed_all(salt: int) -> None:
        real_seed(salt)
        gen.offset, gen.drawn = 1000 + salt % 97, 0  # the weights' draws come first, on the CPU's generator

    monkeypatch.setattr(burst, "seed_all", seed_all)
    monkeypatch.setattr(burst, "_device_generator", lambda device: gen)
    monkeypatch.setattr(burst, "_other_rng", lambda device: others["state"])
    return gen, others


def _state(gen: Counter, others: dict | None = None, touch_other_at: int | None = None) -> SimpleNamespace:
    calls = {"n": 0}

    def get_inputs():
        if others is not None and calls["n"] == touch_other_at:
            others["state"] += 1  # a draw from a generator the offset does not cover (numpy, say)
        calls["n"] += 1
        return [gen.draw(N), gen.draw(N // 2)]

    return SimpleNamespace(device=CPU, task=SimpleNamespace(get_inputs=get_inputs))


def fn(x, y):
    return [torch.relu(x) * 1.5, y * 2]


NUMELS = [N, N // 2]


@pytest.mark.parametrize("digest", ["hash", "dense"])
def test_jumped_digests_are_the_sequences_and_draw_only_the_sampled_calls(counter, digest):
    gen, _ = counter
    st = _state(gen)
    only = {0, 5, 17, 40}
    want, kept_want = burst._sequence_digests(st, fn, 321, 41, 1, NUMELS, only, digest)  # type: ignore[arg-type]
    assert gen.drawn == 2 * 41
    got, kept = burst._jumped_digests(st, fn, 321, NUMELS, only, digest, "torch")  # type: ignore[arg-type]
    assert gen.drawn == 2 * (2 + 3)  # calls 0 and 1 (the step), then 5, 17 and 40
    rows = sorted(only)
    assert not torch.isnan(want[rows][:, :4]).any()
    assert torch.equal(got[rows][:, :4], want[rows][:, :4]) and torch.isnan(got[rows][:, 4:]).all()
    assert all(torch.equal(a, b) for ka, kb in zip(kept, kept_want, strict=True) for a, b in zip(ka, kb, strict=True))
    other, _ = burst._jumped_digests(st, fn, 322, NUMELS, only, digest, "torch")  # type: ignore[arg-type]
    assert not torch.allclose(other[rows][:, :4], got[rows][:, :4])


def test_an_uneven_step_is_found_at_the_first_call_it_moves(counter):
    gen, _ = counter
    gen.step = lambda offset: 4 if offset < 1060 else 5  # a task whose later draws take more of the offset
    st = _state(gen)
    with pytest.raises(burst._NoJump):
        burst._jumped_digests(st, fn, 0, NUMELS, {3, 30}, "hash", "torch")  # type: ignore[arg-type]
    gen.step = lambda offset: 4 if gen.drawn % 4 < 2 else 6  # uneven within the first two calls
    with pytest.raises(burst._NoJump):
        burst._jumped_digests(st, fn, 0, NUMELS, {3, 30}, "hash", "torch")  # type: ignore[arg-type]


def test_draws_that_move_another_generator_are_drawn_call_by_call(counter):
    gen, others = counter
    for at in (1, 3):  # the second draw (it measures the step) and the fourth (call 9, a jumped one)
        st = _state(gen, others, touch_other_at=at)
        with pytest.raises(burst._NoJump):
            burst._jumped_digests(st, fn, 0, NUMELS, {3, 9, 30}, "hash", "torch")  # type: ignore[arg-type]


def test_the_request_and_reply_carry_exact_and_jumped():
    req = P.Digests(9, [1, 2], 1e-2, 1e-2, "hash", "fast", True)
    assert P.request_from_wire(P.to_wire(req)) == req and P.Digests(9, [1], 1e-2, 1e-2).exact is False
    body = {"ok": True, "digests": [[1.0]], "scales": [[0.5]]}
    assert P.parse_reply("digests", body).jumped is False  # type: ignore[union-attr]
    assert P.parse_reply("digests", {**body, "jumped": True}).jumped is True  # type: ignore[union-attr]
    with pytest.raises(P.ProtocolError):
        P.parse_reply("digests", {**body, "jumped": "yes"})


def _record(rows: list[list[float]]) -> timed.BurstRecord:
    return timed.BurstRecord("graph", len(rows), 1, [11], [0.01], [P.PackedDigests.of(rows)])


def _check(monkeypatch, replies: list[P.DigestsReply]) -> tuple[EvalResult, list[P.Digests]]:
    asked: list[P.Digests] = []

    def ask(child, res, req, timeout, phase, kind):
        asked.append(req)
        r = replies[len(asked) - 1]
        n = len(req.calls)
        return P.DigestsReply(r.digests * n, r.scales * n, r.jumped)

    monkeypatch.setattr(timed, "ask", ask)
    res = EvalResult(Status.OK, None, True)
    task = Task("t", "", atol=1e-2, rtol=1e-2)
    rows = [[1.0, 2.0]] * 40
    try:
        timed.check_burst_outputs(None, res, EvalConfig(), task, _record(rows))  # type: ignore[arg-type]
    except Stop:
        pass
    return res, asked


def test_a_jumped_mismatch_is_asked_again_exactly_before_a_verdict(monkeypatch):
    right, wrong = [[1.0, 2.0]], [[5.0, 2.0]]
    scales = [[0.01, 0.01]]
    res, asked = _check(monkeypatch, [P.DigestsReply(wrong, scales, True), P.DigestsReply(right, scales)])
    assert res.status is Status.OK and [a.exact for a in asked] == [False, True]
    assert asked[0].calls == asked[1].calls
    res, asked = _check(monkeypatch, [P.DigestsReply(wrong, scales, True), P.DigestsReply(wrong, scales)])
    assert res.status is Status.INCORRECT and "back-to-back" in res.message and len(asked) == 2
    res, asked = _check(monkeypatch, [P.DigestsReply(wrong, scales, False)])  # drawn call by call: decided
    assert res.status is Status.INCORRECT and len(asked) == 1
    res, asked = _check(monkeypatch, [P.DigestsReply(right, scales, True)])
    assert res.status is Status.OK and len(asked) == 1


def test_the_other_generators_state_moves_with_each_of_them():
    """What `_other_rng` watches (the real one; the fixture above stands in for it elsewhere): a draw from
    the CPU's generator, Python's or numpy's each changes it; nothing else does."""
    import random

    import numpy as np

    dev = torch.device("cuda", 0)  # index given: no CUDA call is needed to name the device's own generator
    before = burst._other_rng(dev)
    assert burst._other_rng(dev) == before
    for draw in (lambda: torch.randn(3), lambda: random.random(), lambda: np.random.rand()):
        draw()
        now = burst._other_rng(dev)
        assert now != before
        before = now
