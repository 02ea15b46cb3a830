"""Issue 17, the report: header facts, absolute times beside ratios, reward counts, fast_p against
eager and torch.compile, the paper's metrics per level, per-task pages (kernels, build log,
findings, trajectory), the sortable and filterable table (checked in headless Chromium when
/usr/bin/chromium exists), and `cuda-agent view` on 127.0.0.1. The run is written through
the real store from typed results, with times chosen so every figure can be computed by hand."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import ROOT, can_mount_read_only, run_read_only

from cuda_agent.agent.trajectory import TrajectoryWriter
from cuda_agent.bench.environment import describe
from cuda_agent.bench.report import build_report
from cuda_agent.bench.report_files import write_report
from cuda_agent.bench.store import ResultStore
from cuda_agent.bench.view import make_server
from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.judge.result import CheckRecord, EvalResult, Finding, Severity, Status, TimingStats

CHROMIUM = Path("/usr/bin/chromium")
# task -> (group, status, reward, candidate ms, eager ms, compile ms)
RUN = {
    "l1_fast": ("level1", Status.OK, 3, 0.1, 1.0, 0.5),
    "l1_eager_only": ("level1", Status.OK, 2, 0.9, 1.0, 0.8),
    "l1_slow": ("level1", Status.OK, 1, 1.25, 1.0, 1.0),
    "l1_wrong": ("level1", Status.INCORRECT, -1, None, None, None),
    "l2_fast": ("level2", Status.OK, 3, 0.5, 1.0, 0.75),
    "l2_broken": ("level2", Status.COMPILE_ERROR, -1, None, None, None),
    "l2_nogpu": ("level2", Status.NO_GPU, None, None, None, None),
}


def _result(status: Status, reward, t, te, tc) -> EvalResult:
    r = EvalResult(
        status=status,
        reward=reward,
        correct=status is Status.OK,
        message=f"{status.value} message",
        time_ms=t,
        eager_ms=te,
        compile_ms=tc,
        speedup_vs_eager=te / t if t else None,
        speedup_vs_compile=tc / t if t else None,
        gpu="NVIDIA H200" if status is not Status.NO_GPU else None,
        torch="2.11.0",
        task_hash="h",
        candidate_hash="c",
    )
    if t:
        r.timing = TimingStats(median_ms=t, mean_ms=t, min_ms=t, cv=0.012, n=50)
        r.checks = [CheckRecord("seed#0", True, 1e-6, 2e-7, 0.0, tol_ratio=1e-4, rel_l2_worst=2e-7)]
    if status is Status.COMPILE_ERROR:
        r.log = '== kernels/k.cu: compile failed (exit 1)\nk.cu(3): error: identifier "oops" is undefined'
        r.findings = [Finding("torch-view", "a view op in forward", Severity.WARN, "model_new.py", 7)]
    return r


@pytest.fixture
def run_dir(tmp_path) -> Path:
    run = tmp_path / "run"
    store = ResultStore(run)
    env = describe(EvalConfig())
    env.update(driver="570.86.15-test", gpus=["NVIDIA H200"])
    store.set_meta(
        planned={**{t: g for t, (g, *_) in RUN.items()}, "l2_nosol": "level2"},
        suite="/suite",
        suite_kind="kernelbench",
        mode="solutions:/sols",
        environment=[env],
    )
    for tid, (group, status, reward, t, te, tc) in RUN.items():
        store.record(tid, group, _result(status, reward, t, te, tc), phase="profile", source="solution")
        store.finish(tid, group, "not_scored" if status is Status.NO_GPU else "done")
    store.record_missing("l2_nosol", "level2", "no solution for l2_nosol")
    cand = run / "candidates" / "l1_fast"
    (cand / "kernels").mkdir(parents=True)
    (cand / "model_new.py").write_text("class ModelNew:  # the scored solution\n    pass\n")
    (cand / "kernels" / "k.cu").write_text("__global__ void fast_kernel() {}\n")
    ep = run / "episodes" / "l1_slow"
    ep.mkdir(parents=True)
    w = TrajectoryWriter(ep / "trajectory.jsonl", {"task": {"name": "l1_slow", "hash": "h"}, "model": "test-model"})
    w.message(
        {
            "role": "assistant",
            "content": "I will write a kernel <b>now</b>",
            "tool_calls": [
                {
                    "id": "1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "nvcc --version"}'},
                }
            ],
        },
        1,
        usage={"prompt_tokens": 10, "completion_tokens": 5},
    )
    w.message({"role": "tool", "tool_call_id": "1", "content": "release 13.0"}, 1, name="bash", ok=True, elapsed_s=0.1)
    w.evaluation(1, "1", "profile", _result(Status.OK, 1, 1.25, 1.0, 1.0), best=True)
    w.end(reason="finished", turns=1, reward=1, usage={"total_tokens": 15})
    w.close()
    return run


def test_report_figures_are_the_hand_computed_ones(run_dir):
    rep = build_report(run_dir)
    l1, l2, overall = rep.rows
    assert (l1.n_tasks, l1.pass_rate, l1.faster_than_eager, l1.faster_than_compile) == (4, 0.75, 0.5, 0.25)
    assert (l2.n_tasks, l2.n_correct) == (3, 1)  # l2_nogpu is not scored: out of the denominator
    assert rep.not_scored == ["l2_nogpu"] and overall.n_tasks == 7
    counts = rep.reward_counts()
    assert counts["level1"] == {"3": 1, "2": 1, "1": 1, "-1": 1, "none": 0, "not scored": 0, "unfinished": 0}
    assert counts["overall"]["-1"] == 3 and counts["overall"]["not scored"] == 1
    fp = rep.fast_p_table("speedup_vs_compile")["overall"]
    assert fp[0] == pytest.approx(4 / 7) and fp[3] == pytest.approx(2 / 7)  # p = 0 and p = 1
    md = (write_report(rep)[0]).read_text()
    assert (
        "570.86.15-test" in md
        and "NVIDIA H200" in md
        and "| l1_fast | level1 | ok | 3 | 0.1 | 1 | 0.5 | 10.00x | 5.00x |" in md
    )
    page = (run_dir / "report" / "l2_broken.html").read_text()
    assert "identifier &quot;oops&quot; is undefined" in page and "torch-view" in page
    assert "fast_kernel" in (run_dir / "report" / "l1_fast.html").read_text()
    episode = (run_dir / "report" / "l1_slow.episode.html").read_text()
    assert "nvcc --version" in episode and "&lt;b&gt;now&lt;/b&gt;" in episode and "new best" in episode


class _Dom(HTMLParser):
    """Rows of the task table (id, hidden), svg series and bars, and text by element id."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, bool]] = []
        self.series: dict[str, dict[str, str]] = {}
        self.bars: list[dict[str, str]] = []
        self.ids: dict[str, str] = {}
        self.body: dict[str, str] = {}
        self._tr: dict[str, str] | None = None
        self._first_td = False
        self._id: str | None = None

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if tag == "body":
            self.body = a
        if tag == "tr" and "data-status" in a:
            self._tr, self._first_td = a, True
        if tag == "td" and self._tr is not None and self._first_td and a.get("data-k") == "task":
            self.rows.append((a["data-v"], "hidden" in self._tr))
            self._first_td = False
        if tag == "path" and a.get("class") == "series":
            self.series[a["data-label"]] = a
        if tag == "rect" and a.get("class") == "bar":
            self.bars.append(a)
        if "id" in a:
            self._id = a["id"]

    def handle_data(self, data):
        if self._id:
            self.ids[self._id] = self.ids.get(self._id, "") + data

    def handle_endtag(self, tag):
        if tag in ("span", "table", "h1"):
            self._id = None


