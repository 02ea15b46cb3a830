"""Issue 12: the parent believes nothing the candidate process says.

Unit tests of the typed protocol and of the trusted clock's arithmetic, then the whole pipeline
on the CPU lane with the test-only hijack switch standing in for a harness that candidate code
rewrote (the static rules would stop the real hijack first): fake fast times, a spoofed GPU, a
path in a reply, a remount, skipped burst work and a dropped guard report each end with reward -1,
and the honest candidate still scores."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import FIXTURES
from test_pipeline_cpu import cpu_cfg, make_ws

from cuda_agent.eval import child
from cuda_agent.eval import protocol as P
from cuda_agent.eval import trusted_time as tt
from cuda_agent.eval.api import evaluate_workspace
from cuda_agent.eval.result import Status
from cuda_agent.sandbox import probe

# ------------------------------------------------------------------ protocol

META = {"tensor": True, "plain": True, "dtype": "float32", "shape": [2, 3], "device": "cpu", "contiguous": True,
        "nbytes": 24, "aliases_input": False}
STATS = {"median_ms": 1.0, "mean_ms": 1.1, "min_ms": 0.9, "cv": 0.01, "spread": 0.01, "n": 50, "rounds": 1, "host_over_event": 1.0,
         "probe_ms": 1.0, "enqueue_ms": 0.01, "hold_ms": 0.05}


def test_well_formed_replies_parse_into_types():
    run = P.parse_reply("run", {"ok": True, "outputs": [{"meta": [META], "inputs_mutated": False, "in_nbytes": 8}], "t": {"call": 0.1}})
    assert isinstance(run, P.RunReply) and run.outputs[0].meta[0].shape == (2, 3) and run.guard is None
    tm = P.parse_reply("time", {"ok": True, "stats": STATS, "outputs": [{"meta": [META], "call": 3}]})
    assert isinstance(tm, P.TimeReply) and tm.outputs[0].call == 3
    err = P.parse_reply("run", {"ok": False, "error": "boom", "traceback": "tb", "cuda_error": True})
    assert isinstance(err, P.ErrorReply) and err.cuda_error


@pytest.mark.parametrize("cmd,obj,needle", [
    ("setup", {"ok": True, "notes": [], "gpu": "NVIDIA B200"}, "unexpected ['gpu']"),
    ("setup", {"ok": True}, "missing ['notes']"),
    ("run", {"ok": True, "outputs": [{"meta": [META], "inputs_mutated": False, "in_nbytes": 8, "file": "/etc/passwd"}], "t": {}},
     "unexpected ['file']"),
    ("run", {"ok": True, "outputs": [{"meta": [{**META, "nbytes": 1}], "inputs_mutated": False, "in_nbytes": 8}], "t": {}},
     "does not match shape"),
    ("run", {"ok": True, "outputs": [{"meta": [{**META, "dtype": "float128"}], "inputs_mutated": False, "in_nbytes": 8}], "t": {}},
     "unknown dtype"),
    ("time", {"ok": True, "stats": {**STATS, "median_ms": float("nan")}, "outputs": []}, "finite number"),
    ("time", {"ok": True, "stats": {**STATS, "median_ms": -1.0}, "outputs": []}, "finite number"),
    ("time", {"ok": True, "stats": {**STATS, "min_ms": 5.0}, "outputs": []}, "above the median"),
    ("time", {"ok": True, "stats": {k: v for k, v in STATS.items() if k != "n"}, "outputs": []}, "missing ['n']"),
    ("time", {"ok": True, "stats": {**STATS, "n": True}, "outputs": []}, "integer"),
    ("burst", {"ok": True, "digests": [["1.0"]]}, "expected a number"),
    ("run", {"ok": "yes"}, "boolean 'ok'"),
    ("run", ["not", "an", "object"], "boolean 'ok'"),
])
def test_malformed_replies_are_refused(cmd, obj, needle):
    with pytest.raises(P.ProtocolError, match=None) as e:
        P.parse_reply(cmd, obj)
    assert needle in str(e.value)


def test_requests_round_trip_and_paths_are_the_parents():
    req = P.Setup("/t/model.py", 7, "fp32", "cuda", "/t", solution=P.Solution("/t/model_new.py", "/b/x.so"), guard=True)
    assert P.request_from_wire(P.to_wire(req)) == req
    assert P.request_from_wire(P.to_wire(P.Burst(1, 2, 3))) == P.Burst(1, 2, 3)
    assert P.output_path("/io", "seed0", 0) == "/io/seed0_0.bin" and P.timed_path("/io", 5) == "/io/timed_call_5.bin"


# ------------------------------------------------------------------ the trusted clock's arithmetic


def test_milestones_stand_only_where_the_bursts_confirm_them():
    ok = tt.judge(0.5, 1.0, 0.8, burst_ms=0.6, burst_eager_ms=1.1, burst_compile_ms=0.9)
    assert (ok.kind, ok.faster_eager, ok.faster_compile) == ("ok", True, True)
    # claimed faster than compile, but back to back it is 20 % slower: that milestone is withdrawn
    part = tt.judge(0.5, 1.0, 0.8, burst_ms=1.08, burst_eager_ms=1.1, burst_compile_ms=0.9)
    assert (part.kind, part.faster_eager, part.faster_compile) == ("unconfirmed", True, False)
    # nothing claimed, nothing to confirm: a slow burst is no finding
    slow = tt.judge(2.0, 1.0, 0.8, burst_ms=5.0, burst_eager_ms=1.1, burst_compile_ms=0.9)
    assert (slow.kind, slow.faster_eager, slow.faster_compile) == ("ok", False, False)


def test_a_claimed_milestone_the_bursts_grossly_contradict_is_forged():
    v = tt.judge(0.05, 1.0, 0.8, burst_ms=3.0, burst_eager_ms=1.1, burst_compile_ms=0.9)
    assert v.kind == "forged" and "not the candidate's" in v.message
    assert tt.burst_size(0.001, 1 << 20) == tt.K_MAX and tt.burst_size(100.0, 1 << 20) == tt.K_MIN
    assert tt.burst_size(0.001, 1 << 30) == tt.BURST_BYTES // (1 << 30)  # all k input sets live at once


def test_a_claim_its_own_burst_contradicts_is_forged_even_when_the_baselines_do_not():
    """The H200 case that clock v2 only withdrew: a kernel about as fast as eager reports a time 20x
    faster. Against the baselines its burst is within 2x (0.51 vs 0.41 ms), but the loop with no
    model costs 0.1 ms a call, so a true 0.0175 ms call would make bursts of about 0.12 ms."""
    base = dict(burst_ms=0.511, burst_eager_ms=0.407, burst_compile_ms=0.41)
    assert tt.judge(0.0175, 0.3, 0.3, **base).kind == "unconfirmed"  # without the loop: withdrawn only
    v = tt.judge(0.0175, 0.3, 0.3, **base, loop_ms=0.1, slack_ms=0.03)
    assert v.kind == "forged" and "loop alone" in v.message
    # honest: a fast kernel whose burst is its time plus the loop's, even a host-bound one whose loop
    # overhead is twice its own time, stands
    assert tt.judge(0.02, 1.4, 1.3, burst_ms=0.11, burst_eager_ms=1.5, burst_compile_ms=1.4,
                    loop_ms=0.09, slack_ms=0.03).kind == "ok"
    assert tt.judge(0.005, 0.3, 0.3, burst_ms=0.06, burst_eager_ms=0.33, burst_compile_ms=0.33,
                    loop_ms=0.05, slack_ms=0.03).kind == "ok"
    # host-bound (many launches from Python, hidden from the device time by the timing's hold): the
    # reported host time excuses the slow burst from being forged, but no milestone counts
    host = tt.judge(0.1, 0.5, 0.5, burst_ms=0.37, burst_eager_ms=0.55, burst_compile_ms=0.55,
                    loop_ms=0.02, slack_ms=0.03, enqueue_ms=0.35)
    assert (host.kind, host.faster_eager, host.faster_compile) == ("unconfirmed", False, False)
    assert tt.judge(0.1, 0.5, 0.5, burst_ms=0.37, burst_eager_ms=0.55, burst_compile_ms=0.55,
                    loop_ms=0.02, slack_ms=0.03).kind == "forged"
    # a slow claim claims nothing: its burst is no finding, however slow
    assert tt.judge(2.0, 1.0, 0.8, burst_ms=50.0, burst_eager_ms=1.1, burst_compile_ms=0.9, loop_ms=0.1).kind == "ok"


# (claim, eager, compile, burst, burst eager, burst compile, loop, enqueue) per call in ms, and the
# milestones that must stand: rows of the H200 red-team run of 2026-12-03 (scripts/gpu-session.sh G)
H200_ROWS = {
    "example/diag_matmul": ((0.02118, 1.356, 1.354, 0.11935, 1.5676, 1.5553, 0.10283, 0.0110), (True, True)),
    "example/gelu_chain": ((0.0728, 0.8819, 0.1461, 0.3982, 1.2865, 0.47143, 0.32415, 0.0091), (True, True)),
    "example/linear_bias_relu": ((0.7707, 0.9036, 0.8965, 1.2578, 1.3723, 1.3860, 0.41189, 0.0270), (True, True)),
    "example/matmul_sum_scale": ((0.03878, 1.408, 1.39, 0.11859, 1.5702, 1.5647, 0.07787, 0.0191), (True, True)),
    "example/row_softmax_wide": ((0.1423, 0.1746, 0.1601, 0.87857, 0.91467, 0.88314, 0.7167, 0.0129), (True, True)),
    "release/scale_add": ((0.003936, 0.006752, 0.00384, 0.070556, 0.070437, 0.117433, 0.050482, 0.0111), (True, False)),
    "control/matmul_cublas_sgemm": ((0.02883, 0.02877, 0.0287, 0.070926, 0.086241, 0.132555, 0.051851, 0.0169), (False, False)),
}


def test_the_h200_rows_honest_stand_and_the_fake_fast_time_is_forged():
    """Clock v4 gave the 20x lie (a 0.111 ms kernel reporting 0.0056 ms) reward 1 on the H200: its
    burst (0.134 ms) was within FORGED x (claim + loop 0.052 ms). Its burst less the loop is 15x its
    claim; every honest row's stays within FIT x its claim plus the slack."""
    for name, (row, kept) in H200_ROWS.items():
        c, e, k, b, be, bc, loop, enq = row
        v = tt.judge(c, e, k, b, be, bc, loop_ms=loop, slack_ms=0.03, enqueue_ms=enq)
        assert (v.kind, v.faster_eager, v.faster_compile) == ("ok", *kept), (name, v)
    v = tt.judge(0.005563, 0.02877, 0.0287, 0.134408, 0.076978, 0.132555, loop_ms=0.051851, slack_ms=0.03,
                 enqueue_ms=0.000824)
    assert v.kind == "forged" and "loop alone" in v.message, v
    # the same lie with its true host time reported is still forged: that figure only excuses host work
    assert tt.judge(0.005563, 0.02877, 0.0287, 0.134408, 0.076978, 0.132555, loop_ms=0.051851, slack_ms=0.03,
                    enqueue_ms=0.0088).kind == "forged"


