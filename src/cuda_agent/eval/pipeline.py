"""One evaluation, end to end, in the trusted parent.

Contract: stage a fresh copy (protected files pristine) -> static findings ->
build (cached) -> spawn a reference child and a candidate child -> reference
outputs for fresh secret seeds -> candidate outputs, compared here ->
candidate timing, its timed outputs compared too -> baselines (cached per
task hash, GPU, torch version, precision, timing settings) -> reward. The runtime defences (`runtime_checks`: ATen op log and
thread census; fresh inputs per timed call with random timed calls checked;
the side-stream re-timing; the speed-of-light flag; the `sandbox` around the
candidate child; the shape probe, one more input set with the batch-like
dimension doubled, run last; the opt-in `sanitize` lane after correctness) add
findings here. The
parent never imports candidate code; both children are killed at the end or
at the first failure. Every candidate failure is a typed `EvalResult`.

Not guaranteed: anything without a CUDA GPU beyond checks and the build
(status no_gpu says so).

Longer than the 250-line guide on purpose: it is the one place where the order
of the steps and what each failure turns into can be read together; each step
it calls (build, children, compare, timing, checks) lives in its own module.
Single-file (load_inline) solutions compile inside the candidate child, so
without a GPU they are only checked statically.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from contextlib import ExitStack
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from cuda_agent.eval import gpu as gpu_mod
from cuda_agent.eval import sandbox as sandbox_mod
from cuda_agent.eval import sanitize as sanitize_mod
from cuda_agent.eval import speed_of_light as sol
from cuda_agent.eval import warm
from cuda_agent.eval.build import build
from cuda_agent.eval.cache import KVCache
from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.env_check import classify as classify_environment
from cuda_agent.eval.procs import Child, ChildFailure, failure
from cuda_agent.eval.progress import phase as announce
from cuda_agent.eval.result import CheckRecord, EvalResult, Finding, Severity, Status, TimingStats
from cuda_agent.eval.result_key import result_key
from cuda_agent.eval.reward import milestone_reward
from cuda_agent.eval.runtime_checks import runtime_findings
from cuda_agent.eval.static_gate import static_findings, workspace_findings
from cuda_agent.eval.timing import PROTOCOL as TIMING_PROTOCOL
from cuda_agent.eval.timing import derive_seed, side_stream_suspect
from cuda_agent.eval.warm import child_dirs, child_env, log_dir
from cuda_agent.task.taskfile import Task
from cuda_agent.task.workspace import cache_root, stage

EVAL_VERSION = "1"


@lru_cache(maxsize=1)
def evaluator_fingerprint() -> str:
    """Hash of the evaluator's own code and templates: a cached result is reused
    only by the same evaluator that produced it."""
    h = hashlib.sha256(EVAL_VERSION.encode())
    pkg = Path(__file__).resolve().parents[1]
    for p in sorted([*pkg.glob("eval/*.py"), *pkg.glob("task/*.py"), *pkg.glob("task/templates/*")]):
        h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()[:12]


@dataclass
class Candidate:
    task: Task
    root: Path  # staged dir: model.py, model_new.py, (kernels/, binding files)
    hash: str
    kind: str  # "workspace" | "single_file"
    findings: list[Finding]


class _Stop(Exception):
    """Ends the evaluation early with a finished result."""

    def __init__(self, result: EvalResult):
        self.result = result


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
        findings = static_findings({"model_new.py": text}, task.precision, single_file=True)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        return evaluate(Candidate(task, root, digest, "single_file", findings), cfg, Path(tmp))


def evaluate(cand: Candidate, cfg: EvalConfig, tmp: Path) -> EvalResult:
    import torch

    gpu = gpu_mod.detect() if cfg.device == "cuda" else gpu_mod.GPU("cpu", "0.0")
    res = EvalResult(
        status=Status.OK, reward=None, correct=False, findings=list(cand.findings), gpu=gpu.name if gpu else None,
        torch=torch.__version__, precision=cand.task.precision, task_hash=cand.task.hash, candidate_hash=cand.hash,
    )
    cache = KVCache(cache_root() / "eval.sqlite") if cfg.use_cache else None
    rkey = result_key(evaluator=evaluator_fingerprint(), task_hash=cand.task.hash, candidate_hash=cand.hash,
                      findings=cand.findings, gpu=res.gpu, torch_version=res.torch, cfg=cfg)
    if cache is not None and cfg.reuse_results and (hit := cache.get(rkey)) is not None:
        out = EvalResult.from_dict(hit)
        out.cache = {**out.cache, "result": True}
        return out
    try:
        _run(cand, cfg, tmp, gpu, res, cache)
    except _Stop as stop:
        res = stop.result
    res = classify_environment(res)  # a machine that cannot build: env_error, no reward, not cached
    if cfg.spare_children and gpu is not None:
        warm.prepare(cfg, cand.task.precision)  # the next evaluation's children warm while the caller is idle
    if cache is not None and res.status not in (Status.TIMEOUT, Status.NO_GPU, Status.ENV_ERROR):
        cache.put(rkey, res.to_dict())
    return res


def _finish(res: EvalResult, status: Status, message: str, log: str = "") -> _Stop:
    res.status, res.message, res.log = status, message, log or res.log
    res.correct = False
    res.reward = -1  # every early end through _finish is a failure; no_gpu ends through _Stop
    return _Stop(res)


def _run(cand: Candidate, cfg: EvalConfig, tmp: Path, gpu: gpu_mod.GPU | None, res: EvalResult, cache: KVCache | None) -> None:
    rejected = [f for f in res.findings if f.severity is Severity.REJECT]
    if rejected:
        f = rejected[0]
        where = f" ({f.file}:{f.line})" if f.file and f.line else (f" ({f.file})" if f.file else "")
        raise _finish(res, Status.REJECTED, f"rejected by rule {f.rule}{where}: {f.message}")
    with ExitStack() as stack:
        pair: warm.Pair | None = None
        if gpu is not None and not (cfg.phase == "compile" and cand.kind == "workspace"):
            # Both children start before the build (or were started as the spare at the end of
            # this process's last evaluation): their torch import and CUDA start-up overlap it.
            pair = warm.pair_for(cfg, cand.task.precision)
            stack.callback(pair.close)
            if cfg.spare_children:
                # the next evaluation's pair starts now, not when this one ends: back-to-back
                # evaluations (an agent that edits at once) otherwise wait ~1 s for CUDA start-up
                warm.prepare(cfg, cand.task.precision)
            res.defences["sandbox"] = pair.sandbox
        seeds = _Seeds.draw(cfg)
        if pair is not None:
            # the reference needs no build: it sets up and computes its outputs while nvcc runs
            _start_reference(pair.ref, cand, cfg, res, seeds)
        so_path = _build(cand, cfg, gpu, res)
        if cfg.phase == "compile" and cand.kind == "workspace":
            res.message = "compiled"  # a GPU is not needed for this phase
            raise _Stop(res)
        if gpu is None:
            what = "compiled with nvcc" if cand.kind == "workspace" else "checked statically (load_inline compiles on the GPU machine)"
            res.status, res.message = Status.NO_GPU, f"{what}; correctness and timing need a CUDA GPU, and none is visible"
            raise _Stop(res)
        assert pair is not None
        _check_and_time(cand, cfg, tmp, res, pair, so_path, cache, seeds)


@dataclass
class _Seeds:
    """The secret seeds of one evaluation (fresh per evaluation: nothing to memorise)."""

    init: int
    correctness: list[int]
    timing: list[int]

    @classmethod
    def draw(cls, cfg: EvalConfig) -> _Seeds:
        return cls(secrets.randbits(62), [secrets.randbits(62) for _ in range(cfg.n_correctness)],
                   [secrets.randbits(62) for _ in range(cfg.n_timing_sets)])


def _setup_msg(cand: Candidate, cfg: EvalConfig, seeds: _Seeds) -> dict[str, Any]:
    return {"cmd": "setup", "task_path": str(cand.root / "model.py"), "init_seed": seeds.init,
            "precision": cand.task.precision, "device": cfg.device, "cwd": str(cand.root)}


def _start_reference(ref: Child, cand: Candidate, cfg: EvalConfig, res: EvalResult, seeds: _Seeds) -> None:
    """Queue the reference's setup and its correctness outputs; `_check_and_time` takes the replies."""
    _send(ref, res, _setup_msg(cand, cfg, seeds), "reference")
    ref_seeds = seeds.correctness if cfg.fresh_timing_inputs else seeds.correctness + seeds.timing
    _send(ref, res, {"cmd": "run", "seeds": ref_seeds, "keep": True, "tag": "ref"}, "reference")


