"""Issue 13: timed sections exclusive per physical GPU across processes, never left held by a crash;
an unstable timing does not pass silently."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from test_pipeline_cpu import cpu_cfg, make_ws

from cuda_agent.eval.api import evaluate_workspace
from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.gpu import GPU
from cuda_agent.eval.judge.result import EvalResult, Status, TimingStats
from cuda_agent.eval.timing import gpu_lock
from cuda_agent.eval.timing.timed import flag_unstable

HOLD = (
    "import sys,time\n"
    "from cuda_agent.eval.timing import gpu_lock\n"
    "with gpu_lock.exclusive(sys.argv[1]) as h:\n"
    "    print('held', h.exclusive, flush=True)\n"
    "    time.sleep(60)\n"
)


@pytest.fixture
def locks(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_AGENT_LOCK_DIR", str(tmp_path / "locks"))
    return tmp_path / "locks"


def _holder(key: str) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", HOLD, key], stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    assert p.stdout is not None and p.stdout.readline().strip() == "held True"
    return p


def test_a_second_process_waits_and_a_killed_holder_releases(locks):
    p = _holder("GPU-aaaa")
    try:
        with gpu_lock.exclusive("GPU-aaaa", wait_s=0.3) as h:
            assert not h.exclusive and h.waited_s >= 0.3  # held elsewhere: gave up, said so
        with gpu_lock.exclusive("GPU-bbbb", wait_s=0.3) as h:
            assert h.exclusive and h.waited_s < 0.3  # another GPU is another lock
        t0 = time.monotonic()
        os.kill(p.pid, signal.SIGKILL)  # a crash of the holder...
        with gpu_lock.exclusive("GPU-aaaa", wait_s=10) as h:
            assert h.exclusive and time.monotonic() - t0 < 5  # ...never leaves the lock held
    finally:
        p.kill()
        p.wait()


def test_two_holders_in_one_process_exclude_each_other(locks):
    with gpu_lock.exclusive("cpu", wait_s=5) as first:
        assert first.exclusive
        with gpu_lock.exclusive("cpu", wait_s=0.2) as second:
            assert not second.exclusive


def test_the_lock_key_is_the_physical_gpu(monkeypatch):
    assert GPU("NVIDIA H200", "9.0", "GPU-1234").key == "GPU-1234"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert GPU("NVIDIA H200", "9.0").key == "index-3" and GPU("cpu", "0.0").key == "cpu"


def test_an_unstable_timing_is_flagged():
    res = EvalResult(status=Status.OK, reward=3, correct=True)
    res.timing = TimingStats(median_ms=0.08, mean_ms=0.24, min_ms=0.03, cv=1.28, n=50, rounds=3)
    res.eager_timing = TimingStats(median_ms=1.0, mean_ms=1.0, min_ms=0.99, cv=0.01, n=50, rounds=1)
    flag_unstable(res, EvalConfig(device="cpu"))
    assert not res.unstable  # the CPU lane's host times are noise by nature
    flag_unstable(res, EvalConfig(round_spread="cv"))
    assert res.unstable and any(f.rule == "timing-unstable" and "cv 1.280" in f.message for f in res.findings)
    res.findings.clear()
    flag_unstable(res, EvalConfig())  # the default's rule: a record without a p10-p90 spread is judged by its CV
    assert any(f.rule == "timing-unstable" and "p10-p90 spread 1.280" in f.message for f in res.findings)
    calm = EvalResult(status=Status.OK, reward=3, correct=True, timing=res.eager_timing)
    flag_unstable(calm, EvalConfig())
    assert not calm.unstable and not calm.findings


@pytest.mark.slow
def test_unstable_results_are_retried_flagged_and_not_cached(tmp_path, cache_env, locks, monkeypatch):
    from cuda_agent.eval.timing import timed

    calls = []

    def always_unstable(res, cfg):  # the CPU lane is exempt from the flag: stand in for a GPU's shaky timing
        calls.append(1)
        res.unstable = True
        res.findings.append(timed.Finding("timing-unstable", "stand-in", timed.Severity.WARN))

    monkeypatch.setattr(timed, "flag_unstable", always_unstable)
    cfg = cpu_cfg(retry_unstable=1)
    ws = make_ws(tmp_path)
    r = evaluate_workspace(ws, config=cfg)
    assert r.status is Status.OK and r.unstable and r.reward is not None, r.message
    assert any(f.rule == "timing-unstable" for f in r.findings) and r.gpu_wait_s >= 0
    assert len(calls) == 2  # looked at once more
    again = evaluate_workspace(ws, config=cfg)
    assert not again.cache.get("result")  # an unstable verdict is never served from the cache


@pytest.mark.slow
def test_baselines_are_precomputed_into_the_evaluators_cache(tmp_path, cache_env, locks, capsys):
    """issue 16: `cuda-agent baselines SUITE` times each task once, and an evaluation then finds them cached."""
    from conftest import FIXTURES

    from cuda_agent.cli.main import main

    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "relu2.py").write_text((FIXTURES / "cpu_lane" / "task.py").read_text())
    assert main(["baselines", str(suite), "--device", "cpu"]) == 0
    first = capsys.readouterr().out
    assert "1/1 tasks have baselines (0 were cached)" in first
    assert main(["baselines", str(suite), "--device", "cpu"]) == 0
    assert "(1 were cached)" in capsys.readouterr().out  # resumable: the cache answers
    from cuda_agent.eval.config import EvalConfig
    from cuda_agent.task import Task
    from cuda_agent.task.workspace import init_workspace

    ws = init_workspace(Task.from_file(suite / "relu2.py"), tmp_path / "ws")
    import shutil

    shutil.copytree(FIXTURES / "cpu_lane" / "kernels", ws / "kernels", dirs_exist_ok=True)
    shutil.copy(FIXTURES / "cpu_lane" / "model_new.py", ws / "model_new.py")
    r = evaluate_workspace(ws, config=EvalConfig(device="cpu"))
    assert r.status is Status.OK and r.cache.get("baselines") is True, (r.message, r.cache)


# issue 16: evaluations share a GPU for their untimed work; a timing runs alone

MODE = (
    "import sys,time\n"
    "from cuda_agent.eval.timing import gpu_lock\n"
    "ctx = gpu_lock.exclusive if sys.argv[2] == 'exclusive' else gpu_lock.untimed\n"
    "with ctx(sys.argv[1], float(sys.argv[4])) as h:\n"
    "    print('held', h.exclusive, flush=True)\n"
    "    time.sleep(float(sys.argv[3]))\n"
)


def _taker(key: str, mode: str, hold_s: float = 60, wait_s: float = 600) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", MODE, key, mode, str(hold_s), str(wait_s)],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )


def _held(p: subprocess.Popen[str]) -> bool:
    assert p.stdout is not None
    return p.stdout.readline().strip() == "held True"


def test_untimed_holders_share_the_gpu_and_a_timing_waits_for_them(locks):
    a = _taker("GPU-s", "untimed")
    try:
        assert _held(a)
        with gpu_lock.untimed("GPU-s", wait_s=0.5) as u:
            assert u.exclusive  # two untimed holders at once
        with gpu_lock.exclusive("GPU-s", wait_s=0.3) as e:
            assert not e.exclusive  # a timing never runs beside untimed work
        a.kill()
        a.wait()
        with gpu_lock.exclusive("GPU-s", wait_s=5) as e:
            assert e.exclusive
    finally:
        a.kill()
        a.wait()


def test_a_waiting_timing_goes_before_untimed_work_that_comes_after_it(locks):
    a = _taker("GPU-g", "untimed")
    try:
        assert _held(a)
        timer = _taker("GPU-g", "exclusive", hold_s=0.5, wait_s=30)  # waits for `a` behind the gate
        time.sleep(0.5)
        with gpu_lock.untimed("GPU-g", wait_s=0.5) as late:
            assert not late.exclusive  # queued behind the timing, not slipped in beside `a`
        a.kill()
        assert _held(timer)  # `a` gone: the timing runs
        timer.wait(10)
        with gpu_lock.untimed("GPU-g", wait_s=5) as u:
            assert u.exclusive
    finally:
        for p in (a, timer):
            p.kill()
            p.wait()


def test_a_timed_section_sets_its_own_threads_untimed_hold_aside(locks):
    with gpu_lock.untimed("GPU-t", wait_s=2) as mine:
        assert mine.exclusive
        with gpu_lock.exclusive("GPU-t", wait_s=2) as e:
            assert e.exclusive  # no deadlock on its own shared hold
            other = _taker("GPU-t", "untimed", hold_s=0, wait_s=0.3)
            assert not _held(other)  # nobody's untimed work beside the timing
            other.wait()
        timer = _taker("GPU-t", "exclusive", hold_s=0, wait_s=0.3)
        assert not _held(timer)  # the shared hold is back after the timing
        timer.wait()


@pytest.mark.slow
def test_an_evaluations_untimed_work_waits_while_another_times(tmp_path, cache_env, locks):
    """A verify-only evaluation has no timed section: before the untimed hold it ran beside a timing."""
    ws = make_ws(tmp_path)
    evaluate_workspace(ws, phase="verify", config=cpu_cfg())  # builds the extension: the second run is quick
    t = _taker("cpu", "exclusive", hold_s=4)
    try:
        assert _held(t)
        t0 = time.monotonic()
        r = evaluate_workspace(ws, phase="verify", config=cpu_cfg(reuse_results=False))
        waited = time.monotonic() - t0
    finally:
        t.kill()
        t.wait()
    assert r.status is Status.OK and r.correct, r.message
    assert r.gpu_wait_s >= 2.5 and waited >= 2.5, (r.gpu_wait_s, waited)
    # the wait is booked as the requests' (no timed section in a verify-only evaluation)
    assert r.phases_s.get("lock.shared", 0.0) >= 2.5 and "lock.exclusive" not in r.phases_s, r.phases_s


@pytest.mark.slow
def test_the_time_an_evaluation_holds_the_gpu_alone_is_recorded(tmp_path, cache_env, locks):
    ws = make_ws(tmp_path)
    v = evaluate_workspace(ws, phase="verify", config=cpu_cfg())
    t0 = time.monotonic()
    p = evaluate_workspace(ws, config=cpu_cfg(reuse_results=False))
    wall = time.monotonic() - t0
    assert v.correct and v.gpu_held_s == 0  # no timed section
    assert p.status is Status.OK and 0 < p.gpu_held_s < wall, (p.gpu_held_s, wall)
    assert p.gpu_held_s >= p.phases_s["timing"] * 0.9  # the timed calls run inside it


@pytest.mark.slow
def test_torch_compiles_build_of_a_baseline_happens_before_the_gpu_is_held_alone(
    tmp_path, cache_env, locks, monkeypatch
):
    """A baseline-cache miss compiles the reference (CPU-bound, seconds) outside the timed section,
    where evaluations sharing the GPU would otherwise wait for it; its timing stays inside."""
    import contextlib

    from cuda_agent.eval.timing import timed

    inside: list[bool] = [False]
    seen: list[tuple[bool, object]] = []
    section, build = timed.section, timed.build_compiled

    @contextlib.contextmanager
    def tracked(*a, **k):
        with section(*a, **k):
            inside[0] = True
            try:
                yield
            finally:
                inside[0] = False

    def spy(*a, **k):
        out = build(*a, **k)
        seen.append((inside[0], out))
        return out

    monkeypatch.setattr(timed, "section", tracked)
    monkeypatch.setattr(timed, "build_compiled", spy)
    r = evaluate_workspace(make_ws(tmp_path), config=cpu_cfg(compile_baseline=True))
    assert r.status is Status.OK and r.compile_ms is not None, r.message
    assert seen == [(False, True)]  # built once, with the GPU not held alone
    assert r.phases_s["baseline_compile_build"] > 0 and "baseline_compile" in r.phases_s


def test_baselines_cli_refuses_cuda_without_a_gpu(monkeypatch, capsys):
    from cuda_agent.cli.main import main
    from cuda_agent.pool import local

    monkeypatch.setattr(local, "visible_gpus", lambda: [])
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert main(["baselines", "examples"]) == 2
    assert "no CUDA GPU is visible" in capsys.readouterr().err


@pytest.mark.slow
def test_an_evaluation_that_cannot_get_the_gpu_goes_on_and_says_so(tmp_path, cache_env, locks):
    ws = make_ws(tmp_path)
    t = _taker("cpu", "exclusive", hold_s=120)
    try:
        assert _held(t)
        r = evaluate_workspace(ws, phase="verify", config=cpu_cfg(gpu_lock_wait_s=0.5))
    finally:
        t.kill()
        t.wait()
    assert r.correct and r.gpu_wait_s >= 0.5, r.message
    assert any(f.rule == "gpu-lock-timeout" and "ran without it" in f.message for f in r.findings), r.findings


def test_a_share_holds_the_gpu_only_while_work_is_in_flight(locks):
    """`Share`: held from the first outstanding request to the last reply, free between them;
    inside this thread's own timed section it takes nothing (and so cannot deadlock on it)."""
    share = gpu_lock.Share("GPU-r", wait_s=2)
    share.enter()
    share.enter()  # the reference and the candidate both working
    timer = _taker("GPU-r", "exclusive", hold_s=0, wait_s=0.3)
    assert not _held(timer)  # a timing waits for work in flight
    timer.wait()
    share.leave()
    timer = _taker("GPU-r", "exclusive", hold_s=0, wait_s=0.3)
    assert not _held(timer)  # one request still out
    timer.wait()
    share.leave()
    timer = _taker("GPU-r", "exclusive", hold_s=0, wait_s=2)
    assert _held(timer)  # nothing in flight: the GPU is free for someone's timing
    timer.wait()
    with gpu_lock.exclusive("GPU-r", wait_s=2) as e:
        assert e.exclusive
        t0 = time.monotonic()
        share.enter()  # a timed call sent inside the section
        share.leave()
        assert time.monotonic() - t0 < 0.5 and share.waited_s < 0.5
    assert share.missed == 0