def test_digests_within_tolerance_pass_and_skipped_work_fails():
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(4096, generator=g)
    w = torch.randn(4096, generator=g)
    scale = float(torch.linalg.vector_norm(1e-2 + 1e-2 * ref.abs()))
    honest = ref + 1e-3 * torch.randn(4096, generator=g)
    d = lambda t: float((t * w).sum())  # noqa: E731
    assert tt.digest_mismatch([d(honest)], [d(ref)], [scale]) is None
    assert "tolerance scales" in (tt.digest_mismatch([d(torch.zeros(4096))], [d(ref)], [scale]) or "")
    assert tt.digest_mismatch([float("nan")], [d(ref)], [scale]) is not None


def test_the_reference_reads_only_the_candidates_io_dir(tmp_path):
    st = child.State("reference")
    io = tmp_path / "io"
    io.mkdir()
    st.peer_io = os.path.realpath(io)
    st.kept["ref#0"] = [torch.ones(3)]
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    with pytest.raises(PermissionError):
        child.cmd_compare(st, P.Compare("ref#0", "x", str(victim), [], 1e-2, 1e-2, 1 << 20))
    assert victim.read_text() == "keep me"
    os.symlink(victim, io / "seed0_0.bin")  # a link the candidate planted in its own dir
    out = child.cmd_compare(st, P.Compare("ref#0", "x", str(io / "seed0_0.bin"), [], 1e-2, 1e-2, 1 << 20))
    assert out["check"]["passed"] is False and "link" in out["check"]["message"]
    assert victim.read_text() == "keep me" and not (io / "seed0_0.bin").exists()


