"""Validation of a stage's verl config with verl's own loader, plus the checks
verl does not make (rl.config.validate calls these).

Contract: `check_ppo(cfg, stage)` runs verl's `validate_config`, converts the
model (loading `model.path`), rollout, critic and algorithm sections to verl's
dataclasses, imports every registered agent loop and the custom reward
function, checks prompt + response length against the rollout's model length,
and renders the stage's initial prompt with the model's own tokenizer to prove
it fits `rollout.prompt_length`. `check_sft(cfg)` converts model, engine,
optimiser, checkpoint and profiler sections (what verl's SFT trainer does first)
and imports the dataset class. Both raise `ConfigError` (defined here, re-exported by
rl.config, so the validation does not import the composer that calls it) on the first problem.
Not guaranteed: anything that needs GPUs (memory, parallel layouts).
"""

from __future__ import annotations

import importlib.util
from typing import Any


class ConfigError(ValueError):
    """A stage config that verl would refuse, or that would silently misbehave."""


_PROBE_TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.relu(a @ b) * 2.0


def get_inputs():
    return [torch.randn(1024, 1024), torch.randn(1024, 1024)]


def get_init_inputs():
    return []
"""


def _import_file(path: str, name: str) -> Any:
    spec = importlib.util.spec_from_file_location("cuda_agent_config_probe", path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not hasattr(mod, name):
        raise ConfigError(f"{path} has no {name}")
    return getattr(mod, name)


def check_ppo(cfg: Any, stage: str) -> None:
    from hydra.utils import get_class
    from omegaconf import OmegaConf
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    if not need_critic(cfg):
        raise ConfigError("the paper's recipe is PPO with a critic (algorithm.adv_estimator=gae)")
    model = omega_conf_to_dataclass(cfg.actor_rollout_ref.model)  # loads config.json and the tokenizer
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    omega_conf_to_dataclass(cfg.critic)
    omega_conf_to_dataclass(cfg.algorithm)
    if rollout.max_model_len and rollout.prompt_length + rollout.response_length > rollout.max_model_len:
        raise ConfigError(
            f"prompt_length {rollout.prompt_length} + response_length {rollout.response_length} exceed "
            f"rollout.max_model_len {rollout.max_model_len}"
        )
    agent = cfg.actor_rollout_ref.rollout.agent
    names = {"single_turn_agent", "tool_agent"}
    if agent.agent_loop_config_path:
        for entry in OmegaConf.load(agent.agent_loop_config_path):
            get_class(entry["_target_"])
            names.add(entry["name"])
    if agent.default_agent_loop not in names:
        raise ConfigError(
            f"default_agent_loop {agent.default_agent_loop!r} is not registered ({', '.join(sorted(names))})"
        )
    crf = cfg.reward.custom_reward_function
    if stage == "warmup" and not crf.path:
        raise ConfigError("the warm-up needs reward.custom_reward_function (rl/scoring.py: compute_score)")
    if crf.path:
        _import_file(crf.path, crf.name)
    _check_prompt_fits(model.tokenizer, stage, rollout.prompt_length)


def _check_prompt_fits(tokenizer: Any, stage: str, prompt_length: int) -> None:
    from cuda_agent.env.toolbox import tool_schemas
    from cuda_agent.rl.prompts import messages_for
    from cuda_agent.rl.tokens import TemplateTokens
    from cuda_agent.task.taskfile import Task

    if stage == "vp":
        return  # replayed prompts are checked per row by the replay loop
    mode = "single_turn" if stage == "warmup" else "agent"
    msgs = messages_for(Task.from_source(_PROBE_TASK, "probe"), mode)
    n = len(TemplateTokens(tokenizer).render(msgs, tool_schemas() if mode == "agent" else None, generation_prompt=True))
    # the probe task is short; real tasks run to a few thousand characters more
    if n + 2048 > prompt_length:
        raise ConfigError(
            f"the {stage} prompt takes {n} tokens with this tokenizer (plus up to ~2048 for a long task); "
            f"raise data.max_prompt_length above {prompt_length}"
        )


def check_sft(cfg: Any, stage: str = "sft") -> None:
    from verl.utils.config import omega_conf_to_dataclass

    for section in ("model", "engine", "optim", "checkpoint", "profiler"):
        omega_conf_to_dataclass(cfg[section])
    cls = cfg.data.custom_cls
    if not cls.path:
        raise ConfigError("the SFT stage needs data.custom_cls (rl/sft_data.py: JsonChatSFTDataset)")
    _import_file(cls.path, cls.name)
    if cfg.data.max_length < 8192:
        raise ConfigError(f"data.max_length {cfg.data.max_length} cannot hold an agent trajectory")
