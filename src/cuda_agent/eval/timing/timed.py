"""The timed half of an evaluation, in the trusted parent: the candidate's timing, the checks of
its timed outputs, the trusted bound, the baselines and the speed-of-light flag.

Contract (called by `pipeline` in this order, with the candidate already correct):
1. `time_candidate`: per-call device timing in the candidate child (`shared.events.time_calls`), the
   parent picking which fresh-input calls keep their outputs; the side-stream re-timing.
2. `burst_candidate`: the candidate's back-to-back bursts on the parent's clock (`timing/clock.py`),
   prepared (a CUDA graph on a GPU) then clocked, while nothing else runs on the GPU;
   `check_burst_outputs`: sampled digests vs the reference.
3. `timed_references` + `check_timed_outputs`: the reference's outputs for the checked timed
   calls, and the comparisons, at paths the parent computed.
0. `clock_kind`: before the timed section, whether the evaluator's clock can run as CUDA graphs
   for this task (the reference's draws and baselines capture), cached per task.
4. `baselines`: eager and torch.compile of the reference (cached per task, GPU, torch,
   precision and timing settings), after the candidate's process is gone; `burst_baselines`:
   theirs and the loop's bursts (cached beside them).
5. `trusted_verdict`: the time that counts (`timing.clock.judge`); a forged time is rejected.
6. `speed_of_light`: the bytes floor (`bandwidth` also feeds the verdict's floor).
Every candidate failure ends the evaluation through `channel.exchange.finish`.

Not guaranteed: stable GPU clocks, or that another process leaves the GPU alone (see
`shared/events.py` and `timing/clock.py`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.eval.channel import messages as P
from cuda_agent.eval.channel.exchange import Stop, ask, compare_recv, compare_send, finish, guard, recv, send, who
from cuda_agent.eval.channel.processes import Child, failure
from cuda_agent.eval.checks import speed_of_light as sol
from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.gpu import GPU
from cuda_agent.eval.judge.cache import KVCache
from cuda_agent.eval.judge.result import EvalResult, Finding, Severity, Status, TimingStats
from cuda_agent.eval.shared import lightloop
from cuda_agent.eval.shared.events import PROTOCOL as TIMING_PROTOCOL
from cuda_agent.eval.shared.events import checked_calls, derive_seed, side_stream_suspect
from cuda_agent.eval.timing import clock as tt
from cuda_agent.eval.timing import gpu_lock
from cuda_agent.task.taskfile import Task


@contextlib.contextmanager
def section(res: EvalResult, cfg: EvalConfig, gpu: GPU) -> Iterator[None]:
    """Hold the GPU's timing lock; afterwards note outside work that shared the GPU meanwhile."""
    with gpu_lock.exclusive(gpu.key, cfg.gpu_lock_wait_s) as held:
        res.gpu_wait_s = round(res.gpu_wait_s + held.waited_s, 3)
        # a sub-key (no phase of its own: the wait sits between phases), read by benchmarks/eval_throughput.py
        res.phases_s["lock.exclusive"] = round(res.phases_s.get("lock.exclusive", 0.0) + held.waited_s, 3)
        if not held.exclusive:
            res.findings.append(
                Finding(
                    "gpu-lock-timeout",
                    f"waited {held.waited_s:.0f} s for the GPU's timing lock and "
                    "timed without it: another process may have timed at the same time",
                    Severity.WARN,
                )
            )
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
            res.findings.append(
                Finding(
                    "gpu-busy",
                    f"processes outside any evaluation used the GPU while it was timed ({busy}): the times may be off",
                    Severity.WARN,
                )
            )
            res.unstable = True


def time_request(cfg: EvalConfig, timing_seeds: list[int], out_dir: Path | None) -> P.Time:
    """The timing request; the baselines take the same one without out_dir (same method, same sets)."""
    fresh = secrets.randbits(62) if cfg.fresh_timing_inputs else None
    checked = [secrets.SystemRandom().random() for _ in range(cfg.n_checked_timed)] if out_dir is not None else []
    return P.Time(
        timing_seeds,
        cfg.n_warmup,
        cfg.n_timed,
        cfg.max_cv,
        cfg.max_rounds,
        fresh_seed=fresh,
        out_dir=str(out_dir) if out_dir is not None else None,
        checked=checked,
        spread=cfg.round_spread,
    )


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
        raise finish(
            res,
            Status.RUNTIME_ERROR,
            f"timing: the candidate returned the outputs of calls {got[:8]}, "
            f"not of the calls the evaluator picked {want[:8]}",
        )


