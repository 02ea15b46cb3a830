"""The timing protocol's hold (timing.py): unheld probe calls first, which size
the hold from the enqueue time and feed the side-stream guard; held timed calls
after. CPU tests drive `time_calls` with a scripted clock; the GPU tests show on
a real device that host launch overhead leaves the span and host work the
device waits for stays in it."""

from __future__ import annotations

import time

import pytest
import torch

from cuda_agent.eval.shared import events as timing
from cuda_agent.eval.shared.events import PROBE_CALLS, side_stream_suspect, time_calls


class ScriptedClock:
    """Event time 1.0 ms held, 1.5 ms unheld; enqueue 0.2 ms; records what happened."""

    warmup_s = 0.0

    def __init__(self) -> None:
        self.held: list[bool] = []
        self.sized: list[float] = []
        self.hold_ms = 0.0
        self.events: list[tuple[str, int]] = []  # each measure's end, for tests that interleave their own events

    def settle(self) -> None:
        pass

    def size_hold(self, enqueue_ms: float) -> None:
        self.sized.append(enqueue_ms)
        self.hold_ms = 2 * enqueue_ms + 0.05

    def measure(self, fn, inputs, held=True, after=None):
        self.held.append(held)
        out = fn(*inputs)
        if after is not None:
            after()  # where the event clock runs it: end event enqueued, final sync not yet done
        self.events.append(("sync", 0))
        return (out, 1.0, 1.2, 0.2) if held else (out, 1.5, 3.0, 0.2)


def test_probe_calls_come_unheld_before_the_held_timed_calls(monkeypatch):
    clock = ScriptedClock()
    monkeypatch.setattr(timing, "make_clock", lambda kind, sync_before_end=False: clock)
    stats, _ = time_calls(lambda x: x + 1, [[torch.ones(4)]], n_warmup=3, n_timed=30, max_cv=1.0, max_rounds=1)
    assert clock.held[:PROBE_CALLS] == [False] * PROBE_CALLS
    assert clock.held[PROBE_CALLS:] == [True] * stats["n"] and stats["n"] >= 30
    assert clock.sized == [0.2]  # sized once, from the probes' median enqueue time, before any held call
    assert stats["median_ms"] == 1.0  # the held calls are the timed ones
    assert stats["probe_ms"] == 1.5 and stats["host_over_event"] == 2.0  # the guard reads the probes
    assert stats["enqueue_ms"] == 0.2 and stats["hold_ms"] == pytest.approx(0.45)


def test_fresh_inputs_are_drawn_while_the_previous_call_runs(monkeypatch):
    clock = ScriptedClock()
    monkeypatch.setattr(timing, "make_clock", lambda kind, sync_before_end=False: clock)
    log = clock.events

    def fresh(g):
        log.append(("draw", g))
        return [torch.full((2,), float(g))]

    def fn(x):
        log.append(("call", int(x[0])))
        return x

    stats, _ = time_calls(
        fn, [[torch.full((2,), -1.0)]], n_warmup=3, n_timed=5, max_cv=1.0, max_rounds=1, fresh_inputs=fresh
    )
    timed = log[next(i for i, e in enumerate(log) if e[0] == "draw") :]
    n = stats["n"]
    # call 0's set first, then each call g followed, inside its measure (before the final sync), by the draw of g+1
    assert timed == [("draw", 0)] + [e for g in range(n) for e in (("call", g), ("draw", g + 1), ("sync", 0))]
    assert clock.held[-n:] == [True] * n
    # input sets over AHEAD_MAX_BYTES: each drawn before its own call, never two alive at once
    monkeypatch.setattr(timing, "AHEAD_MAX_BYTES", 4)  # the sets hold 8 bytes
    log.clear()
    stats, _ = time_calls(
        fn, [[torch.full((2,), -1.0)]], n_warmup=3, n_timed=5, max_cv=1.0, max_rounds=1, fresh_inputs=fresh
    )
    timed = log[next(i for i, e in enumerate(log) if e[0] == "draw") :]
    assert timed == [e for g in range(stats["n"]) for e in (("draw", g), ("call", g), ("sync", 0))]


def test_host_clock_reports_no_hold():
    stats, _ = time_calls(
        lambda x: x * 2, [[torch.randn(8)]], clock="host", n_warmup=3, n_timed=20, max_cv=1.0, max_rounds=1
    )
    assert stats["hold_ms"] == 0.0
    assert stats["enqueue_ms"] is not None and stats["enqueue_ms"] > 0


