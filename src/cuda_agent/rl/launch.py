"""Start a training stage with verl (`cuda-agent rl train`).

Contract: `command(stage, config, ...)` is the argv that runs the stage from a
config written by rl.config: PPO stages (warmup, vp, ppo) run
`python -m verl.trainer.main_ppo --config-path DIR --config-name NAME` (verl
starts Ray, or joins the cluster named by RAY_ADDRESS); the SFT stage runs verl's
`sft_trainer` under torchrun (one process per training GPU; several nodes need
--nnodes, --node-rank and --master-addr on every node). `environment(...)` is
what the process needs on top of the caller's environment: RAY_ADDRESS for a
cluster, `VERL_USE_EXTERNAL_MODULES` naming rl.verl_plugins (the "hf" rollout and the
"cpu" platform) in front of any modules the caller already names, and VERL_PLATFORM=cpu
for a config with `trainer.device=cpu`. A CPU config joining a cluster (--ray-address, or
RAY_ADDRESS in the environment, other than "local") drops the local
Ray's slot count (`ray.init` refuses resource counts when it connects); that cluster's
nodes must offer "GPU" slots (`ray start --num-gpus N`). `run` executes the command and
returns its exit code.
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

PLUGINS = "cuda_agent.rl.verl_plugins"


def device_of(config: str | Path) -> str:
    """The config's `trainer.device` ("cuda" when it names none)."""
    import yaml

    data = yaml.safe_load(Path(config).read_text()) or {}
    return str((data.get("trainer") or {}).get("device") or "cuda")


def command(
    stage: str,
    config: str | Path,
    *,
    nnodes: int = 1,
    gpus_per_node: int = 8,
    node_rank: int = 0,
    master_addr: str | None = None,
    master_port: int = 29500,
    ray_address: str | None = None,
) -> list[str]:
    cfg = Path(config).resolve()
    where = ["--config-path", str(cfg.parent), "--config-name", cfg.stem]
    if stage != "sft":
        joins = ["ray_kwargs.ray_init.num_gpus=null", "ray_kwargs.ray_init.num_cpus=null"]
        joining = (ray_address or os.environ.get("RAY_ADDRESS") or "local") != "local"
        return [
            sys.executable,
            "-m",
            "verl.trainer.main_ppo",
            *where,
            *(joins if joining and device_of(cfg) == "cpu" else []),
        ]
    dist = [f"--nnodes={nnodes}", f"--nproc_per_node={gpus_per_node}"]
    if nnodes > 1:
        if not master_addr:
            raise ValueError("SFT on several nodes needs --master-addr (the address of node 0)")
        dist += [f"--node_rank={node_rank}", f"--master_addr={master_addr}", f"--master_port={master_port}"]
    return [sys.executable, "-m", "torch.distributed.run", *dist, "-m", "verl.trainer.sft_trainer", *where]


def environment(ray_address: str | None = None, config: str | Path | None = None) -> dict[str, str]:
    have = [m for m in os.environ.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m and m != PLUGINS]
    env = {"VERL_USE_EXTERNAL_MODULES": ",".join([PLUGINS, *have])}
    if config is not None and device_of(config) == "cpu":
        env["VERL_PLATFORM"] = "cpu"
    if ray_address:
        env["RAY_ADDRESS"] = ray_address
    return env


def run(argv: list[str], extra_env: dict[str, str]) -> int:
    return subprocess.call(argv, env={**os.environ, **extra_env})
