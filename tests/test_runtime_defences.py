"""Runtime defences on the CPU lane: the ATen op log, the thread census, fresh
timed inputs with random timed calls checked, and the speed-of-light flag.

The hostile candidates would be rejected by the static checks first; these
tests switch the static gate off (monkeypatching `static_findings`) so that
they show the runtime layer catching them on its own."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from conftest import FIXTURES
from conftest import cpu_cfg as lane_cfg

from cuda_agent.eval import pipeline
from cuda_agent.eval.api import evaluate_workspace
from cuda_agent.eval.checks import gate as static_gate
from cuda_agent.eval.checks import symbols
from cuda_agent.eval.checks.runtime import disallowed, runtime_findings
from cuda_agent.eval.checks.speed_of_light import bandwidth_for, finding, floor_ms
from cuda_agent.eval.child.guards import OpLog, new_threads, thread_ids
from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.judge.result import Severity, Status
from cuda_agent.eval.shared.events import PROBE_CALLS, derive_seed, side_stream_suspect, time_calls
from cuda_agent.task import Task
from cuda_agent.task.workspace import init_workspace

LANE = FIXTURES / "cpu_lane"


def hostile_ws(tmp_path: Path, behaviour: str, name: str = "ws", defines: dict[str, str] | None = None) -> Path:
    ws = init_workspace(Task.from_file(LANE / "task.py"), tmp_path / name)
    shutil.copytree(LANE / "kernels", ws / "kernels", dirs_exist_ok=True)
    text = (LANE / "hostile" / "hostile_binding.cpp").read_text()
    for key, value in (defines or {}).items():
        text = text.replace(f"#define {key} ", f"#define {key} {value} //", 1)
    (ws / "kernels" / "hostile_binding.cpp").write_text(text)
    shutil.copy(FIXTURES / "hostile_acts.h", ws / "kernels" / "hostile_acts.h")
    src = (LANE / "model_new.py").read_text().replace("cuda_extension.good(", f"cuda_extension.{behaviour}(")
    (ws / "model_new.py").write_text(src)
    return ws


def cpu_cfg(**kw) -> EvalConfig:
    return lane_cfg(**{"reuse_results": False, **kw})


@pytest.fixture
def no_static_gate(monkeypatch):
    # both entry points: workspaces go through static_gate.workspace_findings
    monkeypatch.setattr(pipeline, "static_findings", lambda *a, **k: [])
    monkeypatch.setattr(static_gate, "static_findings", lambda *a, **k: [])
    # and the post-build symbol check, which rejects what the hostile acts link to (fork, ...) before they run
    monkeypatch.setattr(symbols, "check", lambda *a, **k: [])


# ---- unit level: fast -------------------------------------------------------


def test_oplog_allows_allocation_views_copies_and_reports_compute():
    x = torch.randn(4, 6)
    log = OpLog()
    with torch.no_grad(), log:
        y = torch.empty_like(x)
        torch.zeros(3)
        x.view(-1).reshape(6, 4).t().contiguous()
        x.clone()
        y.copy_(x)
    assert disallowed(log.ops) == []
    log = OpLog()
    with torch.no_grad(), log:
        x.relu()
        x * 2
        x.to(torch.float16)
        y.fill_(1.0)
    assert disallowed(log.ops) == ["aten::_to_copy(dtype change)", "aten::fill_", "aten::mul", "aten::relu"]


def test_thread_census_sees_a_thread_that_outlives_the_call():
    import threading

    before = thread_ids()
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        assert new_threads(before)
    finally:
        stop.set()
        t.join()
    assert (
        runtime_findings({"ops": {"aten::mul": 2}, "new_threads": ["x (tid 1)"]}, "here")[0].rule == "runtime-aten-op"
    )
    assert [f.rule for f in runtime_findings({"ops": {"aten::empty_like": 5}, "new_threads": ["x"]}, "here")] == [
        "runtime-thread"
    ]
    assert runtime_findings({"ops": {"aten::view": 1}, "new_threads": []}, "here") == []


def test_fresh_inputs_give_every_timed_call_new_values_and_keep_checked_outputs():
    seen: list[float] = []

    def fn(x):
        seen.append(float(x.sum()))
        return x * 2

    def fresh(g):
        return [torch.randn(8, generator=torch.Generator().manual_seed(derive_seed(7, g)))]

    kept: dict[int, torch.Tensor] = {}
    stats, _ = time_calls(
        fn,
        [[torch.randn(8)]],
        clock="host",
        n_warmup=3,
        n_timed=20,
        max_cv=1.0,
        max_rounds=1,
        fresh_inputs=fresh,
        checked=[0.0, 0.5, 0.99],
        kept=kept,
    )
    timed = seen[3 + PROBE_CALLS :]  # after the warm-up and the unheld probe calls
    assert len(timed) == stats["n"] >= 20 and len(set(timed)) == len(timed)
    n = stats["n"]
    assert set(kept) == {0, n // 2, min(n - 1, int(0.99 * n))}  # the caller's picks, not the harness's
    from cuda_agent.eval.shared.events import checked_calls

    assert checked_calls(10, [0.5, 0.51, 0.52]) == {5, 6, 7}  # colliding picks stay distinct
    assert checked_calls(2, [0.1, 0.2, 0.3]) == {0, 1}
    for g, out in kept.items():
        assert torch.equal(out, fresh(g)[0] * 2)
    assert derive_seed(7, 1) == derive_seed(7, 1) != derive_seed(7, 2)


def test_side_stream_and_speed_of_light_decisions():
    assert not side_stream_suspect({"median_ms": 1.0, "host_over_event": 1.05})
    assert not side_stream_suspect({"median_ms": 0.01, "host_over_event": 2.0})  # 10 us absolute: launch noise
    assert side_stream_suspect({"median_ms": 0.1, "host_over_event": 3.0})
    assert bandwidth_for("NVIDIA H200") == 4.3e12 and bandwidth_for("NVIDIA H20") == 3.6e12
    assert bandwidth_for("some cpu") is None
    fl = floor_ms(4_300_000_000, 4.3e12)
    assert abs(fl - 1.0) < 1e-9
    assert finding(0.6, fl, 1, 4.3e12) is None
    f = finding(0.3, fl, 4_300_000_000, 4.3e12)
    assert f is not None and f.rule == "faster-than-light" and f.severity is Severity.WARN


# ---- the pipeline: slow -----------------------------------------------------


@pytest.mark.slow
def test_aten_fallback_in_the_binding_is_rejected_at_runtime(tmp_path, cache_env, no_static_gate):
    r = evaluate_workspace(hostile_ws(tmp_path, "aten_fallback"), config=cpu_cfg())
    assert r.status is Status.REJECTED and r.reward == -1, (r.status, r.message, r.log[-2000:])
    f = next(f for f in r.findings if f.rule == "runtime-aten-op")
    assert "aten::relu" in f.message and "aten::mul" in f.message


@pytest.mark.slow
def test_thread_left_running_is_rejected_at_runtime(tmp_path, cache_env, no_static_gate):
    r = evaluate_workspace(hostile_ws(tmp_path, "leaves_thread"), config=cpu_cfg())
    assert r.status is Status.REJECTED and r.reward == -1, (r.status, r.message)
    assert any(f.rule == "runtime-thread" for f in r.findings)


@pytest.mark.slow
def test_good_candidate_passes_the_guards_and_faster_than_light_warns(tmp_path, cache_env):
    ws = hostile_ws(tmp_path, "good")
    for f in ("hostile_binding.cpp", "hostile_acts.h"):  # the honest kernels only
        (ws / "kernels" / f).unlink()
    r = evaluate_workspace(ws, config=cpu_cfg(bandwidth=1e3))  # 1 kB/s: every time beats this floor
    assert r.status is Status.OK and r.reward in (1, 2, 3), (r.message, r.log[-2000:])
    assert r.defences.get("runtime_guards") == "on"
    assert [c.label for c in r.checks if c.label.startswith("timed#")].__len__() == EvalConfig().n_checked_timed
    assert any(f.rule == "faster-than-light" and f.severity is Severity.WARN for f in r.findings)
    assert not any(f.rule.startswith("runtime-") for f in r.findings)
