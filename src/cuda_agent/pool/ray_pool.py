"""The Ray backend of the evaluation pool (`--ray`, or RAY_ADDRESS set).

Contract: `RayPool().submit(job)` runs the job as a Ray task and returns a
`concurrent.futures.Future[EvalResult]`. GPU phases (verify, profile with
device "cuda") declare num_gpus=1, so Ray gives each one an exclusive GPU and
sets CUDA_VISIBLE_DEVICES; compile phases and CPU-lane jobs declare
num_gpus=0. Jobs travel as task + source snapshot (`jobs.portable`). For a
workspace job past the compile phase, a compile-only task runs first and its
object ref is an argument of the GPU task: Ray starts the GPU task after it,
and a candidate that failed to compile never holds a GPU for long.
`submit_call(job)` runs a `jobs.CallJob` as a Ray task declaring
`num_gpus=job.gpu_fraction` for a CUDA job (so 1/fraction of them share a GPU),
0 for a CPU job.
With `gpu_resource` set (RL: verl owns Ray's GPUs), GPU phases request one unit
of that custom resource instead of num_gpus=1 and lease a node-local GPU
(`gpu_lease`).
A cluster without the resource its GPU phases ask for (Ray would queue them forever while
its autoscaler repeats that no node fits): `missing_gpu()` names the resource and what the
cluster has (None when the resource is there). Without "GPU" (bench) the pool does what
the local pool does on a machine without a GPU: the GPU phase runs as a CPU task after the
checks and the build, and the evaluator returns status no_gpu (not scored; a rerun on a
cluster with GPUs scores it). Without the custom resource (RL, where an unscored rollout
would train on nothing) the job's future raises `HarnessError` with that line at once.
Ray's totals are read per GPU job (one call to the cluster's control store), so a GPU node
that joins later is used from then on; a cluster that starts GPU nodes only on demand
(an autoscaler scaling from zero) reads as one without GPUs until its first GPU node is up.
Not guaranteed: across machines the compile-ahead helps only when
CUDA_AGENT_CACHE is on a shared filesystem; cuda-agent must be installed on
every node; `close()` leaves the cluster (and ray.init) to the caller.
"""

from __future__ import annotations

import os
from concurrent.futures import Future
from typing import Any

from cuda_agent.eval.judge.result import EvalResult
from cuda_agent.pool.gpu_lease import run_leased
from cuda_agent.pool.jobs import CallJob, EvalJob, HarnessError, portable, run_any, run_gated


class RayPool:
    def __init__(
        self,
        address: str | None = None,
        *,
        compile_ahead: bool = True,
        gpu_resource: str | None = None,
        **init_kwargs: Any,
    ):
        try:
            import ray
        except ImportError:
            raise HarnessError("the Ray backend needs ray (pip install 'cuda-agent[ray]')") from None
        self._ray = ray
        if not ray.is_initialized():
            ray.init(address=address or os.environ.get("RAY_ADDRESS") or None, **init_kwargs)
        self.compile_ahead = compile_ahead
        self.gpu_resource = gpu_resource
        self._fn = ray.remote(run_gated)
        self._call = ray.remote(run_any)
        self._leased = ray.remote(run_leased)

    def missing_gpu(self) -> str | None:
        """One line naming the resource GPU phases ask for and what the cluster has, when it has none of it."""
        want = self.gpu_resource or "GPU"
        have = self._ray.cluster_resources()
        if have.get(want, 0) > 0:
            return None
        shown = ", ".join(
            f"{k} {v:g}"
            for k, v in sorted(have.items())
            if not k.startswith(("node:", "accelerator_type:")) and k not in ("memory", "object_store_memory")
        )
        return f"the Ray cluster has no {want!r} resource for GPU evaluations (it has {shown or 'nothing'})"

    def _opts(self, job: EvalJob, no_gpu: bool = False) -> Any:
        gpu = job.config.device == "cuda" and job.phase != "compile" and not no_gpu
        if gpu and self.gpu_resource:
            return self._leased.options(num_gpus=0, num_cpus=1, resources={self.gpu_resource: 1}, max_retries=0)
        return self._fn.options(num_gpus=1 if gpu else 0, num_cpus=1, max_retries=0)

    def submit(self, job: EvalJob) -> Future[EvalResult]:
        job = portable(job)
        no_gpu = False
        if job.config.device == "cuda" and job.phase != "compile" and (missing := self.missing_gpu()):
            if self.gpu_resource:
                failed: Future[EvalResult] = Future()
                failed.set_exception(HarnessError(missing))
                return failed
            # as the local pool without a GPU: checks and build on a CPU worker (Ray gives a task without GPUs
            # an empty CUDA_VISIBLE_DEVICES), then the evaluator's own no_gpu verdict
            no_gpu = True
        compiled = None
        if job.kind == "workspace" and job.phase != "compile" and self.compile_ahead:
            first = job.with_phase("compile")
            compiled = self._opts(first).remote(first, None)
        return self._opts(job, no_gpu).remote(job, compiled).future()

    def submit_call(self, job: CallJob) -> Future[Any]:
        job.validate()
        gpus = job.gpu_fraction if job.device == "cuda" else 0
        return self._call.options(num_gpus=gpus, num_cpus=1, max_retries=0).remote(job).future()

    def close(self, cancel: bool = False) -> None:
        pass  # the cluster outlives the pool; ray.shutdown() is the caller's choice

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
