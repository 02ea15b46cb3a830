"""Weak-task lint: would trivial outputs pass this task's correctness check?

Contract: `lint_task(task, device=...)` starts one trusted reference child
(the same `child/main.py` the evaluator uses; it runs only the task's own Model),
draws `n_seeds` fresh secret seeds plus one fixed seed, and runs the negative
controls of `shared/negative_controls.py` (zeros, a constant, pass-through of the first
input, the output of another seed, the output of one fixed input set, i.e.
an answer precomputed at init) through the evaluator's comparison with the
task's tolerances. Returns a `LintReport`: `passing` names every control the
evaluator itself would accept (a hole: the task must be fixed or dropped);
`weak` adds the controls that pass the paper's elementwise rule alone (what
KernelBench-style harnesses check; our relative-L2 bound is what rejects them)
or miss it by less than `shared.negative_controls.NEAR_MISS_FACTOR` (another draw of
inputs may let them through), so a benchmark or a synthesized dataset can drop
or fix the task. A failure of the task itself (raises, hangs) is a report with
`error` set, not an exception.

Not guaranteed: the controls are the cheap hacks only; a task none of them
passes can still be weak in ways they do not try.
"""

from __future__ import annotations

import secrets
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.eval.channel import messages as P
from cuda_agent.eval.channel.children import child_env
from cuda_agent.eval.channel.processes import Child, ChildFailure
from cuda_agent.eval.progress import phase as announce
from cuda_agent.eval.shared.negative_controls import NEAR_MISS_FACTOR, is_weak
from cuda_agent.task.taskfile import Task


@dataclass
class LintReport:
    task: str
    controls: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str = ""
    precision: str = ""  # the task's, and what the controls were compared with
    precision_source: str = ""
    atol: float = 0.0
    rtol: float = 0.0

    @property
    def passing(self) -> list[str]:
        """Controls the evaluator's whole correctness check accepts."""
        return [name for name, c in self.controls.items() if c.get("passes")]

    @property
    def weak(self) -> list[str]:
        """Controls that pass either rule or nearly pass the elementwise one (see the module docstring)."""
        return [name for name, c in self.controls.items() if is_weak(c)]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passing": self.passing, "weak": self.weak, "near_miss_factor": NEAR_MISS_FACTOR}


def lint_task(task: Task, *, device: str = "cuda", n_seeds: int = 5, timeout: float = 300.0) -> LintReport:
    report = LintReport(
        task=task.name, precision=task.precision, precision_source=task.precision_source, atol=task.atol, rtol=task.rtol
    )
    with tempfile.TemporaryDirectory(prefix="cuda-agent-lint-") as tmp:
        root = Path(tmp)
        (root / "model.py").write_text(task.source)
        # the evaluator's child environment, so the reference computes what it computes there
        env = {**child_env(task.precision), "TMPDIR": tmp}
        child = Child("reference", cwd=root, env=env, log_path=root / "reference.log")
        try:
            steps: list[P.Request] = [
                P.Setup(str(root / "model.py"), secrets.randbits(62), task.precision, device, cwd=""),
                P.Controls([secrets.randbits(62) for _ in range(n_seeds)], secrets.randbits(62), task.atol, task.rtol),
            ]
            for msg in steps:
                announce("reference" if msg.cmd == "setup" else "controls")
                reply = child.request(msg, timeout)
                if isinstance(reply, ChildFailure):
                    report.error = f"{msg.cmd}: {reply.message}"
                    return report
                if isinstance(reply, P.ErrorReply):
                    report.error = f"{msg.cmd}: the task raised {reply.error}"[:1000]
                    return report
            assert isinstance(reply, P.ControlsReply)
            report.controls = reply.controls
        finally:
            child.close()
    return report
