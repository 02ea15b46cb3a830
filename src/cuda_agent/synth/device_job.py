"""The filter's device stages for one candidate, as a pool call job.

Contract: `TaskCheckJob(cid, code, settings)` is a `pool.jobs.CallJob`; its
`run()` (in a pool worker, or directly) starts one fresh `check_child` process
for the candidate, drives it and returns a `DeviceReport` whose `verdicts`
hold, in this order and until the first rejection:
- `runs`: builds and runs in eager mode on a fresh seed, outputs floating,
  finite and non-empty;
- `timing`: eager median time within `window_ms`; outside it, the batch-like
  dimension is scaled toward the window's lower quarter (`reshape.scale_batch`)
  up to `max_reshapes` times, bounded by `max_input_bytes`; the stages below
  run once, on the final shape;
- `deterministic`: no random ATen op in the op log, and two calls on the same
  input under different RNG states agree (1e-5);
- `anti_hack`: none of lint-task's negative controls (zeros, constant,
  pass-through, another seed's output, a precomputed output) passes with the
  task's tolerances; `other_seed` failing is "outputs differ across inputs";
- `compile`: `torch.compile` runs and agrees with eager on two seeds.
`DeviceReport.code` is the final (possibly re-shaped) source; `stage_s` the
seconds spent waiting on each stage (lock waits included; `lock_wait` their part
spent waiting for the GPU lock, already counted in the stages). Each job runs in
a child of its own, which has run nothing before; with `spare_child` a pool
worker starts the next job's child while a job runs; on a GPU the spare also
warms cuBLAS, cuDNN and (with `compile`) dynamo/inductor/Triton while it waits. The candidate's
failures are verdicts; a broken harness (child died, timeout) is a verdict of
the stage it happened in, with the reason. Seeds are drawn fresh per job.
Not guaranteed: times comparable across machines, or stable on a GPU shared
with anything but other filter jobs (the exclusive lock keeps those out).
"""

from __future__ import annotations

import atexit
import contextlib
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from cuda_agent.eval.channel.children import SpareSlot
from cuda_agent.eval.timing import gpu_lock
from cuda_agent.synth.records import Verdict
from cuda_agent.synth.reshape import scale_batch

DEVICE_STAGES = ("runs", "timing", "deterministic", "anti_hack", "compile")


@dataclass
class FilterSettings:
    device: str = "cuda"
    window_ms: tuple[float, float] = (1.0, 100.0)  # the paper's eager-time window
    max_reshapes: int = 4
    max_input_bytes: int = 4 << 30
    time_calls: int = 10
    time_budget_s: float = 1.0
    compile: bool = True
    gpu_fraction: float = 0.125  # filter jobs per GPU: 8 share one (compiles are CPU-bound)
    # the evaluator's lock dir by default: filter jobs and evaluations on one GPU take turns timing
    lock_dir: str = field(default_factory=lambda: str(gpu_lock.lock_dir()))
    # the evaluator's sandbox around the child that runs the candidate's code ("auto" or "off"):
    # composed code comes from an LLM, so it gets the candidate's treatment (see check_child)
    sandbox: str = "auto"
    sandbox_max_file_bytes: int = 8 << 30
    sandbox_max_procs: int = 4096
    load_timeout: float = 180.0
    checks_timeout: float = 180.0
    time_timeout: float = 120.0
    compile_timeout: float = 900.0
    # start the next job's child while this one runs (per pool worker): its torch import and CUDA
    # start-up (3-5 s) leave the critical path of every job but the first
    spare_child: bool = True


