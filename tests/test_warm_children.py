"""Spare evaluation children (eval.channel.children) on the CPU lane: a spare started during one
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

from cuda_agent.eval.api import evaluate_workspace
from cuda_agent.eval.channel import children as warm
from cuda_agent.eval.child import main as child
from cuda_agent.eval.judge.result import Status

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

    def counting(cfg, precision, gpu_key=None):
        made.append(real(cfg, precision, gpu_key))
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
    real = pipeline._load

    def spy(*args, **kwargs):
        seen.append((len(spawns), warm._slot.item is not None and warm._slot.item.alive()))
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "_load", spy)
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
    from cuda_agent.eval.channel import messages as P

    child.cmd_setup(st, P.Setup(str(FIXTURES / "cpu_lane" / "task.py"), 1, "fp32", "cpu", str(tmp_path)))
    assert os.path.samefile(os.getcwd(), tmp_path) and sys.path[0] == str(tmp_path)


def _gated_cfg():
    """A spare as the GPU lane starts one (CUDA gated on the lock), with children that run on the CPU
    (their CUDA start-up fails quietly here and the gate's exchange is all that is tested)."""
    return cpu_cfg(device="cuda", sandbox="off", gpu_lock_wait_s=60)


def test_a_spare_starts_cuda_only_under_the_gpu_lock(tmp_path, monkeypatch):
    """A spare's children import torch at once but create their CUDA contexts only under a shared hold
    of the GPU's lock: not while a timed section holds it, and pair_for waits for that start-up."""
    from cuda_agent.eval.channel import processes as procs
    from cuda_agent.eval.timing import gpu_lock

    monkeypatch.setenv("CUDA_AGENT_LOCK_DIR", str(tmp_path / "locks"))
    events: list[tuple[str, str, float]] = []
    real_send, real_raw = procs.Child.send, procs.Child.receive_raw

    def send(self, req):
        if isinstance(req, dict):
            events.append((self.role, f"send {req.get('cmd')}", time.monotonic()))
        return real_send(self, req)

    def receive_raw(self, timeout, cmd):
        out = real_raw(self, timeout, cmd)
        events.append((self.role, f"got {cmd}", time.monotonic()))
        return out

    monkeypatch.setattr(procs.Child, "send", send)
    monkeypatch.setattr(procs.Child, "receive_raw", receive_raw)
    with gpu_lock.exclusive("gpu-x", 5):  # a timing under way in this process (another slot, say)
        pair = warm.spawn(_gated_cfg(), "fp32", "gpu-x")
        try:
            end = time.monotonic() + 120
            while sum(e[1] == "got imported" for e in events) < 2 and time.monotonic() < end:
                time.sleep(0.05)
            assert sum(e[1] == "got imported" for e in events) == 2, events
            time.sleep(0.5)
            assert not [e for e in events if e[1] == "send warm_cuda"]  # waits for the timed section
            released = time.monotonic()
        except BaseException:
            pair.close()
            raise
    try:
        assert pair.ready()
        sends = [e for e in events if e[1] == "send warm_cuda"]
        assert sorted(r for r, *_ in sends) == ["candidate", "reference"] and all(t >= released for *_, t in sends)
        assert sum(e[1] == "got warm_cuda" for e in events) == 2
        # after the start-up the children take ordinary commands
        from cuda_agent.eval.channel import messages as P

        reply = pair.ref.request(P.Setup(str(FIXTURES / "cpu_lane" / "task.py"), 1, "fp32", "cpu", str(tmp_path)), 60)
        assert isinstance(reply, P.SetupReply), reply
    finally:
        pair.close()
    assert all(_gone(p) for p in _pids(pair))


def test_a_spare_that_dies_while_starting_is_replaced(tmp_path, monkeypatch, spawns):
    monkeypatch.setenv("CUDA_AGENT_LOCK_DIR", str(tmp_path / "locks"))
    cfg = _gated_cfg()
    warm.prepare(cfg, "fp32", "gpu-y")
    spare = warm._slot.item
    assert spare is not None and spare._warming is not None
    spare.cnd.proc.kill()  # dies before (or during) its start-up
    pair = warm.pair_for(cfg, "fp32")
    try:
        assert pair is not spare and pair.alive() and len(spawns) == 2
    finally:
        pair.close()
    assert all(_gone(p) for p in _pids(spare))


def test_a_child_gated_on_go_takes_an_ordinary_first_command(tmp_path):
    """Without the go (a parent that never sends it), the first command is served as usual."""
    from cuda_agent.eval.channel import messages as P
    from cuda_agent.eval.channel.processes import Child, scrubbed_env

    kid = Child(
        "reference", cwd=tmp_path, env=scrubbed_env(), log_path=tmp_path / "ref.log", child_args=("--warm-cuda-on-go",)
    )
    try:
        assert kid.receive_raw(120, "imported") == {"ok": True, "stage": "imported"}
        reply = kid.request(P.Setup(str(FIXTURES / "cpu_lane" / "task.py"), 1, "fp32", "cpu", str(tmp_path)), 60)
        assert isinstance(reply, P.SetupReply), reply
    finally:
        kid.close()
