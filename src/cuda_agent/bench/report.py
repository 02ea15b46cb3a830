"""The report of a bench run: what was measured, on what, and the paper's metrics.

Contract: `build_report(run_dir)` reads RUN_DIR/results.sqlite (read-only: nothing is written
to the run dir) and returns a `Report`: per task a `TaskRow` from its best evaluation (best of
trajectory; stored solutions have one) with absolute times, speedups, status, reward, the
full `EvalResult`, and where its kernels and episode are; the metric rows per group, then
overall (`metrics`); reward counts; and the run's environment (GPU, driver, torch, CUDA,
commit, evaluator settings; `bench.environment`). Denominators: every task the bench planned
except the ones no machine could score yet (status no_gpu or env_error: "not scored", shown
as such and re-run by the next bench); an unfinished task or one that hit a harness error
counts as failed, and the notes say how many there are.
`report_files.write_report(report, out_dir)` writes the files drawn from a `Report` (report.md,
report.html, report/<task>.html); the renderers import this module, never the reverse, so the
data does not depend on its views. `cuda-agent view` serves the same pages live.
Not guaranteed: a stable layout of the HTML or Markdown; parse results.sqlite, not them.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.bench.metrics import (
    OVERALL,
    GroupMetrics,
    Outcome,
    best_of_trajectory,
    fast_p,
    geomean,
    reward_counts,
    summarize,
)
from cuda_agent.bench.store import ResultStore, safe_name
from cuda_agent.eval.judge.result import NOT_SCORED

COLUMNS = (
    "level",
    "tasks",
    "pass",
    "faster than eager",
    "faster than compile",
    "geomean vs eager",
    "geomean vs compile",
)
FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0, 5.0, 10.0)  # the p values tabulated (the figure has the whole curve)
_UNSCORED = {s.value for s in NOT_SCORED}


@dataclass
class TaskRow:
    task_id: str
    group: str
    state: str  # done | not_scored | error | unfinished
    outcome: Outcome
    result: dict[str, Any] | None = None  # the best evaluation's EvalResult.to_dict()
    n_evaluations: int = 0
    candidate_dir: Path | None = None  # the scored kernels (RUN_DIR/candidates/<id> or episodes/<id>/best)
    episode: Path | None = None  # RUN_DIR/episodes/<id>/trajectory.jsonl

    @property
    def scored(self) -> bool:
        return self.state != "not_scored" and self.outcome.status not in _UNSCORED

    @property
    def page(self) -> str:
        return f"report/{safe_name(self.task_id)}.html"

    def ms(self, key: str) -> float | None:
        return (self.result or {}).get(key)


@dataclass
class Report:
    run_dir: Path
    meta: dict[str, Any]
    tasks: dict[str, TaskRow]
    rows: list[GroupMetrics]
    unfinished: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    n_evaluations: int = 0
    n_cached: int = 0
    gpus: Counter[str] = field(default_factory=Counter)  # GPU names the evaluations report
    torches: Counter[str] = field(default_factory=Counter)  # torch versions the evaluations report
    last_finished: float | None = None

    @property
    def best(self) -> dict[str, Outcome]:
        return {t: r.outcome for t, r in self.tasks.items()}

    @property
    def not_scored(self) -> list[str]:
        return [t for t, r in self.tasks.items() if not r.scored]

    @property
    def scored_outcomes(self) -> list[Outcome]:
        return [r.outcome for r in self.tasks.values() if r.scored]

    @property
    def environment(self) -> dict[str, Any]:
        """The latest session's environment (`bench.environment.describe`), {} for older runs."""
        env = self.meta.get("environment") or []
        return env[-1] if isinstance(env, list) and env else {}

    def groups(self) -> list[str]:
        return [g.group for g in self.rows if g.group != OVERALL]

    def reward_counts(self) -> dict[str, dict[str, int]]:
        """group (and overall) -> reward value -> tasks, over scored tasks, plus not scored / unfinished."""
        out = {}
        for g in [*self.groups(), OVERALL]:
            rows = [r for r in self.tasks.values() if g == OVERALL or r.group == g]
            counts = reward_counts(r.outcome for r in rows if r.scored and r.state != "unfinished")
            counts["not scored"] = sum(not r.scored for r in rows)
            counts["unfinished"] = sum(r.state in ("unfinished", "error") for r in rows)
            out[g] = counts
        return out

    @property
    def has_best(self) -> bool:
        """Whether the run measured baselines beyond the paper's two (`--baselines`)."""
        return any(o.speedup_vs_best is not None for o in self.scored_outcomes)

    def best_geomeans(self) -> dict[str, float | None]:
        """group (and overall, pooled) -> geomean speedup vs each task's best baseline, over correct tasks."""
        by = {g: [r.outcome for r in self.tasks.values() if r.scored and r.group == g] for g in self.groups()}
        by[OVERALL] = self.scored_outcomes
        return {
            g: geomean(o.speedup_vs_best for o in rows if o.correct and o.speedup_vs_best) for g, rows in by.items()
        }

    def fast_p_table(self, attr: str) -> dict[str, list[float | None]]:
        by = {g: [r.outcome for r in self.tasks.values() if r.scored and r.group == g] for g in self.groups()}
        by[OVERALL] = self.scored_outcomes
        return {g: [fast_p(rows, p, attr) for p in FAST_P] for g, rows in by.items()}