def _retime_synced(cnd: Child, res: EvalResult, cfg: EvalConfig, req: P.Time) -> None:
    """Host time well above event time: work escaped the timed stream. Time it again with a
    device synchronize before the end event; those numbers count (a warning says why)."""
    assert res.timing is not None
    first = res.timing
    again = P.Time(
        req.seeds,
        req.n_warmup,
        req.n_timed,
        req.max_cv,
        req.max_rounds,
        fresh_seed=req.fresh_seed,
        sync_before_end=True,
        spread=req.spread,
    )
    reply = cnd.request(again, cfg.timing_timeout)
    if (why := failure(reply)) is not None or not isinstance(reply, P.TimeReply):
        raise finish(res, Status.RUNTIME_ERROR, f"re-timing with a device synchronize failed: {why}"[:600])
    res.timing = TimingStats.from_dict(reply.stats)
    res.findings.append(
        Finding(
            "side-stream-work",
            f"host time was {first.host_over_event:.2f}x the event time ({first.probe_ms or first.median_ms:.4g} ms by events): work ran "
            f"outside the timed stream; re-timed with a device synchronize before the end event: {res.timing.median_ms:.4g} ms counts",
            Severity.WARN,
        )
    )


@dataclass
class BurstRecord:
    """One side's bursts: the mode they ran in ("graph" or "host"), k calls replayed `replays` times
    per burst, each look's secret salt, the parent's seconds and the digests."""

    kind: str
    k: int
    replays: int
    salts: list[int]
    seconds: list[float]
    digests: list[P.PackedDigests]  # per look: its calls' digests, rows decoded only where checked
    # per look, the CPU seconds the kernel charged the child's process tree (the CPU lane's candidate only):
    # what its calls cost however long the machine kept it off a core
    cpu_seconds: list[float] = dataclasses.field(default_factory=list)

    @property
    def looks(self) -> tt.Looks:
        return tt.Looks(self.k * self.replays, tuple(self.seconds))

    @property
    def cpu_looks(self) -> tt.Looks | None:
        if not self.cpu_seconds or len(self.cpu_seconds) != len(self.seconds):
            return None
        return tt.Looks(self.k * self.replays, tuple(self.cpu_seconds))


def _clock_opt_ins(cfg: EvalConfig) -> list[str]:
    """The evaluator's clock's opt-ins in force (the flush is a GPU step): they name the baselines' bursts'
    cache key and the result's trusted_mode, since a burst's per-call time means something else under each."""
    digest, draws = cfg.clock_loop()
    return (
        (["flush"] if cfg.clock_flush and cfg.device == "cuda" else [])
        + (["cold"] if cfg.clock_cold_digest and cfg.device == "cuda" else [])
        + ([digest] if digest != "dense" else [])
        + (["fast"] if draws == "fast" else [])
    )


def _prepare(
    child: Child, res: EvalResult, cfg: EvalConfig, k: int, mode: str, graph: bool, verify: bool = False
) -> P.PrepareReply:
    opts = _clock_opt_ins(cfg)
    digest, draws = cfg.clock_loop()
    try:
        return ask(
            child,
            res,
            P.BurstPrepare(k, mode, graph, verify, "flush" in opts, digest, "cold" in opts, draws),
            cfg.timing_timeout,
            "trusted_clock",
            P.PrepareReply,
        )
    except Stop as stop:
        # The reference (our harness alone) could not build the lighter loop: the machine failed, not the
        # candidate (no reward, not cached). Only the reference's word counts: a candidate could raise the same text.
        if child.role == "reference" and lightloop.UNAVAILABLE in stop.result.message:
            r = stop.result
            r.status, r.reward = Status.ENV_ERROR, None
            r.message = (
                f"{r.message} -- the evaluator's clock's lighter loop cannot run on this machine; "
                "`--clock dense,torch` (EvalConfig(clock_digest='dense', clock_draws='torch')) uses the loop before it"
            )[:900]
        raise