def _chromium_dom(url: str) -> _Dom:
    out = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=3000", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    dom = _Dom()
    dom.feed(out)
    return dom


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium")
def test_report_in_headless_chromium(run_dir, tmp_path):
    write_report(build_report(run_dir))
    page = (run_dir / "report.html").as_uri()
    dom = _chromium_dom(page + "#sort=vs_compile:desc&level=level1")
    assert dom.body.get("data-ready") == "1"  # the inline script ran, offline
    shown = [t for t, hidden in dom.rows if not hidden]
    assert shown == ["l1_fast", "l1_eager_only", "l1_slow", "l1_wrong"]  # sorted by speedup, none last
    assert all(hidden for t, hidden in dom.rows if not t.startswith("l1_"))
    assert dom.ids["shown"].strip() == "4 of 8 tasks shown"
    assert set(dom.series) == {"vs eager", "vs torch.compile"}
    assert float(dom.series["vs torch.compile"]["data-first"]) == pytest.approx(4 / 7, rel=1e-5)
    assert int(dom.series["vs eager"]["data-n"]) == 5  # p = 0 and one corner per distinct speedup (10, 2, 1.11, 0.8)
    assert len(dom.bars) == 8 and {b["data-label"] for b in dom.bars if b["data-value"]} == {
        "l1_fast",
        "l1_eager_only",
        "l1_slow",
        "l2_fast",
    }
    assert "570.86.15-test" in dom.ids["header"] and "NVIDIA H200" in dom.ids["header"]
    assert "75.0 %" in dom.ids["metrics"] and "25.0 %" in dom.ids["metrics"]
    asc = _chromium_dom(page + "#sort=ms:asc")
    assert [t for t, _ in asc.rows][:4] == ["l1_fast", "l2_fast", "l1_eager_only", "l1_slow"]
    status = _chromium_dom(page + "#status=no_gpu")
    assert [t for t, hidden in status.rows if not hidden] == ["l2_nogpu"]


