"""The files of a bench report, written from a `Report` (`bench.report.build_report`).

Contract: `write_report(report, out_dir)` writes report.md (`report_text`, which also has the
terminal table), report.html (`report_html`: header, tables, SVG figures, a sortable and
filterable task table) and report/<task>.html pages (kernels, build log, findings, checks,
timing, the agent's episode turn by turn; `report_pages`) into `out_dir` (default: the run dir).
Its own module because the renderers import `bench.report` for its data: with the writer in
`bench.report`, the data and its views imported each other (issue 33).
"""

from __future__ import annotations

from pathlib import Path

from cuda_agent.bench.report import Report
from cuda_agent.bench.report_html import html_page
from cuda_agent.bench.report_pages import episode_page, task_page
from cuda_agent.bench.report_text import markdown


def write_report(rep: Report, out_dir: str | Path | None = None) -> tuple[Path, Path]:
    """report.md, report.html and report/<task>.html pages in `out_dir` (default: the run dir)."""
    out = Path(out_dir) if out_dir is not None else rep.run_dir
    out.mkdir(parents=True, exist_ok=True)
    md, page = out / "report.md", out / "report.html"
    md.write_text(markdown(rep))
    (out / "report").mkdir(exist_ok=True)
    for r in rep.tasks.values():
        (out / r.page).write_text(task_page(rep, r))
        if r.episode is not None:
            (out / r.page.replace(".html", ".episode.html")).write_text(
                episode_page(r.episode, back=f"{Path(r.page).name}")
            )
    page.write_text(html_page(rep))
    return md, page
