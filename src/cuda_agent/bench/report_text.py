"""The report as text: the terminal table (rich) and report.md.

Contract: `rich_table(report)` is the paper's metrics table for a terminal (a "not scored" row
when no task could be scored); `markdown(report)` is report.md: the header facts, the metrics
per level, reward counts, fast_p against eager and torch.compile at fixed p, and one line per
task with absolute times (ms) beside the speedups. Both are views of a `report.Report`.
Not guaranteed: a stable layout; parse results.sqlite, not these.
"""

from __future__ import annotations

from typing import Any

from cuda_agent.bench.metrics import OVERALL, REWARD_KEYS
from cuda_agent.bench.report import COLUMNS, FAST_P, Report, cells, fmt_ms, fmt_pct, fmt_x, header_facts, notes


def rich_table(rep: Report) -> Any:
    from rich.table import Table

    t = Table(title=f"cuda-agent report: {rep.run_dir}", title_justify="left")
    for i, c in enumerate(COLUMNS):
        t.add_column(c, justify="left" if i == 0 else "right")
    for g in rep.rows:
        t.add_row(*cells(g), style="bold" if g.group == OVERALL else None)
    if not rep.scored_outcomes and rep.tasks:
        t.add_row("not scored", str(len(rep.not_scored)), *["-"] * 5, style="yellow")
    return t


def markdown(rep: Report) -> str:
    lines = (
        [f"# Benchmark report: {rep.run_dir.name}", ""]
        + [f"- {k}: {v}" for k, v in header_facts(rep)]
        + [
            "",
            "Pass = compiled and correct. Faster = correct and strictly faster than the baseline. Geomean = geometric "
            "mean of baseline time / candidate time over correct tasks. Overall = weighted by task count. Per task the best "
            "evaluation counts.",
            "",
            "| " + " | ".join(COLUMNS) + " |",
            "|" + "---|" * len(COLUMNS),
        ]
    )
    lines += ["| " + " | ".join(cells(g)) + " |" for g in rep.rows]
    lines += [""] + [f"> {n}" for n in notes(rep)]
    keys = [*REWARD_KEYS, "not scored", "unfinished"]
    lines += [
        "",
        "## Rewards (tasks per value)",
        "",
        "| level | " + " | ".join(keys) + " |",
        "|" + "---|" * (len(keys) + 1),
    ]
    lines += [f"| {g} | " + " | ".join(str(c[k]) for k in keys) + " |" for g, c in rep.reward_counts().items()]
    for attr, name in (("speedup_vs_eager", "eager"), ("speedup_vs_compile", "torch.compile")):
        lines += [
            "",
            f"## fast_p vs {name} (share of tasks correct and more than p times faster)",
            "",
            "| level | " + " | ".join(f"p={p:g}" for p in FAST_P) + " |",
            "|" + "---|" * (len(FAST_P) + 1),
        ]
        lines += [
            f"| {g} | " + " | ".join(fmt_pct(v) for v in vals) + " |" for g, vals in rep.fast_p_table(attr).items()
        ]
    if rep.has_best:  # issue 32: the run measured more baselines than the paper's two
        lines += [
            "",
            "## vs the best baseline (per task the fastest measured: eager, torch.compile, max-autotune, "
            "CUDA graph; event times; not the reward)",
            "",
            "| level | geomean vs best | " + " | ".join(f"fast_{p:g}" for p in FAST_P) + " |",
            "|" + "---|" * (len(FAST_P) + 2),
        ]
        gm = rep.best_geomeans()
        lines += [
            f"| {g} | {fmt_x(gm.get(g))} | " + " | ".join(fmt_pct(v) for v in vals) + " |"
            for g, vals in rep.fast_p_table("speedup_vs_best").items()
        ]
    lines += [
        "",
        "## Tasks",
        "",
        "| task | level | status | reward | ms | eager ms | compile ms | vs eager | vs compile |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rep.tasks.values():
        o = r.outcome
        lines.append(
            f"| {r.task_id} | {r.group} | {o.status or r.state} | {'-' if o.reward is None else o.reward} | "
            f"{fmt_ms(r.ms('time_ms'))} | {fmt_ms(r.ms('eager_ms'))} | {fmt_ms(r.ms('compile_ms'))} | "
            f"{fmt_x(o.speedup_vs_eager)} | {fmt_x(o.speedup_vs_compile)} |"
        )
    return "\n".join(lines) + "\n"
