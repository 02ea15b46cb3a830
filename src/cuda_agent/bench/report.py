"""The report of a bench run: the paper's metrics table, Markdown and HTML with plots.

Contract: `build_report(run_dir)` reads RUN_DIR/results.sqlite and returns a
`Report`: per task the best outcome of its evaluations (best of trajectory;
stored solutions have one), the metric rows (per group, then overall; see
`metrics`), and counts of tasks still unfinished. The denominator is every
task the bench planned: an unfinished task or one that hit a harness error
counts as failed, and the report says how many there are.
`write_report(report)` writes RUN_DIR/report.md and RUN_DIR/report.html; the
HTML embeds two PNG plots as base64 (speedup distribution per group, per-task
speedup bars) when matplotlib is installed, and says so when it is not.
Not guaranteed: a stable layout of the HTML; parse results.sqlite, not it.
"""

from __future__ import annotations

import base64
import html
import io
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.bench.metrics import OVERALL, GroupMetrics, Outcome, best_of_trajectory, summarize
from cuda_agent.bench.store import ResultStore

COLUMNS = ("level", "tasks", "pass", "faster than eager", "faster than compile", "geomean vs eager", "geomean vs compile")


@dataclass
class Report:
    run_dir: Path
    meta: dict[str, Any]
    best: dict[str, Outcome]
    rows: list[GroupMetrics]
    unfinished: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    n_evaluations: int = 0
    n_cached: int = 0


def build_report(run_dir: str | Path) -> Report:
    store = ResultStore.open_existing(run_dir)
    meta = store.meta()
    planned: dict[str, str] = meta.get("planned", {})
    states = store.task_states()
    evals = store.rows()
    best = best_of_trajectory(store.outcomes())
    unfinished = sorted(t for t in planned if states.get(t, ("", "", ""))[1] != "done")
    errors = {t: s[2] for t, s in states.items() if s[1] == "error"}
    for tid, group in planned.items():
        if tid not in best:
            best[tid] = Outcome(tid, group, False, status="error" if tid in errors else "not_run")
    groups = set(planned.values())
    rows = summarize(best.values(), groups)
    return Report(Path(run_dir), meta, dict(sorted(best.items())), rows, unfinished, errors,
                  len(evals), sum(int(r["cached"] or 0) for r in evals))


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f} %"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def cells(g: GroupMetrics) -> list[str]:
    return [g.group, str(g.n_tasks), _pct(g.pass_rate), _pct(g.faster_than_eager), _pct(g.faster_than_compile),
            _x(g.geomean_vs_eager), _x(g.geomean_vs_compile)]


def rich_table(rep: Report) -> Any:
    from rich.table import Table

    t = Table(title=f"cuda-agent report: {rep.run_dir}", title_justify="left")
    for i, c in enumerate(COLUMNS):
        t.add_column(c, justify="left" if i == 0 else "right")
    for g in rep.rows:
        t.add_row(*cells(g), style="bold" if g.group == OVERALL else None)
    return t


def notes(rep: Report) -> list[str]:
    out = []
    if rep.unfinished:
        out.append(f"{len(rep.unfinished)} of {len(rep.best)} task(s) not finished; they count as failed "
                   f"(rerun `cuda-agent bench` with the same -o to finish them)")
    if rep.errors:
        out.append(f"{len(rep.errors)} task(s) hit a harness error: {', '.join(sorted(rep.errors)[:5])}")
    if rep.meta.get("device") == "cpu":
        out.append("evaluated on the CPU lane: times say nothing about kernels")
    return out


def markdown(rep: Report) -> str:
    lines = [f"# Benchmark report: {rep.run_dir.name}", "",
             f"- suite: `{rep.meta.get('suite', '?')}` ({rep.meta.get('suite_kind', '?')})",
             f"- candidates: `{rep.meta.get('mode', '?')}`",
             f"- evaluations stored: {rep.n_evaluations} ({rep.n_cached} answered by the evaluator's result cache)",
             f"- written: {time.strftime('%Y-%m-%d %H:%M:%S')}", "",
             "Pass = compiled and correct. Faster = correct and strictly faster than the baseline. "
             "Geomean = geometric mean of baseline time / candidate time over correct tasks. "
             "Overall = weighted by task count. Per task the best evaluation counts.", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cells(g)) + " |" for g in rep.rows]
    lines += [""] + [f"> {n}" for n in notes(rep)] + ["", "## Per task", "",
                                                      "| task | group | status | reward | vs eager | vs compile |",
                                                      "|---|---|---|---|---|---|"]
    for o in rep.best.values():
        lines.append(f"| {o.task_id} | {o.group} | {o.status or ('ok' if o.correct else 'failed')} | "
                     f"{'-' if o.reward is None else o.reward} | {_x(o.speedup_vs_eager)} | {_x(o.speedup_vs_compile)} |")
    return "\n".join(lines) + "\n"