def test_view_serves_live_pages_on_localhost_only(run_dir):
    server = make_server(run_dir, 0)
    host, port = server.server_address[:2]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://{host}:{port}"
    try:
        assert host == "127.0.0.1"
        with urllib.request.urlopen(base + "/") as r:  # redirected to the report
            assert r.url.endswith("/report.html") and b"Benchmark report" in r.read()
        with urllib.request.urlopen(base + "/report/l1_slow.episode.html") as r:
            assert b"nvcc --version" in r.read()
        store = ResultStore(run_dir)  # a result lands while the page is served: the next load shows it
        store.record("l2_nogpu", "level2", _result(Status.OK, 3, 0.2, 1.0, 0.9), phase="profile")
        store.finish("l2_nogpu", "level2", "done")
        with urllib.request.urlopen(base + "/report/l2_nogpu.html") as r:
            assert b"0.2" in r.read()
        for bad in ("/report/../results.sqlite", "/report/%2e%2e/results.sqlite", "/etc/passwd", "/report/nope.html"):
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(base + bad)
            assert err.value.code == 404, bad
    finally:
        server.shutdown()
        server.server_close()


def test_view_of_an_optimize_run_shows_its_episode(run_dir):
    episode_dir = run_dir / "episodes" / "l1_slow"
    server = make_server(episode_dir, 0)
    host, port = server.server_address[:2]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/") as r:
            assert r.url.endswith("/episode.html") and b"nvcc --version" in r.read()
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://{host}:{port}/report.html")
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.skipif(not can_mount_read_only(), reason="needs unprivileged user and mount namespaces")
def test_report_of_a_read_only_run_writes_nothing_there(run_dir, tmp_path):
    before = sorted(p.name for p in run_dir.iterdir())
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cli = [sys.executable, "-m", "cuda_agent", "report", str(run_dir)]
    table = run_read_only(run_dir, [*cli, "--no-files"], env)
    assert table.returncode == 0 and "overall" in table.stdout and "Traceback" not in table.stderr, table.stderr
    elsewhere = run_read_only(run_dir, [*cli, "--out", str(tmp_path / "elsewhere")], env)
    assert elsewhere.returncode == 0 and "cuda-agent view" in elsewhere.stdout, elsewhere.stderr
    refused = run_read_only(run_dir, cli, env)
    assert refused.returncode == 2 and "--out DIR" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in run_dir.iterdir()) == before
    assert (tmp_path / "elsewhere" / "report.html").is_file() and (
        tmp_path / "elsewhere" / "report" / "l1_fast.html"
    ).is_file()


def test_html_has_no_external_reference(run_dir):
    write_report(build_report(run_dir))
    text = (run_dir / "report.html").read_text()
    assert not re.search(r'(src|href)="(https?:)?//', text) and "<script src" not in text
