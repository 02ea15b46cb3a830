"""Typed results of one evaluation.

Contract: `EvalResult` is plain data (JSON round-trips through `to_dict` /
`from_dict`). Everything a candidate can do wrong (fail to compile, crash,
hang, produce wrong numbers, hack) is expressed here as a `Status` plus
`Finding`s, never as an exception. The reward is not stored separately from
the evidence: it is computed from `correct` and the three times by
`judge.reward.milestone_reward`.

Not guaranteed: times are `None` whenever they were not measured (no GPU,
candidate failed before timing); consumers must check.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    OK = "ok"  # evaluation completed: compiled, correct, timed
    COMPILE_ERROR = "compile_error"
    INCORRECT = "incorrect"
    RUNTIME_ERROR = "runtime_error"  # crash, CUDA error, exception in the candidate
    TIMEOUT = "timeout"
    REJECTED = "rejected"  # a finding proves a hack
    NO_GPU = "no_gpu"  # only the GPU-free phases ran (checks, nvcc compile)
    # The machine, not the candidate, failed (a toolkit header or compiler is missing; see
    # env_check): no reward, never cached, and a bench re-runs it once the machine is fixed.
    ENV_ERROR = "env_error"


# statuses that say nothing about the candidate: no reward, not a finished task in a bench
NOT_SCORED = (Status.NO_GPU, Status.ENV_ERROR)


class Severity(StrEnum):
    REJECT = "reject"  # proves a hack or a broken rule: reward -1
    WARN = "warn"  # suspicious, reported, does not change the reward


@dataclass
class Finding:
    rule: str
    message: str
    severity: Severity = Severity.REJECT
    file: str | None = None
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "message": self.message,
            "severity": self.severity.value,
            "file": self.file,
            "line": self.line,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        return cls(
            rule=d["rule"],
            message=d["message"],
            severity=Severity(d.get("severity", "reject")),
            file=d.get("file"),
            line=d.get("line"),
        )


@dataclass
class CheckRecord:
    """Comparison of one output set against the reference."""

    label: str  # e.g. "seed#1" or "timed#0"
    passed: bool
    max_abs_err: float | None = None
    rel_l2_err: float | None = None
    mismatch_frac: float | None = None
    message: str = ""
    # worst element's |error| / (atol + rtol * |ref|): below 1 passes the paper's elementwise rule;
    # a negative control failing it by a small factor marks a weak task (lint_task)
    tol_ratio: float | None = None
    # the largest relative L2 error of one output tensor (compare.REL_L2_MAX bounds it)
    rel_l2_worst: float | None = None


@dataclass
class TimingStats:
    """Per-call device times of one model, in milliseconds."""

    median_ms: float
    mean_ms: float
    min_ms: float
    cv: float  # coefficient of variation (std / mean) of the kept round
    n: int  # timed calls in the kept round
    rounds: int = 1  # rounds measured (re-measured while cv > threshold)
    host_over_event: float | None = None  # host wall time / event time, median of the unheld probe calls
    probe_ms: float | None = None  # event time of the unheld probe calls (launch overhead included), median
    enqueue_ms: float | None = None  # host time to enqueue one call (its Python and launch overhead), median
    hold_ms: float | None = None  # the stream was held this long before each timed call (timing.py); 0: not held
    spread: float | None = (
        None  # (p90 - p10) / (2.563 median) of the kept round (timing.robust_spread); None: older record
    )

    def spread_by(self, how: str) -> float:
        """The kept round's spread as `how` ("cv" or "p10p90", EvalConfig.round_spread) measures it."""
        return self.spread if how == "p10p90" and self.spread is not None else self.cv

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TimingStats:
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


@dataclass
class EvalResult:
    status: Status
    reward: int | None  # None when the phase run does not decide it (compile, verify, no_gpu, env_error)
    correct: bool
    message: str = ""  # one line saying what happened
    time_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    findings: list[Finding] = field(default_factory=list)
    gpu: str | None = None
    torch: str | None = None
    checks: list[CheckRecord] = field(default_factory=list)
    timing: TimingStats | None = None
    eager_timing: TimingStats | None = None
    compile_timing: TimingStats | None = None
    # extra baselines (EvalConfig.baselines, eval.timing.baseline_set): name -> median ms by the events; eager and
    # torch.compile stay in eager_ms/compile_ms. Reported with "vs best", never part of the reward.
    baselines_ms: dict[str, float] = field(default_factory=dict)
    precision: str = "fp32"
    # wall seconds per phase; a dotted key ("timing.calls") is part of its phase or, for "lock.shared" and
    # "lock.exclusive" (waits for the GPU's lock: requests, timed sections), of the time between phases
    phases_s: dict[str, float] = field(default_factory=dict)
    cache: dict[str, bool] = field(default_factory=dict)  # what came from a cache
    defences: dict[str, str] = field(default_factory=dict)  # runtime defences in force, e.g. {"sandbox": "on"}
    # The evaluator's own clock (trusted_time): per-call times of the calls alone (bursts less the loop's
    # cost) of the candidate and the baselines, by the same method. time_ms and the speedups are the
    # candidate's event times only where these agree with them within `trusted_tol`; otherwise time_ms
    # is this clock's, on the events' scale, and `reported_ms` keeps the candidate's own figure.
    reported_ms: float | None = None  # the candidate's process's own event time (a diagnostic, never believed)
    trusted_ms: float | None = None
    trusted_eager_ms: float | None = None
    trusted_compile_ms: float | None = None
    trusted_loop_ms: float | None = None  # the loop with no model in it (draws and digests), per call
    trusted_tol: float | None = None  # the most a claim may be better than this clock and stand (relative)
    trusted_mode: str | None = None  # "graph" (CUDA-graph bursts) or "host" (a Python loop: coarser)
    # what those nets came from, to tell the clock's noise within one evaluation from its spread between
    # evaluations (benchmarks/clock_leak.py): per side ("candidate", "eager", "torch.compile", "loop_small",
    # "loop_large") {"calls": calls per burst, "ms": each look's wall ms}, and "fit": {"fixed_ms", "per_call_ms"}
    trusted_looks: dict[str, Any] = field(default_factory=dict)
    # a timing whose spread stayed above EvalConfig.max_cv after all its rounds (candidate or a
    # baseline): its figures, and so the reward, may be off; bench and the agent's tools retry once
    unstable: bool = False
    gpu_wait_s: float = 0.0  # seconds waited for the GPU's lock: untimed work while another timed, timing while any ran
    gpu_held_s: float = 0.0  # seconds it held the GPU alone (timed sections): the floor of a GPU shared by evaluations
    task_hash: str = ""
    candidate_hash: str = ""
    log: str = ""  # tail of compiler or child output, for the agent to read

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["status"] = self.status.value
        d["findings"] = [f.to_dict() for f in self.findings]
        return d

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvalResult:
        d = dict(d)
        d["status"] = Status(d["status"])
        d["findings"] = [Finding.from_dict(f) for f in d.get("findings", [])]
        d["checks"] = [CheckRecord(**c) for c in d.get("checks", [])]
        for key in ("timing", "eager_timing", "compile_timing"):
            if d.get(key) is not None:
                d[key] = TimingStats.from_dict(d[key])
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    @property
    def rejected_findings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.REJECT]
