"""benchmarks/ray_pool.py (issue 29 item 5's GPU measurement) on the CPU: the outcomes of two bench runs read
from their stores, and every task whose outcome differs, or that one run lacks, named."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from cuda_agent.bench.store import ResultStore
from cuda_agent.eval.judge.result import EvalResult, Status

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
_spec = importlib.util.spec_from_file_location("ray_pool", ROOT / "benchmarks" / "ray_pool.py")
rp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rp)


def _store(run: Path, outcomes: dict[str, tuple[Status, int, bool, float]]) -> None:
    s = ResultStore(run)
    for task, (status, reward, correct, t) in outcomes.items():
        s.record(task, "level1", EvalResult(status, reward, correct, time_ms=t, task_hash="h"), phase="full")


def test_runs_that_differ_only_in_time_agree(tmp_path):
    _store(tmp_path / "a", {"L1-1": (Status.OK, 3, True, 0.10), "L1-2": (Status.INCORRECT, -1, False, 0.0)})
    _store(tmp_path / "b", {"L1-1": (Status.OK, 3, True, 0.13), "L1-2": (Status.INCORRECT, -1, False, 0.0)})
    a, b = rp.outcomes(tmp_path / "a"), rp.outcomes(tmp_path / "b")
    assert a["L1-1"][:3] == ("ok", 3, 1) and rp.differences(a, b) == ([], [])


def test_a_reward_moved_by_the_time_alone_is_named_apart(tmp_path):
    """The GPU run's case (H100, 2026-12-06): KLDivLoss, same events, clock 0.691 vs 0.754 ms, reward 3 vs 2."""
    _store(tmp_path / "a", {"L1-98": (Status.OK, 3, True, 0.691)})
    _store(tmp_path / "b", {"L1-98": (Status.OK, 2, True, 0.754)})
    hard, timed = rp.differences(rp.outcomes(tmp_path / "a"), rp.outcomes(tmp_path / "b"))
    assert hard == [] and timed == ["L1-98: reward local 3 vs ray 2, time that counts 0.691 vs 0.754 ms, 9.1 % apart"]


def test_a_changed_status_or_a_missing_task_is_named(tmp_path):
    _store(tmp_path / "a", {"L1-1": (Status.OK, 3, True, 0.1), "L1-2": (Status.OK, 2, True, 0.1)})
    _store(tmp_path / "b", {"L1-1": (Status.INCORRECT, -1, False, 0.1)})
    hard, timed = rp.differences(rp.outcomes(tmp_path / "a"), rp.outcomes(tmp_path / "b"))
    assert timed == []
    assert hard == [
        "L1-1: local ('ok', 3, 1) vs ray ('incorrect', -1, 0)",
        "L1-2: local ('ok', 2, 1) vs ray missing",
    ]