@dataclass
class DeviceReport:
    id: str
    verdicts: list[Verdict]
    code: str
    eager_ms: float | None = None
    compile_ms: float | None = None
    reshapes: list[dict[str, Any]] = field(default_factory=list)  # {"batch": [old, new], "eager_ms": before}
    wall_s: float = 0.0
    complete: bool = False  # every stage ran and passed
    sandbox: str = ""  # the sandbox's word for the record ("on", "off", "unavailable: why", ...)
    # seconds this job waited on each stage's replies ("start": on the child's start-up, 0 when a spare
    # child was ready): where a candidate's wall goes, lock waits included
    stage_s: dict[str, float] = field(default_factory=dict)
    warm_s: dict[str, float] = field(default_factory=dict)  # the child's start-up by part (check_child.WARM_S)

    @property
    def passed(self) -> bool:
        return self.complete and all(v.passed for v in self.verdicts)


def _factor(reshapes: list[dict[str, Any]], ms: float, target: float) -> float:
    """How much to scale the batch so that the eager time reaches `target` ms.

    First try: proportional, at most 64x either way. After a re-shape, the two last points fit
    time = c + k * batch: small tasks are launch-bound (on the H200, 64x the batch often took a
    0.04 ms task only to 0.05 ms), and a proportional step then needs two or three more re-shapes,
    each a load and a timing. The fitted step is bounded at 1024x (the caller bounds the bytes).
    """
    proportional = min(64.0, max(1 / 64, target / max(ms, 1e-6)))
    if not reshapes:
        return proportional
    b0, b1 = reshapes[-1]["batch"]
    m0 = reshapes[-1]["eager_ms"]
    if b1 == b0 or (ms - m0) / (b1 - b0) <= 0:  # noise, or a time that does not grow with the batch
        return proportional
    k = (ms - m0) / (b1 - b0)
    c = m0 - k * b0
    want = (target - c) / k
    if want <= 0:
        return proportional
    return min(1024.0, max(1 / 1024, want / b1))


class _Stop(Exception):
    def __init__(self, verdict: Verdict):
        self.verdict = verdict


