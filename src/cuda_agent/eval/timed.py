"""The timed half of an evaluation, in the trusted parent: the candidate's timing, the checks of
its timed outputs, the trusted bound, the baselines and the speed-of-light flag.

Contract (called by `pipeline` in this order, with the candidate already correct):
1. `time_candidate`: per-call device timing in the candidate child (`timing.time_calls`), the
   parent picking which fresh-input calls keep their outputs; the side-stream re-timing.
2. `burst_candidate`: the candidate's back-to-back bursts on the parent's clock (`trusted_time`),
   while nothing else runs on the GPU; `check_burst_outputs`: sampled digests vs the reference.
3. `timed_references` + `check_timed_outputs`: the reference's outputs for the checked timed
   calls, and the comparisons, at paths the parent computed.
4. `baselines`: eager and torch.compile of the reference (cached per task, GPU, torch,
   precision and timing settings); `burst_baselines`: their bursts (cached beside them).
5. `trusted_milestones`: the reward's milestones that the bursts confirm; a forged time is
   rejected (`trusted_time.judge`).
6. `speed_of_light`: the bytes floor.
Every candidate failure ends the evaluation through `exchange.finish`.

Not guaranteed: stable GPU clocks, or that another process leaves the GPU alone (see
`timing` and `trusted_time`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.eval import gpu_lock
from cuda_agent.eval import protocol as P
from cuda_agent.eval import speed_of_light as sol
from cuda_agent.eval import trusted_time as tt
from cuda_agent.eval.cache import KVCache
from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.exchange import ask, compare_recv, compare_send, finish, guard, recv, send, who
from cuda_agent.eval.gpu import GPU
from cuda_agent.eval.procs import Child, failure
from cuda_agent.eval.result import EvalResult, Finding, Severity, Status, TimingStats
from cuda_agent.eval.timing import PROTOCOL as TIMING_PROTOCOL
from cuda_agent.eval.timing import checked_calls, derive_seed, side_stream_suspect
from cuda_agent.task.taskfile import Task


@contextlib.contextmanager
def section(res: EvalResult, cfg: EvalConfig, gpu: GPU) -> Iterator[None]:
    """Hold the GPU's timing lock; afterwards note outside work that shared the GPU meanwhile."""
    with gpu_lock.exclusive(gpu.key, cfg.gpu_lock_wait_s) as held:
        res.gpu_wait_s = round(res.gpu_wait_s + held.waited_s, 3)
        # a sub-key (no phase of its own: the wait sits between phases), read by benchmarks/eval_throughput.py
        res.phases_s["lock.exclusive"] = round(res.phases_s.get("lock.exclusive", 0.0) + held.waited_s, 3)
        if not held.exclusive:
            res.findings.append(Finding("gpu-lock-timeout", f"waited {held.waited_s:.0f} s for the GPU's timing lock and "
                                        "timed without it: another process may have timed at the same time", Severity.WARN))
        t0, t_in = time.time(), time.monotonic()
        try:
            yield
        finally:  # the GPU held alone: what sharing a GPU between evaluations cannot overlap
            res.gpu_held_s = round(res.gpu_held_s + time.monotonic() - t_in, 3)
    if cfg.device == "cuda" and gpu.uuid:
        busy = gpu_lock.foreign_work(gpu.uuid, t0)
        if busy is not None and busy.startswith("unavailable"):
            res.defences["gpu_busy_check"] = busy
        elif busy is not None:
            res.findings.append(Finding("gpu-busy", f"processes outside any evaluation used the GPU while it was timed "
                                        f"({busy}): the times may be off", Severity.WARN))
            res.unstable = True


def time_request(cfg: EvalConfig, timing_seeds: list[int], out_dir: Path | None) -> P.Time:
    """The timing request; the baselines take the same one without out_dir (same method, same sets)."""
    fresh = secrets.randbits(62) if cfg.fresh_timing_inputs else None
    checked = [secrets.SystemRandom().random() for _ in range(cfg.n_checked_timed)] if out_dir is not None else []
    return P.Time(timing_seeds, cfg.n_warmup, cfg.n_timed, cfg.max_cv, cfg.max_rounds, fresh_seed=fresh,
                  out_dir=str(out_dir) if out_dir is not None else None, checked=checked, spread=cfg.round_spread)


