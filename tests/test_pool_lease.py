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
