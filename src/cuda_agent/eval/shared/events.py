"""Device timing of one callable, the same method for candidate and baselines.

Contract (`time_calls`): per call, outside the timed region, the L2 cache is
flushed by writing a buffer of at least twice its size; then a hold kernel
(`torch.cuda._sleep`) keeps the stream busy while the host enqueues the call,
and CUDA events bracket the call on the current stream; a device-wide
synchronize follows. The event span is therefore the device time of the call:
the host's launch overhead is hidden as it is in a model whose stream never
runs dry, but host work the device has to wait for (a synchronize, a copy
back, enqueueing that outlasts the hold) is counted. Why: with the host's
Python and launch overhead inside the span, a 30-100 us candidate measured
8-29 % apart in two processes on an H200 (the overhead is host jitter, not
kernel time); the hold is what nvbench does for the same reason. The hold is
sized per callable from its measured enqueue time (2x + 50 us, at most
`HOLD_MAX_MS`), and `hold_ms` / `enqueue_ms` are reported. At least `n_warmup`
untimed calls and a quarter second of them come first; then `PROBE_CALLS`
calls without the hold (device synchronized before, host clock around them)
measure the enqueue time and the host/event ratio of the side-stream guard.
A round is `n_timed` calls rotating through the given input sets, more
for short calls (`calls_per_round`: a round spans at least 0.1 s, at most 1000
calls); rounds repeat (up to `max_rounds`) while the round's spread exceeds `max_cv`, and
the round with the lowest spread is kept. The spread is the coefficient of variation
(`spread="cv"`, this function's default) or, with `spread="p10p90"` (EvalConfig's default),
(p90 - p10) / (2.563 x median), which
equals the CV for normally spread times but is not moved by a few outlier calls: one call in a
thousand 4x slower takes a 21 us kernel's CV from 0.02 past 0.05 and costs a whole new round
(0.15-0.3 s; half of diag_matmul's evaluations on the H200, 2026-12-04) without moving the
median. Both are reported (`cv`, `spread`). Returns the statistics
and the last output produced for each input set (so the parent can check the
timed outputs). Imports only the standard library and torch.

Not guaranteed: stable clocks (we never touch GPU clock settings), or that
event time captures work the callable hid on other streams: `host_over_event`
(from the probe calls) reports the ratio of host time to event time so such
work can be flagged; a callable that hides work on another stream only in the
held calls (it could tell them by a busy stream) escapes that guard, which is
why the static rules reject stream APIs first. Without `torch.cuda._sleep` (a private torch API) the
hold is 0 and the span includes the launch overhead, as before (`hold_ms` 0).

Fresh inputs (`fresh_inputs`, optional): the given `input_sets` then serve the
warm-up only, and every timed call gets a new input set `fresh_inputs(g)` (g =
0, 1, ... over all timed calls), drawn before the call, outside the timed
region: while call g-1 runs on the device (after its end event, before the
synchronize), so the draw's host time overlaps device work instead of leaving
the GPU idle between calls (call 0's set is drawn before it; a set over
`AHEAD_MAX_BYTES` is drawn before its own call, so two never live at once). An output cache keyed on the
input pointer (the allocator hands back the same addresses) then returns a
stale value, and one keyed on the content never hits. `checked` calls of the
first round, picked at random once the round length is known, keep their
outputs in `kept[g]` so the caller can check them against the reference for
input set g (`derive_seed` gives the seed); the caller picks them, as fractions of
the round (`checked`), so that a harness cannot choose which of its calls are checked. Trade-off, chosen knowingly: a pool
of pre-drawn sets would cost memory (a short memory-bound call needs up to a
thousand sets per round) and still repeat pointers and contents across
rounds; drawing per call costs host time outside the timed region only, and
the same method times the baselines, so the comparison stays fair. Checking a
few random calls (not all) bounds memory; a candidate that is wrong on a
fraction f of its calls escapes with probability (1 - f) ** checked.

Side-stream guard: `side_stream_suspect(stats)` says when the host clock of
the probe calls exceeds their event time by more than `SIDE_STREAM_RATIO` and
`SIDE_STREAM_ABS_MS`; the caller then re-times with `sync_before_end=True`
(a device-wide synchronize before the end event, so the event span covers work
on every stream; no hold, since the host waits inside the span anyway) and
uses those numbers.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

MIN_FLUSH_BYTES = 128 << 20
WARMUP_S = 0.25
# Short calls get more timed samples (up to MAX_TIMED), so that a round spans at
# least ROUND_S: the median of a 30 us kernel over 50 calls moves by several
# per cent between processes, mostly launch jitter.
ROUND_S = 0.1
MAX_TIMED = 1000
SIDE_STREAM_RATIO = 1.5
SIDE_STREAM_ABS_MS = 0.02
# Calls without the hold after the warm-up: they size the hold and feed the side-stream guard.
PROBE_CALLS = 16
HOLD_MIN_MS = 0.05
HOLD_MAX_MS = 5.0
# Fresh input sets up to this size are drawn during the previous call (two sets live at once); larger
# ones before their own call: their calls are long enough that the draw's host time hardly idles the GPU.
AHEAD_MAX_BYTES = 1 << 30
# Changes whenever the meaning of a timed number changes: part of the baseline cache key.
PROTOCOL = "hold-v2"  # v2: fresh inputs drawn during the previous call (the GPU idles less between calls)

FreshInputs = Callable[[int], Sequence[Any]]


def derive_seed(base: int, g: int) -> int:
    """Seed of timed call g's fresh inputs (the parent recomputes it to check outputs)."""
    digest = hashlib.blake2b(f"{base}:{g}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 62) - 1)


def side_stream_suspect(stats: dict[str, Any]) -> bool:
    ratio = stats.get("host_over_event")
    med = stats.get("probe_ms") or stats.get("median_ms") or 0.0  # the ratio is of the probe calls
    if not ratio or ratio <= SIDE_STREAM_RATIO:
        return False
    return med * (ratio - 1.0) > SIDE_STREAM_ABS_MS


def checked_calls(n: int, checked: Sequence[float]) -> set[int]:
    """The timed calls (of a round of n) whose outputs are kept: fractions of the round, picked by the parent.
    Two fractions that land on one call move the later one to the next free call, so min(len(checked), n)
    distinct calls are checked (parent and child compute the same set)."""
    picks: set[int] = set()
    for f in checked:
        g = min(n - 1, max(0, int(f * n)))
        while g in picks and len(picks) < n:
            g = (g + 1) % n
        picks.add(g)
    return picks


def _nbytes(inputs: Sequence[Any]) -> int:
    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


def calls_per_round(n_timed: int, seconds_per_call: float) -> int:
    if seconds_per_call <= 0:
        return MAX_TIMED
    return max(n_timed, min(MAX_TIMED, int(ROUND_S / seconds_per_call)))


def l2_flush_buffer(device: torch.device) -> torch.Tensor:
    props = torch.cuda.get_device_properties(device)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    nbytes = max(2 * l2, MIN_FLUSH_BYTES)
    return torch.empty(nbytes // 4, dtype=torch.float32, device=device)


SPREADS = ("cv", "p10p90")
_P10_P90_SIGMAS = 2.563  # p90 - p10 of a normal distribution, in standard deviations


def robust_spread(times: list[float]) -> float:
    """(p90 - p10) / (2.563 x median): the CV of normally spread times, blind to a few outliers."""
    if len(times) < 2:
        return 0.0
    med = statistics.median(times)
    dec = statistics.quantiles(times, n=10)
    return (dec[-1] - dec[0]) / (_P10_P90_SIGMAS * med) if med > 0 else 0.0


def spread_key(spread: str) -> str:
    """The stats key a round's spread is read from."""
    if spread not in SPREADS:
        raise ValueError(f"spread must be one of {SPREADS}, not {spread!r}")
    return "cv" if spread == "cv" else "spread"


def _stats(times: list[float], probe: list[tuple[float, float, float]], rounds: int, hold_ms: float) -> dict[str, Any]:
    mean = statistics.fmean(times)
    std = statistics.pstdev(times) if len(times) > 1 else 0.0
    ratios = [h / t for t, h, _ in probe if t > 0]
    return {
        "median_ms": statistics.median(times),
        "mean_ms": mean,
        "min_ms": min(times),
        "cv": std / mean if mean > 0 else 0.0,
        "spread": robust_spread(times),
        "n": len(times),
        "rounds": rounds,
        "host_over_event": statistics.median(ratios) if ratios else None,
        "probe_ms": statistics.median(t for t, _, _ in probe) if probe else None,
        "enqueue_ms": statistics.median(e for _, _, e in probe) if probe else None,
        "hold_ms": hold_ms,
    }


class _EventClock:
    """Device clock: L2 flush, then (held) a sleep kernel that covers the host's
    enqueue, or (unheld) a device sync; CUDA events around the call; a
    device-wide sync after it (so the host clock covers every stream)."""

    warmup_s = WARMUP_S

    def __init__(self, sync_before_end: bool):
        self.flush = l2_flush_buffer(torch.device("cuda", torch.cuda.current_device()))
        self.sync_before_end = sync_before_end
        self.hold_cycles = 0
        self.hold_ms = 0.0

    def settle(self) -> None:
        torch.cuda.synchronize()

    def size_hold(self, enqueue_ms: float) -> None:
        """Hold the stream for 2x the enqueue time + 50 us (at most HOLD_MAX_MS).
        The sleep kernel counts clock cycles: calibrate cycles per ms once, on the warm chip."""
        sleep = getattr(torch.cuda, "_sleep", None)
        if sleep is None or self.sync_before_end:
            return
        want_ms = min(HOLD_MAX_MS, max(HOLD_MIN_MS, 2.0 * enqueue_ms + HOLD_MIN_MS))
        probe_cycles = 1_000_000
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        best = float("inf")
        for _ in range(3):
            start.record()
            sleep(probe_cycles)
            end.record()
            torch.cuda.synchronize()
            best = min(best, start.elapsed_time(end))
        if best <= 0:
            return
        self.hold_cycles = max(1, int(probe_cycles * want_ms / best))
        self.hold_ms = want_ms

    def measure(
        self, fn: Callable[..., Any], inputs: Sequence[Any], held: bool = True, after: Callable[[], None] | None = None
    ) -> tuple[Any, float, float, float]:
        """(output, event ms, host ms from before the call to after the final sync, host ms to enqueue the call).
        `after` runs once the end event is enqueued, before the final sync: host work (the next call's
        fresh inputs) that overlaps this call's device time and stays out of its span."""
        self.flush.zero_()
        if held and self.hold_cycles:
            torch.cuda._sleep(self.hold_cycles)
        else:
            # The event span then holds the call alone, its launch latency included,
            # and the host clock is not inflated by the flush.
            torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        out = fn(*inputs)
        t_enq = time.perf_counter()
        if self.sync_before_end:
            torch.cuda.synchronize()
        end.record()
        if after is not None:
            after()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        return out, start.elapsed_time(end), (t1 - t0) * 1e3, (t_enq - t0) * 1e3


class _HostClock:
    """Host clock only: the CPU lane, where the harness is tested without a GPU."""

    warmup_s = 0.0

    def settle(self) -> None:
        pass

    hold_ms = 0.0

    def size_hold(self, enqueue_ms: float) -> None:
        pass

    def measure(
        self, fn: Callable[..., Any], inputs: Sequence[Any], held: bool = True, after: Callable[[], None] | None = None
    ) -> tuple[Any, float, float, float]:
        t0 = time.perf_counter()
        out = fn(*inputs)
        ms = (time.perf_counter() - t0) * 1e3
        if after is not None:
            after()
        return out, ms, ms, ms


def make_clock(kind: str, *, sync_before_end: bool = False) -> _EventClock | _HostClock:
    """ "cuda": events (L2 flushed before each call, then a hold or a sync); "host": the host clock."""
    return _EventClock(sync_before_end) if kind == "cuda" else _HostClock()


def time_calls(
    fn: Callable[..., Any],
    input_sets: Sequence[Sequence[Any]],
    *,
    n_warmup: int,
    n_timed: int,
    max_cv: float,
    max_rounds: int,
    before_call: Callable[[], None] | None = None,
    fresh_inputs: FreshInputs | None = None,
    checked: Sequence[float] = (),
    kept: dict[int, Any] | None = None,
    sync_before_end: bool = False,
    clock: str = "cuda",
    spread: str = "cv",
) -> tuple[dict[str, Any], list[Any]]:
    """`clock="host"` runs the same protocol with the host clock (CPU lane only)."""
    key = spread_key(spread)
    timer = make_clock(clock, sync_before_end=sync_before_end)
    k = len(input_sets)
    last: list[Any] = [None] * k
    with torch.no_grad():
        # At least n_warmup calls and (on the GPU) WARMUP_S of work: a GPU that was
        # idle needs tens of milliseconds of load before its clocks settle, and a
        # short kernel would otherwise be timed on a cold chip.
        t0 = time.perf_counter()
        t_end = t0 + timer.warmup_s
        i = 0
        while i < max(n_warmup, 3) or (time.perf_counter() < t_end and i < 10_000):
            last[i % k] = fn(*input_sets[i % k])
            i += 1
            if i % 8 == 0:
                timer.settle()
        timer.settle()
        n = calls_per_round(n_timed, (time.perf_counter() - t0) / i)
        probe: list[tuple[float, float, float]] = []
        for j in range(PROBE_CALLS):
            last[j % k], event_ms, host_ms, enq_ms = timer.measure(fn, input_sets[j % k], held=False)
            probe.append((event_ms, host_ms, enq_ms))
        timer.size_hold(statistics.median(e for _, _, e in probe))
        best: dict[str, Any] | None = None
        picks = checked_calls(n, checked) if fresh_inputs is not None else set()
        g = 0
        ahead: list[Sequence[Any]] = []  # call g+1's fresh inputs, drawn while call g runs on the device

        def draw_ahead() -> None:
            assert fresh_inputs is not None
            ahead.append(fresh_inputs(g + 1))

        for r in range(1, max_rounds + 1):
            times: list[float] = []
            for i in range(n):
                if fresh_inputs is not None:
                    inputs = ahead.pop() if ahead else fresh_inputs(g)
                else:
                    inputs = input_sets[i % k]
                if before_call is not None:
                    before_call()
                pre = draw_ahead if fresh_inputs is not None and _nbytes(inputs) <= AHEAD_MAX_BYTES else None
                out, event_ms, _, _ = timer.measure(fn, inputs, after=pre)
                times.append(event_ms)
                if fresh_inputs is None:
                    last[i % k] = out
                elif g in picks and kept is not None:
                    kept[g] = out
                del out, inputs
                g += 1
            stats = _stats(times, probe, r, timer.hold_ms)
            if best is None or stats[key] < best[key]:
                best = stats
            best["rounds"] = r
            if stats[key] <= max_cv:
                break
    assert best is not None
    return best, last
