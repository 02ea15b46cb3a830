"""One evaluation, end to end, in the trusted parent.

Contract: stage a fresh copy (protected files pristine) -> static findings ->
build (cached) -> spawn a reference child and a candidate child -> reference
outputs for fresh secret seeds -> candidate outputs, compared here ->
candidate timing and its bursts on the parent's clock (`timing/timed.py`,
`timing/clock.py`), its timed outputs compared too -> baselines (cached per
task hash, GPU, torch version, precision, timing settings) -> the trusted
bound's verdict -> reward. Every exchange with a child is a typed
`channel/messages.py` message (`channel/exchange.py`); paths, the GPU identity and cache keys are
the parent's own, never taken from a reply. The runtime defences (`child/guards.py`: ATen op log and
thread census, judged by `checks/runtime.py`; fresh inputs per timed call with random timed calls checked;
the side-stream re-timing; the speed-of-light flag; the `sandbox` around the
candidate child; the shape probe, one more input set with the batch-like
dimension doubled, run last; the opt-in `sanitize` lane after correctness) add
findings here. The
parent never imports candidate code; both children are killed at the end or
at the first failure. Every candidate failure is a typed `EvalResult`.

Not guaranteed: anything without a CUDA GPU beyond checks and the build
(status no_gpu says so).

Shape: `_attempt` is the whole evaluation as a sequence of phases over one typed state
(`_Evaluation`), read top to bottom: the static gate, the children, the reference queued, the build,
"compiled" or no GPU, the candidate's load, correctness, "verified" or on, the candidate's timing, the
baselines', the reward, the shape probe, the extra baselines. A phase returns the finished result where
the evaluation ends; a failure deep inside one (an exchange, a check) ends it through `channel.exchange.finish`,
which the step between phases turns into that return. Each step a phase calls (build, children,
compare, timing, checks) lives in its own module.
Single-file (load_inline) solutions are built here too when their load_inline
arguments are static (`build/single_file.py`, the common case), else inside the
candidate child, and then without a GPU they are only checked statically.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import secrets
import shutil
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from cuda_agent.eval import gpu as gpu_mod
from cuda_agent.eval.build import single_file as inline_build
from cuda_agent.eval.build.env_check import classify as classify_environment
from cuda_agent.eval.build.workspace import BuildResult, build
from cuda_agent.eval.channel import children as warm
from cuda_agent.eval.channel import messages as P
from cuda_agent.eval.channel.children import child_dirs, child_env, log_dir
from cuda_agent.eval.channel.exchange import Stop, compare_recv, compare_send, finish, guard, recv, send
from cuda_agent.eval.channel.processes import Child, ChildFailure, failure
from cuda_agent.eval.checks import sanitize as sanitize_mod
from cuda_agent.eval.checks.gate import static_findings, workspace_findings
from cuda_agent.eval.checks.speed_of_light import floor_ms as _sol_floor
from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.judge.cache import KVCache
from cuda_agent.eval.judge.result import CheckRecord, EvalResult, Finding, Severity, Status
from cuda_agent.eval.judge.result_key import result_key
from cuda_agent.eval.judge.reward import clearly_faster, milestone_from
from cuda_agent.eval.progress import phase as announce
from cuda_agent.eval.timing import baseline_set, gpu_lock, timed
from cuda_agent.eval.timing import clock as tt
from cuda_agent.task.taskfile import Task
from cuda_agent.task.workspace import cache_root, stage

EVAL_VERSION = "1"


@lru_cache(maxsize=1)
def evaluator_fingerprint() -> str:
    """Hash of the evaluator's own code and templates: a cached result is reused
    only by the same evaluator that produced it."""
    h = hashlib.sha256(EVAL_VERSION.encode())
    pkg = Path(__file__).resolve().parents[1]
    for p in sorted([*pkg.glob("eval/**/*.py"), *pkg.glob("task/*.py"), *pkg.glob("task/templates/*")]):
        if not p.is_file():  # a __pycache__ that compileall or a non-editable install leaves beside the templates
            continue
        h.update(p.relative_to(pkg).as_posix().encode() + p.read_bytes())
    return h.hexdigest()[:12]


@dataclass
class Candidate:
    task: Task
    root: Path  # staged dir: model.py, model_new.py, (kernels/, binding files)
    hash: str
    kind: str  # "workspace" | "single_file"
    findings: list[Finding]


def run_workspace(workdir: Path, task: Task | None, cfg: EvalConfig) -> EvalResult:
    with warm.scratch_dir() as tmp:
        staged = stage(workdir, Path(tmp) / "ws", task)
        cand = Candidate(staged.task, staged.root, staged.candidate_hash, "workspace", workspace_findings(staged))
        return evaluate(cand, cfg, Path(tmp))


def run_single_file(task: Task, solution: Path, cfg: EvalConfig) -> EvalResult:
    if not solution.is_file():
        raise FileNotFoundError(f"solution file not found: {solution}")
    text = solution.read_text(errors="replace")
    with warm.scratch_dir() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        (root / "model.py").write_text(task.source)
        (root / "model_new.py").write_text(text)
        findings = static_findings(
            {"model_new.py": text},
            task.precision,
            single_file=True,
            precision_source=task.precision_source,
            task_dtypes=task.dtypes,
        )
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        return evaluate(Candidate(task, root, digest, "single_file", findings), cfg, Path(tmp))


def evaluate(cand: Candidate, cfg: EvalConfig, tmp: Path) -> EvalResult:
    gpu = gpu_mod.detect() if cfg.device == "cuda" else gpu_mod.GPU("cpu", "0.0")
    res = _new_result(cand, gpu)
    cache = KVCache(cache_root() / "eval.sqlite") if cfg.use_cache else None
    rkey = result_key(
        evaluator=evaluator_fingerprint(),
        task_hash=cand.task.hash,
        candidate_hash=cand.hash,
        findings=cand.findings,
        gpu=res.gpu,
        torch_version=res.torch,
        cfg=cfg,
    )
    if cache is not None and cfg.reuse_results and (hit := cache.get(rkey)) is not None:
        out = EvalResult.from_dict(hit)
        out.cache = {**out.cache, "result": True}
        return out
    res = _attempt(cand, cfg, tmp, gpu, res, cache)
    for _ in range(cfg.retry_unstable if res.unstable else 0):
        again = _attempt(cand, cfg, tmp, gpu, _new_result(cand, gpu), cache)
        if not again.unstable or (
            again.timing
            and res.timing
            and again.timing.spread_by(cfg.round_spread) < res.timing.spread_by(cfg.round_spread)
        ):
            res = again  # the steadier look counts
        if not res.unstable:
            break
    res = classify_environment(res)  # a machine that cannot build: env_error, no reward, not cached
    if cfg.spare_children and gpu is not None:
        warm.prepare(cfg, cand.task.precision, gpu.key)  # the next evaluation's children warm while the caller is idle
    if cache is not None and res.status not in (Status.TIMEOUT, Status.NO_GPU, Status.ENV_ERROR) and not res.unstable:
        cache.put(rkey, res.to_dict())
    return res


def _attempt(
    cand: Candidate, cfg: EvalConfig, tmp: Path, gpu: gpu_mod.GPU | None, res: EvalResult, cache: KVCache | None
) -> EvalResult:
    """One look at the candidate: its phases in order, over one state. A phase returns the finished
    result when the evaluation ends there (a failure, or the last phase the caller asked for)."""
    with ExitStack() as stack:  # the children and the GPU's shared hold, closed when the look ends
        ev = _Evaluation(cand, cfg, tmp, gpu, res, cache, stack)
        for phase in (
            _static_gate,
            _start_children,
            _queue_reference,
            _build,
            _compiled_or_no_gpu,
            _load,
            _correctness,
            _verified_or_on,
            _time_candidate,
            _time_baselines,
            _reward,
            _shape_probe_last,
            _extra_baselines,
        ):
            if (end := _step(phase, ev)) is not None:
                return end
    return res


def _step(phase: Callable[[_Evaluation], EvalResult | None], ev: _Evaluation) -> EvalResult | None:
    try:
        return phase(ev)
    except Stop as stop:  # an exchange or a check deep in the phase ended the evaluation (exchange.finish)
        return stop.result


def _new_result(cand: Candidate, gpu: gpu_mod.GPU | None) -> EvalResult:
    import torch

    return EvalResult(
        status=Status.OK,
        reward=None,
        correct=False,
        findings=list(cand.findings),
        gpu=gpu.name if gpu else None,
        torch=torch.__version__,
        precision=cand.task.precision,
        task_hash=cand.task.hash,
        candidate_hash=cand.hash,
    )


@dataclass
class _Seeds:
    """The secret seeds of one evaluation (fresh per evaluation: nothing to memorise)."""

    init: int
    correctness: list[int]
    timing: list[int]

    @classmethod
    def draw(cls, cfg: EvalConfig) -> _Seeds:
        return cls(
            secrets.randbits(62),
            [secrets.randbits(62) for _ in range(cfg.n_correctness)],
            [secrets.randbits(62) for _ in range(cfg.n_timing_sets)],
        )


@dataclass
class _Built:
    so_path: Path | None = None  # workspace: cuda_extension.so
    inline: dict[str, str] | None = None  # single file: load_inline name -> module built here (inline_build)


@dataclass
class _Evaluation:
    """One look's state, filled in phase by phase (a field is set by the phase named beside it)."""

    cand: Candidate
    cfg: EvalConfig
    tmp: Path
    gpu: gpu_mod.GPU | None
    res: EvalResult
    cache: KVCache | None
    stack: ExitStack
    pair: warm.Pair | None = None  # _start_children: the reference and the candidate child
    seeds: _Seeds | None = None  # _queue_reference
    built: _Built = dataclasses.field(default_factory=_Built)  # _build
    setup: P.Setup | None = None  # _load: the candidate's setup (the sanitizer lane repeats it)
    ref_bytes: int = 0  # _load: the reference's largest output, its largest output + inputs, its largest inputs
    moved: int = 0
    in_bytes: int = 0
    max_bytes: int = 0  # _load: the most a candidate output file may hold before it is cut off, not read
    grow: P.Run | None = None  # _verified_or_on: the shape probe's request, and whether it runs
    probe: bool = False
    treq: P.Time | None = None  # _time_candidate: the candidate's timing request, the baselines' (no checked calls)
    base_req: P.Time | None = None
    compiled: bool | None = None  # _time_candidate: torch.compile's build (timed.build_compiled)
    bursts: timed.BurstRecord | None = None  # _time_candidate: the clock's bursts of the candidate
    grown: P.OutputRecord | str | None = None  # _time_candidate: the candidate's output on the doubled inputs
    base: timed.BaselineLooks | None = None  # _time_baselines: the clock's looks at the baselines

    @property
    def children(self) -> warm.Pair:
        assert self.pair is not None
        return self.pair


