"""Complete verl configs for the paper's training stages (`cuda-agent rl config`).

Stages: "warmup" (single-turn PPO, 32K context, the milestone reward through the
pool), "sft" (rejection fine-tuning with verl's sft_trainer), "vp" (value
pretraining: PPO with the replay loop and `trainer.critic_warmup` one past the
last step, so only the critic learns: verl updates the actor once
`critic_warmup <= global_steps`, and its steps count from 1), "ppo" (agentic PPO, 131,072 context,
150 turns). The paper's values are the defaults (PAPER); every one can be
overridden with verl's own dotted keys.

Contract: `build(stage, model=..., train=..., ...)` composes verl's own
`ppo_trainer` (or `sft_trainer_engine`) YAML through Hydra with our overrides
and returns the DictConfig; `write(stage, out, ...)` writes it (interpolations
kept) plus, for PPO stages, the agent-loop registry next to it, then loads the
written file back and validates it (`validate`). `validate` runs verl's
`validate_config`, converts the model, rollout, critic and optimiser sections
to verl's dataclasses (this loads `model.path`: a local folder with a
config.json and a tokenizer), checks that the registered loops and the reward
function import, and renders the stage's initial prompt with the model's
tokenizer to prove it fits `rollout.prompt_length` (verl would cut it from the
left with only a warning). Problems raise `ConfigError` with one line.
Not guaranteed: that the cluster has the memory for the chosen lengths; that
is for the first step to find out (lower `ppo_max_token_len_per_gpu` or raise
tensor parallelism if it does not fit).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# ConfigError is defined by rl.check (which raises it too) and imported from here by callers
from cuda_agent.eval.config import CPU_QUICK
from cuda_agent.rl.check import ConfigError, check_ppo, check_sft

STAGES = ("warmup", "sft", "vp", "ppo")
PAPER = {
    "gamma": 1.0,
    "lam": 0.95,
    "clip_low": 0.2,
    "clip_high": 0.28,
    "loss_agg_mode": "seq-mean-token-mean",
    "actor_lr": 3e-6,
    "critic_lr": 6e-6,
    "batch": 1024,
    "steps": 150,
    "context": 131072,
    "warmup_context": 32768,
    "max_turns": 150,
}
# Our choices where the paper gives no number (docs/training.md says so).
OURS = {
    "prompt_length": 8192,
    "warmup_steps": 50,
    "vp_steps": 20,
    "sft_lr": 1e-5,
    "sft_batch": 64,
    "sft_epochs": 2,
    "episode_timeout_s": 7200,
    "max_tokens_per_turn": 16384,
}
LOOP_NAME = {"warmup": "single_turn_agent", "vp": "cuda_agent_replay", "ppo": "cuda_agent"}
DEVICES = ("cuda", "cpu")
ROLLOUTS = ("vllm", "sglang", "hf")  # "hf": rl.hf_rollout (transformers), registered by rl.verl_plugins
PLUGINS = "cuda_agent.rl.verl_plugins"
# Ray bookkeeping on the CPU: verl's placement bundles ask for 3 CPUs and one "GPU" slot per training
# process (rl.cpu_platform), its actors one CPU each; these are logical counts, not cores.
CPU_RAY_CPUS = 32


def cpu_overrides(stage: str, slots: int) -> list[str]:
    """What the CPU device needs on top of a stage's config: verl's CPU-unfriendly defaults off
    (remove-padding and fused kernels need flash-attention, gradient checkpointing and torch.compile
    only cost time here), fp32, one agent-loop and reward worker, and a local Ray with `slots`
    training slots and the plugin module in every worker's environment."""
    out = [
        "trainer.device=cpu",
        f"+ray_kwargs.ray_init.num_gpus={slots}",
        f"ray_kwargs.ray_init.num_cpus={CPU_RAY_CPUS}",
        f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES={PLUGINS}",
        "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_PLATFORM=cpu",
        "data.dataloader_num_workers=0",
    ]
    if stage == "sft":
        return out[:1] + [
            "model.use_remove_padding=false",
            "model.enable_gradient_checkpointing=false",
            "++model.override_config.attn_implementation=sdpa",
            "engine.use_torch_compile=false",
            "engine.dtype=float32",
            "engine.strategy=fsdp2",
            "data.num_workers=0",
        ]
    for m in ("actor_rollout_ref.model", "critic.model"):
        out += [
            f"{m}.use_remove_padding=false",
            f"{m}.enable_gradient_checkpointing=false",
            f"++{m}.override_config.attn_implementation=sdpa",
        ]
    for f in ("actor_rollout_ref.actor.fsdp_config", "actor_rollout_ref.ref.fsdp_config", "critic.fsdp"):
        out += [f"{f}.use_torch_compile=false", f"{f}.dtype=float32", f"{f}.strategy=fsdp2"]
    # FSDP2 (fully_shard): FSDP1 insists on an accelerator device id
    return out + [
        "actor_rollout_ref.actor.strategy=fsdp2",
        "critic.strategy=fsdp2",
        "actor_rollout_ref.ref.strategy=fsdp2",
        "actor_rollout_ref.actor.use_torch_compile=false",
        "actor_rollout_ref.rollout.dtype=float32",
        "actor_rollout_ref.rollout.free_cache_engine=false",
        "actor_rollout_ref.rollout.load_format=auto",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "reward.num_workers=1",
    ]