def test_side_stream_guard_uses_the_probe_time_when_given():
    # held median 0.01 ms would be under the absolute floor; the probes' 0.1 ms is not
    assert side_stream_suspect({"median_ms": 0.01, "probe_ms": 0.1, "host_over_event": 3.0})
    assert not side_stream_suspect({"median_ms": 0.1, "probe_ms": 0.01, "host_over_event": 2.0})


def _spin_host(us: float) -> None:
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


@pytest.mark.gpu
def test_held_span_hides_host_overhead_but_counts_what_the_device_waits_for():
    x = torch.randn(1 << 16, device="cuda")

    def slow_host(t):  # 300 us of host work before one tiny kernel
        _spin_host(300)
        return t * 2

    def syncs(t):  # the device must wait for the host: the 300 us after the sync are counted
        y = t * 2
        torch.cuda.synchronize()
        _spin_host(300)
        return y + 1

    kw = dict(n_warmup=3, n_timed=30, max_cv=1.0, max_rounds=1)
    fast, _ = time_calls(lambda t: t * 2, [[x]], **kw)
    slow, _ = time_calls(slow_host, [[x]], **kw)
    synced, _ = time_calls(syncs, [[x]], **kw)
    assert slow["hold_ms"] > 0.6 and slow["enqueue_ms"] >= 0.3
    assert slow["probe_ms"] >= 0.3  # unheld, the host overhead is in the span
    assert slow["median_ms"] < 0.1 + 3 * fast["median_ms"]  # held, it is not
    assert synced["median_ms"] >= 0.3


@pytest.mark.gpu
def test_side_stream_work_is_flagged_by_the_probe_calls():
    # About a millisecond of sleep on a side stream: the event span (current stream) sees a tiny
    # kernel, the device-wide synchronize after it waits for the sleep. (Many short side-stream
    # launches would not do: unheld, their enqueue time lands inside the span as well.)
    x = torch.randn(1 << 10, device="cuda")
    side = torch.cuda.Stream()

    def hides(t):
        with torch.cuda.stream(side):
            torch.cuda._sleep(2_000_000)
        return t * 2

    stats, _ = time_calls(hides, [[x]], n_warmup=3, n_timed=30, max_cv=1.0, max_rounds=1)
    assert side_stream_suspect(stats), stats
    assert stats["median_ms"] < 0.5  # held and unsynced, the side-stream sleep escapes the span: hence the guard


class OutlierClock(ScriptedClock):
    """Held calls take 1.0 ms with +-1 % jitter, and one call in every 200 takes 4 ms (a hiccup)."""

    def __init__(self) -> None:
        super().__init__()
        self.k = 0

    def measure(self, fn, inputs, held=True, after=None):
        out, ms, host, enq = super().measure(fn, inputs, held, after)
        if not held:
            return out, ms, host, enq
        self.k += 1
        return out, (4.0 if self.k % 200 == 0 else 1.0 + 0.01 * ((self.k * 7919) % 21 - 10) / 10), host, enq


@pytest.mark.parametrize("spread, rounds", [("cv", 3), ("p10p90", 1)])
def test_a_few_outlier_calls_cost_a_round_only_under_the_cv(monkeypatch, spread, rounds):
    """One call in 200 four times slower takes the CV past 5 % in every round, so "cv" measures all
    max_rounds rounds; "p10p90" is not moved by it and stops after one. The median is the same."""
    clock = OutlierClock()
    monkeypatch.setattr(timing, "make_clock", lambda kind, sync_before_end=False: clock)
    stats, _ = time_calls(
        lambda x: x + 1, [[torch.ones(4)]], n_warmup=3, n_timed=400, max_cv=0.05, max_rounds=3, spread=spread
    )
    assert stats["rounds"] == rounds
    assert stats["cv"] > 0.05 and stats["spread"] < 0.02  # both reported, whichever decided
    assert stats["median_ms"] == pytest.approx(1.0, abs=0.011)


def test_the_robust_spread_is_the_cv_of_normal_times():
    import random

    rng = random.Random(3)
    times = [rng.gauss(1.0, 0.03) for _ in range(5000)]
    assert timing.robust_spread(times) == pytest.approx(0.03, rel=0.1)
    with pytest.raises(ValueError):
        timing.spread_key("iqr")