def plots(rep: Report) -> dict[str, bytes]:
    """name -> PNG bytes; empty when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    out: dict[str, bytes] = {}
    groups = [g.group for g in rep.rows if g.group != OVERALL]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, attr, name in ((axes[0], "speedup_vs_eager", "eager"), (axes[1], "speedup_vs_compile", "torch.compile")):
        data = [[getattr(o, attr) for o in rep.best.values() if o.group == g and o.correct and getattr(o, attr)] for g in groups]
        shown = [(g, d) for g, d in zip(groups, data, strict=True) if d]
        if shown:
            ax.boxplot([d for _, d in shown], tick_labels=[g for g, _ in shown], showmeans=True)
            for i, (_, d) in enumerate(shown, start=1):
                ax.scatter([i] * len(d), d, s=10, alpha=0.6)
            ax.set_yscale("log")
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_title(f"speedup vs {name} (correct tasks)")
        ax.set_ylabel("baseline time / candidate time")
    fig.tight_layout()
    out["speedup_distribution"] = _png(fig, plt)
    tasks = list(rep.best.values())
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(tasks) + 2), 4))
    vals = [o.speedup_vs_compile if o.correct and o.speedup_vs_compile else 0.0 for o in tasks]
    colors = ["tab:green" if v > 1 else ("tab:orange" if v > 0 else "tab:red") for v in vals]
    ax.bar(range(len(tasks)), [v if v > 0 else 0.02 for v in vals], color=colors)
    ax.set_xticks(range(len(tasks)), [o.task_id for o in tasks], rotation=70, ha="right", fontsize=7)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    if any(v > 0 for v in vals):
        ax.set_yscale("log")
    ax.set_ylabel("speedup vs torch.compile")
    ax.set_title("per task (red: failed, orange: correct but not faster, green: faster)")
    fig.tight_layout()
    out["per_task"] = _png(fig, plt)
    return out


def _png(fig: Any, plt: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def html_page(rep: Report, images: dict[str, bytes]) -> str:
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in cells(g)) + "</tr>" for g in rep.rows)
    tasks = "".join(
        f"<tr><td>{e(o.task_id)}</td><td>{e(o.group)}</td><td>{e(o.status or '')}</td>"
        f"<td>{'-' if o.reward is None else o.reward}</td><td>{_x(o.speedup_vs_eager)}</td><td>{_x(o.speedup_vs_compile)}</td></tr>"
        for o in rep.best.values())
    imgs = "".join(f'<h2>{e(k.replace("_", " "))}</h2><img alt="{e(k)}" src="data:image/png;base64,'
                   f'{base64.b64encode(v).decode()}">' for k, v in images.items())
    if not images:
        imgs = "<p>plots need matplotlib (pip install 'cuda-agent[report]')</p>"
    note = "".join(f"<p class=note>{e(n)}</p>" for n in notes(rep))
    return (f"<!doctype html><html><head><meta charset=utf-8><title>cuda-agent report {e(rep.run_dir.name)}</title>"
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
            "padding:3px 8px;text-align:right}td:first-child{text-align:left}.note{color:#a60}</style></head><body>"
            f"<h1>Benchmark report: {e(rep.run_dir.name)}</h1><p>suite <code>{e(str(rep.meta.get('suite')))}</code>, "
            f"candidates <code>{e(str(rep.meta.get('mode')))}</code>, {rep.n_evaluations} evaluations</p>"
            f"<table><tr>{head}</tr>{body}</table>{note}{imgs}<h2>per task</h2>"
            "<table><tr><th>task</th><th>group</th><th>status</th><th>reward</th><th>vs eager</th><th>vs compile</th></tr>"
            f"{tasks}</table></body></html>\n")


def write_report(rep: Report) -> tuple[Path, Path]:
    md, page = rep.run_dir / "report.md", rep.run_dir / "report.html"
    md.write_text(markdown(rep))
    page.write_text(html_page(rep, plots(rep)))
    return md, page