def _static_gate(ev: _Evaluation) -> EvalResult | None:
    res = ev.res
    rejected = [f for f in res.findings if f.severity is Severity.REJECT]
    if (
        rejected and not ev.cfg.static_gate
    ):  # the red team's runtime lane: the static rules' verdicts noted, not applied
        res.defences["static_gate"] = "off: " + ", ".join(sorted({f.rule for f in rejected}))
        rejected = []
    if rejected:
        f = rejected[0]
        where = f" ({f.file}:{f.line})" if f.file and f.line else (f" ({f.file})" if f.file else "")
        return finish(res, Status.REJECTED, f"rejected by rule {f.rule}{where}: {f.message}").result
    return None


def _start_children(ev: _Evaluation) -> None:
    cand, cfg, gpu, res, stack = ev.cand, ev.cfg, ev.gpu, ev.res, ev.stack
    if gpu is not None and not (cfg.phase == "compile" and cand.kind == "workspace"):
        # The GPU shared with other evaluations' untimed work, never with a timing (gpu_lock):
        # held while a child has a request in flight (its set-up, runs, compares), not while
        # this parent builds, stages or checks files; closed after the children (entered first).
        share = gpu_lock.Share(gpu.key, cfg.gpu_lock_wait_s)
        stack.callback(_book_share, share, res)
        stack.callback(share.close)
        # Both children start before the build (or were started as the spare at the end of
        # this process's last evaluation): their torch import and CUDA start-up overlap it.
        t_pair = time.monotonic()
        pair = ev.pair = warm.pair_for(cfg, cand.task.precision)
        # waiting for a spare still starting (its CUDA start-up waits for the GPU's timed sections),
        # or for a new pair's spawn: child start-up on the critical path (benchmarks/eval_throughput.py)
        _book(res, "children", t_pair)
        stack.callback(pair.close)
        pair.ref.share = pair.cnd.share = share
        if cfg.spare_children:
            # the next evaluation's pair starts now, not when this one ends: back-to-back
            # evaluations (an agent that edits at once) otherwise wait ~1 s for CUDA start-up
            warm.prepare(cfg, cand.task.precision, gpu.key)
        res.defences["sandbox"] = pair.sandbox


