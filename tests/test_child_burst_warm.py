"""The digest path's start-up warm-up (`child_burst.warm_digest_path`) runs on the CPU lane too and
draws from no generator a task relies on: the task's inputs are seeded per draw, but a warm-up that
consumed the default generator would still make a child's state depend on whether it was a spare.
Its effect (the first burst no slower than the second) is a GPU figure: benchmarks/defence_trace.py."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.eval.child.burst import warm_digest_path


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


def _burst_digests(fn, k: int, **plan: torch.Tensor | None) -> torch.Tensor:
    """k calls of fn through child_burst._body on the CPU (64 standard-normal inputs each, seed 7), with
    the Plan's extra buffers `plan` (flush=, cold=): the digests it wrote."""
    from types import SimpleNamespace

    from cuda_agent.eval.child.burst import WIDTH, Plan, _body, _draw_weights, _weight_buffers

    st = SimpleNamespace(device=torch.device("cpu"), task=SimpleNamespace(get_inputs=lambda: [torch.randn(64)]))
    torch.manual_seed(7)
    burst = Plan(fn, k, [64], _weight_buffers([64], st.device), **plan)
    _draw_weights(burst.weights)
    out = torch.full((k, WIDTH), float("nan"))
    _body(st, burst, out)  # type: ignore[arg-type]
    return out


def test_a_flushing_burst_flushes_before_every_call_and_digests_the_same():
    """EvalConfig.clock_flush: each call of a burst follows an L2 flush (the flush buffer written), as
    the event timing's calls do; the draws and the digests are the same as without it."""
    from cuda_agent.eval.channel import messages as P

    seen: list[bool] = []

    def run(flush: torch.Tensor | None) -> torch.Tensor:
        def fn(x):
            if flush is not None:
                seen.append(bool((flush == 0).all()))
                flush.fill_(1.0)  # what the call leaves in the cache, for the next flush to clear
            return torch.relu(x) * 1.5

        return _burst_digests(fn, 5, flush=flush)

    plain = run(None)
    flushed = run(torch.ones(32))
    assert seen == [True] * 5
    assert torch.equal(torch.nan_to_num(plain), torch.nan_to_num(flushed)) and not torch.isnan(plain[:, :2]).any()
    req = P.BurstPrepare(8, "loop", True, False, True)
    assert P.request_from_wire(P.to_wire(req)) == req and req.flush


def test_a_cold_digest_burst_flushes_between_each_call_and_its_digest():
    """EvalConfig.clock_cold_digest: between each call and its digest the flush buffer is written (on a GPU
    that evicts the output from L2, so the digest reads it from memory as the loop's does); the digests
    are the same as without it. The opt-in travels in BurstPrepare, and names the bursts' cache key and
    trusted_mode on a GPU only (the flush is a GPU step)."""
    from cuda_agent.eval.channel import messages as P
    from cuda_agent.eval.config import EvalConfig
    from cuda_agent.eval.timing.timed import _clock_opt_ins

    flushed_since_last_call: list[bool] = []

    def run(cold: torch.Tensor | None) -> torch.Tensor:
        def fn(x):
            if cold is not None:
                flushed_since_last_call.append(bool((cold == 0).all()))
                cold.fill_(1.0)  # what the call leaves in the cache
            return torch.relu(x) * 1.5

        out = _burst_digests(fn, 4, cold=cold)
        if cold is not None:
            assert bool((cold == 0).all())  # the last call's output was followed by the flush
        return out

    plain = run(None)
    cold = run(torch.ones(32))
    # the buffer starts dirty; every later call finds it flushed after the previous call (not before its own)
    assert flushed_since_last_call == [False, True, True, True]
    assert torch.equal(torch.nan_to_num(plain), torch.nan_to_num(cold)) and not torch.isnan(plain[:, :2]).any()
    req = P.BurstPrepare(8, "loop", True, False, False, "dense", True)
    assert P.request_from_wire(P.to_wire(req)) == req and req.cold_digest and not P.BurstPrepare(8).cold_digest
    assert "cold" in _clock_opt_ins(EvalConfig(device="cuda", clock_cold_digest=True))
    assert "cold" not in _clock_opt_ins(EvalConfig(device="cpu", clock_cold_digest=True))
    assert "cold" not in _clock_opt_ins(EvalConfig(device="cuda"))


def test_the_clocks_opt_ins_by_name():
    """`--clock` of the benchmarks and gpu_check: each short name turns on its EvalConfig field, none
    leaves the defaults, and a name that is not an opt-in is an error that names it."""
    from cuda_agent.eval.config import CLOCK_OPT_INS, EvalConfig, clock_opt_ins

    assert EvalConfig(**clock_opt_ins("")) == EvalConfig()  # type: ignore[arg-type]
    one_each = ",".join(o for o in CLOCK_OPT_INS if o not in ("dense", "hash", "torch"))  # one digest, one draws
    cfg = EvalConfig(**clock_opt_ins(one_each))  # type: ignore[arg-type]
    assert cfg.clock_flush and cfg.clock_fresh_baselines and cfg.clock_digest == "rank1" and cfg.clock_cold_digest
    assert cfg.clock_draws == "fast" and EvalConfig(**clock_opt_ins("hash")).clock_digest == "hash"  # type: ignore[arg-type]
    assert clock_opt_ins("cold") == {**clock_opt_ins(""), "clock_cold_digest": True}
    with pytest.raises(ValueError, match="flsh"):
        clock_opt_ins("cold,flsh")
