"""Public entry points of the evaluator.

Contract: `evaluate_workspace` and `evaluate_single_file` never raise for
anything a candidate does; they return an `EvalResult`. They raise `TaskError`
(or `FileNotFoundError`) for bad input from the user (missing files, a file
that is not a task), and other exceptions only for bugs in the harness.
`render_text` turns a result into the readable text the agent's tools return.
"""

from __future__ import annotations

from pathlib import Path

from cuda_agent.eval.config import EvalConfig, Phase
from cuda_agent.eval.judge.result import EvalResult
from cuda_agent.task.taskfile import Task


def evaluate_workspace(
    workdir: str | Path,
    *,
    task: Task | None = None,
    phase: Phase = "profile",
    config: EvalConfig | None = None,
) -> EvalResult:
    from cuda_agent.eval.pipeline import run_workspace

    cfg = config or EvalConfig()
    cfg.phase = phase
    return run_workspace(Path(workdir), task, cfg)


def evaluate_single_file(
    task: Task,
    solution: str | Path,
    *,
    phase: Phase = "profile",
    config: EvalConfig | None = None,
) -> EvalResult:
    """A KernelBench single-file solution (ModelNew built with load_inline)."""
    from cuda_agent.eval.pipeline import run_single_file

    cfg = config or EvalConfig()
    cfg.phase = phase
    return run_single_file(task, Path(solution), cfg)


def render_text(result: EvalResult) -> str:
    from cuda_agent.eval.judge.render import result_text

    return result_text(result)