# ------------------------------------------------------------------ the pipeline against a rewritten harness (CPU lane)

@pytest.fixture
def hijack(monkeypatch):
    def set_(value: str) -> None:
        monkeypatch.setenv("CUDA_AGENT_TEST_HIJACK", value)
    return set_


@pytest.mark.slow
def test_an_honest_slow_candidate_agrees_with_the_parents_clock(tmp_path, cache_env):
    r = evaluate_workspace(make_ws(tmp_path, "slow"), config=cpu_cfg(reuse_results=False))
    assert r.status is Status.OK and r.correct, (r.message, r.log[-1500:])
    assert r.trusted_ms is not None and r.defences["trusted_clock"].startswith("ok"), r.defences
    assert r.timing is not None and r.timing.median_ms / 3 < r.trusted_ms < 3 * r.timing.median_ms  # same work, within noise
    assert r.trusted_eager_ms is not None and r.trusted_eager_ms < r.trusted_ms  # the task's own relu is far faster


@pytest.mark.slow
def test_fake_fast_times_are_rejected_by_the_parents_clock(tmp_path, cache_env, hijack):
    hijack("fake_time=0.0001")  # ~6 ms per call reported as below a microsecond: faster than eager
    r = evaluate_workspace(make_ws(tmp_path, "slow"), config=cpu_cfg(reuse_results=False))
    assert r.status is Status.REJECTED and r.reward == -1, (r.status, r.message)
    assert "timing-forged" in r.message and r.trusted_ms is not None and r.trusted_eager_ms is not None
    assert r.trusted_ms > tt.FORGED * r.trusted_eager_ms


