"""The in-process timing forgery family (tests/redteam/forgery, issue 28) on the CPU: the honest
solutions pass the static rules, every forger is rejected by them and, built, by the post-build
symbol check; the GPU runner's bar is checked on made-up rows. The runtime half (the evaluator's
clock against the forgers, static gate off) needs a GPU: benchmarks/forgery_redteam.py."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from cuda_agent.eval.checks.static import check_single_file, check_sources
from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.judge.result import Severity, Status
from cuda_agent.task import Task
from cuda_agent.task.workspace import init_workspace, read_agent_sources

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import forgery_redteam as fr  # noqa: E402


def _findings(task: str, path: Path):
    if fr.TASKS[task] == "workspace":
        return check_sources(read_agent_sources(path))
    return check_single_file(path.read_text())


@pytest.mark.parametrize("task", sorted(fr.TASKS))
def test_honest_twins_pass_and_forgers_are_rejected_statically(task, tmp_path):
    honest = fr.materialize(task, tmp_path / "honest")
    assert not [f for f in _findings(task, honest) if f.severity is Severity.REJECT]
    for factor in (0.9, 0.05):
        forged = fr.materialize(task, tmp_path / f"forged{factor}", factor)
        rules = {f.rule for f in _findings(task, forged) if f.severity is Severity.REJECT}
        assert "symbol-rename" in rules, rules
        text = "".join(p.read_text() for p in (forged.rglob("*") if forged.is_dir() else [forged]) if p.is_file())
        assert f"{factor}" in text and "PyRun_SimpleString" in text


def test_the_bar_fails_on_a_gained_milestone_an_unflagged_lie_or_a_forged_time_shown():
    honest = {
        "task": "t",
        "how": "honest",
        "factor": None,
        "reward": 2,
        "status": "ok",
        "findings": [],
        "time_ms": 1.0,
        "reported_ms": 1.0,
    }
    fine = {
        **honest,
        "how": "native",
        "factor": 0.8,
        "status": "ok",
        "findings": ["timing-forged"],
        "time_ms": 1.0,
        "reported_ms": 0.8,
    }
    assert fr.judge_rows([honest, fine]) == []
    gained = {**fine, "reward": 3}
    unflagged = {**fine, "findings": []}
    shown = {**fine, "time_ms": 0.8}
    assert any("all above the honest" in b for b in fr.judge_rows([honest, gained, gained, gained]))
    for row, needle in ((unflagged, "not flagged"), (shown, "shown as time_ms")):
        assert any(needle in b for b in fr.judge_rows([honest, row])), row
    # issue 28's bar is a gain in 3 of 3 runs: one or two runs above the twin are listed, not a failure
    # (the clock-only rule gives a liar its twin's spread: single runs near a line land on either side)
    assert fr.judge_rows([honest, gained, fine, gained]) == []
    assert fr.judge_rows([honest, gained]) == []
    assert fr.above_twin([honest, gained, fine, gained]) == [
        "t native x0.8: 2 of 3 runs above the honest twin's lowest 2"
    ]
    # against three honest runs 2, 3, 2 (median 2) three runs of 3 still gain; against 3, 3, 2 they do not
    assert fr.judge_rows([honest, {**honest, "reward": 3}, honest, gained, gained, gained])
    assert fr.judge_rows([{**honest, "reward": 3}, {**honest, "reward": 3}, honest, gained, gained, gained]) == []
    # the parent re-timed it with a device synchronize (its host time far above its events): flagged, even
    # where the re-timing undid the lie so that the claim agrees with the clock; a warning of another kind is not
    retimed = {**fine, "findings": ["symbol-rename", "side-stream-work"], "reported_ms": 1.0, "time_ms": 1.01}
    assert fr.judge_rows([honest, retimed]) == []
    other = {**retimed, "findings": ["symbol-rename", "timing-unstable"]}
    assert any("not flagged" in b for b in fr.judge_rows([honest, other]))


def test_judge_reads_the_rows_of_several_calls_together(tmp_path, capsys):
    """A red team cut at its limit and finished by another call: --judge weighs both files' rows as one."""
    import json

    base = {"status": "ok", "findings": [], "time_ms": 1.0, "reported_ms": 1.0, "task": "t", "factor": None}
    honest = {**base, "how": "honest", "reward": 2}
    forger = {**base, "how": "native", "factor": 0.5, "reward": 2, "findings": ["timing-forged"], "reported_ms": 0.5}
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps([honest]))
    second.write_text(json.dumps([forger]))
    argv = sys.argv
    try:
        sys.argv = ["forgery_redteam.py", "--judge", str(first), str(second)]
        assert fr.main() == 0
        assert "BAR HOLDS" in capsys.readouterr().out
        second.write_text(json.dumps([{**forger, "reward": 3}] * 3))  # above its twin in 3 of 3, in the other file
        assert fr.main() == 1
        assert "all above the honest twin's 2" in capsys.readouterr().out
    finally:
        sys.argv = argv


@pytest.mark.slow
def test_a_built_native_forger_is_rejected_by_the_symbol_check_alone(tmp_path, cache_env, monkeypatch):
    """With the static rules out of the way, the forger's object still references PyRun_SimpleString
    (the assembler label's target): the post-build check rejects it, naming the symbol."""
    from cuda_agent.eval import pipeline
    from cuda_agent.eval.api import evaluate_workspace
    from cuda_agent.eval.checks import gate as static_gate

    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists():
        pytest.skip("no nvcc")
    monkeypatch.setattr(pipeline, "workspace_findings", lambda staged: [])
    monkeypatch.setattr(static_gate, "static_findings", lambda *a, **k: [])
    t = Task.from_file(fr.FORGERY / "tasks" / "relu_scale.py")
    ws = init_workspace(t, tmp_path / "ws")
    sol = fr.materialize("relu_scale", tmp_path / "sol", 0.5)
    shutil.copytree(sol, ws, dirs_exist_ok=True)
    r = evaluate_workspace(ws, phase="compile", config=EvalConfig(device="cpu", reuse_results=False))
    assert r.status is Status.REJECTED and r.reward == -1, (r.status, r.message, r.log[-800:])
    assert any(f.rule == "built-symbol" and "PyRun_SimpleString" in f.message for f in r.findings), r.findings
    # the runtime lane's switch lets it build (what the GPU runner needs to show the clock alone)
    r2 = evaluate_workspace(
        ws, phase="compile", config=EvalConfig(device="cpu", reuse_results=False, static_gate=False)
    )
    assert r2.status is not Status.REJECTED, (r2.status, r2.message, r2.log[-800:])


def test_clock_means_compare_the_forgers_nets_with_the_honest_ones():
    """The forgery-quick call at 530e0ab (H100): honest 44.6 us; forgers 43.5-47.5 us: the lie did not lower the net."""
    base = {"task": "relu_scale", "status": "ok", "findings": [], "time_ms": 0.05, "reported_ms": 0.05, "reward": 2}
    honest = [{**base, "how": "honest", "factor": None, "trusted_ms": t} for t in (0.0446, 0.0450)]
    nets = (0.043477, 0.043842, 0.046743, 0.042978, 0.043884, 0.047494)
    forgers = [{**base, "how": "native", "factor": 0.9, "trusted_ms": t} for t in nets]
    rejected = {**base, "how": "switch", "factor": 0.05, "trusted_ms": 0.001, "status": "rejected"}
    (line,) = fr.clock_means([*honest, *forgers, rejected])
    assert line.startswith("relu_scale: honest 44.80 us (n 2), forgers 44.74 us (n 6): -0.1 %")
