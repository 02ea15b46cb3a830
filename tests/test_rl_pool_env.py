"""The RL scoring's local pool takes its evaluations per GPU from CUDA_AGENT_EVALS_PER_GPU (default 3
where a GPU is visible, 1 on a CPU-only machine),
and a malformed value is a clear error, not a silent default."""

from __future__ import annotations

import pytest

from cuda_agent.rl import scoring


def test_evals_per_gpu_from_the_environment(monkeypatch):
    monkeypatch.setattr("cuda_agent.pool.local.visible_gpus", lambda: [])  # a CPU machine: one device slot
    monkeypatch.setenv("CUDA_AGENT_EVALS_PER_GPU", "3")
    pool = scoring._make_pool()
    try:
        assert pool.per_gpu == 3 and pool.n_slots == 3
    finally:
        pool.close()
    monkeypatch.delenv("CUDA_AGENT_EVALS_PER_GPU")
    pool = scoring._make_pool()
    try:
        assert pool.per_gpu == 1 and pool.n_slots == 1
    finally:
        pool.close()
    monkeypatch.setenv("CUDA_AGENT_EVALS_PER_GPU", "three")
    with pytest.raises(ValueError, match="CUDA_AGENT_EVALS_PER_GPU"):
        scoring._make_pool()


def test_the_default_shares_a_visible_gpu(monkeypatch):
    from cuda_agent.pool.local import DEFAULT_PER_GPU

    monkeypatch.delenv("CUDA_AGENT_EVALS_PER_GPU", raising=False)
    monkeypatch.setattr("cuda_agent.pool.local.visible_gpus", lambda: ["0"])
    assert scoring.evals_per_gpu() == DEFAULT_PER_GPU > 1
    monkeypatch.setattr("cuda_agent.pool.local.visible_gpus", lambda: [])
    assert scoring.evals_per_gpu() == 1
