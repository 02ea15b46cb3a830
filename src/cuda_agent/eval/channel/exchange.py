"""The trusted parent's exchanges with its two children, and how each failure ends an evaluation.

Contract: `send` / `recv` / `ask` carry typed `channel/messages.py` requests and replies and book the
wait (and the child's own split of it) to a phase of the result. Whatever the candidate child
does wrong ends the evaluation as a typed result through `Stop`: a timeout -> TIMEOUT, a death,
a malformed reply or an exception in its handler -> RUNTIME_ERROR, each with reward -1 (the
child is killed first; it is never reused). The reference child runs only our harness and the
task: a malformed reply from it is a bug of this harness and raises `HarnessBug`, while its
other failures (a task that fails on some inputs) end the evaluation as for the candidate.
`compare_send` / `compare_recv` ask the reference to check a candidate output file at a path
the parent computed; `guard` turns a guard report into findings and a rejection.

Not guaranteed: that a well-formed reply is true; the callers check outputs and bound times.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TypeVar

from cuda_agent.eval.channel import messages as P
from cuda_agent.eval.channel.processes import Child, ChildFailure
from cuda_agent.eval.checks.runtime import runtime_findings
from cuda_agent.eval.judge.result import CheckRecord, EvalResult, Status
from cuda_agent.eval.progress import phase as announce
from cuda_agent.task.taskfile import Task

R = TypeVar("R")


class Stop(Exception):
    """Ends the evaluation early with a finished result."""

    def __init__(self, result: EvalResult):
        self.result = result


class HarnessBug(RuntimeError):
    """The trusted reference child broke the protocol: a defect of this harness, not the candidate's."""


def finish(res: EvalResult, status: Status, message: str, log: str = "") -> Stop:
    res.status, res.message, res.log = status, message, log or res.log
    res.correct = False
    res.reward = -1  # every early end through finish is a failure; no_gpu ends through Stop
    return Stop(res)


def who(child: Child) -> str:
    return "the reference model" if child.role == "reference" else "the candidate"


def send(child: Child, res: EvalResult, req: P.Request, phase: str) -> None:
    """Queue a command; its reply is taken later with `recv` (the two children work at once)."""
    if (fail := child.send(req)) is not None:
        raise finish(res, Status.RUNTIME_ERROR, f"{phase}: {who(child)}: {fail.message}", fail.log)


def recv(child: Child, res: EvalResult, timeout: float, phase: str, cmd: str, kind: type[R]) -> R:
    """The next reply of `child`, of type `kind`; the wait is booked to `phase`, with the child's own split."""
    announce(phase)
    t0 = time.monotonic()
    reply = child.receive(timeout, cmd)
    res.phases_s[phase] = round(res.phases_s.get(phase, 0.0) + time.monotonic() - t0, 3)
    for part, sec in getattr(reply, "t", {}).items():  # the child's own split of the phase
        key = f"{phase}.{part}"
        res.phases_s[key] = round(res.phases_s.get(key, 0.0) + sec, 3)
    if isinstance(reply, ChildFailure):
        if reply.kind == "protocol" and child.role == "reference":
            raise HarnessBug(f"{phase}: {reply.message}")
        status = Status.TIMEOUT if reply.kind == "timeout" else Status.RUNTIME_ERROR
        raise finish(res, status, f"{phase}: {who(child)}: {reply.message}", reply.log)
    if isinstance(reply, P.ErrorReply):
        child.kill()  # never reuse a child after an error: its CUDA context may be poisoned
        raise finish(
            res,
            Status.RUNTIME_ERROR,
            f"{phase}: {who(child)} raised {reply.error}"[:600],
            reply.traceback + "\n" + child.log_tail(),
        )
    if not isinstance(reply, kind):
        child.kill()
        raise finish(res, Status.RUNTIME_ERROR, f"{phase}: {who(child)} answered '{cmd}' with {type(reply).__name__}")
    return reply


def ask(child: Child, res: EvalResult, req: P.Request, timeout: float, phase: str, kind: type[R]) -> R:
    send(child, res, req, phase)
    return recv(child, res, timeout, phase, req.cmd, kind)


def compare_send(
    ref: Child, res: EvalResult, task: Task, label: str, ref_label: str, path: str, rec: P.OutputRecord, max_bytes: int
) -> None:
    """Ask the reference to check the candidate's output file at `path` (the parent's own path)."""
    req = P.Compare(ref_label, label, path, [m.to_dict() for m in rec.meta], task.atol, task.rtol, max_bytes)
    send(ref, res, req, "compare")


def compare_recv(ref: Child, res: EvalResult, timeout: float) -> CheckRecord:
    chk = CheckRecord(**recv(ref, res, timeout, "compare", "compare", P.CompareReply).check)
    res.checks.append(chk)
    return chk


def guard(res: EvalResult, report: P.GuardReport | None, enabled: bool, where: str) -> None:
    """Findings from the candidate's guard report; the first REJECT ends the evaluation."""
    if not enabled:
        return
    if report is None:  # the harness in the candidate's process was told to report: silence is a forged reply
        raise finish(
            res,
            Status.REJECTED,
            f"rejected by rule runtime-guard-missing: {where}: the candidate process "
            "sent no guard report (its harness was changed)",
        )
    found = runtime_findings(dataclasses.asdict(report) if report is not None else None, where)
    res.findings += found
    if found:
        f = found[0]
        raise finish(res, Status.REJECTED, f"rejected by rule {f.rule}: {f.message}"[:600])
