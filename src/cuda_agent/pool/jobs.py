"""One evaluation job of the pool, and how a worker runs it.

Contract: `EvalJob` names one evaluation: a task plus a candidate given as a
workspace directory (`workdir`), a snapshot of the agent-written files
(`sources`: relative path -> text, e.g. model_new.py, kernels/x.cu), or a
KernelBench single-file solution (`solution`); a phase and an `EvalConfig`.
`run_job(job)` evaluates it in the calling process (the trusted evaluator
spawns its own children as always) and, like the evaluator, returns a result
for anything the candidate does; it raises `HarnessError` for a malformed job.
`run_gated(job, compiled)` skips the run when a compile-ahead result already
settles it (compile error, rejected, compile timeout). `portable(job)` turns a
workdir job into task + sources so it can run on another machine.
`CallJob` is the other kind of job: not an evaluation of a candidate but a
self-contained piece of device work defined by a higher layer (task
synthesis's filter checks, `cuda_agent.synth.device_job`). The pool only calls
its `run()` in a worker that sees the job's device; `gpu_fraction` says how
many such jobs may share one GPU (0.125: eight at once). `run_any(job)` runs
either kind.
Not guaranteed: a snapshot carries only agent-writable files; tampering with
protected files of the workspace is then invisible (and harmless: the
pristine task is used).
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cuda_agent.eval.config import EvalConfig, Phase
from cuda_agent.eval.judge.result import EvalResult, Status
from cuda_agent.task.taskfile import Task

# statuses of a compile-phase result after which running on a GPU cannot help (env_error: the
# machine cannot build; the GPU slot would fail the same way)
GATE_STATUSES = (Status.COMPILE_ERROR, Status.REJECTED, Status.TIMEOUT, Status.ENV_ERROR)


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


@runtime_checkable
class CallJob(Protocol):
    """Device work that is not an evaluation; see the module docstring. Must be picklable."""

    label: str
    device: str  # "cuda": runs in a worker with one GPU visible; "cpu": with none
    gpu_fraction: float  # share of one GPU a job takes (1.0: exclusive)

    def validate(self) -> None: ...

    def run(self) -> Any: ...


def run_any(job: EvalJob | CallJob) -> Any:
    """Run an evaluation job or a call job here (what a pool worker does with either)."""
    return run_job(job) if isinstance(job, EvalJob) else job.run()


def run_job(job: EvalJob) -> EvalResult:
    """Evaluate one job here and now (inside a pool worker, or directly)."""
    from cuda_agent.eval.api import evaluate_single_file, evaluate_workspace

    job.validate()
    # an unstable timing is looked at once more (pool jobs feed benchmarks and rewards)
    cfg = dataclasses.replace(job.config, retry_unstable=max(job.config.retry_unstable, 1))
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


def portable(job: EvalJob) -> EvalJob:
    """The same job as a task plus a source snapshot, so it can run on another machine."""
    from cuda_agent.task.workspace import find_task, read_agent_sources

    job.validate()
    if job.workdir is None:
        return job
    task = job.task or find_task(Path(job.workdir))[0]
    return dataclasses.replace(job, task=task, workdir=None, sources=read_agent_sources(Path(job.workdir)))
