"""The paper's benchmark metrics, as pure functions of per-task outcomes.

Definitions (CUDA Agent paper, KernelBench levels 1-3):
- pass rate: tasks whose solution compiled and was correct / all tasks;
- faster-than-eager (-compile) rate: tasks that are correct AND strictly
  faster than the baseline (t < t0, i.e. speedup t0 / t > 1; plain "faster",
  not the reward's 5 % margin) / all tasks;
- geometric-mean speedup vs eager (compile): over the correct tasks only;
- overall: every rate is the task-count-weighted mean of the group rates
  (equal to pooling all tasks); the overall geomean is the task-count-weighted
  geometric mean of the group geomeans, exp(sum n_g ln G_g / sum n_g), over
  groups that have one. With the paper's levels of 100/100/50 tasks this
  reproduces its overall figures from its per-level ones (2.48/3.27/1.80 ->
  2.60x; 1.87/2.80/1.52 -> 2.11x), which pooling the correct tasks does not;
- best of trajectory: per task the best correct outcome counts (ranked like
  the agent's RUN_DIR/best: timed first, then reward, then speedup vs
  compile, then vs eager); a task with no correct outcome counts as failed.

- fast_p (KernelBench): the share of tasks that are correct and more than p
  times faster than the baseline (speedup t0 / t > p), over all tasks; fast_0
  is the share correct and timed, fast_1 the faster-than rate above.
  `fast_p_points` gives the whole curve as a step function of p.
- reward counts: how many tasks' best outcome earned each reward value.
- vs the best baseline (issue 32, beyond the paper): the same fast_p and geomean with each task's
  fastest measured baseline as t0 (`Outcome.speedup_vs_best`), where the run measured more than the
  paper's two (`--baselines`); the best of trajectory still ranks by the paper's figures.

Edge cases: a group with no tasks has rates None and weight 0; no correct
task (or no timed correct task) gives geomean None; a correct task without a
speedup (not timed) counts for pass but neither as faster nor in a geomean.
Not guaranteed: anything about the quality of the timings fed in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

OVERALL = "overall"


@dataclass(frozen=True)
class Outcome:
    task_id: str
    group: str
    correct: bool
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    reward: int | None = None
    status: str = ""
    row: int | None = None  # the evaluation it came from (results.sqlite evaluations.id), for reports
    # against the fastest of the baselines the run measured (eval.timing.baseline_set: eager, torch.compile, and where
    # asked max-autotune and a CUDA graph); None where only the paper's two were measured
    speedup_vs_best: float | None = None


@dataclass(frozen=True)
class GroupMetrics:
    group: str
    n_tasks: int
    n_correct: int
    pass_rate: float | None
    faster_than_eager: float | None
    faster_than_compile: float | None
    geomean_vs_eager: float | None
    geomean_vs_compile: float | None


def geomean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    if any(v <= 0 for v in vals):
        raise ValueError("geometric mean of non-positive speedups")
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def _faster(s: float | None) -> bool:
    return s is not None and s > 1.0


def group_metrics(group: str, outcomes: Iterable[Outcome]) -> GroupMetrics:
    rows = list(outcomes)
    n = len(rows)
    ok = [o for o in rows if o.correct]
    rate = (lambda k: k / n) if n else (lambda k: None)
    return GroupMetrics(
        group=group,
        n_tasks=n,
        n_correct=len(ok),
        pass_rate=rate(len(ok)),
        faster_than_eager=rate(sum(_faster(o.speedup_vs_eager) for o in ok)),
        faster_than_compile=rate(sum(_faster(o.speedup_vs_compile) for o in ok)),
        geomean_vs_eager=geomean(o.speedup_vs_eager for o in ok),
        geomean_vs_compile=geomean(o.speedup_vs_compile for o in ok),
    )


def _weighted_rate(groups: list[GroupMetrics], attr: str) -> float | None:
    total = sum(g.n_tasks for g in groups)
    if not total:
        return None
    return sum(getattr(g, attr) * g.n_tasks for g in groups if g.n_tasks) / total


def _weighted_geomean(groups: list[GroupMetrics], attr: str) -> float | None:
    have = [(g.n_tasks, getattr(g, attr)) for g in groups if g.n_tasks and getattr(g, attr) is not None]
    total = sum(n for n, _ in have)
    if not total:
        return None
    return math.exp(sum(n * math.log(v) for n, v in have) / total)


def overall(groups: list[GroupMetrics]) -> GroupMetrics:
    return GroupMetrics(
        group=OVERALL,
        n_tasks=sum(g.n_tasks for g in groups),
        n_correct=sum(g.n_correct for g in groups),
        pass_rate=_weighted_rate(groups, "pass_rate"),
        faster_than_eager=_weighted_rate(groups, "faster_than_eager"),
        faster_than_compile=_weighted_rate(groups, "faster_than_compile"),
        geomean_vs_eager=_weighted_geomean(groups, "geomean_vs_eager"),
        geomean_vs_compile=_weighted_geomean(groups, "geomean_vs_compile"),
    )


def summarize(outcomes: Iterable[Outcome], groups: Iterable[str] = ()) -> list[GroupMetrics]:
    """One row per group (sorted; `groups` adds ones that may be empty), then the overall row."""
    by: dict[str, list[Outcome]] = {g: [] for g in groups}
    for o in outcomes:
        by.setdefault(o.group, []).append(o)
    rows = [group_metrics(g, by[g]) for g in sorted(by, key=_order)]
    return [*rows, overall(rows)]


def _order(g: str) -> tuple[int, str]:
    digits = g.removeprefix("level")
    return (int(digits), "") if g.startswith("level") and digits.isdigit() else (1 << 30, g)


def fast_p(outcomes: Iterable[Outcome], p: float, attr: str = "speedup_vs_compile") -> float | None:
    """KernelBench's fast_p: correct tasks with speedup > p, over all tasks (None without tasks)."""
    rows = list(outcomes)
    if not rows:
        return None
    return sum(1 for o in rows if o.correct and (s := getattr(o, attr)) is not None and s > p) / len(rows)