@pytest.mark.slow
def test_an_evaluation_lets_the_gpu_go_between_its_childrens_requests(tmp_path, cache_env, locks, monkeypatch):
    """Before issue 16's second step an evaluation held the GPU shared from its children's start to
    their end, so a timing waited for whole evaluations (their staging, file checks and builds
    included). Now the hold comes and goes with the requests: several takes, none left at the end."""
    takes: list[float] = []
    real = gpu_lock.untimed

    def counting(*a, **kw):
        takes.append(time.monotonic())
        return real(*a, **kw)

    monkeypatch.setattr(gpu_lock, "untimed", counting)
    r = evaluate_workspace(make_ws(tmp_path), config=cpu_cfg(reuse_results=False))
    assert r.status is Status.OK and r.correct, r.message
    assert len(takes) >= 3, takes  # load, checks and compares in separate holds
    with gpu_lock.exclusive("cpu", wait_s=1) as e:
        assert e.exclusive  # nothing left held


ECHO = (
    "import argparse, json, os\n"
    "ap = argparse.ArgumentParser()\n"
    "ap.add_argument('--role'); ap.add_argument('--fd-in', type=int); ap.add_argument('--fd-out', type=int)\n"
    "a, _ = ap.parse_known_args()\n"
    "with os.fdopen(a.fd_in) as fin, os.fdopen(a.fd_out, 'w') as fout:\n"
    "    for line in fin:\n"
    "        fout.write(json.dumps({'ok': True, 'echo': json.loads(line)['cmd']}) + '\\n')\n"
    "        fout.flush()\n"
)


