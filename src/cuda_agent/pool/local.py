"""The evaluation pool: one job API over local worker processes or a Ray cluster.

Contract:
- Jobs: `cuda_agent.pool.jobs.EvalJob` (a task plus a workdir, a source
  snapshot or a single-file solution; a phase; an EvalConfig).
- `pool.submit(job)` returns a `concurrent.futures.Future[EvalResult]`. A
  candidate's failure is a result; the future raises only for a harness
  failure (a worker process died, a bug), and then only that job's future.
- `LocalPool`: one worker process per device slot (`per_gpu` slots per
  visible GPU, default 1, each started with CUDA_VISIBLE_DEVICES set to its
  GPU; slots sharing a GPU overlap their untimed work and take turns timing,
  through eval.timing.gpu_lock) plus a CPU compile farm (workers with no GPU visible). A
  workspace job for verify/profile is first built on the farm (phase
  "compile"); it reaches a GPU slot only after that, and its own build is then
  a build-cache hit, so GPUs never wait on nvcc. A candidate that fails there
  (compile error, rejected by static checks, compile timeout) gets that
  result and never takes a GPU. Compile-only jobs run on the farm only.
  GPU slots evaluate with `spare_children` (eval.channel.children): each keeps the next
  job's two children starting while it finishes the current one.
- `make_pool(ray=True)` or RAY_ADDRESS: `ray_pool.RayPool`, the same jobs as
  Ray tasks with GPU resources declared per task.
- Both share the evaluator's caches under cache_root(): build objects,
  baselines and whole results (cuda_agent.eval.judge.cache).
- A `jobs.CallJob` (device work that is not an evaluation) runs on call
  workers: per visible GPU, round(1 / job.gpu_fraction) processes with only
  that GPU visible (created on first use); on a CPU pool, `call_workers`
  processes with no GPU visible. Its future holds whatever `job.run()`
  returned. Call workers and GPU slots are not coordinated: a call job that
  times something must guard that itself (the synthesis filter takes a
  per-GPU file lock).

Not guaranteed: Killing the pool's parent does not wait
for evaluations in flight; their children die with their process groups.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import subprocess
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

from cuda_agent.eval.judge.result import EvalResult
from cuda_agent.pool.jobs import GATE_STATUSES, CallJob, EvalJob, HarnessError, run_any, run_job
from cuda_agent.pool.spawn import executor

__all__ = ["EvalJob", "HarnessError", "LocalPool", "Pool", "make_pool", "run_job", "visible_gpus"]


class Pool(Protocol):
    def submit(self, job: EvalJob) -> Future[EvalResult]: ...
    def submit_call(self, job: CallJob) -> Future[Any]: ...
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
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0] if out and out[0].replace(".", "").isdigit() else None


def _stop_workers(ex: ProcessPoolExecutor) -> None:
    """Kill an executor's worker processes: a cancelled pool must not wait for running jobs (an
    evaluation's children and compilers run in their own process groups and end with their pipes)."""
    for proc in list((getattr(ex, "_processes", None) or {}).values()):
        with contextlib.suppress(OSError, AttributeError):
            proc.kill()


# Evaluations per GPU where a caller does not say (bench, RL scoring): on one H200 (the throughput mix
# of benchmarks/eval_throughput.py) 3 ran 1.83-1.92x the serial rate (2026-12-03), 2.34x with every
# baseline cached (2026-12-04: 1,872 vs 800 evaluations per GPU-hour) and 2.46x once timing rounds were
# bounded by the p10-p90 spread (905c952: 2,145 vs 871), each honest candidate's median time within
# 0.5 % of its serial one; 4 was no better in a short run (1.64x).
DEFAULT_PER_GPU = 3