def _looks(child: Child, res: EvalResult, cfg: EvalConfig, kind: str, k: int, replays: int, mode: str) -> BurstRecord:
    """LOOKS bursts of a prepared side on fresh salts, each clocked by the parent from send to reply; up
    to MORE_LOOKS more while the two fastest disagree by more than half the tolerance's cap."""
    rec = BurstRecord(kind, k, replays, [], [], [])
    # the CPU lane's candidate: its tree's CPU time beside the wall time (`clock.judge`'s `cpu_net_ms`)
    cpu = cfg.device != "cuda" and child.role == "candidate"
    for i in range(tt.LOOKS + tt.MORE_LOOKS):
        if i >= tt.LOOKS and rec.looks.spread() <= tt.TOL_CAP / 2:
            break
        salt = secrets.randbits(62)
        c0 = child.cpu_s() if cpu else None
        send(child, res, P.Burst(salt, k, mode, replays), "trusted_clock")
        # from the moment before the request was written (`Child.sent_at`), not after: a parent kept off
        # its core right after the write (a busy machine; the pipe's wake-up runs the child on the
        # writer's core) read its start late, and a look came out shorter than the child's work (CPU
        # lane, every core busy, 2026-12-07: 0.26 ms of wall for 14 ms of the child's CPU time)
        t0 = child.sent_at
        reply = recv(child, res, cfg.timing_timeout, "trusted_clock", "burst", P.BurstReply)
        rec.seconds.append(time.perf_counter() - t0)
        if c0 is not None and (c1 := child.cpu_s()) is not None:
            rec.cpu_seconds.append(max(0.0, c1 - c0))
        if len(reply.digests) != k * replays:
            raise finish(
                res,
                Status.RUNTIME_ERROR,
                f"evaluator's clock: {who(child)} digested {len(reply.digests)} of {k * replays} calls",
            )
        rec.salts.append(salt)
        rec.digests.append(reply.digests)
    return rec


def clock_kind(ref: Child, res: EvalResult, cfg: EvalConfig, cache: KVCache | None) -> str:
    """ "graph" when the task's draws are graph-safe and its eager (and compiled) reference can be
    captured, else "host" (the CPU lane always). Decided in the reference before any candidate
    burst, cached per task, GPU, torch and precision; the reason lands in res.defences."""
    if cfg.device != "cuda":
        return "host"
    if not cfg.clock_graphs:
        res.defences["clock_kind"] = "host: EvalConfig.clock_graphs is off"
        return "host"
    key = f"clockkind/{tt.PROTOCOL}/{res.task_hash}/{res.gpu}/{res.torch}/{res.precision}/{cfg.compile_baseline}"
    if cache is not None and (hit := cache.get(key)) is not None:
        res.defences["clock_kind"] = hit["why"]
        return str(hit["kind"])
    t0 = time.monotonic()
    why = "graph: the task's draws and its reference capture as CUDA graphs"
    kind = "graph"
    for mode, k, verify in (("draws", 3, True), ("model", 2, False), ("compiled", 2, False)):
        if mode == "compiled":
            if not cfg.compile_baseline:
                continue
            warm = ref.request(P.Warm("compiled", secrets.randbits(62)), cfg.baseline_timeout)
            if not isinstance(warm, P.WarmReply):
                continue  # torch.compile unusable: eager stands in for it (baselines), nothing to capture
        rep = _prepare(ref, res, cfg, k, mode, True, verify)
        if not rep.graph:
            kind, why = "host", f"host: the reference's {mode} would not capture as a CUDA graph ({rep.why})"
            break
    res.phases_s["clock_kind"] = round(time.monotonic() - t0, 3)
    res.defences["clock_kind"] = why
    if cache is not None:
        cache.put(key, {"kind": kind, "why": why})
    return kind


def burst_candidate(
    cnd: Child,
    res: EvalResult,
    cfg: EvalConfig,
    in_bytes: int,
    kind: str,
    cached: tuple[list[tt.SideShape], float] | None = None,
) -> BurstRecord:
    """The candidate's bursts, right after its timing (the GPU is still its alone), at the shape of the
    cached baseline nearest its claim (`clock.candidate_shape`; `cached_shapes`: the sides' shapes and the
    loop's cost per call). A candidate whose calls do not capture as a graph is clocked by the Python loop
    (and so are its baselines)."""
    assert res.timing is not None
    claim = res.timing.median_ms
    sides, loop = cached if cached is not None else ([], 0.0)
    k, replays = tt.candidate_shape(claim, in_bytes, kind == "graph", sides, loop)
    rep = _prepare(cnd, res, cfg, k, "model", kind == "graph")
    if kind == "graph" and not rep.graph:
        res.findings.append(
            Finding(
                "clock-host-loop",
                f"the candidate's calls would not capture as a CUDA graph ({rep.why}); "
                "the evaluator's clock timed them from a Python loop, which resolves short kernels "
                "less well (launch on the current stream and keep forward free of synchronization)",
                Severity.WARN,
            )
        )
        kind, sides = "host", []  # the graph's shapes say nothing of the host loop's
        k, replays = tt.candidate_shape(claim, in_bytes, False, None)
        _prepare(cnd, res, cfg, k, "model", False)
    same = any((k, replays) == (x.k, x.replays) for x in sides)
    res.defences["clock_shape"] = f"{k} calls x {replays}: " + (
        "a baseline's cached shape" if same else "its own (sized by its claim plus the loop)"
    )
    return _looks(cnd, res, cfg, kind, k, replays, "model")