def _queue_reference(ev: _Evaluation) -> None:
    """Queue the reference's setup and its correctness outputs (`_load` takes the replies): the
    reference needs no build, so it sets up and computes its outputs while nvcc runs."""
    seeds = ev.seeds = _Seeds.draw(ev.cfg)
    if ev.pair is not None:
        send(ev.pair.ref, ev.res, _setup(ev.cand, ev.cfg, seeds, peer_io=ev.pair.cnd_io), "reference")
        ref_seeds = seeds.correctness if ev.cfg.fresh_timing_inputs else seeds.correctness + seeds.timing
        send(ev.pair.ref, ev.res, P.Run(ref_seeds, "ref", keep=True), "reference")


def _compiled_or_no_gpu(ev: _Evaluation) -> EvalResult | None:
    cand, res = ev.cand, ev.res
    if ev.cfg.phase == "compile" and (cand.kind == "workspace" or ev.built.inline):
        res.message = "compiled"  # a GPU is not needed for this phase
        return res
    if ev.gpu is None:
        what = (
            "compiled with nvcc"
            if cand.kind == "workspace" or ev.built.inline
            else "checked statically (its load_inline arguments are not static: it compiles on the GPU machine)"
        )
        res.status, res.message = Status.NO_GPU, f"{what}; correctness and timing need a CUDA GPU, and none is visible"
        return res
    return None