class _Depth:
    def __init__(self) -> None:
        self.depth = 0

    def enter(self) -> None:
        self.depth += 1

    def leave(self) -> None:
        self.depth -= 1


def test_a_child_books_each_request_to_the_share_it_was_sent_under(tmp_path):
    """Replies come in request order: the reply to a request sent before the share was attached
    must not let go of the hold of a later one; a killed child lets go of all it had."""
    from cuda_agent.eval.channel.processes import Child

    (tmp_path / "echo_child.py").write_text(ECHO)
    child = Child(
        "reference",
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        log_path=tmp_path / "log",
        module="echo_child",
    )
    try:
        child.send({"cmd": "early"})  # before the evaluation attached its share
        share = _Depth()
        child.share = share
        child.send({"cmd": "late"})
        assert share.depth == 1
        assert child._receive_raw(10, "early")["echo"] == "early"
        assert share.depth == 1  # "late" still in flight
        assert child._receive_raw(10, "late")["echo"] == "late" and share.depth == 0
        child.send({"cmd": "never answered"})
        child.send({"cmd": "nor this"})
        assert share.depth == 2
    finally:
        child.close()
    assert share.depth == 0


class _FakeNVML:
    """pynvml's calls that foreign_work makes, counted."""

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        self.inits = 0
        self.fail_handle = False

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        if self.fail_handle:
            raise RuntimeError("driver reset")
        return uuid

    def nvmlDeviceGetProcessUtilization(self, h: str, since_us: int) -> list:
        from types import SimpleNamespace

        return [SimpleNamespace(pid=2_000_000_000, smUtil=30), SimpleNamespace(pid=2_000_000_001, smUtil=0)]


def test_foreign_work_initializes_nvml_once_per_process(monkeypatch):
    import sys

    fake = _FakeNVML()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(gpu_lock, "_nvml_pid", None)
    assert gpu_lock.foreign_work("GPU-x", 0.0) == "pid 2000000000 at 30% SM"  # the idle one is not named
    assert gpu_lock.foreign_work("GPU-x", 0.0) == "pid 2000000000 at 30% SM"
    assert fake.inits == 1
    monkeypatch.setattr(gpu_lock, "_nvml_pid", -1)  # as in a forked child: NVML's state is the parent's
    gpu_lock.foreign_work("GPU-x", 0.0)
    assert fake.inits == 2
    fake.fail_handle = True  # a failure reports, and the next call initializes again
    assert gpu_lock.foreign_work("GPU-x", 0.0).startswith("unavailable: RuntimeError")
    fake.fail_handle = False
    gpu_lock.foreign_work("GPU-x", 0.0)
    assert fake.inits == 3
