"""The Ray backend of the pool on a local Ray cluster on the CPU: compile-only jobs
(static checks + build) run as Ray tasks that declare no GPU, from a source
snapshot, and a candidate rejected by the static checks comes back as a result."""

from __future__ import annotations

import shutil

import pytest
from conftest import FIXTURES

from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.judge.result import Status
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
    (hack / "model_new.py").write_text(
        (LANE / "model_new.py")
        .read_text()
        .replace("return cuda_extension.good(x)", "return torch.relu(x) * 2.0")
        .replace("import torch.nn", "import torch\nimport torch.nn")
    )
    cfg = EvalConfig(device="cpu", compile_baseline=False)
    snap = portable(EvalJob(workdir=ws, phase="compile", config=cfg))
    assert snap.workdir is None and snap.task is not None and "kernels/cpu_lane_binding.cpp" in snap.sources
    ray.init(
        num_cpus=2,
        num_gpus=0,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"CUDA_AGENT_CACHE": str(cache_env)}},
    )
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


def test_bench_on_a_ray_cluster_without_gpus_does_not_wait_for_one(tmp_path, cache_env):
    """`bench --ray` where Ray has no GPU (this machine): before, the profile task asked Ray for a GPU and
    sat at "0/?" forever while Ray's autoscaler said no node fits; now it runs as the local pool does
    without a GPU (built and checked, status no_gpu) and says which resource the cluster lacks."""
    import os
    import sqlite3
    import subprocess
    import sys

    from conftest import ROOT

    suite, sols = tmp_path / "suite", tmp_path / "solutions"
    suite.mkdir()
    shutil.copy(LANE / "task.py", suite / "lane.py")
    shutil.copytree(LANE / "kernels", sols / "lane" / "kernels")
    shutil.copy(LANE / "model_new.py", sols / "lane" / "model_new.py")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    # a Ray of its own with no GPU whatever this machine has (Ray would count a real one)
    env.update(
        PYTHONPATH=str(ROOT / "src"),
        CUDA_AGENT_CACHE=str(cache_env),
        CUDA_VISIBLE_DEVICES="",
        RAY_memory_monitor_refresh_ms="0",
    )
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_agent.cli.main",
            "bench",
            str(suite),
            "--solutions",
            str(sols),
            "-o",
            str(tmp_path / "run"),
            "--ray",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=420,
        env=env,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    assert "no 'GPU' resource" in out and "CPU " in out, out[-3000:]  # the resource asked for, and what there is
    db = sqlite3.connect(tmp_path / "run" / "results.sqlite")
    status = dict(db.execute("SELECT task_id, status FROM evaluations"))
    db.close()
    assert status == {"lane": "no_gpu"}, status


def test_rl_pool_without_its_evaluation_resource_fails_at_once(tmp_path, cache_env):
    """RL's pool asks for a custom resource (eval_gpu) that `ray start` must offer; without it the job's
    future fails with one line naming it, instead of a rollout waiting forever for a GPU task."""
    from cuda_agent.pool.jobs import HarnessError
    from cuda_agent.pool.ray_pool import RayPool

    task = Task.from_file(LANE / "task.py")
    sources = {"model_new.py": (LANE / "model_new.py").read_text()}
    ray.init(num_cpus=1, num_gpus=0, include_dashboard=False, log_to_driver=False)
    try:
        pool = RayPool(gpu_resource="eval_gpu")
        fut = pool.submit(EvalJob(task=task, sources=sources, phase="profile", config=EvalConfig(device="cuda")))
        err = fut.exception(timeout=30)
    finally:
        ray.shutdown()
    assert isinstance(err, HarnessError) and "'eval_gpu'" in str(err) and "CPU 1" in str(err), err
