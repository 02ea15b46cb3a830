"""The leased evaluation path of RL on one GPU, without verl: does a pool job that Ray schedules by the
custom resource (`RayPool(gpu_resource="eval_gpu")`, as `rl train` does) see the GPU it leases?

Why: on an H100 (2026-12-06) every rollout of `scripts/gpu_issue29.sh` scored -1 although the taught
kernel is correct and scores 1 on the CPU lane. Suspected cause: a Ray worker first used by a
compile task (num_gpus=0) asked the CUDA driver under that task's CUDA_VISIBLE_DEVICES and kept that
view when it later ran the leased GPU job (fixed in `pool.gpu_lease` / `eval.gpu`).

Run (GPU machine, the carried Ray installed first as gpu_issue29.sh does; one CPU slot, so Ray reuses
the worker): `python3 scripts/gpu_lease_probe.py`. Prints what Ray gives a num_gpus=0 task
(CUDA_VISIBLE_DEVICES, the view it fixed, the worker's pid), what the leased task then sees in-process
and in a fresh process, and the status and reward of one real evaluation through RayPool: the correct
relu(x) * 2 kernel of gpu_issue29 (expect ok, reward >= 1) and the same kernel on relu(x) * 3 (expect
incorrect, -1). Exit 0 when the two rewards differ that way.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "scripts")]


def cpu_task() -> dict:
    from cuda_agent.eval import gpu as gpu_mod

    d = gpu_mod.detect()
    return {
        "pid": os.getpid(),
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"),
        "detect": d.name if d else None,
        "view_fixed_under": gpu_mod.view_fixed_under(),
    }


def leased_task() -> dict:
    from cuda_agent.eval import gpu as gpu_mod
    from cuda_agent.pool.gpu_lease import in_fresh_process, lease_gpu, probe

    with lease_gpu() as gid:
        here = gpu_mod.detect()
        fresh = in_fresh_process(probe, (), {"CUDA_VISIBLE_DEVICES": gid})[2]
        return {
            "pid": os.getpid(),
            "gid": gid,
            "view_fixed_under": gpu_mod.view_fixed_under(),
            "detect_here": here.name if here else None,
            "detect_fresh_process": fresh,
        }


def main() -> int:
    import ray
    from gpu_issue29 import files, task_source

    from cuda_agent.eval.config import EvalConfig
    from cuda_agent.pool.jobs import EvalJob
    from cuda_agent.pool.ray_pool import RayPool
    from cuda_agent.task.taskfile import Task

    os.environ.setdefault("CUDA_AGENT_EVAL_GPUS", "0")
    ray.init(num_cpus=1, resources={"eval_gpu": 1}, include_dashboard=False, log_to_driver=False)
    out: dict = {}
    try:
        out["cpu_task"] = ray.get(ray.remote(num_cpus=1)(cpu_task).remote())
        lt = ray.remote(num_cpus=1, num_gpus=0, resources={"eval_gpu": 1})(leased_task)
        out["leased_task"] = ray.get(lt.remote())
        print(json.dumps(out, indent=1), flush=True)
        pool = RayPool(gpu_resource="eval_gpu")
        sources = files("cuda")
        rewards = {}
        for k in (2, 3):
            task = Task.from_source(task_source(k, 2048, "cuda"), f"relu_x{k}")
            t0 = time.monotonic()
            r = pool.submit(EvalJob(task=task, sources=sources, phase="verify", config=EvalConfig())).result(
                timeout=240
            )
            rewards[k] = r.reward
            print(
                f"relu_x{k}: status {r.status.value}, reward {r.reward}, {time.monotonic() - t0:.1f} s: "
                f"{' '.join((r.message or '').split())[:300]}",
                flush=True,
            )
    finally:
        ray.shutdown()
    ok = (rewards.get(2) or -1) >= 1 and rewards.get(3) == -1
    print(f"verdict: {'the leased path scores real kernels' if ok else 'NOT as expected'}: rewards {rewards}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