def _load(ev: _Evaluation) -> EvalResult | None:
    """The candidate loads while the reference sets up and computes its outputs (they live in the
    reference's memory, not in files): when the build was quick (a pool's farm built it), the two
    set-ups overlap instead of following each other on the critical path."""
    cand, cfg, res, seeds, built = ev.cand, ev.cfg, ev.res, ev.seeds, ev.built
    ref, cnd = ev.children.ref, ev.children.cnd
    assert seeds is not None
    sol = P.Solution(str(cand.root / "model_new.py"), str(built.so_path) if built.so_path else None, built.inline)
    load_budget = cfg.load_timeout + (cfg.compile_timeout if cand.kind == "single_file" and not built.inline else 0)
    ev.setup = _setup(cand, cfg, seeds, solution=sol, guard=cfg.runtime_guards)
    send(cnd, res, ev.setup, "load")
    t_setup = time.monotonic()
    recv(ref, res, cfg.load_timeout, "reference", "setup", P.SetupReply)  # both queued by _queue_reference
    # the part of "reference" spent waiting for the reference child to start and build the task's model
    # after the build: child start-up on the critical path (benchmarks/eval_throughput.py reports it)
    _book(res, "reference.setup", t_setup)
    ref_run = recv(ref, res, cfg.correctness_timeout, "reference", "run", P.RunReply)
    ev.ref_bytes = max(_nbytes(r) for r in ref_run.outputs)
    ev.moved = max(_nbytes(r) + r.in_nbytes for r in ref_run.outputs)
    ev.in_bytes = max(r.in_nbytes for r in ref_run.outputs)
    ev.max_bytes = 4 * ev.ref_bytes + (1 << 20)  # a candidate writing gigabytes is cut off, not read
    info = recv(cnd, res, load_budget, "load", "setup", P.SetupReply)
    res.defences["runtime_guards"] = "on" if cfg.runtime_guards else "off"
    for note in info.notes:
        res.findings.append(Finding("state-dict-mismatch", note, Severity.WARN, "model_new.py"))
    if cfg.phase == "compile":
        res.message = "compiled and loaded"
        return res
    return None


def _correctness(ev: _Evaluation) -> None:
    cfg, res, pair, seeds = ev.cfg, ev.res, ev.children, ev.seeds
    assert seeds is not None and ev.setup is not None
    _verify(cfg, pair.cnd_io, res, ev.cand.task, pair.ref, pair.cnd, seeds.correctness, ev.max_bytes)
    res.correct = True
    if cfg.sanitize:
        _sanitize(
            ev.cand, cfg, ev.tmp, res, dataclasses.replace(ev.setup, guard=False), seeds.correctness[0], pair.cnd.share
        )


def _verified_or_on(ev: _Evaluation) -> EvalResult | None:
    """The shape probe's request (run last), and the end of a `verify` evaluation."""
    cfg, res, io = ev.cfg, ev.res, ev.children.cnd_io
    assert ev.seeds is not None
    grow = ev.grow = P.Run([secrets.randbits(62)], "grow", out_dir=str(io), grow_seed=secrets.randbits(62))
    ev.probe = cfg.shape_probe and _probe_fits(cfg, io, res, ev.ref_bytes)
    if cfg.phase == "verify":
        if ev.probe:
            t_probe = time.monotonic()
            grown = _probe_reply(ev.children.cnd.request(grow, cfg.correctness_timeout))
            _book(res, "shape_probe", t_probe)
            _shape_probe(ev.children.ref, res, cfg, ev.cand.task, grown, grow, ev.max_bytes)
        res.message = f"correct on {len(ev.seeds.correctness)} fresh input sets"
        return res
    return None


