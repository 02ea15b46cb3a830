"""The reward's time: the evaluator's own clock, and how the candidate's own figure is judged by it.

Why: the candidate's process measures its device time with CUDA events (`shared/events.py`), and code
in that process (native code that reaches Python, or that redirects the CUDA runtime's event
timer through the dynamic linker's tables, with no forbidden name in its source) can make those
events say anything. Events are precise but the candidate's to forge; the parent's clock is
the candidate's never to touch but sees only whole requests. So every milestone and speedup
must follow from the parent's clock, and the events may only refine it within that clock's
measured noise.

The clock (a "burst"): the parent sends a child a secret salt and reads its own monotonic clock
from the request to the reply. Inside, the child seeds the default generators once with the
salt, draws the digest weights (secret standard-normal rows, one pair per output) and then, k
times, the task's next input set, calls the model on it, and reduces each output to
`DIGESTS_PER_OUTPUT` digests into a device buffer; one read-back at the end. On a GPU the k
calls are one CUDA graph, captured before the request with a dummy seed and replayed
`replays` times under the salt (graph replay reads the generator's seed on the device, so the
draws are the salt's): the host does O(1) work per burst, the device runs the calls back to
back, and the burst is bound by the device, not by Python (a first version looped in Python;
its 0.17 ms of host work per call hid a 0.04 ms kernel, and lies of 10-50 % passed). Where a
graph cannot be captured (the CPU lane, a task whose draws are not graph-safe, a candidate
that launches on the legacy stream or synchronizes in forward) the same loop runs from Python
(mode "host"); its resolution is worse and the verdict says so.

Like with like: the reference child runs the same burst, of the same mode, for eager PyTorch,
for torch.compile, and for the loop with no model in it at two sizes (`fit_loop`: a burst's
fixed cost F and the loop's cost per call L). Each side's per-call time is then
net = (fastest burst - F) / (k * replays) - L: the calls alone, the draws and digests taken out.
Like with like where a line is near (v7): each baseline is burst at its own shape, sized by its
time plus L so that a burst lasts about TARGET_MS (`SideShape`, cached with its bursts), and the
candidate at the shape of the baseline nearest its claim (within SAME_SHAPE_SPAN), so that F and L
cancel in that pair's nets' difference (net_c - net_X = (best_c - best_X) / n) and an error in the
loop's fit moves a ratio near 1 by only that error times its distance from 1. A candidate with no
cached shape near it (the task's first evaluation) is burst at its own shape, and each baseline near
it again at that shape (`candidate_shape`, `reburst`); one far from it keeps its own bursts. Why: at v6
each side was sized by its own claim plus L, and where L was 4x the kernel (row_softmax_wide, H100,
2026-12-06, 530e0ab) 16-call bursts corrected by a fit from 69 and 138 calls put the baselines'
nets 8-10 % under their events and the candidate's at its own (reward 1, the events say 2).
The candidate's bursts run right after its own timing; the baselines' after the candidate's
process is killed (a candidate cannot leave work on the GPU to slow them down).

The verdict (`judge`): the time that counts is the clock's, always: the candidate's net on the
events' scale, equiv = max over baselines X of x * net_c / net_X (x: X's event time, which the
reference measured and the candidate never touches), so each speedup is at most the clock's own
ratio net_X / net_c. The claim (the candidate's events) never lowers it: under any rule where it
could, a liar gains wherever the clock and the events disagree for its kernel, and they do by a few
per cent (the burst's inputs partly in L2, the events' flushed; below). The claim decides only the
findings: `timing-unconfirmed` (WARN) when it is more than tol_X better than the clock, with tol_X
twice the ratio's relative noise as the looks show it (the second-fastest look against the fastest,
per side, at least `JITTER_MS` per burst), clamped to [TOL_FLOOR, TOL_CAP] (the CPU lane's to
[HOST_LANE_FLOOR, HOST_LANE_CAP]: it tests the machinery, not kernels); `timing-forged` (WARN)
when it is `FORGED_WARN` or more times faster than the clock; a rejection (reward -1) when it is
`FORGED` or more times faster in graph mode (or, in host mode, faster than even its own reported
host time per call explains) by every baseline's scale, each read at the edge of its noise least
against the candidate, and the candidate's net stands clear of its own noise (on the CPU lane, also
by the candidate's own net against its claim: `Bounds.own`, its wall net or the CPU time the kernel
charged its processes, whichever is less; the CPU time, which a busy machine does not stretch, also
lets a claim it bears out agree there, never setting the time): a rejection needs evidence every side agrees on, where the time that counts takes the side least in its favour. The clock's time is charged its tolerance (the largest tol_X), so a
milestone stands only where the clock confirms it beyond its measured noise; in host mode (a burst
bound by Python) that noise, and so the charge, is larger. Where the candidate's net does not
stand clear of its noise no milestone is granted: the clock confirms nothing it cannot see; where a
baseline's net does not, its event time stands in for it (so that a lie is still caught) but no
milestone over that baseline is granted (`Verdict.unseen`): the candidate's net is on the burst's
scale and an event time is not. The reported time stays in the result as
`reported_ms`, the candidate's own figure.

What a candidate that fully controls its process can and cannot do:
- It cannot slow the parent's clock, and it cannot know a burst's inputs or weights before the
  request: both come from a salt it sees only then (graph replay reads it on the device). It
  cannot skip calls unseen: `SAMPLE` calls, picked after it replied, are digested by the
  reference; a fraction f skipped goes unnoticed with probability about (1 - 0.99 f) ** SAMPLE.
- It cannot gain by lying about its event time: the claim does not enter the time that counts.
  What remains is the clock's own error, the same for an honest candidate and a liar: between
  evaluations a 46 us memory-bound kernel's net moved 1.5-6 % (H100, 2026-12-05; docs/throughput.md
  "the evaluator's clock"), so a kernel that close to a milestone's line may land on either side.
  `EvalConfig.clock_flush`, `clock_fresh_baselines` and `clock_digest="rank1"` did not narrow that
  spread in the same session's A/B and stay off. The lighter loop (`child/hashed.py`: sign digests and
  counter-based draws; the GPU's default since 2026-12-07, `EvalConfig.clock_loop`) attacks what the
  spread scales with, the loop's own cost: on an H100 (2026-12-07, 202e74f; docs/throughput.md "Call
  11") relu 2^23's loop fell from 0.097 to 0.042 ms a call, and the ~20 us pairs below (x0.9 forgers
  against honest twins, alternating) gave +3.1 % and -1.0 % (the forger slower, then faster), each with
  a standard error of 3.0 % against the dense loop's 7.3 % on the same machine; pooled, a 10 % lie's mean
  gain is bounded to about 3 %, every reward 2 on both sides. Under it, ~100 us: +2.7 % (standard error
  1.2 %), ~1 ms: -0.6 % (0.7 %), ~5 us: +9.7 % (8.2 %, one honest run 3 and one forger 1, the rest 2).
  With the reply packed (burst-v8, fbd4f67; H100, docs/throughput.md "Call 12") the most a 10 % lie lowers
  the mean time that counts, at two standard errors (`clock_leak.py --pairs`): ~5 us 4.8 %, ~20 us 0.9 %,
  ~100 us 0.2 %, ~1 ms 3.8 % (three pairs only; 2.0 % from Call 11's four); issue 28 asks for at most
  3 % from 20 us up, on the H200, where this is not yet measured. At burst-v9 with the jumped output
  check (d4760ee; H100, docs/throughput.md "Call 14") ~20 us gave 2.4 % (standard error 1.3 %).
  One kernel's net at 20 us still spreads about 5 % between evaluations, and a run's level follows its
  one cached baseline measurement (two runs' honest means 12 % apart): a kernel within that of a
  milestone's line may land on either side, honest or lying. Figures before it, per kernel size (H100, 2026-12-06, b21b3ab,
  `benchmarks/clock_leak.py`; docs/throughput.md "Call 7"): lies of 1-10 % moved the time that
  counts by at most 1.4 % at ~100 us and 0.5 % at ~1 ms (the clock's spread there: 0.8 %, 0.2 %), no
  reward above the honest twin's; at ~20 us and ~5 us the clock's own spread of one kernel's net
  (3.9 %, 5.1 %) exceeds the 3 % charge, so there a kernel on a milestone's line may land on either
  side, and no lie smaller than that spread can be told from it. In pairs (H100, 2026-12-06, a39a97a,
  `clock_leak.py --pairs 8 --sizes "~20 us" --factor 0.9`; docs/throughput.md "Call 8") a 10 % lie
  moved the mean time that counts by +0.3 % (the liar slower; standard error 3.2 %), rewards 3 in 6 of
  8 honest runs and 4 of 8 lying ones: no gain seen, but bounded only to about 6.5 %. The spread there
  comes from the loop: draws and digests cost 0.10 ms per call against a 0.013 ms net, so 1 % of burst
  noise is about 8 % of the net. At v6 (530e0ab, the same call) -0.7 %, standard error 2.6 %, z -0.3
  (nets 15.3-19.6 us, most within 17.0-17.7), rewards 3 in 4 of 8 on both sides; on relu_scale at
  ~45 us (`forgery-quick`) the forgers' nets (43.0-47.5 us) averaged the honest run's 44.6 us. At v7
  on the H200 (2026-12-06, d5e2a3e; docs/throughput.md "Call 10") the same pairs gave -4.7 %, standard
  error 5.6 % (the loop 0.090 ms a call, nets 9.4-13.2 us): no gain seen, bounded only to about 11 %;
  and row_softmax_wide (~0.14 ms, loop about 4x the kernel) read 1.03-1.17x torch.compile over 9 runs
  where its events say 1.105x. So the clock's spread between evaluations, where the loop outweighs the
  kernel, is the leak that remains: a kernel within that spread of a milestone's line may land on either
  side, whether it lies or not.
- The clock's own error is not only noise. On the H100 (2026-12-05, docs/throughput.md "Call 5")
  diag_matmul's net came out 7.6x below its event time, under the task's speed-of-light floor
  (so `floor_ms` set its time), while the baselines' nets matched their events: inside a burst the
  digest reads the output just written, mostly from L2, where the loop burst digests a stored
  output from DRAM, so a memory-bound call with a large output is credited that read. Honest
  candidates and liars alike; the milestone line moves by about 5 % of the credit, but the speedup
  shown for such a kernel is too high until the loop digests as the calls do. The candidate cure,
  `EvalConfig.clock_cold_digest` (L2 flushed between each call and its digest, on every side), is
  off until a GPU has measured it (`scripts/gpu-session.sh X8`).
- It can make its looks uneven: that widens tol (up to TOL_CAP), which only charges it more; it
  never moves its fastest look.
- Remaining leaks, stated: (1) work the harness does inside the candidate's process (the draws
  and the digests) could be fused into the candidate's own kernels by a candidate that replaces
  the harness's burst with its own code; that lowers its burst by up to the loop's cost, so the
  clock's time is never taken below the task's speed-of-light floor (`floor_ms`), but a
  memory-bound candidate could then be timed down to that floor. (2) The digests are linear in the
  output, with one set of weights per burst (a weight matrix, or the sign digest's keyed signs): for
  a linear task (a GEMM) a candidate that replaces the burst could compute the digests from the
  inputs and W A without the outputs. Both need
  code that rewrites the harness from inside the process (which the static rules and the
  post-build symbol check reject first) and an exact reimplementation of the burst; moving the
  draws and digests into the reference's process (CUDA IPC) would close both. (3) k calls with
  no dependence between them may run concurrently; a kernel too small to fill the GPU could
  gain from that. (4) Another process loading the GPU during a burst (timed sections are
  exclusive per GPU among evaluations).

Pure functions of numbers; the requests live in `timing/timed.py` and `child/burst.py`. Standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cuda_agent.eval.judge.reward import clearly_faster

PROTOCOL = "burst-v9"  # changes whenever a burst's per-call time changes meaning: part of the cache key
# (v8: the reply's digests packed, not JSON numbers: about 2 us a call less host work in every burst, so a
# loop fitted under v7 would take that out of a v8 candidate's net; v9: the sign digest sums its blocks in
# one kernel of its own, where torch's sum and a copy were two, so a graph's loop runs other kernels)
TARGET_MS = 15.0  # a burst lasts about this long, its loop included where the loop's cost is known (the
# reply's wake-up jitter is ~0.01-0.1 ms; the burst's own spread on the H100 was ~0.7 % of its length, so
# a longer burst buys little precision: v5 sized by the claim alone and ran ~90 ms bursts where the loop
# was 8x the kernel, +44 % per evaluation; v6, sized with the loop, +16 %, H100, 2026-12-06, 530e0ab)
K_MIN, K_MAX = 4, 256  # calls captured in one graph (or looped from Python)
MAX_REPLAYS = 16  # a graph of K_MAX short calls is replayed up to this many times per burst
BURST_BYTES = 4 << 30  # host mode: all k input sets may live at once
LOOKS = 3  # bursts per side; up to MORE_LOOKS more while the looks disagree by more than TOL_CAP / 2
MORE_LOOKS = 3
SAMPLE = 12  # candidate calls whose digests the reference checks
Z = 6.0  # tolerance scales a digest may differ by
JITTER_MS = 0.01  # the least a burst's wall time is taken to be uncertain by (pipe and wake-up)
TOL_FLOOR = 0.02  # the least noise the clock's time is charged: its run-to-run spread, which one evaluation's
# looks do not show (H100, 2026-12-05: 36 evaluations of one 46 us kernel whose median sat 0.6 % over a
# milestone's line: standard deviation 1.0 %, the lowest 1.3 % under the line; charged its looks' own
# tolerance (1.1-3 %) the nearest stayed only 0.7 % over it, charged at least 2 % it stays 1.2 % over)
TOL_CAP = 0.03  # the most the clock's time is charged for its noise (and the most a claim may beat it unflagged)
HOST_LANE_CAP = 0.5  # the CPU lane's (its host clock is as noisy as the machine: it tests the machinery, not kernels)
HOST_LANE_FLOOR = 0.25  # ... and the least it charges: its baselines are microseconds of Python whose net and event
# time part by more than their looks show (CI, b02afbb: eager's net 11 % under its events, so an honest
# candidate read 13 % slower than it reported against a 2.4 % tolerance and was called unconfirmed)
HOST_LANE_FORGED = 5.0  # the CPU lane rejects only lies this gross (a loaded 2-core machine moved honest ones 2.5x)
FORGED_WARN = 1.15  # a claim this many times faster than the clock is flagged as forged (a 20 % lie is 1.25x, less
# the clock's run-to-run noise: on the H100, 2026-12-05, one kernel's net moved 5 % between evaluations)
FORGED = 2.0  # ... and this many times (graph mode) is rejected


@dataclass(frozen=True)
class Bounds:
    """One lane's bounds on the verdict: the tolerance's floor and cap, and the rejection's factor.
    `own`: a rejection also needs the candidate's own net, at the edge of its noise, `forged` times its
    claim. The CPU lane's: there a baseline's net and events part by several times under load (CI-like
    load, 2026-12-07, the RL smoke's honest relu: eager's net 0.0052 ms against its 0.027 ms of events, so
    on eager's scale the candidate read 7.9x its claim and was rejected as forged while its own net was
    1.5x its claim). The own net is the lesser of the wall's and the CPU time's (`judge`'s `cpu_net_ms`):
    a busy machine stretches the wall alone (2-core machine, the suite beside it, 2026-12-07: the same
    relu's own wall net read 15x its claim and it was rejected). Not the GPU's: there nets sit a steady
    fraction under their events (0.5-0.9x), and a 2x lie whose net reads 0.6x its events would pass the
    candidate's own check."""

    least: float
    cap: float
    forged: float
    own: bool = False


GPU_BOUNDS = Bounds(TOL_FLOOR, TOL_CAP, FORGED)
HOST_LANE_BOUNDS = Bounds(HOST_LANE_FLOOR, HOST_LANE_CAP, HOST_LANE_FORGED, own=True)


def burst_shape(per_call_ms: float, in_bytes: int, graph: bool, loop_ms: float = 0.0) -> tuple[int, int]:
    """(k, replays): enough calls for TARGET_MS at this per-call time plus the loop's cost per call
    (`LoopFit.per_call_ms`, 0 where not yet known). Host mode keeps every input set alive at once, so
    BURST_BYTES bounds its k; a graph reuses its memory and repeats instead."""
    each = per_call_ms + max(0.0, loop_ms) if per_call_ms > 0 else 0.0
    want = K_MAX * MAX_REPLAYS if not each > 0 else max(K_MIN, math.ceil(TARGET_MS / each))
    if not graph:
        return max(2, min(want, K_MAX, BURST_BYTES // max(1, in_bytes))), 1
    k = max(K_MIN, min(K_MAX, want))
    return k, max(1, min(MAX_REPLAYS, math.ceil(want / k)))


# a candidate within this factor of a baseline's per-call cost (each with the loop) shares its shape
SAME_SHAPE_SPAN = 4.0


@dataclass(frozen=True)
class SideShape:
    """One baseline's burst shape (k, replays) and the per-call cost that sized it (its time plus the
    loop's): trusted, from the reference, cached with its bursts."""

    k: int
    replays: int
    sized_ms: float


def near(per_call_ms: float, sized_ms: float) -> bool:
    return sized_ms / SAME_SHAPE_SPAN <= per_call_ms <= SAME_SHAPE_SPAN * sized_ms


def candidate_shape(
    claim_ms: float, in_bytes: int, graph: bool, sides: list[SideShape] | None, loop_ms: float = 0.0
) -> tuple[int, int]:
    """The candidate's (k, replays): the shape of the baseline nearest its claim (each with the loop's
    cost), where one is within SAME_SHAPE_SPAN, so that the comparison that can decide a milestone holds
    the same calls on both sides, and a burst's fixed cost and the loop's per-call cost cancel in the
    nets' difference (net_c - net_X = (best_c - best_X) / n); else (no baseline bursts cached yet, or
    none near) its own, sized by its claim plus the loop."""
    loop = loop_ms if graph else 0.0
    cost = claim_ms + loop
    close = [x for x in sides or [] if claim_ms > 0 and near(cost, x.sized_ms)]
    if close:
        x = min(close, key=lambda x: abs(math.log(cost / x.sized_ms)))
        return x.k, x.replays
    return burst_shape(claim_ms, in_bytes, graph, loop)


def reburst(claim_ms: float, loop_ms: float, side: SideShape, cand_shape: tuple[int, int]) -> bool:
    """Whether a baseline bursts again at the candidate's shape: the shape is not its own (the task's
    first evaluation, or another side's) and the candidate is near it, where a milestone's line may be.
    A side far from the candidate keeps its own cached bursts: its net keeps the fit's error uncancelled,
    but no line is near, and at the candidate's calls a far faster side's bursts would be too short to
    time well (its net, and through the max over sides the time that counts, would carry that error:
    an honest candidate 72x slower than eager read 1.85x slower than its events on the CPU lane) and a
    far slower side's too long. A lie cannot move a candidate near a line out of this: it would need a
    claim SAME_SHAPE_SPAN times under the clock, which FORGED rejects."""
    return tuple(cand_shape) != (side.k, side.replays) and claim_ms > 0 and near(claim_ms + loop_ms, side.sized_ms)


@dataclass(frozen=True)
class Looks:
    """One side's bursts: calls per burst (k x replays) and the parent's seconds for each look."""

    calls: int
    seconds: tuple[float, ...]

    @property
    def best_ms(self) -> float:
        return min(self.seconds) * 1e3

    @property
    def jitter_ms(self) -> float:
        """How far the next-best look is from the best (at least JITTER_MS): this side's noise per burst."""
        s = sorted(self.seconds)
        second = (s[1] - s[0]) * 1e3 if len(s) > 1 else float("inf")
        return max(JITTER_MS, second)

    def spread(self) -> float:
        return self.jitter_ms / self.best_ms if self.best_ms > 0 else float("inf")


@dataclass(frozen=True)
class LoopFit:
    """The loop with no model: fixed cost per burst (ms) and cost per call (ms)."""

    fixed_ms: float
    per_call_ms: float


def fit_loop(small: Looks, large: Looks) -> LoopFit:
    """F and L from the loop's bursts at two sizes (both trusted: the reference ran them)."""
    if large.calls <= small.calls:
        raise ValueError("the loop's second size must have more calls")
    per = max(0.0, (large.best_ms - small.best_ms) / (large.calls - small.calls))
    return LoopFit(max(0.0, small.best_ms - small.calls * per), per)


def net_ms(looks: Looks, fit: LoopFit) -> float:
    """Per-call time of the calls alone: the fastest burst less the fixed cost and the loop's share."""
    return (looks.best_ms - fit.fixed_ms) / looks.calls - fit.per_call_ms


def noise_ms(looks: Looks) -> float:
    return looks.jitter_ms / looks.calls


def digest_mismatch(cand: list[float | None], ref: list[float | None], scales: list[float | None]) -> str | None:
    """Why one call's digests disagree with the reference's, or None."""
    if len(cand) != len(ref):
        return f"{len(cand)} digests, the reference has {len(ref)}"
    for j, (c, r, s) in enumerate(zip(cand, ref, scales, strict=True)):
        if r is None or s is None:
            continue
        if c is None or not math.isfinite(c):
            return f"digest {j} is not finite or its output is not a tensor"
        if abs(c - r) > Z * s + 1e-6 * abs(r):
            return f"digest {j}: off by {abs(c - r) / s if s else float('inf'):.1f} tolerance scales (at most {Z:g})"
    return None


@dataclass(frozen=True)
class Side:
    """A baseline as both clocks see it: its event time (ms, trusted: the reference timed it) and
    its net per-call time on the parent's clock with that net's noise."""

    name: str
    event_ms: float
    net_ms: float
    noise_ms: float


@dataclass(frozen=True)
class Verdict:
    kind: str  # the claim against the clock: "ok" (within tol) | "unconfirmed" (beyond it) | "forged" (rejected)
    time_ms: float  # the candidate's time that counts, whatever the kind: equiv_ms charged the largest tol
    equiv_ms: float  # the clock's time on the events' scale (max over baselines of x * net_c / net_X)
    tol: dict[str, float]  # per baseline: the clock's measured noise (its charge; a claim beyond it is flagged)
    flagged: bool  # the claim is FORGED_WARN or more times faster than the clock
    resolved: bool  # every tolerance below TOL_CAP: the clock resolves this kernel to its noise
    message: str
    grants: bool = True  # False: the clock could not compare like with like, so no milestone stands
    # baselines whose nets the clock could not see past their noise: no milestone over them
    unseen: tuple[str, ...] = ()


def judge(
    claim_ms: float,
    cand_net_ms: float,
    cand_noise_ms: float,
    sides: list[Side],
    mode: str = "graph",
    floor_ms: float = 0.0,
    enqueue_ms: float | None = None,
    bounds: Bounds = GPU_BOUNDS,
    cpu_net_ms: float | None = None,
) -> Verdict:
    """The candidate's time that counts (module docstring): the clock's, whatever the claim. `floor_ms`:
    the task's speed-of-light time per call (0: unknown); the clock's net is never taken below it.
    `mode`: "graph" or "host" (a host-bound burst resolves less: its wider tolerance is its charge);
    `enqueue_ms`: the host time per call the candidate reported (host mode: a
    host-bound honest candidate's slow burst is then not called forged). `bounds`: the lane's floor and
    cap on the tolerance and its rejection factor (GPU_BOUNDS; HOST_LANE_BOUNDS on the CPU lane).
    `cpu_net_ms` (the CPU lane): the candidate's net by the CPU time the kernel charged its processes in
    the same looks, which a busy machine does not stretch as it does the wall time; it may only spare the
    candidate (agreement, and no rejection unless it too is `forged` times the claim), never set the
    time: work moved into a process that ends before the reading is not in it. The claim decides only
    the findings (and a rejection when grossly below the clock), never the time or a milestone: any
    rule in which the claim could lower the time would let a liar gain wherever the clock and the
    events disagree for its kernel (measured: 3-6 % on a 46 us kernel), which no tolerance fixes."""
    cap, forged, least = bounds.cap, bounds.forged, bounds.least
    raw = max(cand_net_ms, 1e-9)
    net_c = max(cand_net_ms, floor_ms, 1e-9)
    tol: dict[str, float] = {}
    equiv = 0.0
    least_equiv = math.inf  # the rejection's evidence: the lowest equivalent any side allows (below)
    agree = True
    parts = []
    resolved = True
    unseen: list[str] = []
    for s in sides:
        base = s.net_ms
        if not base > 2.0 * s.noise_ms:
            # a baseline too quick for the clock to see past the loop's noise: its event time stands in
            # for its net, so that a lie is still caught against the events; but the candidate's net is
            # on the burst's scale and the events are not (H200, 2026-12-06, relu_scale under the rank-1
            # digest: nets 0.8-0.9x their events, so against compile's event time a candidate whose net
            # ran low took the milestone its twin did not), so no milestone over this side stands
            base, resolved = s.event_ms, False
            unseen.append(s.name)
        rel = math.hypot(cand_noise_ms / net_c, s.noise_ms / base)
        t = min(cap, max(least, 2.0 * rel))
        tol[s.name] = t
        ratio = net_c / base
        equiv = max(equiv, s.event_ms * ratio)
        # for a rejection every side must agree, each at the edge of its noise least against the candidate:
        # the max over sides that sets the time would let one side's error alone call an honest claim
        # forged (H200, 2026-12-06, 6a32046: release/scale_add, a 4 us kernel, was rejected as 2.13x
        # forged in 2 of 9 runs, its candidate's own net 1.22x its events)
        lo = max(0.0, raw - 2.0 * cand_noise_ms) / (base + 2.0 * s.noise_ms)
        least_equiv = min(least_equiv, s.event_ms * lo)
        if claim_ms / s.event_ms * (1 + t) < ratio:
            agree = False
        parts.append(f"{s.name} {base:.4g} ms (x{ratio:.3f}, tol {t:.1%})")
    # the CPU lane: a claim the candidate's CPU time bears out agrees, the wall's ratio still setting the
    # time. Against the claim itself, not on a baseline's scale: both are the candidate's own calls, while a
    # baseline's net and events part by 10 % and more on a busy CPU (2 cores, both busy, 2026-12-07)
    by_cpu = not agree and cpu_net_ms is not None and claim_ms * (1 + max(tol.values(), default=cap)) >= cpu_net_ms
    agree = agree or by_cpu
    # the candidate's own net must stand clear of its noise, or the clock saw nothing of its calls
    visible = net_c > 2.0 * cand_noise_ms and bool(sides)
    resolved = resolved and visible and all(t < cap for t in tol.values())
    clock = f"evaluator's clock ({mode}): candidate {net_c:.4g} ms per call vs " + ", ".join(parts)
    # the time that counts: the clock's on the events' scale, charged its own measured noise, so a
    # milestone stands only where the clock confirms it beyond that noise. The clock's bare time
    # would hand a milestone to whichever evaluation of a kernel on the line ran low (H100,
    # 2026-12-05: relu_scale 1.3 % short of the line, its forgers' nets spread 5 % over 48
    # evaluations, a third of them crossed it; with this charge none did).
    time_ms = equiv * (1 + max(tol.values(), default=cap))
    note = "" if visible else "; the clock cannot see this kernel past its noise: no milestone is confirmed"
    if unseen and visible:
        note += f"; the clock {unseen_note(unseen)}"
    if agree:
        return Verdict(
            "ok",
            time_ms,
            equiv,
            tol,
            False,
            resolved,
            f"{clock}: agrees with the reported {claim_ms:.4g} ms"
            + (f" by its CPU time ({cpu_net_ms:.4g} ms per call: the machine kept it off a core)" if by_cpu else "")
            + f"; the clock's {time_ms:.4g} ms counts"
            + note,
            grants=visible,
            unseen=tuple(unseen),
        )
    over = equiv / claim_ms if claim_ms > 0 else float("inf")
    flagged = over >= FORGED_WARN
    host = max(claim_ms, enqueue_ms or 0.0)
    gross = visible and least_equiv >= forged * claim_ms and (mode == "graph" or least_equiv >= forged * host)
    if bounds.own:
        own = raw if cpu_net_ms is None else min(raw, cpu_net_ms)
        gross = gross and max(0.0, own - 2.0 * cand_noise_ms) >= forged * host
    what = (
        f"the candidate reported {claim_ms:.4g} ms per call, {over:.2f}x faster than the evaluator's clock "
        f"confirms ({equiv:.4g} ms on the same scale; {clock}"
        + ("" if cpu_net_ms is None else f"; its CPU time {cpu_net_ms:.4g} ms per call")
        + ")"
    )
    if gross:
        return Verdict(
            "forged",
            time_ms,
            equiv,
            tol,
            True,
            resolved,
            what + ": the reported time is not the candidate's",
            grants=False,
            unseen=tuple(unseen),
        )
    return Verdict(
        "unconfirmed",
        time_ms,
        equiv,
        tol,
        flagged,
        resolved,
        what
        + f": the clock's {time_ms:.4g} ms counts"
        + note
        + ("" if resolved or not visible else "; the clock's noise is at its limit here"),
        grants=visible,
        unseen=tuple(unseen),
    )


def unseen_note(names: list[str] | tuple[str, ...]) -> str:
    """What the verdict says of baselines the clock could not see (its message and the result's finding)."""
    return f"cannot see {' or '.join(names)} past its noise: no milestone over it is confirmed"


def milestones(v: Verdict, eager_ms: float, compile_ms: float) -> tuple[bool, bool]:
    """The reward's milestones from the time that counts."""
    if not v.grants:
        return False, False
    eager_seen = "eager" not in v.unseen
    # without a torch.compile side eager stands in for it, and so does eager's visibility
    compile_seen = "torch.compile" not in v.unseen if "torch.compile" in v.tol else eager_seen
    return (
        eager_seen and clearly_faster(v.time_ms, eager_ms),
        compile_seen and clearly_faster(v.time_ms, compile_ms),
    )