@dataclass
class Cluster:
    nnodes: int = 1
    gpus_per_node: int = 8  # training GPUs per node; evaluation GPUs are a separate Ray resource
    rollout_tp: int = 2


def _verl_config_dir() -> str:
    import verl

    return os.path.join(os.path.dirname(verl.__file__), "trainer", "config")


def _rl_file(name: str) -> str:
    return str(Path(__file__).with_name(name))


def overrides(
    stage: str,
    *,
    model: str,
    train: str,
    val: str | None,
    cluster: Cluster,
    loops: str | None,
    steps: int | None,
    batch: int | None,
    device: str = "cuda",
    rollout: str | None = None,
) -> list[str]:
    if stage not in STAGES:
        raise ConfigError(f"unknown stage {stage!r}; one of {', '.join(STAGES)}")
    if device not in DEVICES:
        raise ConfigError(f"unknown device {device!r}; one of {', '.join(DEVICES)}")
    rollout = rollout or ("hf" if device == "cpu" else "vllm")
    if rollout not in ROLLOUTS:
        raise ConfigError(f"unknown rollout {rollout!r}; one of {', '.join(ROLLOUTS)}")
    if device == "cpu" and rollout != "hf":
        raise ConfigError(f"the {rollout} rollout needs GPUs; on the CPU the rollout is hf (transformers)")
    dev = cpu_overrides(stage, cluster.gpus_per_node) if device == "cpu" else []
    if rollout == "hf" and device != "cpu" and stage != "sft":
        # verl's workers find the hf rollout through the plugin module; a cluster's workers take their
        # environment from `ray start`, not from `rl train`, so it goes into Ray's runtime environment
        dev.append(f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES={PLUGINS}")
    c, p, o = cluster, PAPER, OURS
    common = [
        f"trainer.nnodes={c.nnodes}",
        f"trainer.n_gpus_per_node={c.gpus_per_node}",
        "trainer.logger=[console]",
        "trainer.project_name=cuda-agent",
        f"trainer.experiment_name={stage}",
        f"data.train_files={train}",
        f"model.path={model}" if stage == "sft" else f"actor_rollout_ref.model.path={model}",
    ]
    if stage == "sft":
        ctx = p["context"]
        return (
            common
            + [
                f"data.val_files={val or 'null'}",
                f"data.custom_cls.path={_rl_file('sft_data.py')}",
                "data.custom_cls.name=JsonChatSFTDataset",
                "data.messages_key=messages",
                "data.tools_key=tools",
                f"data.max_length={ctx}",
                "data.pad_mode=no_padding",
                "data.truncation=error",
                "data.use_dynamic_bsz=true",
                f"data.max_token_len_per_gpu={ctx}",
                f"data.train_batch_size={batch or o['sft_batch']}",
                f"optim.lr={o['sft_lr']}",
                f"trainer.total_epochs={o['sft_epochs']}",
                f"trainer.total_training_steps={steps or 'null'}",
                "checkpoint.save_contents=[model,optimizer,extra,hf_model]",
            ]
            + dev
        )
    ctx = p["warmup_context"] if stage == "warmup" else p["context"]
    total = steps or {"warmup": o["warmup_steps"], "vp": o["vp_steps"], "ppo": p["steps"]}[stage]
    b = batch or p["batch"]
    out = (
        common
        + [
            f"data.val_files={val or train}",
            f"data.max_prompt_length={o['prompt_length']}",
            f"data.max_response_length={ctx - o['prompt_length']}",
            f"data.train_batch_size={b}",
            "data.return_raw_chat=true",
            "data.filter_overlong_prompts=false",
            "algorithm.adv_estimator=gae",
            f"algorithm.gamma={p['gamma']}",
            f"algorithm.lam={p['lam']}",
            "algorithm.use_kl_in_reward=false",
            f"actor_rollout_ref.actor.optim.lr={p['actor_lr']}",
            f"actor_rollout_ref.actor.ppo_mini_batch_size={b}",
            f"actor_rollout_ref.actor.clip_ratio_low={p['clip_low']}",
            f"actor_rollout_ref.actor.clip_ratio_high={p['clip_high']}",
            f"actor_rollout_ref.actor.loss_agg_mode={p['loss_agg_mode']}",
            "actor_rollout_ref.actor.ppo_epochs=1",
            "actor_rollout_ref.actor.use_kl_loss=false",
            "actor_rollout_ref.actor.entropy_coeff=0",
            "actor_rollout_ref.actor.use_dynamic_bsz=true",
            f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={ctx}",
            f"actor_rollout_ref.rollout.name={rollout}",
            "actor_rollout_ref.rollout.n=1",
            f"actor_rollout_ref.rollout.max_model_len={ctx}",
            f"actor_rollout_ref.rollout.tensor_model_parallel_size={1 if rollout == 'hf' else c.rollout_tp}",
            "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true",
            f"actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu={ctx}",
            "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=true",
            f"actor_rollout_ref.ref.log_prob_max_token_len_per_gpu={ctx}",
            f"actor_rollout_ref.rollout.agent.default_agent_loop={LOOP_NAME[stage]}",
            f"critic.model.path={model}",
            f"critic.optim.lr={p['critic_lr']}",
            f"critic.ppo_mini_batch_size={b}",
            "critic.use_dynamic_bsz=true",
            f"critic.ppo_max_token_len_per_gpu={ctx}",
            f"trainer.total_training_steps={total}",
            "trainer.val_before_train=false",
            "trainer.test_freq=-1",
            "trainer.save_freq=25",
            f"trainer.critic_warmup={total + 1 if stage == 'vp' else 0}",
            # Hugging Face weights in every checkpoint: the next stage (and vLLM for collection) starts from them
            "actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]",
            "critic.checkpoint.save_contents=[model,optimizer,extra,hf_model]",
        ]
        + dev
    )
    if loops:
        out.append(f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}")
    if stage == "vp":  # replayed trajectories carry no rollout log-probs; verl would ask for them
        out.append("actor_rollout_ref.rollout.calculate_log_probs=false")
    if stage == "warmup":
        out += [
            f"reward.custom_reward_function.path={_rl_file('scoring.py')}",
            "reward.custom_reward_function.name=compute_score",
        ]
        if device == "cpu":
            out.append("+reward.custom_reward_function.reward_kwargs.eval_device=cpu")
    return out


def agent_loops(max_turns: int = PAPER["max_turns"], device: str = "cuda") -> list[dict[str, Any]]:
    """verl's agent-loop registry entries; extra keys become constructor arguments. On the CPU device
    the evaluator runs its CPU lane (compile and checks on the host; its times say nothing)."""
    return [
        {
            "name": "cuda_agent",
            "_target_": "cuda_agent.rl.verl_loop.CudaAgentLoop",
            "max_turns": max_turns,
            "episode_timeout_s": OURS["episode_timeout_s"],
            "max_tokens_per_turn": OURS["max_tokens_per_turn"],
            "eval_device": device,
            **({"eval_options": CPU_QUICK} if device == "cpu" else {}),
        },
        {"name": "cuda_agent_replay", "_target_": "cuda_agent.rl.verl_loop.ReplayAgentLoop"},
    ]


def build(
    stage: str,
    *,
    model: str,
    train: str,
    val: str | None = None,
    cluster: Cluster | None = None,
    loops: str | None = None,
    steps: int | None = None,
    batch: int | None = None,
    extra: list[str] | None = None,
    device: str = "cuda",
    rollout: str | None = None,
) -> Any:
    from hydra import compose, initialize_config_dir

    ov = overrides(
        stage,
        model=model,
        train=train,
        val=val,
        cluster=cluster or Cluster(),
        loops=loops,
        steps=steps,
        batch=batch,
        device=device,
        rollout=rollout,
    ) + list(extra or [])
    try:
        with initialize_config_dir(config_dir=_verl_config_dir(), version_base=None):
            return compose("sft_trainer_engine" if stage == "sft" else "ppo_trainer", overrides=ov)
    except Exception as e:  # noqa: BLE001 - Hydra's errors for a bad key or value, as one line
        raise ConfigError(f"verl refused an override: {e}".splitlines()[0]) from None


def write(stage: str, out: str | Path, **kw: Any) -> Path:
    from omegaconf import OmegaConf

    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    loops = None
    if stage != "sft":
        loops = out.with_name(out.stem + ".agent_loops.yaml")
        loops.write_text(yaml.safe_dump(agent_loops(device=kw.get("device", "cuda")), sort_keys=False))
    cfg = build(stage, loops=str(loops) if loops else None, **kw)
    out.write_text(OmegaConf.to_yaml(cfg))
    validate(OmegaConf.load(out), stage)
    return out


def validate(cfg: Any, stage: str) -> None:
    try:
        (check_sft if stage == "sft" else check_ppo)(cfg, stage)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - verl's loaders raise anything (Hydra wraps theirs); one line each
        cause = e.__cause__ if type(e).__name__ == "InstantiationException" and e.__cause__ else e
        lines = [ln for ln in str(cause).splitlines() if ln.strip()] or [""]
        raise ConfigError(f"{stage} config rejected: {type(cause).__name__}: {lines[0]}") from None