def time_candidate(cnd: Child, res: EvalResult, cfg: EvalConfig, req: P.Time) -> P.TimeReply:
    reply = ask(cnd, res, req, cfg.timing_timeout, "timing", P.TimeReply)
    guard(res, reply.guard, cfg.runtime_guards, "timed calls")
    _expect_calls(res, cfg, req, reply)
    res.timing = TimingStats.from_dict(reply.stats)
    if cfg.side_stream_guard and cfg.device == "cuda" and side_stream_suspect(reply.stats):
        _retime_synced(cnd, res, cfg, req)
    return reply


def _expect_calls(res: EvalResult, cfg: EvalConfig, req: P.Time, reply: P.TimeReply) -> None:
    """The timed outputs are those of the calls the parent picked, no more, no fewer."""
    n = reply.stats["n"]
    want = sorted(checked_calls(n, req.checked)) if req.fresh_seed is not None else list(range(len(req.seeds)))
    got = [r.call for r in reply.outputs]
    if got != want:
        raise finish(res, Status.RUNTIME_ERROR, f"timing: the candidate returned the outputs of calls {got[:8]}, "
                     f"not of the calls the evaluator picked {want[:8]}")


def _retime_synced(cnd: Child, res: EvalResult, cfg: EvalConfig, req: P.Time) -> None:
    """Host time well above event time: work escaped the timed stream. Time it again with a
    device synchronize before the end event; those numbers count (a warning says why)."""
    assert res.timing is not None
    first = res.timing
    again = P.Time(req.seeds, req.n_warmup, req.n_timed, req.max_cv, req.max_rounds, fresh_seed=req.fresh_seed,
                   sync_before_end=True, spread=req.spread)
    reply = cnd.request(again, cfg.timing_timeout)
    if (why := failure(reply)) is not None or not isinstance(reply, P.TimeReply):
        raise finish(res, Status.RUNTIME_ERROR, f"re-timing with a device synchronize failed: {why}"[:600])
    res.timing = TimingStats.from_dict(reply.stats)
    res.findings.append(Finding(
        "side-stream-work",
        f"host time was {first.host_over_event:.2f}x the event time ({first.probe_ms or first.median_ms:.4g} ms by events): work ran "
        f"outside the timed stream; re-timed with a device synchronize before the end event: {res.timing.median_ms:.4g} ms counts",
        Severity.WARN))


@dataclass
class BurstRecord:
    """Bursts of one callable: k calls each, their secret salts and weight seed, the parent's seconds,
    the digests."""

    k: int
    salts: list[int]
    weight_seed: int
    seconds: list[float]
    digests: list[list[list[float | None]]]

    @property
    def per_call_ms(self) -> float:
        return min(self.seconds) * 1e3 / self.k


def _bursts(child: Child, res: EvalResult, cfg: EvalConfig, k: int, mode: str) -> BurstRecord:
    """BURSTS bursts of k calls on fresh seeds, each clocked by the parent from send to reply."""
    rec = BurstRecord(k, [], secrets.randbits(62), [], [])
    for _ in range(tt.BURSTS):
        salt = secrets.randbits(62)
        send(child, res, P.Burst(salt, k, rec.weight_seed, mode), "trusted_clock")
        t0 = time.perf_counter()
        reply = recv(child, res, cfg.timing_timeout, "trusted_clock", "burst", P.BurstReply)
        rec.seconds.append(time.perf_counter() - t0)
        if len(reply.digests) != k:
            raise finish(res, Status.RUNTIME_ERROR, f"trusted clock: {who(child)} digested {len(reply.digests)} of {k} calls")
        rec.salts.append(salt)
        rec.digests.append(reply.digests)
    return rec


def burst_candidate(cnd: Child, res: EvalResult, cfg: EvalConfig, in_bytes: int) -> BurstRecord:
    """The candidate's bursts, right after its timing: the GPU is still its alone."""
    assert res.timing is not None
    return _bursts(cnd, res, cfg, tt.burst_size(res.timing.median_ms, in_bytes), "model")