def _build(cand: Candidate, cfg: EvalConfig, gpu: gpu_mod.GPU | None, res: EvalResult) -> Path | None:
    if cand.kind != "workspace":
        return None  # single-file solutions build inside the candidate child (load_inline)
    t0 = time.monotonic()
    announce("compile")
    # the CPU lane's stand-in GPU has capability "0.0", which no nvcc accepts
    arch = cfg.arch or gpu_mod.arch_from_env() or (gpu.capability if gpu and cfg.device == "cuda" else None) or "9.0"
    b = build(cand.root, cache_root() / "build", arch=arch, timeout=cfg.compile_timeout, jobs=cfg.jobs, use_cache=cfg.use_cache)
    res.phases_s["compile"] = round(time.monotonic() - t0, 3)
    res.cache["build"] = b.cached
    res.log = b.log
    if not b.ok:
        if b.timed_out:
            raise _finish(res, Status.TIMEOUT, f"compile exceeded its {cfg.compile_timeout:.0f} s budget", b.log)
        raise _finish(res, Status.COMPILE_ERROR, "compilation failed; see log", b.log)
    return b.so_path


def _ask(child: Child, res: EvalResult, msg: dict[str, Any], timeout: float, phase: str) -> dict[str, Any]:
    _send(child, res, msg, phase)
    return _recv(child, res, timeout, phase, str(msg.get("cmd")))