def _time_candidate(ev: _Evaluation) -> None:
    """The candidate's timing and its bursts on the evaluator's clock, its timed outputs checked; the
    candidate runs the shape probe meanwhile and is killed before any baseline is timed."""
    cfg, res, cache, gpu, task = ev.cfg, ev.res, ev.cache, ev.gpu, ev.cand.task
    ref, cnd, io = ev.children.ref, ev.children.cnd, ev.children.cnd_io
    assert ev.seeds is not None and gpu is not None and ev.grow is not None
    treq = ev.treq = timed.time_request(cfg, ev.seeds.timing, io)
    ev.base_req = dataclasses.replace(treq, out_dir=None, checked=[])
    ev.compiled = timed.build_compiled(cfg, res, ref, ev.base_req, cache)  # a cache miss's torch.compile build: untimed
    kind = timed.clock_kind(ref, res, cfg, cache) if cfg.trusted_clock else None
    shapes = timed.cached_shapes(cfg, cache, timed.baseline_key(cfg, res, ev.base_req), kind or "")
    with timed.section(res, cfg, gpu):  # exclusive per physical GPU, across processes (gpu_lock)
        reply_t = timed.time_candidate(cnd, res, cfg, treq)
        ev.bursts = timed.burst_candidate(cnd, res, cfg, ev.in_bytes, kind, shapes) if kind is not None else None
    # after timing: a candidate that fails on the grown inputs may leave its CUDA context unusable.
    # It runs them while the reference checks the timed outputs; the baselines, timed, come after.
    # The reference's runs for the checked timed calls come first, so that only the compares
    # (one output at a time on the device) share the GPU with the candidate's doubled inputs.
    timed.timed_references(ref, res, cfg, treq, reply_t.outputs)
    if ev.probe:
        send(cnd, res, ev.grow, "shape_probe")
    timed.check_timed_outputs(ref, res, cfg, task, treq, reply_t.outputs, len(ev.seeds.correctness), ev.max_bytes)
    t_probe = time.monotonic()
    ev.grown = _probe_reply(cnd.receive(cfg.correctness_timeout, "run")) if ev.probe else None
    if ev.grown is not None:
        _book(res, "shape_probe", t_probe)
    # the candidate's process goes before any baseline is timed: work it left on the GPU dies with it
    cnd.close()
    if ev.bursts is not None:
        timed.check_burst_outputs(ref, res, cfg, task, ev.bursts)


def _time_baselines(ev: _Evaluation) -> None:
    cfg, res, cache, ref = ev.cfg, ev.res, ev.cache, ev.children.ref
    assert ev.gpu is not None and ev.base_req is not None
    with timed.section(res, cfg, ev.gpu):
        timed.baselines(cfg, res, ref, ev.base_req, cache, ev.compiled)
        assert res.eager_timing is not None
        ev.base = (
            timed.burst_baselines(
                ref,
                res,
                cfg,
                ev.in_bytes,
                cache,
                timed.baseline_key(cfg, res, ev.base_req),
                ev.bursts.kind,
                (ev.bursts.k, ev.bursts.replays),
            )
            if ev.bursts is not None
            else None
        )
    timed.flag_unstable(res, cfg)


def _reward(ev: _Evaluation) -> None:
    cfg, res = ev.cfg, ev.res
    assert res.timing is not None and res.eager_timing is not None
    t, te = res.timing.median_ms, res.eager_timing.median_ms
    tc = res.compile_timing.median_ms if res.compile_timing else te  # compile unusable: eager stands in
    bw = timed.bandwidth(ev.children.ref, res, cfg, ev.cache)
    if ev.bursts is not None:  # the time that counts is the evaluator's clock's (trusted_time)
        floor = sol_floor(ev.moved, bw)
        v = timed.trusted_verdict(res, cfg, ev.bursts, ev.base, floor)
        t = v.time_ms
        faster = tt.milestones(v, te, tc)
    else:
        faster = (clearly_faster(t, te), clearly_faster(t, tc))
    res.time_ms, res.eager_ms, res.compile_ms = t, te, (res.compile_timing.median_ms if res.compile_timing else None)
    res.speedup_vs_eager = te / t if te and t > 0 else None
    res.speedup_vs_compile = tc / t if tc and t > 0 else None
    res.reward = milestone_from(*faster)
    timed.speed_of_light(res, ev.moved, bw)
    res.message = f"correct; {t:.4g} ms vs eager {te:.4g} ms and torch.compile {tc:.4g} ms; reward {res.reward}"
    if res.reported_ms is not None and abs(res.reported_ms - t) > 1e-9 * t:
        res.message += f" (the candidate reported {res.reported_ms:.4g} ms; the evaluator's clock decides)"


def _shape_probe_last(ev: _Evaluation) -> None:
    if ev.grown is not None:  # last: the reference may fail on grown inputs, and it is not needed after
        assert ev.grow is not None
        _shape_probe(ev.children.ref, ev.res, ev.cfg, ev.cand.task, ev.grown, ev.grow, ev.max_bytes)