class LocalPool:
    def __init__(
        self,
        slots: int | None = None,
        *,
        device: str = "cuda",
        compile_workers: int | None = None,
        compile_ahead: bool = True,
        arch: str | None = None,
        call_workers: int | None = None,
        per_gpu: int = 1,
    ):
        gpus = visible_gpus() if device == "cuda" else []
        self._gpus = gpus
        self._call_workers = call_workers
        self._calls: list[ProcessPoolExecutor] = []
        self._call_envs: list[dict[str, str]] = []
        self._call_next = 0
        self._call_per = 1
        self._call_lock = threading.Lock()
        if per_gpu < 1:
            raise ValueError(f"per_gpu must be at least 1, got {per_gpu}")
        n = slots if slots is not None else max(1, len(gpus))
        if device == "cuda" and gpus and n > len(gpus):
            raise ValueError(f"{n} GPU workers asked for, {len(gpus)} GPU(s) visible")
        self.arch = arch or (gpu_arch() if device == "cuda" else None)
        self.compile_ahead = compile_ahead
        # per_gpu slots share each GPU: their untimed work overlaps, their timings take turns (gpu_lock)
        self.per_gpu = per_gpu
        self._envs = [{"CUDA_VISIBLE_DEVICES": gpus[i]} if gpus else {} for i in range(n) for _ in range(per_gpu)]
        n = len(self._envs)
        self._slots = [executor(1, e) for e in self._envs]
        n_farm = compile_workers if compile_workers is not None else max(1, min(8, (os.cpu_count() or 2) // 2))
        self._n_farm = n_farm
        self._farm = executor(n_farm, {"CUDA_VISIBLE_DEVICES": ""})
        self._closed = False
        self.stats = {"farm": 0, "slot": 0, "gated": 0}  # jobs run on the farm, on device slots; GPU runs saved
        self._queue: queue.Queue[tuple[EvalJob, Future[EvalResult]] | None] = queue.Queue()
        self._threads = [
            threading.Thread(target=self._serve, args=(i,), daemon=True, name=f"pool-slot-{i}") for i in range(n)
        ]
        for t in self._threads:
            t.start()

    @property
    def n_slots(self) -> int:
        return len(self._slots)

    def submit(self, job: EvalJob) -> Future[EvalResult]:
        if self._closed:
            raise RuntimeError("pool is closed")
        job.validate()
        if self.arch and job.config.arch is None:
            job = dataclasses.replace(job, config=dataclasses.replace(job.config, arch=self.arch))
        if self._envs and self._envs[0] and not job.config.spare_children:
            # a GPU slot is a long-lived process: its next pair of children warms while this job ends
            job = dataclasses.replace(job, config=dataclasses.replace(job.config, spare_children=True))
        out: Future[EvalResult] = Future()
        if job.kind == "workspace" and job.phase == "compile":
            self._chain(self._farm.submit(run_job, job), out, None)
        elif job.kind == "workspace" and self.compile_ahead:
            self._chain(self._farm.submit(run_job, job.with_phase("compile")), out, job)
        else:
            self._queue.put((job, out))
        return out

    def submit_call(self, job: CallJob) -> Future[Any]:
        """Run a call job on a call worker (see the module docstring)."""
        if self._closed:
            raise RuntimeError("pool is closed")
        job.validate()
        with self._call_lock:
            if not self._calls:
                if self._gpus and job.device == "cuda":
                    per_gpu = self._call_workers or max(1, round(1 / max(job.gpu_fraction, 1e-3)))
                    self._call_envs = [{"CUDA_VISIBLE_DEVICES": g} for g in self._gpus]
                else:
                    per_gpu = self._call_workers or max(1, (os.cpu_count() or 2) // 2)
                    self._call_envs = [{"CUDA_VISIBLE_DEVICES": ""}]
                self._call_per = per_gpu
                self._calls = [executor(per_gpu, e) for e in self._call_envs]
            i = self._call_next % len(self._calls)
            self._call_next += 1
            inner = self._calls[i].submit(run_any, job)
        out: Future[Any] = Future()

        def done(f: Future[Any]) -> None:
            err = f.exception()
            if err is None:
                out.set_result(f.result())
                return
            if isinstance(err, BrokenProcessPool):
                with self._call_lock:
                    if self._calls and not self._closed:
                        self._calls[i] = executor(self._call_per, self._call_envs[i])
            out.set_exception(_harness(err))

        inner.add_done_callback(done)
        return out

    def _chain(self, inner: Future[EvalResult], out: Future[EvalResult], then: EvalJob | None) -> None:
        def done(f: Future[EvalResult]) -> None:
            self.stats["farm"] += 1
            err = f.exception()
            if then is None:
                if err is not None:
                    out.set_exception(_harness(err))
                else:
                    out.set_result(f.result())
                return
            if err is None and f.result().status in GATE_STATUSES:
                self.stats["gated"] += 1
                out.set_result(f.result())
            else:  # a farm failure is not fatal: the GPU slot builds by itself
                self._queue.put((then, out))
            if isinstance(err, BrokenProcessPool):
                self._farm = executor(self._n_farm, {"CUDA_VISIBLE_DEVICES": ""})

        inner.add_done_callback(done)

    def _serve(self, i: int) -> None:
        while (item := self._queue.get()) is not None:
            job, out = item
            if not out.set_running_or_notify_cancel():
                continue
            self.stats["slot"] += 1
            try:
                out.set_result(self._slots[i].submit(run_job, job).result())
            except BrokenProcessPool as e:
                self._slots[i] = executor(1, self._envs[i])
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
        if cancel:
            for ex in (self._farm, *self._slots):
                _stop_workers(ex)
        self._farm.shutdown(wait=not cancel, cancel_futures=cancel)
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join(timeout=None if not cancel else 1)
        for ex in [*self._slots, *self._calls]:
            ex.shutdown(wait=not cancel, cancel_futures=cancel)

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close(cancel=exc[0] is not None)


def _harness(err: BaseException) -> BaseException:
    if isinstance(err, BrokenProcessPool):
        return HarnessError(f"evaluation worker process died: {err}")
    return err


def make_pool(
    *,
    ray: bool = False,
    slots: int | None = None,
    device: str = "cuda",
    compile_workers: int | None = None,
    call_workers: int | None = None,
    per_gpu: int = 1,
) -> Pool:
    if ray or os.environ.get("RAY_ADDRESS"):
        from cuda_agent.pool.ray_pool import RayPool

        return RayPool()
    return LocalPool(slots, device=device, compile_workers=compile_workers, call_workers=call_workers, per_gpu=per_gpu)
