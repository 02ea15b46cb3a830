"""Device timing of one callable, the same method for candidate and baselines.

Contract (`time_calls`): per call, outside the timed region, the L2 cache is
flushed by writing a buffer of at least twice its size and the device is
synchronized; CUDA events then bracket the call on the current stream; a
device-wide synchronize follows so that the host clock covers work on every
stream. At least `n_warmup` untimed calls and a quarter second of them come
first. A round is `n_timed` calls rotating through the given input sets, more
for short calls (`calls_per_round`: a round spans at least 0.1 s, at most 1000
calls); rounds repeat (up to `max_rounds`) while the coefficient of variation exceeds
`max_cv`, and the round with the lowest CV is kept. Returns the statistics
and the last output produced for each input set (so the parent can check the
timed outputs). Imports only the standard library and torch.

Not guaranteed: stable clocks (we never touch GPU clock settings), or that
event time captures work the callable hid on other streams: `host_over_event`
reports the ratio of host time to event time so such work can be flagged.

Fresh inputs (`fresh_inputs`, optional): the given `input_sets` then serve the
warm-up only, and every timed call gets a new input set `fresh_inputs(g)` (g =
0, 1, ... over all timed calls), drawn before the call, outside the timed
region (before the flush and the synchronize). An output cache keyed on the
input pointer (the allocator hands back the same addresses) then returns a
stale value, and one keyed on the content never hits. `checked` calls of the
first round, picked at random once the round length is known, keep their
outputs in `kept[g]` so the caller can check them against the reference for
input set g (`derive_seed` gives the seed). Trade-off, chosen knowingly: a pool
of pre-drawn sets would cost memory (a short memory-bound call needs up to a
thousand sets per round) and still repeat pointers and contents across
rounds; drawing per call costs host time outside the timed region only, and
the same method times the baselines, so the comparison stays fair. Checking a
few random calls (not all) bounds memory; a candidate that is wrong on a
fraction f of its calls escapes with probability (1 - f) ** checked.

Side-stream guard: `side_stream_suspect(stats)` says when the host clock
exceeds the event time by more than `SIDE_STREAM_RATIO` and
`SIDE_STREAM_ABS_MS`; the caller then re-times with `sync_before_end=True`
(a device-wide synchronize before the end event, so the event span covers work
on every stream) and uses those numbers.
"""

from __future__ import annotations

import hashlib
import random
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

FreshInputs = Callable[[int], Sequence[Any]]


def derive_seed(base: int, g: int) -> int:
    """Seed of timed call g's fresh inputs (the parent recomputes it to check outputs)."""
    digest = hashlib.blake2b(f"{base}:{g}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 62) - 1)


def side_stream_suspect(stats: dict[str, Any]) -> bool:
    ratio = stats.get("host_over_event")
    med = stats.get("median_ms") or 0.0
    if not ratio or ratio <= SIDE_STREAM_RATIO:
        return False
    return med * (ratio - 1.0) > SIDE_STREAM_ABS_MS


def _pick_checked(n: int, checked: int) -> set[int]:
    return set(random.SystemRandom().sample(range(n), min(checked, n))) if checked > 0 else set()


def calls_per_round(n_timed: int, seconds_per_call: float) -> int:
    if seconds_per_call <= 0:
        return MAX_TIMED
    return max(n_timed, min(MAX_TIMED, int(ROUND_S / seconds_per_call)))


def l2_flush_buffer(device: torch.device) -> torch.Tensor:
    props = torch.cuda.get_device_properties(device)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    nbytes = max(2 * l2, MIN_FLUSH_BYTES)
    return torch.empty(nbytes // 4, dtype=torch.float32, device=device)


def _stats(times: list[float], host: list[float], rounds: int) -> dict[str, Any]:
    mean = statistics.fmean(times)
    std = statistics.pstdev(times) if len(times) > 1 else 0.0
    ratios = [h / t for h, t in zip(host, times, strict=True) if t > 0]
    return {
        "median_ms": statistics.median(times),
        "mean_ms": mean,
        "min_ms": min(times),
        "cv": std / mean if mean > 0 else 0.0,
        "n": len(times),
        "rounds": rounds,
        "host_over_event": statistics.median(ratios) if ratios else None,
    }


class _EventClock:
    """Device clock: L2 flush and sync before the call, CUDA events around it,
    a device-wide sync after it (so the host clock covers every stream)."""

    warmup_s = WARMUP_S

    def __init__(self, sync_before_end: bool):
        self.flush = l2_flush_buffer(torch.device("cuda", torch.cuda.current_device()))
        self.sync_before_end = sync_before_end

    def settle(self) -> None:
        torch.cuda.synchronize()

    def measure(self, fn: Callable[..., Any], inputs: Sequence[Any]) -> tuple[Any, float, float]:
        self.flush.zero_()
        # Sync first: the event span then holds the call alone (its launch latency
        # included, as a user sees it), and the host clock is not inflated by the flush.
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        out = fn(*inputs)
        if self.sync_before_end:
            torch.cuda.synchronize()
        end.record()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        return out, start.elapsed_time(end), (t1 - t0) * 1e3


class _HostClock:
    """Host clock only: the CPU lane, where the harness is tested without a GPU."""

    warmup_s = 0.0

    def settle(self) -> None:
        pass

    def measure(self, fn: Callable[..., Any], inputs: Sequence[Any]) -> tuple[Any, float, float]:
        t0 = time.perf_counter()
        out = fn(*inputs)
        ms = (time.perf_counter() - t0) * 1e3
        return out, ms, ms


def make_clock(kind: str, *, sync_before_end: bool = False) -> _EventClock | _HostClock:
    """"cuda": events (L2 flushed and device synced before each call); "host": the host clock."""
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
    checked: int = 0,
    kept: dict[int, Any] | None = None,
    sync_before_end: bool = False,
    clock: str = "cuda",
) -> tuple[dict[str, Any], list[Any]]:
    """`clock="host"` runs the same protocol with the host clock (CPU lane only)."""
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
        best: dict[str, Any] | None = None
        picks = _pick_checked(n, checked) if fresh_inputs is not None else set()
        g = 0
        for r in range(1, max_rounds + 1):
            times: list[float] = []
            host: list[float] = []
            for i in range(n):
                inputs = fresh_inputs(g) if fresh_inputs is not None else input_sets[i % k]
                if before_call is not None:
                    before_call()
                out, event_ms, host_ms = timer.measure(fn, inputs)
                times.append(event_ms)
                host.append(host_ms)
                if fresh_inputs is None:
                    last[i % k] = out
                elif g in picks and kept is not None:
                    kept[g] = out
                del out, inputs
                g += 1
            stats = _stats(times, host, r)
            if best is None or stats["cv"] < best["cv"]:
                best = stats
            best["rounds"] = r
            if stats["cv"] <= max_cv:
                break
    assert best is not None
    return best, last
