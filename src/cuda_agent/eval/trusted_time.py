"""A bound on the candidate's time from a clock its process cannot touch, and the threat model.

Why: the candidate's own process measures its device time (CUDA events, `timing.py`), and code
in that process (native code through pybind11, or Python that slipped past the static rules)
can rewrite the harness there and report any number. The reward needs a time the candidate
cannot forge, yet events inside the process are the only precise device clock.

The bound (a "burst"): after the timed calls the parent sends the candidate child k fresh input
seeds and a secret weight seed in one request and measures, on its own clock, how long the
reply takes. In that request the child draws each input set, calls the model, and reduces each
output to two digests, sum(W * out) in float64 with independent standard-normal weight tensors W
drawn from the secret seed, back to back with one synchronize at the end; it returns them all. The trusted
reference child then runs the same loop with the call left out (the overhead: input draws and
digests of same-shaped outputs), timed the same way by the parent, and computes the reference's
own digests for `SAMPLE` of the k calls, picked by the parent after the candidate replied:
  u = (T_burst - T_overhead) / k        per-call time, on the parent's clock
Each sampled digest must lie within `Z` tolerance scales of the reference's
(scale = sqrt(sum((atol + rtol |ref|)^2)), so an output within atol/rtol everywhere passes with
overwhelming probability, while an unrelated one, zeros say, fails each digest with about 90 %
probability and both with about 99 %), or the candidate is incorrect: the calls of the burst
really computed outputs from inputs that did not exist before the request arrived.

The verdict (`judge`), with claim = the reported median device time, enqueue = the reported
host time to enqueue one call, tol and slack from `EvalConfig` (TOL, SLACK_MS by default):
- forged (rejected, reward -1): u > FORGED * (max(claim, enqueue) + slack), seen again on
  fresh bursts: the reported figures are not within a factor FORGED of what the parent's
  clock saw, which no honest process under ordinary load produces;
- floored: claim < (u - slack) / (1 + tol): the reward uses that floor instead of the claim
  (a WARN finding says so). This happens honestly when the host path of a call (its Python and
  launches) outlasts its device time: the event time leaves the host out, the parent's clock
  cannot; only `slack` of host time per call stays uncounted;
- otherwise the claim stands.

What a candidate that fully controls its process can and cannot do:
- It cannot make the parent's clock run slower, and it cannot skip or precompute the work of a
  burst: the inputs come from seeds it sees only inside the timed request, the weights are
  secret until then, and a sampled digest that is off makes it incorrect. Skipping a fraction f
  of the calls goes unnoticed with probability (1 - f) ** SAMPLE.
- It can report a device time lower than its true one by at most tol (relative) plus slack
  (absolute) before the claim is floored, and below half its true time it is rejected.
- It can waste time inside a burst; that only raises its own bound.
- Not excluded: an output whose digest can be computed faster than the output itself for some
  op (the weights are a full random tensor, so for every op we know the digest costs as much
  as the output); work that overlaps the parent's pipe round trip (microseconds); a burst that
  runs while another process loads the same GPU (the GPU lock of the timed sections keeps
  evaluations apart).

Pure functions of numbers; the requests live in `pipeline` and `child`. Standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TARGET_MS = 10.0  # a burst lasts about this long on the claimed time (pipe jitter is ~0.1 ms)
K_MIN, K_MAX = 8, 400
SAMPLE = 12  # digests checked against the reference
Z = 6.0  # tolerance scales a digest may differ by
TOL = 0.10
SLACK_MS = 0.03
CPU_LANE_SLACK_MS = 5.0  # the CPU lane times host code on a shared machine: only gross lies are its business
FORGED = 2.0
BURSTS = 2  # bursts of each kind; the fastest counts (scheduling noise only adds time)


def burst_size(claim_ms: float) -> int:
    """Calls per burst: enough for TARGET_MS at the claimed time, within [K_MIN, K_MAX]."""
    if not claim_ms > 0:
        return K_MAX
    return max(K_MIN, min(K_MAX, math.ceil(TARGET_MS / claim_ms)))


def digest_mismatch(cand: list[float | None], ref: list[float | None], scales: list[float | None]) -> str | None:
    """Why one call's digests disagree with the reference's, or None."""
    if len(cand) != len(ref):
        return f"{len(cand)} digests, the reference has {len(ref)}"
    for j, (c, r, s) in enumerate(zip(cand, ref, scales, strict=True)):
        if r is None or s is None:
            continue
        if c is None or not math.isfinite(c):
            return f"digest {j} is not finite or its output is not a tensor"
        if abs(c - r) > Z * s + 1e-9 * abs(r):
            return f"digest {j}: off by {abs(c - r) / s if s else float('inf'):.1f} tolerance scales (at most {Z:g})"
    return None


@dataclass(frozen=True)
class Verdict:
    per_call_ms: float  # u, the parent's clock
    floor_ms: float  # the least time the reward may use
    kind: str  # "ok" | "floored" | "forged"
    k: int

    def message(self, claim_ms: float, enqueue_ms: float | None) -> str:
        head = (f"{self.k} back-to-back calls on fresh inputs took {self.per_call_ms:.4g} ms per call on the evaluator's "
                f"own clock")
        if self.kind == "forged":
            return (f"{head}, but the candidate reported {claim_ms:.4g} ms of device time and {enqueue_ms or 0:.4g} ms to "
                    f"enqueue a call: its figures are not within a factor {FORGED:g} of that")
        if self.kind == "floored":
            return (f"{head}; the reported {claim_ms:.4g} ms is below what that allows, so {self.floor_ms:.4g} ms counts "
                    "(the host side of each call outlasts its device time, or the figure was too low)")
        return f"{head}; the reported {claim_ms:.4g} ms agrees"


def judge(claim_ms: float, enqueue_ms: float | None, burst_s: float, overhead_s: float, k: int,
          tol: float = TOL, slack_ms: float = SLACK_MS) -> Verdict:
    u = max(0.0, (burst_s - overhead_s) * 1e3 / k)
    floor = max(0.0, (u - slack_ms) / (1 + tol))
    if u > FORGED * (max(claim_ms, enqueue_ms or 0.0) + slack_ms):
        return Verdict(u, floor, "forged", k)
    return Verdict(u, floor, "floored" if claim_ms < floor else "ok", k)