def build_report(run_dir: str | Path) -> Report:
    store = ResultStore.open_existing(run_dir)
    run = Path(run_dir)
    meta = store.meta()
    planned: dict[str, str] = meta.get("planned", {})
    states = store.task_states()
    evals = store.rows()
    by_id = {r["id"]: r for r in evals}
    counts = Counter(r["task_id"] for r in evals)
    best = best_of_trajectory(store.outcomes())
    tasks: dict[str, TaskRow] = {}
    for tid, group in {**{t: s[0] for t, s in states.items()}, **planned}.items():
        state = states.get(tid, ("", "unfinished", ""))[1]
        o = best.get(tid) or Outcome(tid, group, False, status="error" if state == "error" else "not_run")
        row = by_id.get(o.row) if o.row is not None else None
        result = json.loads(row["result_json"]) if row and row.get("result_json") else None
        if row and result is None:  # e.g. no_solution rows carry only a message
            result = {"status": row["status"], "message": row["message"] or ""}
        cand = run / "candidates" / safe_name(tid)
        ep = run / "episodes" / tid
        tasks[tid] = TaskRow(
            tid,
            group,
            state if state in ("done", "not_scored", "error") else "unfinished",
            o,
            result,
            counts[tid],
            cand if cand.is_dir() else (ep / "best" if (ep / "best").is_dir() else None),
            ep / "trajectory.jsonl" if (ep / "trajectory.jsonl").is_file() else None,
        )
    rep = Report(
        run,
        meta,
        dict(sorted(tasks.items())),
        [],
        sorted(t for t, r in tasks.items() if r.state in ("unfinished", "error")),
        {t: s[2] for t, s in states.items() if s[1] == "error"},
        len(evals),
        sum(int(r["cached"] or 0) for r in evals),
        Counter(r["gpu"] for r in evals if r["gpu"]),
        Counter(r["torch"] for r in evals if r["torch"]),
        max((r["finished"] for r in evals), default=None),
    )
    rep.rows = summarize(rep.scored_outcomes, {r.group for r in tasks.values() if r.scored})
    return rep


def fmt_pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f} %"


def fmt_x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


def cells(g: GroupMetrics) -> list[str]:
    return [
        g.group,
        str(g.n_tasks),
        fmt_pct(g.pass_rate),
        fmt_pct(g.faster_than_eager),
        fmt_pct(g.faster_than_compile),
        fmt_x(g.geomean_vs_eager),
        fmt_x(g.geomean_vs_compile),
    ]


def notes(rep: Report) -> list[str]:
    out = []
    if rep.not_scored:
        why = Counter(rep.tasks[t].outcome.status or rep.tasks[t].state for t in rep.not_scored)
        out.append(
            f"{len(rep.not_scored)} of {len(rep.tasks)} task(s) not scored ({', '.join(f'{k}: {v}' for k, v in why.items())}): "
            "this machine could not score them, so they are left out of every rate; rerun `cuda-agent bench` "
            "with the same -o where a CUDA GPU is visible (env_error: fix what the message names first)"
        )
    if rep.unfinished:
        out.append(
            f"{len(rep.unfinished)} of {len(rep.tasks)} task(s) not finished; they count as failed "
            f"(rerun `cuda-agent bench` with the same -o to finish them)"
        )
    if rep.errors:
        out.append(f"{len(rep.errors)} task(s) hit a harness error: {', '.join(sorted(rep.errors)[:5])}")
    if rep.meta.get("device") == "cpu":
        out.append("evaluated on the CPU lane: times say nothing about kernels")
    return out


def header_facts(rep: Report) -> list[tuple[str, str]]:
    """(label, value) lines of the report's header."""
    env = rep.environment
    gpus = (
        ", ".join(f"{g} ({n} evaluations)" for g, n in rep.gpus.most_common())
        or ", ".join(env.get("gpus") or [])
        or "none"
    )
    cuda = (
        " / ".join(
            x
            for x in (
                f"torch built with CUDA {env['torch_cuda']}" if env.get("torch_cuda") else "",
                f"nvcc {env['nvcc']}" if env.get("nvcc") else "",
            )
            if x
        )
        or "-"
    )
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(rep.last_finished)) if rep.last_finished else "-"
    settings = env.get("settings")
    shown = (
        ", ".join(f"{k}={v}" for k, v in settings.items() if k not in ("timing", "tolerance", "reward"))
        if settings
        else "not recorded (a run made before cuda-agent recorded its settings)"
    )
    return [
        ("suite", f"{rep.meta.get('suite', '?')} ({rep.meta.get('suite_kind', '?')})"),
        ("candidates", str(rep.meta.get("mode", "?"))),
        ("GPU", gpus),
        ("driver", env.get("driver") or "-"),
        ("torch", ", ".join(rep.torches) or env.get("torch") or "-"),
        ("CUDA", cuda),
        (
            "date",
            f"last evaluation {when}; bench started {env.get('started', '-')}; report written "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        ),
        ("commit", f"cuda-agent {env.get('cuda_agent', '?')} at {env.get('commit') or 'unknown commit'}"),
        ("evaluator", shown),
        ("timing", (settings or {}).get("timing", "-")),
        ("correctness", (settings or {}).get("tolerance", "-")),
        ("reward", (settings or {}).get("reward", "-")),
        ("evaluations", f"{rep.n_evaluations} stored, {rep.n_cached} answered by the evaluator's result cache"),
    ]