MATMUL_TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4096, 4096) / 64)

    def forward(self, x):
        return x @ self.w


def get_inputs():
    return [torch.randn(64, 4096)]


def get_init_inputs():
    return []
"""

EAGER_TWIN = """import cuda_extension  # noqa: F401 - built, not used: this candidate is eager PyTorch itself
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4096, 4096) / 64)

    def forward(self, x):
        return x @ self.w
"""


@pytest.mark.slow
def test_a_fake_time_for_a_kernel_as_fast_as_eager_is_rejected(tmp_path, cache_env, hijack, monkeypatch):
    """The case clock v2 missed on the H200: the candidate is as fast as eager (here it is eager: the
    static gate and the op log are off so that only the clock judges) and reports 20x faster. Its
    burst equals eager's, so the baselines alone only withdraw the milestones; its own burst, less
    the loop's cost, gives it away. Honest, the same candidate stands."""
    import shutil

    from cuda_agent.eval import pipeline, static_gate
    from cuda_agent.task import Task
    from cuda_agent.task.workspace import init_workspace

    monkeypatch.setattr(pipeline, "static_findings", lambda *a, **k: [])
    monkeypatch.setattr(static_gate, "static_findings", lambda *a, **k: [])
    ws = init_workspace(Task.from_source(MATMUL_TASK, name="mm"), tmp_path / "ws")
    shutil.copytree(FIXTURES / "cpu_lane" / "kernels", ws / "kernels", dirs_exist_ok=True)
    (ws / "model_new.py").write_text(EAGER_TWIN)
    cfg = cpu_cfg(reuse_results=False, runtime_guards=False, trusted_slack_ms=1.0)
    honest = evaluate_workspace(ws, config=cfg)
    assert honest.status is Status.OK and honest.correct, (honest.message, honest.log[-1500:])
    assert not honest.defences["trusted_clock"].startswith("forged"), honest.defences
    hijack("fake_time=0.05")
    r = evaluate_workspace(ws, config=cfg)
    assert r.status is Status.REJECTED and r.reward == -1, (r.status, r.message, r.defences)
    assert "timing-forged" in r.message and "loop alone" in r.message
    assert r.trusted_ms is not None and r.trusted_eager_ms is not None
    assert r.trusted_ms < tt.FORGED * r.trusted_eager_ms  # the baselines' bursts alone would not have said so


@pytest.mark.slow
def test_skipped_burst_work_is_incorrect(tmp_path, cache_env, hijack):
    hijack("fake_digest=1")
    r = evaluate_workspace(make_ws(tmp_path), config=cpu_cfg(reuse_results=False))
    assert r.status is Status.INCORRECT and r.reward == -1 and "trusted clock" in r.message, r.message


@pytest.mark.slow
@pytest.mark.parametrize("switch,status,needle", [
    ("spoof_gpu=NVIDIA B200", Status.RUNTIME_ERROR, "unexpected ['gpu']"),
    ("drop_guard=1", Status.REJECTED, "runtime-guard-missing"),
])
def test_forged_replies_score_minus_one(tmp_path, cache_env, hijack, switch, status, needle):
    hijack(switch)
    r = evaluate_workspace(make_ws(tmp_path), config=cpu_cfg(reuse_results=False))
    assert r.status is status and r.reward == -1 and needle in r.message, (r.status, r.message)
    assert r.gpu == "cpu"  # the parent's own identity, whatever the reply said