def _send(child: Child, res: EvalResult, msg: dict[str, Any], phase: str) -> None:
    """Queue a command; its reply is taken later with `_recv` (the two children work at once)."""
    if (fail := child.send(msg)) is not None:
        raise _finish(res, Status.RUNTIME_ERROR, f"{phase}: {_who(child)}: {fail.message}", fail.log)


def _recv(child: Child, res: EvalResult, timeout: float, phase: str, cmd: str) -> dict[str, Any]:
    """The next reply of `child`; the wait is booked to `phase`, with the child's own split."""
    announce(phase)
    t0 = time.monotonic()
    reply = child.receive(timeout, cmd)
    res.phases_s[phase] = round(res.phases_s.get(phase, 0.0) + time.monotonic() - t0, 3)
    if isinstance(reply, dict):
        for part, sec in (reply.get("t") or {}).items():  # the child's own split of the phase
            if isinstance(sec, (int, float)):
                key = f"{phase}.{part}"
                res.phases_s[key] = round(res.phases_s.get(key, 0.0) + float(sec), 3)
    if isinstance(reply, ChildFailure):
        status = Status.TIMEOUT if reply.kind == "timeout" else Status.RUNTIME_ERROR
        raise _finish(res, status, f"{phase}: {_who(child)}: {reply.message}", reply.log)
    if not reply.get("ok"):
        child.kill()  # never reuse a child after an error: its CUDA context may be poisoned
        raise _finish(res, Status.RUNTIME_ERROR, f"{phase}: {_who(child)} raised {reply.get('error', '?')}"[:600],
                      str(reply.get("traceback", "")) + "\n" + child.log_tail())
    return reply


def _who(child: Child) -> str:
    return "the reference model" if child.role == "reference" else "the candidate"


def _compare(ref: Child, res: EvalResult, cfg: EvalConfig, task: Task, label: str, ref_label: str,
             rec: dict[str, Any], max_bytes: int) -> CheckRecord:
    """The trusted reference process compares on the device; only numbers come back."""
    _compare_send(ref, res, task, label, ref_label, rec, max_bytes)
    return _compare_recv(ref, res, cfg)


def _compare_send(ref: Child, res: EvalResult, task: Task, label: str, ref_label: str,
                  rec: dict[str, Any], max_bytes: int) -> None:
    msg = {"cmd": "compare", "ref": ref_label, "label": label, "file": str(rec.get("file", "")),
           "meta": rec.get("meta", []), "atol": task.atol, "rtol": task.rtol, "max_bytes": max_bytes}
    _send(ref, res, msg, "compare")


def _compare_recv(ref: Child, res: EvalResult, cfg: EvalConfig) -> CheckRecord:
    chk = CheckRecord(**_recv(ref, res, cfg.correctness_timeout, "compare", "compare")["check"])
    res.checks.append(chk)
    return chk


