"""Start a training stage with verl (`cuda-agent rl train`).

Contract: `command(stage, config, ...)` is the argv that runs the stage from a
config written by rl.config: PPO stages (warmup, vp, ppo) run
`python -m verl.trainer.main_ppo --config-path DIR --config-name NAME` (verl
starts Ray, or joins the cluster named by RAY_ADDRESS); the SFT stage runs verl's
`sft_trainer` under torchrun (one process per training GPU; several nodes need
--nnodes, --node-rank and --master-addr on every node). `environment(...)` is
what the process needs on top of the caller's environment: RAY_ADDRESS for a
cluster. `run` executes the command and returns its exit code.
Not guaranteed: that the cluster offers the evaluation resource. Ray workers take
their environment from their node's `ray start`, so the resource name
(CUDA_AGENT_EVAL_RESOURCE, default "eval_gpu") and the evaluation GPU ids
(CUDA_AGENT_EVAL_GPUS) belong there; docs/training.md shows the lines.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def command(stage: str, config: str | Path, *, nnodes: int = 1, gpus_per_node: int = 8, node_rank: int = 0,
            master_addr: str | None = None, master_port: int = 29500) -> list[str]:
    cfg = Path(config).resolve()
    where = ["--config-path", str(cfg.parent), "--config-name", cfg.stem]
    if stage != "sft":
        return [sys.executable, "-m", "verl.trainer.main_ppo", *where]
    dist = [f"--nnodes={nnodes}", f"--nproc_per_node={gpus_per_node}"]
    if nnodes > 1:
        if not master_addr:
            raise ValueError("SFT on several nodes needs --master-addr (the address of node 0)")
        dist += [f"--node_rank={node_rank}", f"--master_addr={master_addr}", f"--master_port={master_port}"]
    return [sys.executable, "-m", "torch.distributed.run", *dist, "-m", "verl.trainer.sft_trainer", *where]


def environment(ray_address: str | None = None) -> dict[str, str]:
    return {"RAY_ADDRESS": ray_address} if ray_address else {}


def run(argv: list[str], extra_env: dict[str, str]) -> int:
    return subprocess.call(argv, env={**os.environ, **extra_env})