def _extra_baselines(ev: _Evaluation) -> None:
    if baseline_set.extras(ev.cfg.baselines):  # issue 32: reported beside the reward, never in it; after all else
        assert ev.gpu is not None and ev.base_req is not None
        with timed.section(ev.res, ev.cfg, ev.gpu):
            timed.extra_baselines(ev.cfg, ev.res, ev.children.ref, ev.base_req, ev.cache)


def _book_share(share: gpu_lock.Share, res: EvalResult) -> None:
    res.gpu_wait_s = round(res.gpu_wait_s + share.waited_s, 3)
    if share.waited_s:  # the requests' waits for other evaluations' timings (a sub-key, as lock.exclusive)
        res.phases_s["lock.shared"] = round(res.phases_s.get("lock.shared", 0.0) + share.waited_s, 3)
    if share.missed:
        res.findings.append(
            Finding(
                "gpu-lock-timeout",
                f"waited {share.wait_s:.0f} s for the GPU's lock {share.missed} "
                "time(s) and ran without it: another process's timing may be off",
                Severity.WARN,
            )
        )


def _setup(
    cand: Candidate,
    cfg: EvalConfig,
    seeds: _Seeds,
    *,
    solution: P.Solution | None = None,
    guard: bool = False,
    peer_io: Path | None = None,
) -> P.Setup:
    return P.Setup(
        str(cand.root / "model.py"),
        seeds.init,
        cand.task.precision,
        cfg.device,
        str(cand.root),
        solution=solution,
        guard=guard,
        peer_io=str(peer_io) if peer_io is not None else None,
    )


def _build(ev: _Evaluation) -> None:
    cand, cfg, gpu, res = ev.cand, ev.cfg, ev.gpu, ev.res
    t0 = time.monotonic()
    announce("compile")
    # the CPU lane's stand-in GPU has capability "0.0", which no nvcc accepts
    arch = cfg.arch or gpu_mod.arch_from_env() or (gpu.capability if gpu and cfg.device == "cuda" else None) or "9.0"
    if cand.kind != "workspace":
        calls = inline_build.find_calls((cand.root / "model_new.py").read_text(errors="replace"))
        if not calls:  # arguments that are not static: load_inline builds inside the candidate child
            res.defences["inline_build"] = "in the candidate child (load_inline arguments are not static)"
            return
        built: dict[str, str] = {}
        notes: list[str] = []
        cached = True
        for call in calls:
            b = inline_build.build_call(
                call,
                cache_root() / "build",
                arch=arch,
                timeout=cfg.compile_timeout,
                use_cache=cfg.use_cache,
                check_symbols=cfg.static_gate,
            )
            _built_or_stop(b, cfg, res, t0)
            built[call.name] = str(b.so_path)
            notes.append(f"{call.name}: {b.note}" if b.note else call.name)
            cached &= b.cached
        res.cache["build"] = cached
        res.defences["inline_build"] = f"in the evaluator: {'; '.join(notes)}"
        ev.built = _Built(inline=built)
        return
    b = build(
        cand.root,
        cache_root() / "build",
        arch=arch,
        timeout=cfg.compile_timeout,
        jobs=cfg.jobs,
        use_cache=cfg.use_cache,
        check_symbols=cfg.static_gate,
    )
    res.cache["build"] = b.cached
    _built_or_stop(b, cfg, res, t0)
    ev.built = _Built(so_path=b.so_path)


def _built_or_stop(b: BuildResult, cfg: EvalConfig, res: EvalResult, t0: float) -> None:
    res.phases_s["compile"] = round(time.monotonic() - t0, 3)
    res.log = b.log
    if b.findings:  # the post-build symbol check (eval/checks/symbols.py): a rejection, not a compile error
        res.findings.extend(b.findings)
        f = b.findings[0]
        raise finish(res, Status.REJECTED, f"rejected by rule {f.rule} ({f.file}): {f.message}", b.log)
    if not b.ok:
        if b.timed_out:
            raise finish(res, Status.TIMEOUT, f"compile exceeded its {cfg.compile_timeout:.0f} s budget", b.log)
        raise finish(res, Status.COMPILE_ERROR, "compilation failed; see log", b.log)


def _nbytes(rec: P.OutputRecord) -> int:
    return sum(m.nbytes for m in rec.meta)


def sol_floor(moved: int, bw: float | None) -> float:
    """The task's speed-of-light time per call (ms), 0 when unknown."""
    return _sol_floor(moved, bw) if bw and moved else 0.0