@dataclass
class TaskCheckJob:
    cid: str
    code: str
    settings: FilterSettings
    atol: float = 1e-2
    rtol: float = 1e-2
    precision: str = "fp32"

    @property
    def label(self) -> str:
        return self.cid

    @property
    def device(self) -> str:
        return self.settings.device

    @property
    def gpu_fraction(self) -> float:
        return self.settings.gpu_fraction

    def validate(self) -> None:
        if not self.code:
            raise ValueError(f"{self.cid}: no code")

    def run(self) -> DeviceReport:
        t0 = time.monotonic()
        report = DeviceReport(self.cid, [], self.code)
        box = _take_child(self.settings, self.precision)
        report.sandbox = box.sandbox
        try:
            if self.settings.spare_child:
                _prepare_child(self.settings, self.precision)  # the next job's child warms while this one runs
            self._stages(box.child, box.io, report)
        except _Stop as stop:
            report.verdicts.append(stop.verdict)
        finally:
            box.close()
            report.wall_s = time.monotonic() - t0
            report.stage_s = {k: round(v, 3) for k, v in report.stage_s.items()}
        return report

    def _ask(self, child: Any, stage: str, msg: dict[str, Any], timeout: float, book: str = "") -> dict[str, Any]:
        """The child's reply to `msg`; its wait is booked in `stage_s[book or stage]`, a failure is a
        verdict of `stage`."""
        from cuda_agent.eval.channel.processes import ChildFailure

        t0 = time.monotonic()
        reply = child.request_raw(msg, timeout)
        key = book or stage
        self._spent[key] = self._spent.get(key, 0.0) + time.monotonic() - t0
        if isinstance(reply, dict) and reply.get("lock_wait_s"):  # part of the above, not in addition to it
            self._spent["lock_wait"] = self._spent.get("lock_wait", 0.0) + float(reply["lock_wait_s"])
        if isinstance(reply, ChildFailure):
            raise _Stop(Verdict(self.cid, stage, False, f"{msg['cmd']}: {reply.message}"))
        if not reply.get("ok"):
            raise _Stop(Verdict(self.cid, stage, False, str(reply.get("error", "?"))))
        return reply

    def _load(self, child: Any, tmp: Path, code: str, stage: str) -> dict[str, Any]:
        s = self.settings
        return self._ask(
            child,
            stage,
            {
                "cmd": "load",
                "source": code,
                "device": s.device,
                "workdir": str(tmp),
                "init_seed": secrets.randbits(62),
                "seed": secrets.randbits(62),
                "precision": self.precision,
                "lock_dir": s.lock_dir,
            },
            s.load_timeout,
        )

    def _checks(self, child: Any, out: list[Verdict]) -> None:
        """Append the deterministic and anti-hack verdicts to `out` (a passing one before the next runs)."""
        seeds = [secrets.randbits(62) for _ in range(3)]
        got = self._ask(
            child,
            "deterministic",
            {"cmd": "checks", "seeds": seeds, "fixed_seed": secrets.randbits(62), "atol": self.atol, "rtol": self.rtol},
            self.settings.checks_timeout,
        )
        if got["random_ops"]:
            raise _Stop(Verdict(self.cid, "deterministic", False, f"random ops in the op log: {got['random_ops']}"))
        if not got["rerun_equal"]:
            raise _Stop(
                Verdict(self.cid, "deterministic", False, f"two runs on the same input differ: {got['rerun_message']}")
            )
        out.append(Verdict(self.cid, "deterministic", True))
        passing = sorted(n for n, c in got["controls"].items() if c.get("passes"))
        if passing:
            why = "outputs do not differ across inputs; " if "other_seed" in passing else ""
            raise _Stop(
                Verdict(
                    self.cid,
                    "anti_hack",
                    False,
                    f"{why}negative controls pass: {', '.join(passing)}",
                    {"controls": passing},
                )
            )
        out.append(Verdict(self.cid, "anti_hack", True))

    def _time(self, child: Any, compiled: bool = False) -> float:
        s = self.settings
        got = self._ask(
            child,
            "compile" if compiled else "timing",
            {
                "cmd": "time",
                "compiled": compiled,
                "seed": secrets.randbits(62),
                "max_calls": s.time_calls,
                "budget_s": s.time_budget_s,
            },
            s.time_timeout,
        )
        return float(got["ms"])

    def _stages(self, child: Any, tmp: Path, report: DeviceReport) -> None:
        self._spent = report.stage_s
        ready = self._ask(
            child, "runs", {"cmd": "ready"}, self.settings.load_timeout, book="start"
        )  # start-up, if not done
        report.warm_s = dict(ready.get("warm_s") or {})
        s = self.settings
        loaded = self._load(child, tmp, report.code, "runs")
        report.verdicts.append(Verdict(self.cid, "runs", True, data={"out_shapes": loaded["out_shapes"]}))
        # Timing (and re-shaping) comes before the checks, so that they run once, on the shape that is
        # saved: two thirds of the candidates are re-shaped, and checking before and after the re-shape
        # cost a quarter of a job's seconds on the H200 (run of 2026-12-04).
        lo, hi = s.window_ms
        target = lo * (hi / lo) ** 0.25  # toward the low end: a re-shaped task stays cheap to evaluate
        for attempt in range(s.max_reshapes + 1):
            ms = self._time(child)
            if lo <= ms <= hi:
                break
            where = "below" if ms < lo else "above"
            if attempt == s.max_reshapes:
                raise _Stop(
                    Verdict(
                        self.cid,
                        "timing",
                        False,
                        f"eager {ms:.4g} ms, {where} the {lo:g}-{hi:g} ms window after {attempt} re-shape(s)",
                        {"eager_ms": ms, "reshapes": report.reshapes},
                    )
                )
            factor = _factor(report.reshapes, ms, target)
            scaled = scale_batch(report.code, factor)
            if scaled is None:
                raise _Stop(
                    Verdict(
                        self.cid,
                        "timing",
                        False,
                        f"eager {ms:.4g} ms, {where} the window, and no batch-like dimension can be scaled",
                        {"eager_ms": ms},
                    )
                )
            code, old, new = scaled
            if new > old and loaded["in_bytes"] * new / old > s.max_input_bytes:
                raise _Stop(
                    Verdict(
                        self.cid,
                        "timing",
                        False,
                        f"eager {ms:.4g} ms; reaching {lo:g} ms needs "
                        f"{loaded['in_bytes'] * new / old / 2**30:.1f} GiB of inputs",
                        {"eager_ms": ms},
                    )
                )
            report.reshapes.append({"batch": [old, new], "eager_ms": ms})
            report.code = code
            loaded = self._load(child, tmp, code, "timing")
        report.eager_ms = ms
        report.verdicts.append(Verdict(self.cid, "timing", True, data={"eager_ms": ms, "reshapes": report.reshapes}))
        self._checks(child, report.verdicts)
        if not s.compile:
            report.complete = True
            return
        got = self._ask(
            child,
            "compile",
            {
                "cmd": "compile_check",
                "seeds": [secrets.randbits(62) for _ in range(2)],
                "atol": self.atol,
                "rtol": self.rtol,
            },
            s.compile_timeout,
        )
        bad = [c for c in got["checks"] if not c["passed"]]
        if bad:
            raise _Stop(Verdict(self.cid, "compile", False, f"torch.compile disagrees with eager: {bad[0]['message']}"))
        report.compile_ms = self._time(child, compiled=True)
        report.verdicts.append(
            Verdict(
                self.cid,
                "compile",
                True,
                data={"compile_ms": report.compile_ms, "compile_s": round(got["compile_s"], 2)},
            )
        )
        report.complete = True


