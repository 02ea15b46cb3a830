"""The Ray backend of the pool on a local Ray cluster on the CPU: compile-only jobs
(static checks + build) run as Ray tasks that declare no GPU, from a source
snapshot, and a candidate rejected by the static checks comes back as a result."""

from __future__ import annotations

import shutil

import pytest
from conftest import FIXTURES

from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.result import Status
from cuda_agent.pool.jobs import EvalJob, portable
from cuda_agent.task import Task
from cuda_agent.task.workspace import init_workspace

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow
LANE = FIXTURES / "cpu_lane"


def test_compile_only_jobs_on_a_local_ray_cluster(tmp_path, cache_env):
    from cuda_agent.pool.ray_pool import RayPool

    task = Task.from_file(LANE / "task.py")
    ws = init_workspace(task, tmp_path / "ws")
    shutil.copytree(LANE / "kernels", ws / "kernels", dirs_exist_ok=True)
    shutil.copy(LANE / "model_new.py", ws / "model_new.py")
    hack = init_workspace(task, tmp_path / "hack")
    shutil.copytree(LANE / "kernels", hack / "kernels", dirs_exist_ok=True)
    (hack / "model_new.py").write_text((LANE / "model_new.py").read_text().replace(
        "return cuda_extension.good(x)", "return torch.relu(x) * 2.0").replace("import torch.nn", "import torch\nimport torch.nn"))
    cfg = EvalConfig(device="cpu", compile_baseline=False)
    snap = portable(EvalJob(workdir=ws, phase="compile", config=cfg))
    assert snap.workdir is None and snap.task is not None and "kernels/cpu_lane_binding.cpp" in snap.sources
    ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"CUDA_AGENT_CACHE": str(cache_env)}})
    try:
        pool = RayPool()
        good = pool.submit(EvalJob(task=task, workdir=ws, phase="compile", config=cfg))
        bad = pool.submit(EvalJob(task=task, workdir=hack, phase="compile", config=cfg))
        r, h = good.result(timeout=300), bad.result(timeout=300)
    finally:
        ray.shutdown()
    assert r.status is Status.OK and r.message == "compiled", r.message + r.log
    assert "compile" in r.phases_s
    assert h.status is Status.REJECTED and h.reward == -1