def _book(res: EvalResult, phase: str, t0: float) -> None:
    """Add the wall seconds since t0 to `phase` of the result (waits that `channel.exchange.recv` does not book)."""
    res.phases_s[phase] = round(res.phases_s.get(phase, 0.0) + time.monotonic() - t0, 3)


def _probe_fits(cfg: EvalConfig, io: Path, res: EvalResult, out_bytes: int) -> bool:
    """Whether the shape probe's doubled output fits where the candidate must write it: under the
    sandbox's file-size limit and in the free space of the scratch folder (/dev/shm, usually). A
    task whose outputs are gigabytes (some KernelBench level 1 tasks) would otherwise have every
    honest candidate killed by SIGXFSZ, or stopped by ENOSPC, on a write the task forced on it."""
    need = 2 * out_bytes + (1 << 20)  # the doubled output and its header
    try:
        free = shutil.disk_usage(io).free
    except OSError:
        free = need
    room = min(cfg.sandbox_max_file_bytes, free)
    if need <= room:
        return True
    gib = 1 << 30
    res.defences["shape_probe"] = (
        f"skipped: the doubled output ({need / gib:.2f} GiB) would not fit the candidate's "
        f"file limit or the scratch folder's free space ({room / gib:.2f} GiB)"
    )
    return False


def _probe_reply(reply: P.Reply | ChildFailure) -> P.OutputRecord | str:
    """The candidate's output on the shape probe's inputs, or why it has none."""
    why = failure(reply)
    if why is not None:
        return why
    if not isinstance(reply, P.RunReply) or len(reply.outputs) != 1:
        return f"the candidate answered the shape probe with {type(reply).__name__}"
    return reply.outputs[0]


def _verify(
    cfg: EvalConfig, io: Path, res: EvalResult, task: Task, ref: Child, cnd: Child, seeds: list[int], max_bytes: int
) -> None:
    """Correctness on every fresh seed, one input set per request so that the reference compares
    set i-1 while the candidate computes and writes set i (the files of large outputs take
    about as long to write as to read back)."""
    pending: int | None = None
    for i, seed in enumerate(seeds):
        req = P.Run([seed], f"seed{i}", out_dir=str(io))
        send(cnd, res, req, "verify")
        if pending is not None:
            _verified(res, compare_recv(ref, res, cfg.correctness_timeout), pending)
        reply = recv(cnd, res, cfg.correctness_timeout, "verify", "run", P.RunReply)
        guard(res, reply.guard, cfg.runtime_guards, "correctness runs")
        if len(reply.outputs) != 1:
            raise finish(
                res,
                Status.RUNTIME_ERROR,
                f"verify: the candidate answered {len(reply.outputs)} output records for one input set",
            )
        rec = reply.outputs[0]
        if rec.inputs_mutated:
            raise finish(res, Status.INCORRECT, "the candidate modified its input tensors")
        compare_send(ref, res, task, f"seed#{i}", f"ref#{i}", P.output_path(str(io), req.tag, 0), rec, max_bytes)
        pending = i
    if pending is not None:
        _verified(res, compare_recv(ref, res, cfg.correctness_timeout), pending)


def _verified(res: EvalResult, chk: CheckRecord, i: int) -> None:
    if not chk.passed:
        raise finish(res, Status.INCORRECT, f"wrong output on input set {i}: {chk.message}")


def _shape_probe(
    ref: Child,
    res: EvalResult,
    cfg: EvalConfig,
    task: Task,
    cand_rec: P.OutputRecord | str,
    grow: P.Run,
    max_bytes: int,
) -> None:
    """Hardcoded shapes: the candidate must match the reference on one input set whose batch-like
    dimension is doubled (`child.state.grow_inputs`). Skipped, with a note, when the reference itself
    cannot run such inputs (its shapes are fixed by the task)."""
    t0 = time.monotonic()
    why = failure(ref.request(dataclasses.replace(grow, keep=True, out_dir=None), cfg.correctness_timeout))
    _book(res, "shape_probe", t0)  # its compare below is booked to "compare", as every compare
    if why is not None:
        res.defences["shape_probe"] = (
            f"skipped: the reference does not run with a doubled leading dimension ({why[:120]})"
        )
        return
    if isinstance(cand_rec, str) and "out of memory" in cand_rec.lower():
        # the doubled set may not fit beside the candidate's timing buffers: no verdict either way
        res.defences["shape_probe"] = f"skipped: the candidate ran out of memory on the doubled set ({cand_rec[:120]})"
        return
    if isinstance(cand_rec, str):
        res.defences["shape_probe"] = "failed"
        raise finish(
            res,
            Status.INCORRECT,
            "the candidate fails on inputs whose leading (batch) dimension is doubled, "
            f"which the reference handles: {cand_rec}"[:600],
        )
    assert grow.out_dir is not None
    compare_send(
        ref, res, task, "shape-probe", "grow#0", P.output_path(grow.out_dir, grow.tag, 0), cand_rec, 2 * max_bytes
    )
    chk = compare_recv(ref, res, cfg.correctness_timeout)
    res.defences["shape_probe"] = "passed" if chk.passed else "failed"
    if not chk.passed:
        raise finish(
            res,
            Status.INCORRECT,
            f"wrong output when the leading (batch) dimension is doubled (are the shapes hardcoded?): {chk.message}"[
                :600
            ],
        )