def _check_and_time(cand: Candidate, cfg: EvalConfig, tmp: Path, res: EvalResult, pair: warm.Pair,
                    so_path: Path | None, cache: KVCache | None, seeds: _Seeds) -> None:
    task, ref, cnd, io = cand.task, pair.ref, pair.cnd, pair.cnd_io
    setup = _setup_msg(cand, cfg, seeds)
    _recv(ref, res, cfg.load_timeout, "reference", "setup")  # both queued by _start_reference
    reply = _recv(ref, res, cfg.correctness_timeout, "reference", "run")
    ref_bytes = max(sum(m.get("nbytes", 0) for m in r["meta"]) for r in reply["outputs"])
    moved = max(sum(m.get("nbytes", 0) for m in r["meta"]) + r.get("in_nbytes", 0) for r in reply["outputs"])
    max_bytes = 4 * ref_bytes + (1 << 20)  # a candidate writing gigabytes is cut off, not read
    sol = {"path": str(cand.root / "model_new.py"), "so_path": str(so_path) if so_path else None}
    load_budget = cfg.load_timeout + (cfg.compile_timeout if cand.kind == "single_file" else 0)
    info = _ask(cnd, res, {**setup, "solution": sol, "guard": cfg.runtime_guards}, load_budget, "load")
    res.defences["runtime_guards"] = "on" if cfg.runtime_guards else "off"
    res.gpu = info.get("gpu", res.gpu)
    for note in info.get("notes", []):
        res.findings.append(Finding("state-dict-mismatch", note, Severity.WARN, "model_new.py"))
    if cfg.phase == "compile":
        res.message = "compiled and loaded"
        raise _Stop(res)
    _verify(cfg, io, res, task, ref, cnd, seeds.correctness, max_bytes)
    res.correct = True
    if cfg.sanitize:
        _sanitize(cand, cfg, tmp, res, {**setup, "solution": sol, "guard": False}, seeds.correctness[0])
    grow = {"seeds": [secrets.randbits(62)], "grow_seed": secrets.randbits(62)}
    if cfg.phase == "verify":
        if cfg.shape_probe:
            _shape_probe(ref, res, cfg, task, _probe_candidate(cnd, cfg, io, grow), grow, max_bytes)
        res.message = f"correct on {len(seeds.correctness)} fresh input sets"
        raise _Stop(res)
    timing: dict[str, Any] = {"cmd": "time", "seeds": seeds.timing, "n_warmup": cfg.n_warmup, "n_timed": cfg.n_timed,
                              "max_cv": cfg.max_cv, "max_rounds": cfg.max_rounds}
    if cfg.fresh_timing_inputs:
        timing["fresh_seed"] = secrets.randbits(62)
    cmsg = {**timing, "out_dir": str(io), "checked": cfg.n_checked_timed}
    reply = _ask(cnd, res, cmsg, cfg.timing_timeout, "timing")
    _guard(res, reply, cfg, "timed calls")
    res.timing = TimingStats.from_dict(reply["stats"])
    if cfg.side_stream_guard and cfg.device == "cuda" and side_stream_suspect(reply["stats"]):
        _retime_synced(cnd, res, cfg, cmsg)
    # after timing: a candidate that fails on the grown inputs may leave its CUDA context unusable.
    # It runs them while the reference checks the timed outputs; the baselines, timed, come after.
    # The reference's runs for the checked timed calls come first, so that only the compares
    # (one output at a time on the device) share the GPU with the candidate's doubled inputs.
    _timed_references(ref, res, cfg, reply["outputs"], timing)
    if cfg.shape_probe:
        _send(cnd, res, _probe_msg(io, grow), "shape_probe")
    _check_timed_outputs(ref, res, cfg, task, reply["outputs"], timing, len(seeds.correctness), max_bytes)
    grown = _probe_reply(cnd.receive(cfg.correctness_timeout, "run")) if cfg.shape_probe else None
    cnd.close()
    _baselines(cfg, res, ref, timing, cache)
    t, te = res.timing.median_ms, res.eager_timing.median_ms if res.eager_timing else None
    tc = res.compile_timing.median_ms if res.compile_timing else te  # compile unusable: eager stands in
    res.time_ms, res.eager_ms, res.compile_ms = t, te, (res.compile_timing.median_ms if res.compile_timing else None)
    res.speedup_vs_eager = te / t if te and t > 0 else None
    res.speedup_vs_compile = tc / t if tc and t > 0 else None
    _speed_of_light(ref, res, cfg, moved, cache)
    res.reward = milestone_reward(True, t, te or float("inf"), tc or float("inf"))
    res.message = f"correct; {t:.4g} ms vs eager {te:.4g} ms and torch.compile {tc:.4g} ms; reward {res.reward}"
    if grown is not None:  # last: the reference may fail on grown inputs, and it is not needed after
        _shape_probe(ref, res, cfg, task, grown, grow, max_bytes)


