"""`cuda-agent lint-task TASK.py`: negative controls that a weak task would accept.

Runs zeros, a constant, pass-through of the first input, another seed's output and an
output precomputed for one fixed input set through the evaluator's reference child and
comparison (`cuda_agent.eval.checks.lint_task`). Per control: PASSES (the evaluator would accept
it), WEAK (the paper's elementwise rule alone accepts it, or it misses that rule by less than
2x: a near miss), or fails. Exit 0 when no control is weak, 1 when any is (the task should be
fixed or dropped), 2 for bad input (or no GPU with --device cuda). The first line says the
precision and tolerances the controls are compared with, and where the precision came from
(`Task.describe_precision`); with --json those are the report's `precision`, `precision_source`,
`atol` and `rtol`.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from cuda_agent.cli.argtypes import positive_int
from cuda_agent.cli.main import UsageError
from cuda_agent.cli.phase_display import enabled_for, showing_phases

if TYPE_CHECKING:
    from cuda_agent.eval.checks.lint_task import LintReport

HELP = "run negative controls (zeros, constant, pass-through, other seed, precomputed) against a task"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", help="a task file (class Model, get_inputs, get_init_inputs)")
    parser.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default="cuda",
        help="where the reference runs (cpu: for tests and machines without a GPU)",
    )
    parser.add_argument("--seeds", type=positive_int, default=5, help="input sets per control (default 5)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from cuda_agent.eval.checks.lint_task import lint_task
    from cuda_agent.task.taskfile import Task

    task = Task.from_file(args.task)
    if not args.json:
        print(task.describe_precision(), flush=True)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("no CUDA GPU is visible; use --device cpu")
    with showing_phases("lint-task", enabled_for(args.json)):
        report = lint_task(task, device=args.device, n_seeds=args.seeds)
    if report.error:
        if args.json:
            print(json.dumps(report.to_dict(), indent=2))
        raise UsageError(f"the task could not be run: {report.error}")
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        for name, c in report.controls.items():
            print(f"{_verdict(c):7} {name:13} {c['message']}")
        print(f"{task.name}: " + _summary(report))
    return 1 if report.weak else 0


def _verdict(c: dict[str, Any]) -> str:
    from cuda_agent.eval.shared.negative_controls import is_weak

    if c["passes"]:
        return "PASSES"
    if is_weak(c):
        return "WEAK"
    return "fails" if c["applicable"] else "n/a"


def _summary(report: LintReport) -> str:
    if report.passing:
        return f"weak, {len(report.passing)} control(s) pass the evaluator's check: {', '.join(report.passing)}"
    if report.weak:
        return (
            f"weak, {len(report.weak)} control(s) pass or nearly pass the paper's elementwise rule: "
            f"{', '.join(report.weak)} (the evaluator's relative-L2 check rejects them; other harnesses would not)"
        )
    return "no negative control passes or comes near"