def _sanitize(
    cand: Candidate,
    cfg: EvalConfig,
    tmp: Path,
    res: EvalResult,
    setup: P.Setup,
    seed: int,
    share: gpu_lock.Share | None = None,
) -> None:
    """The opt-in compute-sanitizer lane (module `sanitize`): a fresh candidate child per check,
    under the tool and inside the same sandbox, loads the candidate and runs one input set."""
    tool = sanitize_mod.find_tool()
    stand_in = bool(os.environ.get(sanitize_mod.OVERRIDE))  # the tests' stand-in tool runs on the CPU lane
    if (cfg.device != "cuda" and not stand_in) or tool is None:
        res.defences["sanitize"] = "unavailable: " + (
            "compute-sanitizer not found" if tool is None else "no CUDA device"
        )
        res.findings.append(Finding("sanitizer-unavailable", res.defences["sanitize"], Severity.WARN))
        return
    box, _ = warm.sandbox_for(cfg)
    env = {**child_env(cand.task.precision), "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    done = []
    with ExitStack() as stack:
        logs = log_dir(stack)
        for check in sanitize_mod.CHECKS:
            if share is not None:  # the lane's process uses the GPU from its start to its end
                share.enter()
                stack.callback(share.leave)
            done.append(_sanitize_one(cand, cfg, tmp, res, setup, seed, tool, box, env, logs, check))
    res.defences["sanitize"] = ", ".join(done)


def _sanitize_one(
    cand: Candidate,
    cfg: EvalConfig,
    tmp: Path,
    res: EvalResult,
    setup: P.Setup,
    seed: int,
    tool: str,
    box: Any,
    env: dict[str, str],
    logs: Path,
    check: str,
) -> str:
    """One check of the lane; returns its word for the record, or ends the evaluation."""
    rw, lane_env = child_dirs(tmp, check, env, private_caches=True)
    report = rw[1] / "sanitizer.log"
    prefix = sanitize_mod.wrap(tool, check, report)

    def wrap(argv: list[str], prefix: list[str] = prefix, rw: list[Path] = rw) -> list[str]:
        # compute-sanitizer reaches its target over TCP: the namespace's own loopback must be up
        return box.wrap(prefix + argv, writable=rw, loopback=True) if box is not None else prefix + argv

    child = Child("candidate", cwd=cand.root, env=lane_env, log_path=logs / f"{check}.log", wrap=wrap)
    t0 = time.monotonic()
    failed = ""
    try:
        for msg in (setup, P.Run([seed], "sanitize", out_dir=str(rw[0]))):
            # memcheck aborts a kernel that it catches, so the call then fails: read the report first
            if (why := failure(child.request(msg, cfg.sanitize_timeout))) is not None:
                failed = why
                break
    finally:
        log = child.log_tail()
        child.finish(timeout=60)
        res.phases_s[f"sanitize_{check}"] = round(time.monotonic() - t0, 3)
    text = report.read_text(errors="replace") if report.is_file() else ""
    found = sanitize_mod.parse(check, text)
    if failed and not found.errors:
        raise finish(
            res,
            Status.RUNTIME_ERROR,
            f"sanitize ({check}): the candidate failed under compute-sanitizer: {failed}"[:600],
            (text[-2000:] + "\n" + log)[-4000:],
        )
    if found.errors is None:
        res.findings.append(Finding(f"sanitizer-{check}", "the sanitizer wrote no summary", Severity.WARN))
        return f"{check} no summary"
    if found.errors > 0:
        detail = "; ".join(found.excerpt)[:400]
        res.findings.append(Finding(f"sanitizer-{check}", f"{found.errors} error(s): {detail}", Severity.REJECT))
        raise finish(
            res,
            Status.REJECTED,
            f"rejected by rule sanitizer-{check}: {found.errors} error(s) under compute-sanitizer: {detail}"[:600],
            text[-4000:],
        )
    return f"{check} clean"