def _probe_msg(io: Path, grow: dict[str, Any]) -> dict[str, Any]:
    return {"cmd": "run", **grow, "out_dir": str(io), "tag": "grow"}


def _probe_reply(reply: dict[str, Any] | ChildFailure) -> dict[str, Any]:
    """The candidate's output on the shape probe's inputs, or {"error": why}."""
    why = failure(reply)
    return {"error": why} if why is not None else reply["outputs"][0]  # type: ignore[index]


def _probe_candidate(cnd: Child, cfg: EvalConfig, io: Path, grow: dict[str, Any]) -> dict[str, Any]:
    return _probe_reply(cnd.request(_probe_msg(io, grow), cfg.correctness_timeout))


def _verify(cfg: EvalConfig, io: Path, res: EvalResult, task: Task, ref: Child, cnd: Child,
            seeds: list[int], max_bytes: int) -> None:
    """Correctness on every fresh seed, one input set per request so that the reference compares
    set i-1 while the candidate computes and writes set i (the files of large outputs take
    about as long to write as to read back)."""
    pending: int | None = None
    for i, seed in enumerate(seeds):
        _send(cnd, res, {"cmd": "run", "seeds": [seed], "out_dir": str(io), "tag": f"seed{i}"}, "verify")
        if pending is not None:
            _verified(res, _compare_recv(ref, res, cfg), pending)
        reply = _recv(cnd, res, cfg.correctness_timeout, "verify", "run")
        _guard(res, reply, cfg, "correctness runs")
        rec = reply["outputs"][0]
        if rec.get("inputs_mutated"):
            raise _finish(res, Status.INCORRECT, "the candidate modified its input tensors")
        _compare_send(ref, res, task, f"seed#{i}", f"ref#{i}", rec, max_bytes)
        pending = i
    if pending is not None:
        _verified(res, _compare_recv(ref, res, cfg), pending)


def _verified(res: EvalResult, chk: CheckRecord, i: int) -> None:
    if not chk.passed:
        raise _finish(res, Status.INCORRECT, f"wrong output on input set {i}: {chk.message}")


def _shape_probe(ref: Child, res: EvalResult, cfg: EvalConfig, task: Task, cand_rec: dict[str, Any],
                 grow: dict[str, Any], max_bytes: int) -> None:
    """Hardcoded shapes: the candidate must match the reference on one input set whose batch-like
    dimension is doubled (`child.grow_inputs`). Skipped, with a note, when the reference itself
    cannot run such inputs (its shapes are fixed by the task)."""
    why = failure(ref.request({"cmd": "run", **grow, "keep": True, "tag": "grow"}, cfg.correctness_timeout))
    if why is not None:
        res.defences["shape_probe"] = f"skipped: the reference does not run with a doubled leading dimension ({why[:120]})"
        return
    if "error" in cand_rec and "out of memory" in cand_rec["error"].lower():
        # the doubled set may not fit beside the candidate's timing buffers: no verdict either way
        res.defences["shape_probe"] = f"skipped: the candidate ran out of memory on the doubled set ({cand_rec['error'][:120]})"
        return
    if "error" in cand_rec:
        res.defences["shape_probe"] = "failed"
        raise _finish(res, Status.INCORRECT, "the candidate fails on inputs whose leading (batch) dimension is doubled, "
                      f"which the reference handles: {cand_rec['error']}"[:600])
    chk = _compare(ref, res, cfg, task, "shape-probe", "grow#0", cand_rec, 2 * max_bytes)
    res.defences["shape_probe"] = "passed" if chk.passed else "failed"
    if not chk.passed:
        raise _finish(res, Status.INCORRECT, "wrong output when the leading (batch) dimension is doubled "
                      f"(are the shapes hardcoded?): {chk.message}"[:600])