def check_burst_outputs(ref: Child, res: EvalResult, cfg: EvalConfig, task: Task, rec: BurstRecord) -> None:
    """SAMPLE of the candidate's burst calls, picked now that it has committed to its digests, against
    the reference's digests of the same inputs under the same weights."""
    rng = secrets.SystemRandom()
    per_burst = max(1, tt.SAMPLE // len(rec.salts))
    for b, salt in enumerate(rec.salts):
        calls = sorted(rng.sample(range(rec.k), min(per_burst, rec.k)))
        want = P.Digests(salt, calls, rec.weight_seed, task.atol, task.rtol)
        # its own phase: outside the timed section, unlike the bursts ("trusted_clock")
        ref_d = ask(ref, res, want, cfg.correctness_timeout, "burst_check", P.DigestsReply)
        for i, r, s in zip(calls, ref_d.digests, ref_d.scales, strict=True):
            if (why := tt.digest_mismatch(rec.digests[b][i], r, s)) is not None:
                raise finish(res, Status.INCORRECT, f"wrong output in the back-to-back calls of the trusted clock "
                             f"(burst {b}, call {i}): {why}")


def burst_baselines(ref: Child, res: EvalResult, cfg: EvalConfig, in_bytes: int, cache: KVCache | None,
                    base_key: str) -> tuple[float, float, float]:
    """Per-call burst times of eager, torch.compile (eager stands in when compile is unusable) and
    the loop with no model in it, in the reference child, cached beside the baselines."""
    assert res.eager_timing is not None
    key = f"burst/{tt.PROTOCOL}/{base_key}"
    if cache is not None and (hit := cache.get(key)) is not None:
        return hit["eager"], hit["compile"], hit["loop"]
    out: list[float] = []
    for mode, stats in (("model", res.eager_timing), ("compiled", res.compile_timing), ("loop", res.eager_timing)):
        if stats is None:
            out.append(out[0])
            continue
        ask(ref, res, P.Warm(mode, secrets.randbits(62)), cfg.baseline_timeout, "trusted_clock", P.WarmReply)
        k = tt.burst_size(stats.median_ms if mode != "loop" else 0.0, in_bytes)
        out.append(_bursts(ref, res, cfg, k, mode).per_call_ms)
    if cache is not None:
        cache.put(key, {"eager": out[0], "compile": out[1], "loop": out[2]})
    return out[0], out[1], out[2]


def slack_ms(cfg: EvalConfig) -> float:
    """Host time per call the self-consistency check leaves uncounted (EvalConfig.trusted_slack_ms)."""
    if cfg.trusted_slack_ms is not None:
        return cfg.trusted_slack_ms
    return 0.03 if cfg.device == "cuda" else 5.0


def _judge(res: EvalResult, cfg: EvalConfig, cand_ms: float, eager_ms: float, compile_ms: float,
           loop_ms: float) -> tt.Verdict:
    assert res.timing is not None and res.eager_ms is not None
    tc = res.compile_ms if res.compile_ms is not None else res.eager_ms
    return tt.judge(res.timing.median_ms, res.eager_ms, tc, cand_ms, eager_ms, compile_ms, cfg.trusted_tol,
                    loop_ms, slack_ms(cfg), res.timing.enqueue_ms)


def would_withdraw(res: EvalResult, cfg: EvalConfig, cand_ms: float, eager_ms: float, compile_ms: float,
                   loop_ms: float) -> bool:
    """Whether these bursts would withdraw a milestone or call the time forged (no side effects)."""
    return _judge(res, cfg, cand_ms, eager_ms, compile_ms, loop_ms).kind != "ok"


def trusted_milestones(res: EvalResult, cfg: EvalConfig, cand_ms: float, eager_ms: float, compile_ms: float,
                       loop_ms: float) -> tuple[bool, bool]:
    """Judge the device times against the bursts; record it; a forged time ends the evaluation.
    Returns the milestones that stand (faster than eager, faster than torch.compile)."""
    v = _judge(res, cfg, cand_ms, eager_ms, compile_ms, loop_ms)
    res.trusted_ms, res.trusted_eager_ms, res.trusted_compile_ms = round(cand_ms, 6), round(eager_ms, 6), round(compile_ms, 6)
    res.trusted_loop_ms = round(loop_ms, 6)
    res.defences["trusted_clock"] = (f"{v.kind}: {cand_ms:.4g} ms/call vs eager {eager_ms:.4g}, compile {compile_ms:.4g}, "
                                     f"loop alone {loop_ms:.4g}")
    if v.kind == "forged":
        res.findings.append(Finding("timing-forged", v.message, Severity.REJECT))
        raise finish(res, Status.REJECTED, f"rejected by rule timing-forged: {v.message}"[:600])
    if v.kind == "unconfirmed":
        res.findings.append(Finding("timing-unconfirmed", v.message, Severity.WARN))
    return v.faster_eager, v.faster_compile


def timed_references(ref: Child, res: EvalResult, cfg: EvalConfig, req: P.Time, outputs: list[P.OutputRecord]) -> None:
    """With fresh timing inputs: the reference's outputs for the checked timed calls, kept as tref#i."""
    if req.fresh_seed is None:
        return  # the timing sets' references were computed with the correctness seeds
    if len(outputs) < min(cfg.n_checked_timed, 1):
        raise finish(res, Status.INCORRECT, "the candidate returned no usable outputs for the checked timed calls")
    seeds = [derive_seed(req.fresh_seed, r.call or 0) for r in outputs]
    ask(ref, res, P.Run(seeds, "tref", keep=True), cfg.correctness_timeout, "reference", P.RunReply)


def check_timed_outputs(ref: Child, res: EvalResult, cfg: EvalConfig, task: Task, req: P.Time,
                        outputs: list[P.OutputRecord], n_seeds: int, max_bytes: int) -> None:
    assert req.out_dir is not None
    for i, rec in enumerate(outputs):
        g = rec.call or 0
        ref_label = f"tref#{i}" if req.fresh_seed is not None else f"ref#{n_seeds + i}"
        compare_send(ref, res, task, f"timed#{g}", ref_label, P.timed_path(req.out_dir, g), rec, max_bytes)
        chk = compare_recv(ref, res, cfg.correctness_timeout)
        if not chk.passed:
            where = f"timed call {g} (fresh inputs)" if req.fresh_seed is not None else f"timing (input set {i})"
            raise finish(res, Status.INCORRECT, f"wrong output on {where}: {chk.message}")


def baseline_key(cfg: EvalConfig, res: EvalResult, req: P.Time) -> str:
    return (f"baseline/{res.task_hash}/{res.gpu}/{res.torch}/{res.precision}/{cfg.compile_baseline}/"
            f"{cfg.n_timing_sets}x{cfg.n_timed}/{cfg.max_cv}/{TIMING_PROTOCOL}" + ("/fresh" if req.fresh_seed is not None else "")
            + ("" if cfg.round_spread == "cv" else f"/{cfg.round_spread}"))


def build_compiled(cfg: EvalConfig, res: EvalResult, ref: Child, req: P.Time, cache: KVCache | None) -> bool | None:
    """Before the timed section, on a baseline-cache miss: torch.compile's build of the reference
    (and one call), so the seconds of CPU-bound compilation are not spent holding the GPU alone
    (where evaluations sharing the GPU wait for them). Returns whether it built (None: nothing to
    build: cached, or no compile baseline); a failure is recorded here, with its reason."""
    if not cfg.compile_baseline or (cache is not None and cache.get(baseline_key(cfg, res, req)) is not None):
        return None
    t0 = time.monotonic()
    reply = ref.request(P.Warm("compiled", secrets.randbits(62)), cfg.baseline_timeout)
    res.phases_s["baseline_compile_build"] = round(time.monotonic() - t0, 3)
    if isinstance(reply, P.WarmReply):
        return True
    _compile_failed(res, failure(reply) or "no reply")
    return False


def _compile_failed(res: EvalResult, why: str) -> None:
    res.findings.append(Finding("compile-baseline-failed", f"torch.compile of the reference failed ({why}); eager stands in",
                                Severity.WARN))


def baselines(cfg: EvalConfig, res: EvalResult, ref: Child, req: P.Time, cache: KVCache | None,
              built: bool | None = None) -> None:
    """Time eager and torch.compile (inside the timed section). `built` False: the build before the
    section failed (`build_compiled` recorded why), so it is not tried again here (eager stands in)."""
    key = baseline_key(cfg, res, req)
    hit = cache.get(key) if cache is not None else None
    if hit is not None:
        res.eager_timing = TimingStats.from_dict(hit["eager"])
        res.compile_timing = TimingStats.from_dict(hit["compile"]) if hit.get("compile") else None
        res.cache["baselines"] = True
        return
    res.cache["baselines"] = False
    base = P.Time(req.seeds, req.n_warmup, req.n_timed, req.max_cv, req.max_rounds, fresh_seed=req.fresh_seed,
                  spread=req.spread)
    res.eager_timing = TimingStats.from_dict(ask(ref, res, base, cfg.baseline_timeout, "baseline_eager", P.TimeReply).stats)
    if cfg.compile_baseline and built is not False:
        t0 = time.monotonic()
        reply = ref.request(dataclasses.replace(base, compiled=True), cfg.baseline_timeout)
        # booked by hand (request, not exchange.recv): torch.compile's own compile is most of a cold baseline
        res.phases_s["baseline_compile"] = round(time.monotonic() - t0, 3)
        if isinstance(reply, P.TimeReply):
            res.compile_timing = TimingStats.from_dict(reply.stats)
        elif (why := failure(reply)) is not None:
            _compile_failed(res, why)
    if cache is not None and (res.compile_timing is not None or not cfg.compile_baseline):  # a failed compile may be transient
        # an eager-only run (compile_baseline off) has no compile timing: stored as None, read back as None
        cache.put(key, {"eager": res.eager_timing.__dict__,
                        "compile": res.compile_timing.__dict__ if res.compile_timing is not None else None})


def flag_unstable(res: EvalResult, cfg: EvalConfig) -> None:
    """A timing whose spread stayed above max_cv after its rounds does not pass silently. Not on the
    CPU lane, whose host-clock times mean nothing and are as noisy as the machine."""
    if cfg.device != "cuda":
        return
    how = cfg.round_spread
    shaky = [(name, t) for name, t in (("the candidate", res.timing), ("eager", res.eager_timing),
                                       ("torch.compile", res.compile_timing)) if t is not None and t.spread_by(how) > cfg.max_cv]
    if shaky:
        res.unstable = True
        word = "cv" if how == "cv" else "p10-p90 spread"
        what = ", ".join(f"{name} ({word} {t.spread_by(how):.3f} after {t.rounds} rounds)" for name, t in shaky)
        res.findings.append(Finding("timing-unstable", f"timing spread above {cfg.max_cv:.0%}: {what}; the times and the "
                                    "reward may be off (is something else using the GPU?)", Severity.WARN))


def speed_of_light(ref: Child, res: EvalResult, cfg: EvalConfig, moved: int, cache: KVCache | None) -> None:
    bw = cfg.bandwidth or sol.bandwidth_for(res.gpu)
    key = f"bandwidth/{res.gpu}/{cfg.device}"
    if bw is None and cache is not None and (hit := cache.get(key)) is not None:
        bw = hit.get("bytes_per_s")
    if bw is None:
        reply = ref.request(P.Bandwidth((1 << 30) if cfg.device == "cuda" else (64 << 20)), cfg.baseline_timeout)
        bw = reply.bytes_per_s if isinstance(reply, P.BandwidthReply) else None
        if bw and cache is not None:
            cache.put(key, {"bytes_per_s": bw})
    if not bw or not moved or res.time_ms is None:
        res.defences["speed_of_light"] = "unknown"
        return
    floor = sol.floor_ms(moved, bw)
    res.defences["speed_of_light"] = f"{floor:.4g} ms floor"
    if (f := sol.finding(res.time_ms, floor, moved, bw)) is not None:
        res.findings.append(f)


__all__ = ["BurstRecord", "section", "baseline_key", "flag_unstable", "would_withdraw", "baselines", "burst_baselines", "burst_candidate", "check_burst_outputs",
           "check_timed_outputs", "speed_of_light", "time_candidate", "time_request", "timed_references", "trusted_milestones"]
