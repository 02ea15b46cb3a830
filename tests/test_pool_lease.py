"""The node-local evaluation-GPU lease used when Ray schedules evaluations by a
custom resource: distinct GPUs for concurrent holders, waiting when all are
taken, CUDA_VISIBLE_DEVICES set and restored."""

from __future__ import annotations

import os
import threading
import time

import pytest

from cuda_agent.pool.gpu_lease import lease_gpu
from cuda_agent.pool.jobs import HarnessError


def test_concurrent_leases_get_distinct_gpus_and_the_third_waits(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "outer")
    ids = [f"t{os.getpid()}a", f"t{os.getpid()}b"]
    got: list[str] = []
    third: list[float] = []
    with lease_gpu(ids) as a, lease_gpu(ids) as b:
        assert {a, b} == set(ids) and os.environ["CUDA_VISIBLE_DEVICES"] == b

        def later():
            t0 = time.monotonic()
            with lease_gpu(ids, poll_s=0.05) as c:
                got.append(c)
                third.append(time.monotonic() - t0)

        th = threading.Thread(target=later)
        th.start()
        time.sleep(0.3)
        assert got == []  # both taken: it waits
    th.join(5)
    assert got and got[0] in ids and third[0] >= 0.25
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "outer"


def test_no_gpu_ids_is_a_harness_error():
    with pytest.raises(HarnessError, match="CUDA_AGENT_EVAL_GPUS"), lease_gpu([]):
        pass


def test_detect_never_asks_the_driver_under_an_empty_visibility(monkeypatch):
    """A Ray worker started for a CPU task (CUDA_VISIBLE_DEVICES="") must stay free to evaluate on a GPU it
    leases later: asking the driver there would fix the process's view at no device for life."""
    import torch

    from cuda_agent.eval import gpu as gpu_mod

    asked: list[bool] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: asked.append(True) or False)
    monkeypatch.setattr(gpu_mod, "_first_query", None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpu_mod.detect() is None and asked == [] and gpu_mod.view_fixed_under() is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    gpu_mod.detect()
    assert asked == [True] and gpu_mod.view_fixed_under() == "2"


def test_fresh_process_gets_its_own_visibility(monkeypatch):
    from cuda_agent.pool.gpu_lease import in_fresh_process, probe

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "outer")
    pid, visible, _ = in_fresh_process(probe, (), {"CUDA_VISIBLE_DEVICES": "5"})
    assert pid != os.getpid() and visible == "5"


@pytest.mark.parametrize(
    "fixed,sees,fresh",
    [(None, True, False), ("GID", True, False), ("7", True, True), ("", True, True), (None, False, True)],
)
def test_a_leased_job_leaves_a_process_whose_cuda_view_is_fixed_elsewhere(monkeypatch, fixed, sees, fresh):
    """The H100 run of 2026-12-06 (every GPU rollout -1) is the case this routes: a worker reused from a task
    that asked the driver under another visibility (or one that finds no GPU under the leased id) evaluates
    in a fresh process on the leased id."""
    from cuda_agent.eval import gpu as gpu_mod
    from cuda_agent.pool import gpu_lease

    gid = f"t{os.getpid()}x"
    monkeypatch.setenv("CUDA_AGENT_EVAL_GPUS", gid)
    monkeypatch.setattr(gpu_mod, "_first_query", gid if fixed == "GID" else fixed)
    monkeypatch.setattr(gpu_mod, "detect", lambda: gpu_mod.GPU("H100", "9.0", "GPU-x") if sees else None)
    ran: list[tuple[str, str | None]] = []
    monkeypatch.setattr(gpu_lease, "run_gated", lambda job, compiled: ran.append(("here", job)) or "here")
    monkeypatch.setattr(
        gpu_lease,
        "in_fresh_process",
        lambda fn, args, env: ran.append(("fresh", env["CUDA_VISIBLE_DEVICES"])) or "fresh",
    )
    assert gpu_lease.run_leased("job", None) == ("fresh" if fresh else "here")
    assert ran == ([("fresh", gid)] if fresh else [("here", "job")])