def _sanitize(cand: Candidate, cfg: EvalConfig, tmp: Path, res: EvalResult, setup: dict[str, Any], seed: int) -> None:
    """The opt-in compute-sanitizer lane (module `sanitize`): a fresh candidate child per check,
    under the tool and inside the same sandbox, loads the candidate and runs one input set."""
    tool = sanitize_mod.find_tool()
    stand_in = bool(os.environ.get(sanitize_mod.OVERRIDE))  # the tests' stand-in tool runs on the CPU lane
    if (cfg.device != "cuda" and not stand_in) or tool is None:
        res.defences["sanitize"] = "unavailable: " + ("compute-sanitizer not found" if tool is None else "no CUDA device")
        res.findings.append(Finding("sanitizer-unavailable", res.defences["sanitize"], Severity.WARN))
        return
    box, _ = sandbox_mod.for_config(cfg)
    env = {**child_env(cand.task.precision), "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    done = []
    with ExitStack() as stack:
        logs = log_dir(stack)
        for check in sanitize_mod.CHECKS:
            done.append(_sanitize_one(cand, cfg, tmp, res, setup, seed, tool, box, env, logs, check))
    res.defences["sanitize"] = ", ".join(done)


def _sanitize_one(cand: Candidate, cfg: EvalConfig, tmp: Path, res: EvalResult, setup: dict[str, Any], seed: int,
                  tool: str, box: Any, env: dict[str, str], logs: Path, check: str) -> str:
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
        for msg in (setup, {"cmd": "run", "seeds": [seed], "out_dir": str(rw[0])}):
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
        raise _finish(res, Status.RUNTIME_ERROR, f"sanitize ({check}): the candidate failed under "
                      f"compute-sanitizer: {failed}"[:600], (text[-2000:] + "\n" + log)[-4000:])
    if found.errors is None:
        res.findings.append(Finding(f"sanitizer-{check}", "the sanitizer wrote no summary", Severity.WARN))
        return f"{check} no summary"
    if found.errors > 0:
        detail = "; ".join(found.excerpt)[:400]
        res.findings.append(Finding(f"sanitizer-{check}", f"{found.errors} error(s): {detail}", Severity.REJECT))
        raise _finish(res, Status.REJECTED,
                      f"rejected by rule sanitizer-{check}: {found.errors} error(s) under compute-sanitizer: {detail}"[:600],
                      text[-4000:])
    return f"{check} clean"


def _guard(res: EvalResult, reply: dict[str, Any], cfg: EvalConfig, where: str) -> None:
    if not cfg.runtime_guards:
        return
    found = runtime_findings(reply.get("guard"), where)
    res.findings += found
    if found:
        f = found[0]
        raise _finish(res, Status.REJECTED, f"rejected by rule {f.rule}: {f.message}"[:600])


def _retime_synced(cnd: Child, res: EvalResult, cfg: EvalConfig, cmsg: dict[str, Any]) -> None:
    """Host time well above event time: work escaped the timed stream. Time it again with a
    device synchronize before the end event; those numbers count (a warning says why)."""
    assert res.timing is not None
    first = res.timing
    reply = cnd.request({**cmsg, "sync_before_end": True, "checked": 0}, cfg.timing_timeout)
    if (why := failure(reply)) is not None:
        raise _finish(res, Status.RUNTIME_ERROR, f"re-timing with a device synchronize failed: {why}"[:600])
    res.timing = TimingStats.from_dict(reply["stats"])
    res.findings.append(Finding(
        "side-stream-work",
        f"host time was {first.host_over_event:.2f}x the event time ({first.probe_ms or first.median_ms:.4g} ms by events): work ran "
        f"outside the timed stream; re-timed with a device synchronize before the end event: {res.timing.median_ms:.4g} ms counts",
        Severity.WARN))


def _timed_references(ref: Child, res: EvalResult, cfg: EvalConfig, outputs: list[dict[str, Any]],
                      timing: dict[str, Any]) -> None:
    """With fresh timing inputs: the reference's outputs for the checked timed calls, kept as tref#i."""
    if "fresh_seed" not in timing:
        return  # the timing sets' references were computed with the correctness seeds
    calls = [rec.get("call") for rec in outputs]
    if len(outputs) < min(cfg.n_checked_timed, 1) or not all(isinstance(g, int) and g >= 0 for g in calls):
        raise _finish(res, Status.INCORRECT, "the candidate returned no usable outputs for the checked timed calls")
    seeds = [derive_seed(timing["fresh_seed"], g) for g in calls]
    _ask(ref, res, {"cmd": "run", "seeds": seeds, "keep": True, "tag": "tref"}, cfg.correctness_timeout, "reference")


def _check_timed_outputs(ref: Child, res: EvalResult, cfg: EvalConfig, task: Task, outputs: list[dict[str, Any]],
                         timing: dict[str, Any], n_seeds: int, max_bytes: int) -> None:
    if "fresh_seed" not in timing:
        for i, rec in enumerate(outputs):
            chk = _compare(ref, res, cfg, task, f"timed#{i}", f"ref#{n_seeds + i}", rec, max_bytes)
            if not chk.passed:
                raise _finish(res, Status.INCORRECT, f"wrong output during timing (input set {i}): {chk.message}")
        return
    calls = [rec.get("call") for rec in outputs]  # checked by _timed_references
    for i, (g, rec) in enumerate(zip(calls, outputs, strict=True)):
        chk = _compare(ref, res, cfg, task, f"timed#{g}", f"tref#{i}", rec, max_bytes)
        if not chk.passed:
            raise _finish(res, Status.INCORRECT, f"wrong output on timed call {g} (fresh inputs): {chk.message}")


def _speed_of_light(ref: Child, res: EvalResult, cfg: EvalConfig, moved: int, cache: KVCache | None) -> None:
    bw = cfg.bandwidth or sol.bandwidth_for(res.gpu)
    key = f"bandwidth/{res.gpu}/{cfg.device}"
    if bw is None and cache is not None and (hit := cache.get(key)) is not None:
        bw = hit.get("bytes_per_s")
    if bw is None:
        reply = ref.request({"cmd": "bandwidth", "nbytes": (1 << 30) if cfg.device == "cuda" else (64 << 20)}, cfg.baseline_timeout)
        bw = reply.get("bytes_per_s") if failure(reply) is None else None
        if bw and cache is not None:
            cache.put(key, {"bytes_per_s": bw})
    if not bw or not moved or res.time_ms is None:
        res.defences["speed_of_light"] = "unknown"
        return
    floor = sol.floor_ms(moved, bw)
    res.defences["speed_of_light"] = f"{floor:.4g} ms floor"
    if (f := sol.finding(res.time_ms, floor, moved, bw)) is not None:
        res.findings.append(f)


def _baselines(cfg: EvalConfig, res: EvalResult, ref: Child, timing: dict[str, Any], cache: KVCache | None) -> None:
    key = (f"baseline/{res.task_hash}/{res.gpu}/{res.torch}/{res.precision}/{cfg.compile_baseline}/"
           f"{cfg.n_timing_sets}x{cfg.n_timed}/{cfg.max_cv}/{TIMING_PROTOCOL}" + ("/fresh" if "fresh_seed" in timing else ""))
    hit = cache.get(key) if cache is not None else None
    if hit is not None:
        res.eager_timing = TimingStats.from_dict(hit["eager"])
        res.compile_timing = TimingStats.from_dict(hit["compile"]) if hit.get("compile") else None
        res.cache["baselines"] = True
        return
    res.cache["baselines"] = False
    res.eager_timing = TimingStats.from_dict(_ask(ref, res, timing, cfg.baseline_timeout, "baseline_eager")["stats"])
    if not cfg.compile_baseline:
        return
    reply = ref.request({**timing, "compiled": True}, cfg.baseline_timeout)
    if (why := failure(reply)) is None:
        res.compile_timing = TimingStats.from_dict(reply["stats"])
    else:
        res.findings.append(Finding("compile-baseline-failed", f"torch.compile of the reference failed ({why}); eager stands in", Severity.WARN))
    if cache is not None and res.compile_timing is not None:  # a failed compile may be transient: retry next time
        cache.put(key, {"eager": res.eager_timing.__dict__, "compile": res.compile_timing.__dict__})
