"""Spare evaluation children (eval.warm) on the CPU lane: a spare started during one
evaluation serves the next when it fits, is replaced when it does not or has died,
never serves twice, and leaves no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import FIXTURES
from test_pipeline_cpu import cpu_cfg, make_ws

from cuda_agent.eval import child, warm
from cuda_agent.eval.api import evaluate_workspace
from cuda_agent.eval.result import Status

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def no_spare_left():
    warm.discard()
    yield
    warm.discard()


@pytest.fixture
def spawns(monkeypatch):
    """Counts the pairs started (the evaluation's own and the spares)."""
    made: list[warm.Pair] = []
    real = warm.spawn

    def counting(cfg, precision):
        made.append(real(cfg, precision))
        return made[-1]

    monkeypatch.setattr(warm, "spawn", counting)
    return made


def _pids(pair: warm.Pair) -> list[subprocess.Popen]:
    return [pair.ref.proc, pair.cnd.proc]


def _gone(proc: subprocess.Popen, within: float = 10.0) -> bool:
    """Exited (and reaped) within the time, and its process group emptied (the sandbox's
    processes inside it go a moment after the group's SIGKILL)."""
    end = time.monotonic() + within
    try:
        proc.wait(timeout=within)
    except subprocess.TimeoutExpired:
        return False
    while time.monotonic() < end:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_spare_serves_the_next_evaluation_once(tmp_path, cache_env, spawns):
    cfg = cpu_cfg(spare_children=True, reuse_results=False)
    ws = make_ws(tmp_path)
    r1 = evaluate_workspace(ws, config=cfg)
    assert r1.status is Status.OK, r1.message + r1.log
    assert len(spawns) == 2 and warm._slot.item is spawns[1] and spawns[1].alive()
    first_pair, spare = spawns
    assert all(_gone(p) for p in _pids(first_pair))  # used once, then closed
    r2 = evaluate_workspace(ws, config=cfg)
    assert r2.status is Status.OK, r2.message + r2.log
    # the second evaluation took the spare (no third pair for it) and left a new spare
    assert len(spawns) == 3 and warm._slot.item is spawns[2]
    assert all(_gone(p) for p in _pids(spare))
    assert r2.defences["sandbox"] == r1.defences["sandbox"]


def test_the_next_spare_starts_before_this_evaluation_checks(tmp_path, cache_env, spawns, monkeypatch):
    """The spare for the next evaluation is started right after this one took its pair, so it
    warms while this one builds, verifies and times (an agent that edits at once finds it ready)."""
    from cuda_agent.eval import pipeline

    seen: list[tuple[int, bool]] = []
    real = pipeline._check_and_time

    def spy(*args, **kwargs):
        seen.append((len(spawns), warm._slot.item is not None and warm._slot.item.alive()))
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "_check_and_time", spy)
    cfg = cpu_cfg(spare_children=True, reuse_results=False)
    r = evaluate_workspace(make_ws(tmp_path), config=cfg)
    assert r.status is Status.OK, r.message + r.log
    assert seen == [(2, True)]  # its own pair and the live spare, before the checks began
    assert warm._slot.item is spawns[1]  # the end of the evaluation kept that spare, started no third


def test_an_evaluation_that_uses_no_children_keeps_the_spare(tmp_path, cache_env, spawns):
    """The agent's compile tool: no children used, so the warm spare stays, not a new one."""
    cfg = cpu_cfg(spare_children=True, reuse_results=False)
    ws = make_ws(tmp_path)
    assert evaluate_workspace(ws, config=cfg).status is Status.OK
    spare = warm._slot.item
    r = evaluate_workspace(ws, phase="compile", config=cfg)
    assert r.status is Status.OK, r.message + r.log
    assert warm._slot.item is spare and spare.alive() and len(spawns) == 2
    assert evaluate_workspace(ws, config=cfg).status is Status.OK
    assert len(spawns) == 3 and all(_gone(p) for p in _pids(spare))  # it served this one


def test_spare_of_another_spec_or_dead_is_replaced(tmp_path, cache_env, spawns):
    ws = make_ws(tmp_path)
    assert evaluate_workspace(ws, config=cpu_cfg(spare_children=True, reuse_results=False)).status is Status.OK
    spare = spawns[1]
    # other settings: the spare's children were started for the op log; these evaluations run without it
    r = evaluate_workspace(ws, config=cpu_cfg(spare_children=True, reuse_results=False, runtime_guards=False))
    assert r.status is Status.OK, r.message + r.log
    assert len(spawns) == 4 and all(_gone(p) for p in _pids(spare))
    # a spare whose candidate died is not used
    os.killpg(spawns[3].cnd.proc.pid, signal.SIGKILL)
    assert _gone(spawns[3].cnd.proc)
    r = evaluate_workspace(ws, config=cpu_cfg(spare_children=True, reuse_results=False, runtime_guards=False))
    assert r.status is Status.OK, r.message + r.log
    assert len(spawns) == 6 and all(_gone(p) for p in _pids(spawns[3]))


def test_a_crashing_candidate_does_not_spoil_the_spare(tmp_path, cache_env, spawns):
    cfg = cpu_cfg(spare_children=True, reuse_results=False)
    bad = evaluate_workspace(make_ws(tmp_path, "segfault", "bad"), config=cfg)
    assert bad.status is Status.RUNTIME_ERROR
    good = evaluate_workspace(make_ws(tmp_path, "good", "good"), config=cfg)
    assert good.status is Status.OK, good.message + good.log
    assert len(spawns) == 3  # the good one ran in the spare started after the crash


def test_no_spare_unless_asked_and_discard_leaves_nothing(tmp_path, cache_env, spawns):
    assert evaluate_workspace(make_ws(tmp_path), config=cpu_cfg(reuse_results=False)).status is Status.OK
    assert warm._slot.item is None and len(spawns) == 1
    warm.prepare(cpu_cfg(), "fp32")
    spare = warm._slot.item
    assert spare is not None
    dirs = [spare.cnd_io.parent]
    warm.discard()
    assert warm._slot.item is None
    assert all(_gone(p) for p in _pids(spare))
    assert not any(d.exists() for d in dirs)


def test_setup_moves_a_child_into_the_staged_dir(tmp_path, monkeypatch):
    """A spare starts elsewhere; `setup` gives the candidate the staged dir as cwd and import root."""
    monkeypatch.chdir(os.getcwd())  # restored after the test
    monkeypatch.setattr(sys, "path", list(sys.path))
    st = child.State("reference")
    from cuda_agent.eval import protocol as P

    child.cmd_setup(st, P.Setup(str(FIXTURES / "cpu_lane" / "task.py"), 1, "fp32", "cpu", str(tmp_path)))
    assert os.path.samefile(os.getcwd(), tmp_path) and sys.path[0] == str(tmp_path)
