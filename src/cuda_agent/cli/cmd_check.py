"""`cuda-agent check WORKDIR`: the static checks, without building or running anything.

Checks a workspace's agent files (model_new.py, kernels/) with
`cuda_agent.eval.checks.static.check_sources` and adds the protected-file findings that staging
reports (a modified model.py, binding.cpp, ...). A path to a `.py` file is treated as a
KernelBench single-file solution and checked with `check_single_file`.
Exit 0 when nothing is rejected (warnings are printed but do not fail), 1 when a finding rejects
the candidate, 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from cuda_agent.cli.main import UsageError
from cuda_agent.eval.checks.gate import static_findings, workspace_findings
from cuda_agent.eval.judge.result import Finding, Severity
from cuda_agent.task.taskfile import Task
from cuda_agent.task.workspace import stage

HELP = "static checks of a workspace or single-file solution for rule violations and known hacks"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workdir", help="a workspace directory, or a KernelBench single-file solution (.py)")
    parser.add_argument("--json", action="store_true", help="print the findings as a JSON list")
    parser.add_argument("--task", metavar="TASK.py", help="the task file (default: the task recorded in the workspace)")


def collect(path: Path, task: Task | None) -> list[Finding]:
    if path.is_file():
        if path.suffix != ".py":
            raise UsageError(f"{path}: expected a workspace directory or a .py single-file solution")
        precision, source = (task.precision, task.precision_source) if task else ("fp32", "default: no --task given")
        text = path.read_text(errors="replace")
        return static_findings(
            {"model_new.py": text},
            precision,
            single_file=True,
            name=path.name,
            precision_source=source,
            task_dtypes=task.dtypes if task else (),
        )
    if not path.is_dir():
        raise UsageError(f"no such workspace or file: {path}")
    with tempfile.TemporaryDirectory(prefix="cuda-agent-check-") as tmp:
        staged = stage(path, Path(tmp) / "staged", task)
    return workspace_findings(staged)


def run(args: argparse.Namespace) -> int:
    task = Task.from_file(args.task) if args.task else None
    findings = collect(Path(args.workdir), task)
    rejected = [f for f in findings if f.severity is Severity.REJECT]
    if args.json:
        print(json.dumps([f.to_dict() for f in findings], indent=2))
    else:
        for f in sorted(findings, key=lambda f: (f.severity is not Severity.REJECT, f.file or "", f.line or 0)):
            where = f.file or "-"
            if f.line:
                where += f":{f.line}"
            print(f"{f.severity.value.upper():6} {f.rule:22} {where}  {f.message}")
        warned = len(findings) - len(rejected)
        verdict = "rejected" if rejected else "clean"
        print(f"{verdict}: {len(rejected)} rejecting finding(s), {warned} warning(s)")
    return 1 if rejected else 0