@dataclass
class _Box:
    """One filter child with its private scratch (io and tmp dirs) for exactly one job."""

    key: tuple[Any, ...]
    child: Any
    io: Path
    tmp: Path
    sandbox: str

    def alive(self) -> bool:
        return self.child.alive()

    def close(self) -> None:
        self.child.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _key(s: FilterSettings, precision: str) -> tuple[Any, ...]:
    return (s.device, precision, s.sandbox, s.sandbox_max_file_bytes, s.sandbox_max_procs, s.lock_dir)


def _start_child(s: FilterSettings, precision: str) -> _Box:
    from cuda_agent.eval.channel.children import child_dirs, child_env
    from cuda_agent.eval.channel.processes import Child
    from cuda_agent.sandbox import profile_for

    tmp = Path(tempfile.mkdtemp(prefix="cuda-agent-synth-"))
    # one compile thread per child: jobs sharing a GPU already compile in parallel, and inductor's
    # worker pool per process would cost more start-up than it saves on these small graphs
    base = {**child_env(precision), "TORCHINDUCTOR_COMPILE_THREADS": "1"}
    rw, env = child_dirs(tmp, "synth", base, private_caches=True)  # [io, tmp]: all it may write
    locks = Path(s.lock_dir)
    locks.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        locks.chmod(0o1777)  # shared by every user's filter jobs on this machine
    box, word = profile_for(s.sandbox, s.device, s.sandbox_max_file_bytes, s.sandbox_max_procs)
    try:
        child = Child(
            "synth",
            cwd=tmp,
            env=env,
            log_path=tmp / "child.log",
            module="cuda_agent.synth.check_child",
            warm_cuda=s.device == "cuda",
            child_args=("--warm-compile",) if s.device == "cuda" and s.compile else (),
            wrap=partial(box.wrap, writable=[*rw, locks]) if box is not None else None,
        )
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _Box(_key(s, precision), child, rw[0], tmp, word)


# The spare of this process (a pool worker runs one job at a time). A spare has run no task code:
# a child that has is closed with its job and never serves another.
_slot: SpareSlot[_Box] = SpareSlot()


def _take_child(s: FilterSettings, precision: str) -> _Box:
    return _slot.take(_key(s, precision), lambda: _start_child(s, precision))


def _prepare_child(s: FilterSettings, precision: str) -> None:
    _slot.prepare(_key(s, precision), lambda: _start_child(s, precision))


def discard_spare() -> None:
    """Close this process's spare child, if any (also at exit)."""
    _slot.discard()


atexit.register(discard_spare)
