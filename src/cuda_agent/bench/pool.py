"""The evaluation pool: one job API over local worker processes or a Ray cluster.

Contract:
- `EvalJob` names one evaluation: a task plus a candidate given as a
  workspace directory (`workdir`), a snapshot of the agent-written files
  (`sources`: relative path -> text, e.g. model_new.py, kernels/x.cu), or a
  KernelBench single-file solution (`solution`); a phase and an `EvalConfig`.
  `run_job(job)` evaluates it in the calling process (the trusted evaluator
  spawns its own children as always).
- `pool.submit(job)` returns a `concurrent.futures.Future[EvalResult]`. A
  candidate's failure is a result; the future raises only for a harness
  failure (a worker process died, a bug), and then only that job's future.
- `LocalPool`: one worker process per device slot (per visible GPU, each
  started with CUDA_VISIBLE_DEVICES set to its GPU, so one exclusive GPU per
  evaluation) plus a CPU compile farm (workers with no GPU visible). A
  workspace job for verify/profile is first built on the farm (phase
  "compile"); it reaches a GPU slot only after that, and its own build is then
  a build-cache hit, so GPUs never wait on nvcc. A candidate that fails there
  (compile error, rejected by static checks, compile timeout) gets that
  result and never takes a GPU. Compile-only jobs run on the farm only.
- `RayPool` (`--ray` or RAY_ADDRESS): the same jobs as Ray tasks. GPU phases
  declare num_gpus=1 (Ray sets CUDA_VISIBLE_DEVICES); compile phases
  num_gpus=0. Jobs travel as source snapshots with the task, so no path on
  the submitting machine is needed; the compile-ahead task's object ref is an
  argument of the GPU task, so Ray orders them.
- Both share the evaluator's caches under cache_root(): build objects,
  baselines and whole results (cuda_agent.eval.cache).

Not guaranteed: with Ray across machines the build cache helps the GPU task
only if CUDA_AGENT_CACHE points to a shared filesystem (otherwise the GPU task
rebuilds; results are the same). Compile-only results computed on a machine
without a GPU carry status no_gpu. Killing the pool's parent does not wait
for evaluations in flight; their children die with their process groups.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import queue
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cuda_agent.eval.config import EvalConfig, Phase
from cuda_agent.eval.result import EvalResult, Status
from cuda_agent.task.taskfile import Task

# statuses of a compile-phase result after which running on a GPU cannot help
GATE_STATUSES = (Status.COMPILE_ERROR, Status.REJECTED, Status.TIMEOUT)


class HarnessError(RuntimeError):
    """The pool could not run a job (worker died, bad job): not the candidate's fault."""


@dataclass
class EvalJob:
    task: Task | None = None
    workdir: Path | None = None
    sources: dict[str, str] | None = None
    solution: Path | None = None
    phase: Phase = "profile"
    config: EvalConfig = field(default_factory=EvalConfig)
    label: str = ""

    @property
    def kind(self) -> str:
        return "single_file" if self.solution is not None else "workspace"

    def validate(self) -> None:
        given = [x is not None for x in (self.workdir, self.sources, self.solution)]
        if sum(given) != 1:
            raise HarnessError("an EvalJob needs exactly one of workdir, sources, solution")
        if (self.sources is not None or self.solution is not None) and self.task is None:
            raise HarnessError("an EvalJob with sources or a solution file needs its task")

    def with_phase(self, phase: Phase) -> EvalJob:
        return dataclasses.replace(self, phase=phase, config=dataclasses.replace(self.config))


def run_job(job: EvalJob) -> EvalResult:
    """Evaluate one job here and now (inside a pool worker, or directly)."""
    from cuda_agent.eval.api import evaluate_single_file, evaluate_workspace

    job.validate()
    cfg = dataclasses.replace(job.config)
    if job.solution is not None:
        return evaluate_single_file(job.task, job.solution, phase=job.phase, config=cfg)  # type: ignore[arg-type]
    if job.workdir is not None:
        return evaluate_workspace(job.workdir, task=job.task, phase=job.phase, config=cfg)
    from cuda_agent.task.workspace import init_workspace

    tmp = tempfile.mkdtemp(prefix="cuda-agent-job-")
    try:
        ws = init_workspace(job.task, Path(tmp) / "ws")  # type: ignore[arg-type]
        for rel, text in (job.sources or {}).items():
            p = ws / rel
            if ".." in Path(rel).parts or Path(rel).is_absolute():
                raise HarnessError(f"source path outside the workspace: {rel}")
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        return evaluate_workspace(ws, task=job.task, phase=job.phase, config=cfg)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_gated(job: EvalJob, compiled: EvalResult | None) -> EvalResult:
    """Run `job` unless its compile-ahead result already settles it."""
    if compiled is not None and compiled.status in GATE_STATUSES:
        return compiled
    return run_job(job)


class Pool(Protocol):
    def submit(self, job: EvalJob) -> Future[EvalResult]: ...
    def close(self, cancel: bool = False) -> None: ...


