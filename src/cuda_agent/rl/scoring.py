"""Rewards for training: the environment's evaluator over the pool, and the
single-turn warm-up's reward function.

Contract:
- `pool_evaluator(pool, task, config)` is an `env.toolbox.Evaluator` that sends
  a snapshot of the agent's files to the evaluation pool (never a path: on Ray
  the job runs on another machine) and waits for the result in the calling
  thread; rollouts call it from their executor threads, so the event loop keeps
  generating for other trajectories meanwhile.
- `shared_pool()` is this process's pool, made on first use: `RayPool` with the
  evaluation GPUs requested as a custom resource (`CUDA_AGENT_EVAL_RESOURCE`,
  default "eval_gpu") when Ray is running, else a `LocalPool`; `use_pool` installs
  another (tests, scripts).
- `compute_score(...)` follows verl's custom reward function signature (async):
  it reads the files of a single-turn answer (`<file path="...">...</file>`
  blocks, only model_new.py and kernels/*), evaluates them with the profile phase
  through the pool and returns {"score": milestone reward, ...} with the same
  keys every time. An answer without model_new.py scores -1 without a job.
  `eval_device` (a `reward_kwargs` key of verl's config; rl.config sets "cpu" for the
  CPU device) chooses the evaluator's lane; the CPU lane uses `eval.config.CPU_QUICK`'s shorter
  protocol (its times say nothing about kernels).
  With `CUDA_AGENT_SCORE_LOG` set to a file, each call appends one JSON line (task, status, reward,
  the evaluator's message, seconds): why a reward is what it is, which verl's rollout dump does not say.
Not guaranteed: an evaluation's wall time (the pool's queue decides it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from cuda_agent.env.toolbox import Evaluator
from cuda_agent.eval.config import EvalConfig, cpu_lane
from cuda_agent.eval.judge.result import EvalResult
from cuda_agent.pool.jobs import EvalJob
from cuda_agent.pool.local import Pool
from cuda_agent.task.taskfile import Task
from cuda_agent.task.workspace import read_agent_sources

FILE_BLOCK = re.compile(r'<file path="([^"\n]+)">\n?(.*?)</file>', re.DOTALL)
_ALLOWED = re.compile(r"^(model_new\.py|kernels/[A-Za-z0-9_.\-]+\.(cu|cuh|cpp|h|hpp))$")
SCORE_KEYS = ("score", "correct", "speedup_vs_eager", "speedup_vs_compile", "files")

_pool: Pool | None = None
_lock = threading.Lock()


def use_pool(pool: Pool | None) -> None:
    global _pool
    with _lock:
        _pool = pool


def shared_pool() -> Pool:
    global _pool
    with _lock:
        if _pool is None:
            _pool = _make_pool()
        return _pool


def _make_pool() -> Pool:
    try:
        import ray
    except ImportError:
        ray = None
    if ray is not None and ray.is_initialized():
        from cuda_agent.pool.ray_pool import RayPool

        return RayPool(gpu_resource=os.environ.get("CUDA_AGENT_EVAL_RESOURCE", "eval_gpu"))
    from cuda_agent.pool.local import LocalPool

    return LocalPool(per_gpu=evals_per_gpu())


def evals_per_gpu() -> int:
    """Evaluations sharing each GPU (their timings take turns; eval.timing.gpu_lock): CUDA_AGENT_EVALS_PER_GPU,
    else `pool.local.DEFAULT_PER_GPU` where a GPU is visible and 1 on a CPU-only machine."""
    from cuda_agent.pool.local import DEFAULT_PER_GPU, visible_gpus

    raw = os.environ.get("CUDA_AGENT_EVALS_PER_GPU") or str(DEFAULT_PER_GPU if visible_gpus() else 1)
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"CUDA_AGENT_EVALS_PER_GPU must be a whole number, got {raw!r}") from None


def pool_evaluator(pool: Pool, task: Task, config: EvalConfig | None = None) -> Evaluator:
    cfg = config or EvalConfig()

    def evaluate(workspace: Path, phase: str) -> EvalResult:
        job = EvalJob(
            task=task,
            sources=read_agent_sources(Path(workspace)),
            phase=phase,  # type: ignore[arg-type]
            config=dataclasses.replace(cfg),
            label=task.name,
        )
        return pool.submit(job).result()

    return evaluate


def answer_sources(text: str) -> dict[str, str]:
    """The files of a single-turn answer; paths outside model_new.py and kernels/ are ignored."""
    out: dict[str, str] = {}
    for m in FILE_BLOCK.finditer(text):
        path = m.group(1).strip().removeprefix("./")
        if _ALLOWED.match(path):
            out[path] = m.group(2)
    return out


def score_of(result: EvalResult | None, files: int) -> dict[str, float]:
    r = result
    return {
        "score": float(r.reward if r is not None and r.reward is not None else -1),
        "correct": float(bool(r and r.correct)),
        "speedup_vs_eager": float((r.speedup_vs_eager or 0.0) if r else 0.0),
        "speedup_vs_compile": float((r.speedup_vs_compile or 0.0) if r else 0.0),
        "files": float(files),
    }


async def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    eval_device: str = "cuda",
    **_: Any,
) -> dict[str, float]:
    info = extra_info or {}
    sources = answer_sources(solution_str)
    name = str(info.get("task_name", "task"))
    if "model_new.py" not in sources:
        _log_score(name, "no-answer", -1.0, f"no model_new.py block among {sorted(sources)}", 0.0)
        return score_of(None, len(sources))
    task = Task.from_source(info["task_source"], name)
    if ground_truth and ground_truth != task.hash:
        raise ValueError(f"row's task hash {ground_truth} does not match its task source ({task.hash})")
    config = cpu_lane() if eval_device == "cpu" else EvalConfig(device=eval_device)
    job = EvalJob(task=task, sources=sources, phase="profile", config=config, label=task.name)
    t0 = time.monotonic()
    try:
        result = await asyncio.wrap_future(shared_pool().submit(job))
    except BaseException as e:
        _log_score(name, "error", None, f"{type(e).__name__}: {e}", time.monotonic() - t0)
        raise
    out = score_of(result, len(sources))
    _log_score(name, result.status.value, out["score"], result.message, time.monotonic() - t0)
    return out


def _log_score(task: str, status: str, reward: float | None, message: str, seconds: float) -> None:
    path = os.environ.get("CUDA_AGENT_SCORE_LOG")
    if not path:
        return
    line = {"task": task, "status": status, "reward": reward, "message": message[:1000], "seconds": round(seconds, 2)}
    try:
        with open(path, "a") as f:  # one write per line: concurrent reward workers append whole lines
            f.write(json.dumps(line) + "\n")
    except OSError:
        pass  # a log that cannot be written never costs a training step