def check_burst_outputs(ref: Child, res: EvalResult, cfg: EvalConfig, task: Task, rec: BurstRecord) -> None:
    """SAMPLE of the candidate's burst calls, picked now that it has committed to its digests, against
    the reference's digests of the same sequence."""
    rng = secrets.SystemRandom()
    per_burst = max(1, -(-tt.SAMPLE // len(rec.salts)))
    n = rec.k * rec.replays
    for b, salt in enumerate(rec.salts):
        calls = sorted(rng.sample(range(n), min(per_burst, n)))
        want = P.Digests(salt, calls, task.atol, task.rtol, *cfg.clock_loop())
        # its own phase: outside the timed section, unlike the bursts ("trusted_clock")
        ref_d = ask(ref, res, want, cfg.correctness_timeout, "burst_check", P.DigestsReply)
        bad = _burst_mismatch(rec.digests[b], calls, ref_d)
        if bad is not None and ref_d.jumped:
            # the reference reached these calls by the generator's offset; a task whose draws step it
            # unevenly would differ there, not the candidate: only the sequence drawn call by call decides
            exact = ask(
                ref, res, dataclasses.replace(want, exact=True), cfg.correctness_timeout, "burst_check", P.DigestsReply
            )
            bad = _burst_mismatch(rec.digests[b], calls, exact)
        if bad is not None:
            i, why = bad
            raise finish(
                res,
                Status.INCORRECT,
                f"wrong output in the back-to-back calls of the evaluator's clock (burst {b}, call {i}): {why}",
            )


def _burst_mismatch(got: P.PackedDigests, calls: list[int], ref_d: P.DigestsReply) -> tuple[int, str] | None:
    """The first sampled call whose digests differ from the reference's, and how; None if none does."""
    if len(ref_d.digests) != len(calls):
        raise RuntimeError(f"the reference digested {len(ref_d.digests)} of {len(calls)} calls")
    for i, r, s in zip(calls, ref_d.digests, ref_d.scales, strict=True):
        if (why := tt.digest_mismatch(got[i], r, s)) is not None:
            return i, why
    return None


@dataclass
class BaselineLooks:
    """The reference's sides on the evaluator's clock: eager, torch.compile (None: eager stands in)
    and the loop with no model at two sizes; each side's burst shape and the per-call cost that sized it."""

    eager: tt.Looks
    compiled: tt.Looks | None
    loop_small: tt.Looks
    loop_large: tt.Looks
    eager_shape: tt.SideShape
    compiled_shape: tt.SideShape | None

    def to_dict(self) -> dict[str, object]:
        def one(x: tt.Looks | None) -> object:
            return None if x is None else {"calls": x.calls, "seconds": list(x.seconds)}

        def shape(x: tt.SideShape | None) -> object:
            return None if x is None else [x.k, x.replays, x.sized_ms]

        return {
            "eager": one(self.eager),
            "compiled": one(self.compiled),
            "loop_small": one(self.loop_small),
            "loop_large": one(self.loop_large),
            "eager_shape": shape(self.eager_shape),
            "compiled_shape": shape(self.compiled_shape),
        }

    @classmethod
    def from_dict(cls, d: dict) -> BaselineLooks:
        def one(x: dict | None) -> tt.Looks | None:
            return None if x is None else tt.Looks(int(x["calls"]), tuple(float(s) for s in x["seconds"]))

        def shape(x: list | None) -> tt.SideShape | None:
            return None if x is None else tt.SideShape(int(x[0]), int(x[1]), float(x[2]))

        eager, small, large, es = one(d["eager"]), one(d["loop_small"]), one(d["loop_large"]), shape(d["eager_shape"])
        assert eager is not None and small is not None and large is not None and es is not None
        return cls(eager, one(d["compiled"]), small, large, es, shape(d["compiled_shape"]))

    def loop_ms(self, graph: bool) -> float:
        return tt.fit_loop(self.loop_small, self.loop_large).per_call_ms if graph else 0.0

    def shapes(self) -> list[tt.SideShape]:
        return [self.eager_shape] + ([self.compiled_shape] if self.compiled_shape is not None else [])


def _burst_key(cfg: EvalConfig, base_key: str, kind: str) -> str:
    return "/".join(["burst", tt.PROTOCOL, kind, base_key, *_clock_opt_ins(cfg)])


def _side(
    ref: Child, res: EvalResult, cfg: EvalConfig, kind: str, mode: str, shape: tuple[int, int]
) -> tt.Looks | None:
    """One baseline's bursts at one shape; None when it would not capture as a graph now."""
    graph = kind == "graph"
    ask(ref, res, P.Warm(mode, secrets.randbits(62)), cfg.baseline_timeout, "trusted_clock", P.WarmReply)
    if _prepare(ref, res, cfg, shape[0], mode, graph).graph != graph:
        res.defences["trusted_clock_baselines"] = f"the reference's {mode} would not capture as a graph now"
        return None
    return _looks(ref, res, cfg, kind, shape[0], shape[1], mode).looks


def _measure_baselines(ref: Child, res: EvalResult, cfg: EvalConfig, in_bytes: int, kind: str) -> BaselineLooks | None:
    """The loop first, shaped by the fastest baseline's time alone; its cost per call then sizes each
    side's shape (one for both where they are near each other), at which eager and torch.compile are burst."""
    assert res.eager_timing is not None
    graph = kind == "graph"
    fastest = min(t.median_ms for t in (res.eager_timing, res.compile_timing) if t is not None)
    ask(ref, res, P.Warm("loop", secrets.randbits(62)), cfg.baseline_timeout, "trusted_clock", P.WarmReply)
    k, replays = tt.burst_shape(fastest, in_bytes, graph)
    if graph:  # one graph, two lengths: its fixed cost and per-call cost from 1 and R replays
        _prepare(ref, res, cfg, k, "loop", True)
        small = _looks(ref, res, cfg, kind, k, 1, "loop").looks
        large = _looks(ref, res, cfg, kind, k, max(2, replays), "loop").looks
    else:
        k_small = max(2, k // 4)
        _prepare(ref, res, cfg, k_small, "loop", False)
        small = _looks(ref, res, cfg, kind, k_small, 1, "loop").looks
        k_large = max(k, k_small + 2)
        _prepare(ref, res, cfg, k_large, "loop", False)
        large = _looks(ref, res, cfg, kind, k_large, 1, "loop").looks
    loop_ms = tt.fit_loop(small, large).per_call_ms if graph else 0.0
    # sides near each other share the faster one's shape, so that a candidate near both is like with like
    # against both without one of them burst again in every evaluation
    shared = res.compile_timing is not None and tt.near(
        res.eager_timing.median_ms + loop_ms, res.compile_timing.median_ms + loop_ms
    )
    looks: dict[str, tt.Looks | None] = {}
    shapes: dict[str, tt.SideShape | None] = {}
    for mode, stats in (("model", res.eager_timing), ("compiled", res.compile_timing)):
        looks[mode] = shapes[mode] = None
        if stats is None:
            continue
        shape = tt.burst_shape(fastest if shared else stats.median_ms, in_bytes, graph, loop_ms)
        if (got := _side(ref, res, cfg, kind, mode, shape)) is None:
            return None
        looks[mode], shapes[mode] = got, tt.SideShape(*shape, stats.median_ms + loop_ms)
    eager, es = looks["model"], shapes["model"]
    assert eager is not None and es is not None
    return BaselineLooks(eager, looks["compiled"], small, large, es, shapes["compiled"])


def burst_baselines(
    ref: Child,
    res: EvalResult,
    cfg: EvalConfig,
    in_bytes: int,
    cache: KVCache | None,
    base_key: str,
    kind: str,
    cand_shape: tuple[int, int] | None = None,
) -> BaselineLooks | None:
    """Eager's, torch.compile's and the loop's bursts in the reference child, in the candidate's mode,
    each side at its own shape, cached beside the baselines; a side near the candidate but at another
    shape than the candidate's (the task's first evaluation) is burst again at the candidate's, not
    cached (`clock.reburst`; `cand_shape` None: the cached sides alone, as `cuda-agent baselines`
    precomputes them). None when a side would not capture now (no milestone can then be confirmed)."""
    assert res.eager_timing is not None
    key = _burst_key(cfg, base_key, kind)
    hit = cache.get(key) if cache is not None and not cfg.clock_fresh_baselines else None
    base = BaselineLooks.from_dict(hit) if hit is not None else _measure_baselines(ref, res, cfg, in_bytes, kind)
    if base is None:
        return None
    if hit is None and cache is not None and not cfg.clock_fresh_baselines:
        cache.put(key, base.to_dict())
    if cand_shape is None:
        return base
    assert res.timing is not None
    loop = base.loop_ms(kind == "graph")
    for field, mode, side in (("eager", "model", base.eager_shape), ("compiled", "compiled", base.compiled_shape)):
        if side is None or not tt.reburst(res.timing.median_ms, loop, side, cand_shape):
            continue
        if (got := _side(ref, res, cfg, kind, mode, cand_shape)) is None:
            return None
        base = dataclasses.replace(base, **{field: got})
    return base


def cached_shapes(
    cfg: EvalConfig, cache: KVCache | None, base_key: str, kind: str
) -> tuple[list[tt.SideShape], float] | None:
    """The task's cached baseline shapes and the loop's cost per call, or None: what shapes the
    candidate's bursts (`clock.candidate_shape`). Trusted data only (the reference timed it)."""
    if cache is None or cfg.clock_fresh_baselines or not kind:
        return None
    hit = cache.get(_burst_key(cfg, base_key, kind))
    if hit is None:
        return None
    try:
        base = BaselineLooks.from_dict(hit)
        return base.shapes(), base.loop_ms(kind == "graph")
    except (KeyError, TypeError, ValueError, AssertionError, IndexError):
        return None


def trusted_verdict(
    res: EvalResult, cfg: EvalConfig, rec: BurstRecord, base: BaselineLooks | None, floor: float
) -> tt.Verdict:
    """The time that counts (`timing.clock.judge`), recorded in the result; a forged time ends the
    evaluation (rejected). Without like-for-like baselines no milestone is confirmed."""
    assert res.timing is not None and res.eager_timing is not None
    claim = res.timing.median_ms
    res.reported_ms = round(claim, 6)
    res.trusted_mode = "+".join([rec.kind, *_clock_opt_ins(cfg)])
    if base is None:
        v = tt.Verdict(
            "unconfirmed",
            claim,
            claim,
            {},
            False,
            False,
            "the evaluator's clock could not time the baselines like the candidate: no milestone is confirmed",
            grants=False,
        )
        res.findings.append(Finding("timing-unconfirmed", v.message, Severity.WARN))
        return v
    fit = tt.fit_loop(base.loop_small, base.loop_large)
    cand_net = tt.net_ms(rec.looks, fit)
    cpu = rec.cpu_looks  # the CPU lane's: the CPU seconds the kernel charged the candidate, per look
    sides = [tt.Side("eager", res.eager_timing.median_ms, tt.net_ms(base.eager, fit), tt.noise_ms(base.eager))]
    if base.compiled is not None and res.compile_timing is not None:
        sides.append(
            tt.Side(
                "torch.compile", res.compile_timing.median_ms, tt.net_ms(base.compiled, fit), tt.noise_ms(base.compiled)
            )
        )
    v = tt.judge(
        claim,
        cand_net,
        tt.noise_ms(rec.looks),
        sides,
        rec.kind,
        0.5 * floor,
        res.timing.enqueue_ms,
        tt.GPU_BOUNDS if cfg.device == "cuda" else tt.HOST_LANE_BOUNDS,
        tt.net_ms(cpu, fit) if cpu is not None else None,
    )
    res.trusted_ms = round(cand_net, 6)
    res.trusted_eager_ms = round(sides[0].net_ms, 6)
    res.trusted_compile_ms = round(sides[1].net_ms, 6) if len(sides) > 1 else None
    res.trusted_loop_ms = round(fit.per_call_ms, 6)
    res.trusted_looks = {
        **{
            name: {"calls": x.calls, "ms": [round(s * 1e3, 4) for s in x.seconds]}
            for name, x in (
                ("candidate", rec.looks),
                ("eager", base.eager),
                ("torch.compile", base.compiled),
                ("loop_small", base.loop_small),
                ("loop_large", base.loop_large),
            )
            if x is not None
        },
        "fit": {"fixed_ms": round(fit.fixed_ms, 5), "per_call_ms": round(fit.per_call_ms, 6)},
    }
    if cpu is not None:
        res.trusted_looks["candidate_cpu"] = {"calls": cpu.calls, "ms": [round(s * 1e3, 4) for s in cpu.seconds]}
    res.trusted_tol = round(max(v.tol.values()), 4) if v.tol else None
    res.defences["trusted_clock"] = f"{v.kind}: {v.message}"[:600]
    if v.kind == "forged":
        res.findings.append(Finding("timing-forged", v.message, Severity.REJECT))
        raise finish(res, Status.REJECTED, f"rejected by rule timing-forged: {v.message}"[:600])
    if v.kind == "unconfirmed":
        rule = "timing-forged" if v.flagged else "timing-unconfirmed"
        res.findings.append(Finding(rule, v.message, Severity.WARN))
    elif v.unseen:  # said in the result: a milestone over these sides is not the clock's to confirm
        res.findings.append(
            Finding("clock-unresolved", f"the evaluator's clock {tt.unseen_note(v.unseen)}", Severity.WARN)
        )
    return v


def timed_references(ref: Child, res: EvalResult, cfg: EvalConfig, req: P.Time, outputs: list[P.OutputRecord]) -> None:
    """With fresh timing inputs: the reference's outputs for the checked timed calls, kept as tref#i."""
    if req.fresh_seed is None:
        return  # the timing sets' references were computed with the correctness seeds
    if len(outputs) < min(cfg.n_checked_timed, 1):
        raise finish(res, Status.INCORRECT, "the candidate returned no usable outputs for the checked timed calls")
    seeds = [derive_seed(req.fresh_seed, r.call or 0) for r in outputs]
    ask(ref, res, P.Run(seeds, "tref", keep=True), cfg.correctness_timeout, "reference", P.RunReply)


def check_timed_outputs(
    ref: Child,
    res: EvalResult,
    cfg: EvalConfig,
    task: Task,
    req: P.Time,
    outputs: list[P.OutputRecord],
    n_seeds: int,
    max_bytes: int,
) -> None:
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
    return (
        f"baseline/{res.task_hash}/{res.gpu}/{res.torch}/{res.precision}/{cfg.compile_baseline}/"
        f"{cfg.n_timing_sets}x{cfg.n_timed}/{cfg.max_cv}/{TIMING_PROTOCOL}"
        + ("/fresh" if req.fresh_seed is not None else "")
        + ("" if cfg.round_spread == "cv" else f"/{cfg.round_spread}")
    )


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
    res.findings.append(
        Finding(
            "compile-baseline-failed", f"torch.compile of the reference failed ({why}); eager stands in", Severity.WARN
        )
    )


def baselines(
    cfg: EvalConfig, res: EvalResult, ref: Child, req: P.Time, cache: KVCache | None, built: bool | None = None
) -> None:
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
    base = P.Time(
        req.seeds, req.n_warmup, req.n_timed, req.max_cv, req.max_rounds, fresh_seed=req.fresh_seed, spread=req.spread
    )
    res.eager_timing = TimingStats.from_dict(
        ask(ref, res, base, cfg.baseline_timeout, "baseline_eager", P.TimeReply).stats
    )
    if cfg.compile_baseline and built is not False:
        t0 = time.monotonic()
        reply = ref.request(dataclasses.replace(base, compiled=True), cfg.baseline_timeout)
        # booked by hand (request, not exchange.recv): torch.compile's own compile is most of a cold baseline
        res.phases_s["baseline_compile"] = round(time.monotonic() - t0, 3)
        if isinstance(reply, P.TimeReply):
            res.compile_timing = TimingStats.from_dict(reply.stats)
        elif (why := failure(reply)) is not None:
            _compile_failed(res, why)
    if cache is not None and (
        res.compile_timing is not None or not cfg.compile_baseline
    ):  # a failed compile may be transient
        # an eager-only run (compile_baseline off) has no compile timing: stored as None, read back as None
        cache.put(
            key,
            {
                "eager": res.eager_timing.__dict__,
                "compile": res.compile_timing.__dict__ if res.compile_timing is not None else None,
            },
        )


def extra_baselines(cfg: EvalConfig, res: EvalResult, ref: Child, req: P.Time, cache: KVCache | None) -> None:
    """The extra baselines of `cfg.baselines` (eval.timing.baseline_set: max-autotune, cuda-graph), timed by the
    same request as eager (events), cached per baseline beside eager's key, into `res.baselines_ms`. A
    baseline that fails (max-autotune's compile, a graph that will not capture) is a WARN finding, not a
    failure of the evaluation; it is not cached (it may be transient). Called last, after everything else
    the reference child does (a failed capture may leave its CUDA context unusable), in a timed section."""
    from cuda_agent.eval.timing import baseline_set

    for name in baseline_set.extras(cfg.baselines):
        key = f"{baseline_key(cfg, res, req)}/extra/{name}"
        if cache is not None and (hit := cache.get(key)) is not None:
            res.baselines_ms[name] = float(hit["median_ms"])
            continue
        base = P.Time(
            req.seeds,
            req.n_warmup,
            req.n_timed,
            req.max_cv,
            req.max_rounds,
            fresh_seed=req.fresh_seed,
            spread=req.spread,
            variant=baseline_set.CHILD_MODE[name],
        )
        t0 = time.monotonic()
        reply = ref.request(base, cfg.baseline_timeout)
        res.phases_s[f"baseline_{name}"] = round(time.monotonic() - t0, 3)
        if isinstance(reply, P.TimeReply):
            stats = TimingStats.from_dict(reply.stats)
            res.baselines_ms[name] = stats.median_ms
            if cache is not None:
                cache.put(key, {"median_ms": stats.median_ms, "stats": stats.__dict__})
        else:
            why = failure(reply) or "no reply"
            res.findings.append(
                Finding(
                    f"baseline-{name}-failed", f"the {name} baseline failed ({why[:300]}); not reported", Severity.WARN
                )
            )


def flag_unstable(res: EvalResult, cfg: EvalConfig) -> None:
    """A timing whose spread stayed above max_cv after its rounds does not pass silently. Not on the
    CPU lane, whose host-clock times mean nothing and are as noisy as the machine."""
    if cfg.device != "cuda":
        return
    how = cfg.round_spread
    shaky = [
        (name, t)
        for name, t in (
            ("the candidate", res.timing),
            ("eager", res.eager_timing),
            ("torch.compile", res.compile_timing),
        )
        if t is not None and t.spread_by(how) > cfg.max_cv
    ]
    if shaky:
        res.unstable = True
        word = "cv" if how == "cv" else "p10-p90 spread"
        what = ", ".join(f"{name} ({word} {t.spread_by(how):.3f} after {t.rounds} rounds)" for name, t in shaky)
        res.findings.append(
            Finding(
                "timing-unstable",
                f"timing spread above {cfg.max_cv:.0%}: {what}; the times and the "
                "reward may be off (is something else using the GPU?)",
                Severity.WARN,
            )
        )


def bandwidth(ref: Child, res: EvalResult, cfg: EvalConfig, cache: KVCache | None) -> float | None:
    """Bytes per second of this GPU: the config's, a known figure, a cached measurement, or a device
    copy measured now in the reference."""
    bw = cfg.bandwidth or sol.bandwidth_for(res.gpu)
    key = f"bandwidth/{res.gpu}/{cfg.device}"
    if bw is None and cache is not None and (hit := cache.get(key)) is not None:
        bw = hit.get("bytes_per_s")
    if bw is None:
        reply = ref.request(P.Bandwidth((1 << 30) if cfg.device == "cuda" else (64 << 20)), cfg.baseline_timeout)
        bw = reply.bytes_per_s if isinstance(reply, P.BandwidthReply) else None
        if bw and cache is not None:
            cache.put(key, {"bytes_per_s": bw})
    return bw


def speed_of_light(res: EvalResult, moved: int, bw: float | None) -> None:
    if not bw or not moved or res.time_ms is None:
        res.defences["speed_of_light"] = "unknown"
        return
    floor = sol.floor_ms(moved, bw)
    res.defences["speed_of_light"] = f"{floor:.4g} ms floor"
    # the fastest time either side presents: the clock's time is floored near the limit already
    # (trusted_time.judge), so a claim below it is what this finding is for
    fastest = min(t for t in (res.time_ms, res.reported_ms) if t is not None)
    if (f := sol.finding(fastest, floor, moved, bw)) is not None:
        res.findings.append(f)


__all__ = [
    "BaselineLooks",
    "BurstRecord",
    "bandwidth",
    "baseline_key",
    "baselines",
    "burst_baselines",
    "burst_candidate",
    "cached_shapes",
    "check_burst_outputs",
    "check_timed_outputs",
    "clock_kind",
    "flag_unstable",
    "section",
    "speed_of_light",
    "time_candidate",
    "time_request",
    "timed_references",
    "trusted_verdict",
]