@pytest.mark.slow
def test_a_path_in_a_reply_never_reaches_the_reference(tmp_path, cache_env, hijack):
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"precious")
    hijack(f"reply_path={victim}")
    r = evaluate_workspace(make_ws(tmp_path), config=cpu_cfg(reuse_results=False))
    assert r.status is Status.RUNTIME_ERROR and r.reward == -1 and "unexpected ['file']" in r.message, r.message
    assert victim.read_bytes() == b"precious"


@pytest.mark.slow
@pytest.mark.skipif(probe("cpu")[0] != (), reason="the full sandbox is not available here")
def test_a_remount_from_the_candidate_process_fails(tmp_path, cache_env, hijack):
    planted = tmp_path / "planted.txt"
    hijack(f"remount={planted}")
    r = evaluate_workspace(make_ws(tmp_path), config=cpu_cfg(reuse_results=False))
    assert r.status is Status.RUNTIME_ERROR and r.reward == -1 and "remount of / refused" in r.message, r.message
    assert not planted.exists()
    assert r.defences["sandbox"] == "on"


@pytest.mark.slow
@pytest.mark.skipif(probe("cpu")[0] != (), reason="the full sandbox is not available here")
def test_a_candidate_cannot_hold_the_gpu_lock(tmp_path, cache_env, hijack, monkeypatch):
    """A harness rewritten to flock the evaluator's lock files shared and keep them makes every
    timed section wait out `gpu_lock_wait_s` without the sandbox; inside it the folder is empty."""
    locks = tmp_path / "locks"
    monkeypatch.setenv("CUDA_AGENT_LOCK_DIR", str(locks))
    hijack(f"lock_hold={locks}")
    cfg = dict(reuse_results=False, gpu_lock_wait_s=1.5)
    bare = evaluate_workspace(make_ws(tmp_path, name="bare"), config=cpu_cfg(sandbox="off", **cfg))
    assert any(f.rule == "gpu-lock-timeout" for f in bare.findings), [f.rule for f in bare.findings]  # the hijack bites
    boxed = evaluate_workspace(make_ws(tmp_path, name="boxed"), config=cpu_cfg(**cfg))
    assert boxed.defences["sandbox"] == "on", boxed.defences
    assert boxed.status is Status.OK and boxed.correct, (boxed.message, boxed.log[-1500:])
    assert not any(f.rule == "gpu-lock-timeout" for f in boxed.findings), [(f.rule, f.message) for f in boxed.findings]


def test_the_sandbox_hides_the_lock_folder(tmp_path, monkeypatch):
    """What a sandboxed process sees at the lock folder: nothing, and it cannot write there; a
    caller that lists the folder as writable (the synth check child) sees it."""
    if probe("cpu")[0] != ():
        pytest.skip("the full sandbox is not available here")
    from cuda_agent.sandbox import Sandbox

    locks = tmp_path / "locks"
    locks.mkdir()
    (locks / "gpu.lock").write_text("")
    monkeypatch.setenv("CUDA_AGENT_LOCK_DIR", str(locks))
    rw = tmp_path / "rw"
    rw.mkdir()
    code = (f"import os,sys\nprint(sorted(os.listdir({str(locks)!r})))\n"
            f"try:\n open({str(locks / 'x.lock')!r}, 'w')\nexcept OSError as e:\n print('refused', e.errno)\n")
    box = Sandbox(1 << 30, 4096)
    hidden = subprocess.run(box.wrap([sys.executable, "-c", code], writable=[rw]), capture_output=True, text=True)
    assert hidden.returncode == 0, hidden.stderr
    assert hidden.stdout.split("\n")[:2] == ["[]", "refused 30"], hidden.stdout  # EROFS
    shown = subprocess.run(box.wrap([sys.executable, "-c", code], writable=[rw, locks]), capture_output=True, text=True)
    assert shown.stdout.startswith("['gpu.lock']"), (shown.stdout, shown.stderr)


def test_hijack_switch_only_reaches_children_when_set(monkeypatch):
    from cuda_agent.eval.warm import HIJACK, child_env

    monkeypatch.delenv(HIJACK, raising=False)
    assert HIJACK not in child_env("fp32")
    monkeypatch.setenv(HIJACK, "fake_time=0.5")
    assert child_env("fp32")[HIJACK] == "fake_time=0.5"
    assert Path(child.__file__).read_text().count("CUDA_AGENT_TEST_HIJACK") >= 1
