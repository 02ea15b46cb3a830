"""Issue 17 item 5: `bench` on a machine without a GPU says so, marks the tasks "not scored" (not
"done", so a rerun on a GPU machine evaluates them), and the report shows them as not scored
instead of 0.0 % pass and red failures. Runs of older versions, whose no_gpu tasks were marked
done, are re-run too."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
import torch
from conftest import FIXTURES

from cuda_agent.bench.report import build_report
from cuda_agent.bench.report_text import rich_table
from cuda_agent.bench.store import ResultStore
from cuda_agent.cli.main import main
from cuda_agent.eval.judge.result import EvalResult, Status

LANE = FIXTURES / "cpu_lane"


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_bench_without_a_gpu_scores_nothing_and_says_so(tmp_path, cache_env, capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    suite, sols = tmp_path / "suite", tmp_path / "sols"
    suite.mkdir()
    src = (LANE / "task.py").read_text()
    for name, width in (("a", 257), ("b", 129)):
        (suite / f"{name}.py").write_text(src.replace("torch.randn(64, 257)", f"torch.randn(64, {width})"))
        shutil.copytree(LANE, sols / name, ignore=shutil.ignore_patterns("task.py", "hostile", "solution_inline.py"))
    run = tmp_path / "run"
    argv = [
        "bench",
        str(suite),
        "--solutions",
        str(sols),
        "-o",
        str(run),
        "--gpus",
        "1",
        "--compile-workers",
        "1",
        "-q",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "no CUDA GPU is visible" in out and "2 not scored" in out and "0.0 %" not in out
    db = sqlite3.connect(run / "results.sqlite")
    assert dict(db.execute("SELECT task_id, state FROM tasks")) == {"a": "not_scored", "b": "not_scored"}
    db.close()
    rep = build_report(run)
    assert rep.not_scored == ["a", "b"] and rep.rows[-1].n_tasks == 0
    html = (run / "report.html").read_text()
    assert "No task was scored" in html and 'class="not_scored"' in html
    assert (run / "candidates" / "a" / "model_new.py").is_file()  # the kernels the report links to
    assert main(argv) == 0  # a rerun evaluates them again (here: still no GPU)
    assert "2 task(s) finished this run, 0 already done" in capsys.readouterr().out
    db = sqlite3.connect(run / "results.sqlite")
    assert db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] == 4
    db.close()


def test_no_gpu_tasks_marked_done_by_older_runs_are_not_done(tmp_path):
    store = ResultStore(tmp_path / "run")
    nogpu = EvalResult(status=Status.NO_GPU, reward=None, correct=False, message="compiled with nvcc")
    wrong = EvalResult(status=Status.INCORRECT, reward=-1, correct=False)
    for tid, res in (
        ("old_nogpu", nogpu),
        ("wrong", wrong),
        ("env", EvalResult(status=Status.ENV_ERROR, reward=None, correct=False)),
    ):
        store.record(tid, "g", res, phase="profile")
        store.finish(tid, "g", "done")
    store.record_missing("nosol", "g", "no solution")
    assert store.done_ids() == {"wrong", "nosol"}
    store.set_meta(planned={"old_nogpu": "g", "wrong": "g", "env": "g", "nosol": "g"})
    rep = build_report(tmp_path / "run")
    assert sorted(rep.not_scored) == ["env", "old_nogpu"] and rep.rows[-1].n_tasks == 2
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(rich_table(rep))
    assert "overall" in console.export_text()
