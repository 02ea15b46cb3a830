"""A node-local lease of one evaluation GPU, for pool jobs that Ray schedules by a
custom resource instead of `num_gpus`.

Why: verl's trainer places its actors with Ray placement groups over the GPUs Ray
knows (`num_gpus`). Evaluation GPUs are started as a custom resource instead
(`ray start --num-gpus 4 --resources '{"eval_gpu": 4}'` with
`CUDA_AGENT_EVAL_GPUS=4,5,6,7` in that shell), so evaluations never compete with
training for a placement. Ray then bounds how many evaluations run on a node but
does not say which GPU each may use; this module picks one.

Contract: `lease_gpu()` holds an exclusive lock file per GPU id in the
evaluator's lock folder (`sandbox.env.shared_lock_dir`, which no candidate process
sees; `fcntl.flock`, released when the holder exits or dies) and sets
CUDA_VISIBLE_DEVICES to the leased id for the evaluator's children; it waits
while all are taken. GPU ids come from CUDA_AGENT_EVAL_GPUS (comma list), else
every GPU `nvidia-smi -L` lists. `run_leased(job, compiled)` is `jobs.run_gated`
under a lease, in this process when its CUDA view can still be set and shows a GPU, else in
a fresh spawned process started with the leased id: Ray reuses a worker across tasks, and one whose
CUDA driver was asked under another CUDA_VISIBLE_DEVICES (a compile task's, a job on
another GPU) sees those devices for life (`eval.gpu.view_fixed_under`). Not guaranteed:
exclusivity against processes that ignore these lock files (start the node's other GPU users
on the other GPUs).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from cuda_agent.eval.judge.result import EvalResult
from cuda_agent.pool.jobs import EvalJob, HarnessError, run_gated
from cuda_agent.pool.spawn import executor
from cuda_agent.sandbox.env import shared_lock_dir

T = TypeVar("T")


def eval_gpu_ids() -> list[str]:
    env = os.environ.get("CUDA_AGENT_EVAL_GPUS")
    if env:
        return [g.strip() for g in env.split(",") if g.strip()]
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


@contextmanager
def lease_gpu(ids: list[str] | None = None, poll_s: float = 0.2) -> Iterator[str]:
    ids = ids if ids is not None else eval_gpu_ids()
    if not ids:
        raise HarnessError("no evaluation GPU on this node (set CUDA_AGENT_EVAL_GPUS)")
    lock_dir = shared_lock_dir()
    while True:
        for gid in ids:
            f = open(lock_dir / f"cuda-agent-eval-gpu-{gid}.lock", "a")  # noqa: SIM115 - held for the lease
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                continue
            before = os.environ.get("CUDA_VISIBLE_DEVICES")
            os.environ["CUDA_VISIBLE_DEVICES"] = gid
            try:
                yield gid
            finally:
                if before is None:
                    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
                else:
                    os.environ["CUDA_VISIBLE_DEVICES"] = before
                f.close()  # closing releases the lock
            return
        time.sleep(poll_s)


def probe() -> tuple[int, str | None, str | None]:
    """This process's id, CUDA_VISIBLE_DEVICES and the GPU the evaluator would detect here (what
    `in_fresh_process` promises: its test and scripts/gpu_lease_probe.py read it)."""
    from cuda_agent.eval import gpu as gpu_mod

    found = gpu_mod.detect()
    return os.getpid(), os.environ.get("CUDA_VISIBLE_DEVICES"), found.name if found else None


def in_fresh_process(fn: Callable[..., T], args: tuple[Any, ...], env: dict[str, str]) -> T:
    """fn(*args) in a new spawned process started with `env` on top of this one's."""
    with executor(1, env) as ex:
        return ex.submit(fn, *args).result()


def run_leased(job: EvalJob, compiled: EvalResult | None) -> EvalResult:
    from cuda_agent.eval import gpu as gpu_mod

    with lease_gpu() as gid:
        if gpu_mod.view_fixed_under() in (None, gid) and gpu_mod.detect() is not None:
            return run_gated(job, compiled)
        # this process's CUDA driver keeps the view of its first query (ours under another visibility, or
        # one we did not see: it finds no GPU under the leased id): in-process, the evaluator would score
        # on that view (no GPU: status no_gpu, reward -1 in RL; or another job's GPU)
        return in_fresh_process(run_gated, (job, compiled), {"CUDA_VISIBLE_DEVICES": gid})
