"""Serve a run's report and its agent episodes on 127.0.0.1, built fresh on every request.

Contract: `make_server(run_dir, port)` returns a `ThreadingHTTPServer` bound to 127.0.0.1 only
(the report shows kernels and prompts; it is not published to the network). Routes:
- `/` redirects to `/report.html` for a bench run dir (results.sqlite), or to `/episode.html`
  for one `cuda-agent optimize` run dir (trajectory.jsonl);
- `/report.html`, `/report/<task>.html`, `/report/<task>.episode.html`: the pages that
  `report_files.write_report` writes (same links), rendered from results.sqlite and the episode files at
  request time, so a bench or an episode in progress shows its latest state on reload;
- `/episode.html`: the optimize run's episode.
Everything else is 404. Request paths are matched against the run's task names, never joined
to a file path, so nothing outside the run dir can be read. Nothing is written to the run dir.

Not guaranteed: speed for very large runs (each request rebuilds the report from the database).
"""

from __future__ import annotations

from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from cuda_agent.bench.report import build_report
from cuda_agent.bench.report_html import html_page
from cuda_agent.bench.report_pages import episode_page, task_page
from cuda_agent.bench.store import FILENAME, StoreError, safe_name


def run_kind(run_dir: Path) -> str:
    """ "bench" (results.sqlite), "episode" (trajectory.jsonl) or "" (neither)."""
    if (run_dir / FILENAME).is_file():
        return "bench"
    return "episode" if (run_dir / "trajectory.jsonl").is_file() else ""


def render(run_dir: Path, path: str) -> tuple[int, str]:
    """(HTTP status, HTML) for one request path."""
    kind = run_kind(run_dir)
    if path == "/episode.html" and kind == "episode":
        return 200, episode_page(run_dir / "trajectory.jsonl", back="/episode.html")
    if kind != "bench" or not (path == "/report.html" or path.startswith("/report/")):
        return 404, "<h1>not found</h1>"
    rep = build_report(run_dir)
    if path == "/report.html":
        return 200, html_page(rep)
    name = path.removeprefix("/report/")
    for row in rep.tasks.values():
        if name == f"{safe_name(row.task_id)}.html":
            return 200, task_page(rep, row)
        if name == f"{safe_name(row.task_id)}.episode.html" and row.episode is not None:
            return 200, episode_page(row.episode, back=f"{safe_name(row.task_id)}.html")
    return 404, "<h1>no such task in this run</h1>"


def make_server(run_dir: str | Path, port: int = 0) -> ThreadingHTTPServer:
    root = Path(run_dir).resolve()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server protocol
            path = unquote(urlsplit(self.path).path)
            if path == "/":
                target = "/report.html" if run_kind(root) == "bench" else "/episode.html"
                self.send_response(HTTPStatus.FOUND)
                self.send_header("Location", target)
                self.end_headers()
                return
            try:
                status, page = render(root, path)
            except (StoreError, OSError) as err:  # a damaged or vanished run: say so in the page
                status, page = 500, f"<h1>cannot read the run</h1><p>{err}</p>"
            data = page.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet: the terminal shows the URL only
            return

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)
