"""Registers this project's verl backends through verl's plugin points.

verl imports this module in every process it starts when `VERL_USE_EXTERNAL_MODULES`
names it (`rl train` sets that for every config; rl.config puts it into the Ray
runtime environment as well, so workers of an existing cluster get it too).

Contract: after import, verl knows
- the device platform "cpu" (rl.cpu_platform; chosen by VERL_PLATFORM=cpu);
- the rollout "hf" (rl.hf_rollout): a replica class in `RolloutReplicaRegistry` and the
  worker-side adapter in the rollout class registry for mode "async".
With VERL_PLATFORM=cpu one more thing changes: verl builds its process-group backend as
"cpu:gloo,{device}:{backend}", which torch refuses when the device is the CPU itself
("Duplicate device type cpu"); verl's two process-group helpers in `verl.utils.distributed`
are wrapped to ask for plain "gloo" instead (the modules that import them by name do so
after this module has run, so they get the wrapped ones); and verl's FSDP training
engines (language model and value model), registered for "cuda" and "npu" only, are
registered for "cpu" as well: their code is device-agnostic (it asks the platform); and
verl's critic loader (`verl.utils.model.load_valuehead_model`), which asks transformers
for flash-attention 2 whatever the config says, loads the value model with SDPA instead
(the actor's attention is a config key, which rl.config sets for the CPU).
On a GPU machine without the flash_attn package the critic loader is replaced the same way
(transformers would refuse flash-attention 2 there; give the actor
`++actor_rollout_ref.model.override_config.attn_implementation=sdpa` and no remove-padding).
Importing it twice is harmless.
"""

from __future__ import annotations

import os
from datetime import timedelta

from verl.plugin.platform.platform_manager import PlatformRegistry
from verl.workers.rollout import base as rollout_base
from verl.workers.rollout.replica import RolloutReplicaRegistry

from cuda_agent.rl.cpu_platform import PlatformCPU


def _hf_replica() -> type:
    from cuda_agent.rl.hf_rollout import HFReplica

    return HFReplica


PlatformRegistry.register(platform="cpu")(PlatformCPU)
RolloutReplicaRegistry.register("hf", _hf_replica)
# verl's table of worker-side rollout classes (verl.workers.rollout.base.get_rollout_class reads it)
rollout_base._ROLLOUT_REGISTRY[("hf", "async")] = "cuda_agent.rl.hf_rollout.HFServerAdapter"


def _gloo_process_groups() -> None:
    import torch.distributed as dist
    from verl.utils import distributed as vd

    if getattr(vd.initialize_global_process_group_ray, "_cuda_agent_gloo", False):
        return
    ray_init = vd.initialize_global_process_group_ray

    def initialize_global_process_group_ray(timeout_second=None, backend=None):  # noqa: ANN001, ANN202 - verl's
        return ray_init(timeout_second=timeout_second, backend=backend or "gloo")

    def initialize_global_process_group(timeout_second=36000):  # noqa: ANN001, ANN202 - verl's signature
        dist.init_process_group(
            backend="gloo",
            timeout=timedelta(seconds=timeout_second),
            init_method=os.environ.get("DIST_INIT_METHOD", None),
        )
        return int(os.environ["LOCAL_RANK"]), int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])

    initialize_global_process_group_ray._cuda_agent_gloo = True  # type: ignore[attr-defined]
    vd.initialize_global_process_group_ray = initialize_global_process_group_ray
    vd.initialize_global_process_group = initialize_global_process_group


def _cpu_engines() -> None:
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead

    for model_type, cls in (("language_model", FSDPEngineWithLMHead), ("value_model", FSDPEngineWithValueHead)):
        for backend in ("fsdp", "fsdp2"):
            if "cpu" not in EngineRegistry._engines.get(model_type, {}).get(backend, {}):
                EngineRegistry.register(model_type=model_type, backend=backend, device="cpu")(cls)


def _sdpa_value_model() -> None:
    from verl.utils import model as vm

    def load_valuehead_model(local_path, torch_dtype, model_config, trust_remote_code):  # noqa: ANN001, ANN202
        from transformers import AutoModelForTokenClassification

        return AutoModelForTokenClassification.from_pretrained(
            pretrained_model_name_or_path=local_path,
            torch_dtype=torch_dtype,
            config=model_config,
            attn_implementation="sdpa",
            trust_remote_code=trust_remote_code,
        )

    vm.load_valuehead_model = load_valuehead_model


def _has_flash_attn() -> bool:
    import importlib.util

    return importlib.util.find_spec("flash_attn") is not None


if os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu":
    _gloo_process_groups()
    _cpu_engines()
    _sdpa_value_model()
elif not _has_flash_attn():  # a GPU without flash-attn (the GPU image we carry verl to): SDPA for the critic too
    _sdpa_value_model()