def fast_p_points(outcomes: Iterable[Outcome], attr: str = "speedup_vs_compile") -> list[tuple[float, float]]:
    """The fast_p curve as (p, share) corners: the share holds for p from one corner's p up to (not
    including) the next; the first corner is p = 0, the last p = the largest speedup (share 0)."""
    rows = list(outcomes)
    if not rows:
        return []
    speeds = sorted(s for o in rows if o.correct and (s := getattr(o, attr)) is not None and s > 0)
    points = [(0.0, len(speeds) / len(rows))]
    for i, s in enumerate(speeds):
        if i + 1 < len(speeds) and speeds[i + 1] == s:
            continue  # ties drop together
        points.append((s, sum(1 for v in speeds if v > s) / len(rows)))
    return points


REWARD_KEYS = ("3", "2", "1", "-1", "none")


def reward_counts(outcomes: Iterable[Outcome]) -> dict[str, int]:
    """How many outcomes earned each reward ("none": not decided, e.g. correct but not timed)."""
    out = dict.fromkeys(REWARD_KEYS, 0)
    for o in outcomes:
        out["none" if o.reward is None else str(o.reward)] += 1
    return out


def rank(o: Outcome) -> tuple[int, int, int, float, float]:
    timed = o.speedup_vs_eager is not None or o.speedup_vs_compile is not None
    return (
        int(o.correct),
        int(timed),
        o.reward if o.reward is not None else -1,
        o.speedup_vs_compile or 0.0,
        o.speedup_vs_eager or 0.0,
    )


def best_of_trajectory(outcomes: Iterable[Outcome]) -> dict[str, Outcome]:
    """task_id -> its best outcome (earliest wins a tie)."""
    best: dict[str, Outcome] = {}
    for o in outcomes:
        cur = best.get(o.task_id)
        if cur is None or rank(o) > rank(cur):
            best[o.task_id] = o
    return best
