"""The reward's time checked against a clock the candidate's process cannot touch; the threat model.

Why: the candidate's own process measures its device time (CUDA events, `timing.py`), and code
in that process (native code through pybind11, or Python that slipped past the static rules)
can rewrite the harness there and report any number. The reward needs times the candidate
cannot forge, yet events inside the process are the only precise device clock.

The bound (a "burst"): the parent sends a child a secret salt, k and a secret weight seed in one
request and measures, on its own clock, how long the reply takes. Inside, the child seeds the
task's random generators once with the salt and then, k times, draws the task's next input set
and calls the model on it, reducing each output to two digests (a product with a secret
standard-normal weight matrix, one GEMV launch into a device buffer), and synchronizes once at
the end. Drawing inside the loop keeps it device-bound: the host draws the next set while the
device runs the last call (a first version drew every set with its own seeding first and spent
0.2-0.5 ms per call of host work on the H200, which hid the calls it meant to time). The candidate's bursts run right after its timing, while the GPU is its alone; the
trusted reference child runs the same loop for eager PyTorch and for torch.compile (warmed up
first), with the same request shape, timed by the same parent clock. b = seconds / k is a
burst's per-call time; the fastest of `BURSTS` bursts counts (scheduling noise only adds time).
`SAMPLE` of the candidate's calls, picked by the parent after it replied, are digested by the
reference too; a digest more than `Z` tolerance scales away (scale = sqrt(sum((atol +
rtol |ref|)^2)): an output within atol/rtol everywhere passes with overwhelming probability, an
unrelated one, zeros say, fails each digest with about 90 % probability and both with about 99 %)
makes the candidate incorrect: the calls really computed outputs from inputs that did not exist
before the request arrived.

The verdict (`judge`): each milestone of the reward that the reported device times grant
(faster than eager, faster than torch.compile, each by more than 5 %) must be confirmed by the
bursts: b_candidate <= b_baseline * (1 + TOL). A milestone the bursts do not confirm is withdrawn
(a WARN finding, the reward drops); one they contradict grossly, b_candidate > FORGED *
b_baseline, rejects the candidate (reward -1) as a forged time. The reported time must also agree
with the candidate's own burst: the reference runs the same loop with no model in it (mode
"loop": the draws, the digests, the host's per-call work; b_loop), and since a call of the loop
costs at most b_loop plus the call itself, an honest candidate's b_candidate - b_loop stays near
(on the H200, at most) its reported time; b_candidate - b_loop > FIT * reported + slack, with a
milestone claimed, is a forged time too (it catches a lie about a kernel that is truly about as
fast as eager, which the comparison with the baselines only withdraws). A candidate bound by its own host work (many
launches from Python, which the timing's hold keeps out of the device time) can have an honest
burst that far above (its launches are host work the loop does not have); where the host time per
call it reported explains the burst, the verdict is "unconfirmed" instead (no milestone counts). That reported figure can only soften a rejection
into reward 1, never confirm a milestone, so lying with it gains nothing. Both sides' bursts carry the same
loop (input draws, digests, the host's per-call work), so the comparison is like for like; the
loop only dilutes differences, so a burst never confirms more than the device times claim.

What a candidate that fully controls its process can and cannot do:
- It cannot make the parent's clock run slower, and it cannot skip or precompute the work of a
  burst: the inputs come from a salt it sees only inside the timed request, the weights are
  secret until then, and a sampled digest that is off makes it incorrect. Skipping a fraction f
  of the calls goes unnoticed with probability about (1 - 0.99 f) ** SAMPLE.
- It can claim a milestone its true time misses only where its burst is within TOL of the
  baseline's: a true time a little slower than the 5 % line, or any time while both bursts are
  bound by host work (calls of a few microseconds, where every side's burst is the loop's own
  Python), which no wall clock can see through. Even there the claim must stay within FIT of
  its own burst less the loop's cost plus the slack (a kernel truly taking t may claim down to
  about (t - slack) / FIT and keep the milestones: the leak that remains; a 20x claim is rejected).
  On the H200 (2026-12-03) the honest controls' and examples' b - b_loop were at most 1.14x their
  reported times above 0.01 ms (a host-bound 0.004 ms call's 0.02 ms, inside the slack), the 20x
  lie's 14.8x (0.083 ms over a 0.0056 ms claim); clock v4 judged that lie against
  FORGED * (reported + b_loop) + slack, which its 0.05 ms loop hid.
- It can waste time inside a burst; that only slows its own burst.
- Not excluded: an output whose digest can be computed faster than the output itself (the weights
  are a full random matrix, so for every op we know the digest costs a full pass over the output
  the candidate has to produce anyway); another process loading the same GPU during a burst (the
  timed sections are exclusive per GPU).

Pure functions of numbers; the requests live in `timed` and `child`. Standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cuda_agent.eval.reward import clearly_faster

PROTOCOL = "burst-v4"  # changes whenever a burst's per-call time changes meaning: part of the cache key
TARGET_MS = 10.0  # a burst lasts about this long (pipe and wake-up jitter is ~0.1 ms)
K_MIN, K_MAX = 4, 400
BURST_BYTES = 4 << 30  # all k input sets live at once: at most this much
SAMPLE = 12  # candidate digests checked against the reference
Z = 6.0  # tolerance scales a digest may differ by
TOL = 0.10  # a burst may be this much slower than the baseline's and still confirm a milestone
FORGED = 2.0  # a claimed milestone with a burst this many times slower than a baseline's is a forged time
FIT = 1.5  # a burst less the loop's cost may be this many times the reported time (plus the slack)
BURSTS = 2


def burst_size(per_call_ms: float, in_bytes: int) -> int:
    """Calls per burst: enough for TARGET_MS at this per-call time, within [K_MIN, K_MAX] and BURST_BYTES."""
    k = K_MAX if not per_call_ms > 0 else max(K_MIN, min(K_MAX, math.ceil(TARGET_MS / per_call_ms)))
    return max(2, min(k, BURST_BYTES // max(1, in_bytes)))


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
class Verdict:
    kind: str  # "ok" | "unconfirmed" (a milestone withdrawn) | "forged"
    faster_eager: bool  # the milestones that stand
    faster_compile: bool
    message: str


def judge(claim_ms: float, eager_ms: float, compile_ms: float, burst_ms: float, burst_eager_ms: float,
          burst_compile_ms: float, tol: float = TOL, loop_ms: float | None = None, slack_ms: float = 0.0,
          enqueue_ms: float | None = None) -> Verdict:
    """The milestones the device times claim, each kept only where the bursts confirm it. `loop_ms`:
    the loop burst's per-call time (None: not measured, no self-consistency check); `slack_ms`:
    host time per call that check leaves uncounted; `enqueue_ms`: the host time per call that the
    candidate reported (its Python and launches, hidden from the device time by the timing's hold):
    it can excuse a slow burst from being called forged, never confirm a milestone."""
    sides = (("eager", eager_ms, burst_eager_ms), ("torch.compile", compile_ms, burst_compile_ms))
    kept: list[bool] = []
    notes: list[str] = []
    claims = any(clearly_faster(claim_ms, t0) for _, t0, _ in sides)
    own = burst_ms - loop_ms if loop_ms is not None else None  # the burst less the loop's own cost
    if claims and own is not None and own > FIT * claim_ms + slack_ms:
        host = max(claim_ms, enqueue_ms or 0.0)
        if own <= FIT * host + slack_ms:
            # bound by its own host work (many launches from Python): the reported device time may be
            # true, but back to back the calls are not that fast, so no milestone counts
            return Verdict("unconfirmed", False, False,
                           f"back to back the candidate took {burst_ms:.4g} ms per call on the evaluator's clock, "
                           f"{own:.4g} ms above the loop alone ({loop_ms:.4g} ms), far above its reported {claim_ms:.4g} ms; "
                           f"its host time per call ({host:.4g} ms) may explain it, so no milestone is counted")
        return Verdict("forged", False, False,
                       f"on the evaluator's own clock the candidate took {burst_ms:.4g} ms per call back to back, "
                       f"{own:.4g} ms more than the loop alone ({loop_ms:.4g} ms), but it reported {claim_ms:.4g} ms per call "
                       f"(its burst less the loop may exceed that by at most {FIT:g}x + {slack_ms:.3g} ms): the reported "
                       "time is not the candidate's")
    for name, t0, b0 in sides:
        claimed = clearly_faster(claim_ms, t0)
        if claimed and burst_ms > FORGED * b0:
            return Verdict("forged", False, False,
                           f"the reported {claim_ms:.4g} ms is faster than {name}'s {t0:.4g} ms, but back to back on fresh inputs "
                           f"the candidate took {burst_ms:.4g} ms per call against {name}'s {b0:.4g} ms on the evaluator's own "
                           f"clock (more than {FORGED:g}x slower): the reported time is not the candidate's")
        confirmed = claimed and burst_ms <= b0 * (1 + tol)
        if claimed and not confirmed:
            notes.append(f"faster than {name} by the reported times ({claim_ms:.4g} vs {t0:.4g} ms) but not back to back on "
                         f"the evaluator's clock ({burst_ms:.4g} vs {b0:.4g} ms per call, tolerance {tol:.0%}): not counted")
        kept.append(confirmed)
    if notes:
        return Verdict("unconfirmed", kept[0], kept[1], "; ".join(notes))
    return Verdict("ok", kept[0], kept[1], f"bursts agree: {burst_ms:.4g} ms per call against eager {burst_eager_ms:.4g} "
                   f"and torch.compile {burst_compile_ms:.4g} ms")