def visible_gpus() -> list[str]:
    """GPU ids this process may use: CUDA_VISIBLE_DEVICES if set, else nvidia-smi -L."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip() and g.strip() != "-1"]
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


def gpu_arch() -> str | None:
    """The compute capability of GPU 0 ("9.0") without initialising CUDA here, so the
    farm builds for the same architecture as the GPU slots (same build-cache keys)."""
    from cuda_agent.eval.gpu import arch_from_env

    if a := arch_from_env():
        return a
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0] if out and out[0].replace(".", "").isdigit() else None


def _init_worker(env: dict[str, str]) -> None:
    os.environ.update(env)


def _executor(n: int, env: dict[str, str]) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_worker, initargs=(env,))


class LocalPool:
    def __init__(self, slots: int | None = None, *, device: str = "cuda", compile_workers: int | None = None,
                 compile_ahead: bool = True, arch: str | None = None):
        gpus = visible_gpus() if device == "cuda" else []
        n = slots if slots is not None else max(1, len(gpus))
        if device == "cuda" and gpus and n > len(gpus):
            raise ValueError(f"{n} GPU workers asked for, {len(gpus)} GPU(s) visible")
        self.arch = arch or (gpu_arch() if device == "cuda" else None)
        self.compile_ahead = compile_ahead
        self._envs = [{"CUDA_VISIBLE_DEVICES": gpus[i]} if gpus else {} for i in range(n)]
        self._slots = [_executor(1, e) for e in self._envs]
        n_farm = compile_workers if compile_workers is not None else max(1, min(8, (os.cpu_count() or 2) // 2))
        self._n_farm = n_farm
        self._farm = _executor(n_farm, {"CUDA_VISIBLE_DEVICES": ""})
        self._queue: queue.Queue[tuple[EvalJob, Future[EvalResult]] | None] = queue.Queue()
        self._threads = [threading.Thread(target=self._serve, args=(i,), daemon=True, name=f"pool-slot-{i}") for i in range(n)]
        for t in self._threads:
            t.start()
        self._closed = False

    @property
    def n_slots(self) -> int:
        return len(self._slots)

    def submit(self, job: EvalJob) -> Future[EvalResult]:
        if self._closed:
            raise RuntimeError("pool is closed")
        job.validate()
        if self.arch and job.config.arch is None:
            job = dataclasses.replace(job, config=dataclasses.replace(job.config, arch=self.arch))
        out: Future[EvalResult] = Future()
        if job.kind == "workspace" and job.phase == "compile":
            self._chain(self._farm.submit(run_job, job), out, None)
        elif job.kind == "workspace" and self.compile_ahead:
            self._chain(self._farm.submit(run_job, job.with_phase("compile")), out, job)
        else:
            self._queue.put((job, out))
        return out

    def _chain(self, inner: Future[EvalResult], out: Future[EvalResult], then: EvalJob | None) -> None:
        def done(f: Future[EvalResult]) -> None:
            err = f.exception()
            if then is None:
                if err is not None:
                    out.set_exception(_harness(err))
                else:
                    out.set_result(f.result())
                return
            if err is None and f.result().status in GATE_STATUSES:
                out.set_result(f.result())
            else:  # a farm failure is not fatal: the GPU slot builds by itself
                self._queue.put((then, out))
            if isinstance(err, BrokenProcessPool):
                self._farm = _executor(self._n_farm, {"CUDA_VISIBLE_DEVICES": ""})

        inner.add_done_callback(done)

    def _serve(self, i: int) -> None:
        while (item := self._queue.get()) is not None:
            job, out = item
            if not out.set_running_or_notify_cancel():
                continue
            try:
                out.set_result(self._slots[i].submit(run_job, job).result())
            except BrokenProcessPool as e:
                self._slots[i] = _executor(1, self._envs[i])
                out.set_exception(_harness(e))
            except BaseException as e:  # noqa: BLE001 - travels to the caller through the future
                out.set_exception(e)

    def close(self, cancel: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        if cancel:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[1].cancel()
        self._farm.shutdown(wait=not cancel, cancel_futures=cancel)
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join(timeout=None if not cancel else 1)
        for ex in self._slots:
            ex.shutdown(wait=not cancel, cancel_futures=cancel)

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close(cancel=exc[0] is not None)


def _harness(err: BaseException) -> BaseException:
    if isinstance(err, BrokenProcessPool):
        return HarnessError(f"evaluation worker process died: {err}")
    return err


def portable(job: EvalJob) -> EvalJob:
    """The same job as a task plus a source snapshot, so it can run on another machine."""
    from cuda_agent.task.workspace import find_task, read_agent_sources

    job.validate()
    if job.workdir is None:
        return job
    task = job.task or find_task(Path(job.workdir))[0]
    return dataclasses.replace(job, task=task, workdir=None, sources=read_agent_sources(Path(job.workdir)))


class RayPool:
    def __init__(self, address: str | None = None, *, compile_ahead: bool = True, **init_kwargs: Any):
        try:
            import ray
        except ImportError:
            raise HarnessError("the Ray backend needs ray (pip install 'cuda-agent[ray]')") from None
        self._ray = ray
        if not ray.is_initialized():
            ray.init(address=address or os.environ.get("RAY_ADDRESS") or None, **init_kwargs)
        self.compile_ahead = compile_ahead
        self._fn = ray.remote(run_gated)

    def _opts(self, job: EvalJob) -> Any:
        gpu = job.config.device == "cuda" and job.phase != "compile"
        return self._fn.options(num_gpus=1 if gpu else 0, num_cpus=1, max_retries=0)

    def submit(self, job: EvalJob) -> Future[EvalResult]:
        job = portable(job)
        compiled = None
        if job.kind == "workspace" and job.phase != "compile" and self.compile_ahead:
            first = job.with_phase("compile")
            compiled = self._opts(first).remote(first, None)
        return self._opts(job).remote(job, compiled).future()

    def close(self, cancel: bool = False) -> None:
        pass  # the cluster outlives the pool; ray.shutdown() is the caller's choice

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def make_pool(*, ray: bool = False, slots: int | None = None, device: str = "cuda",
              compile_workers: int | None = None) -> LocalPool | RayPool:
    if ray or os.environ.get("RAY_ADDRESS"):
        return RayPool()
    return LocalPool(slots, device=device, compile_workers=compile_workers)
