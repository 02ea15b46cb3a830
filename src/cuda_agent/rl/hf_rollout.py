"""A verl rollout backend that generates with `transformers` (rollout name "hf").

For machines without vLLM or SGLang: a laptop, CI, a GPU image that cannot carry vLLM. It
serves verl's token-in/token-out generate API from one Ray actor per replica; verl's
agent loops (ours included) call it through verl's own LLM server client.

Contract:
- `HFReplica` (registered with verl's `RolloutReplicaRegistry` as "hf") starts one
  `HFServer` actor per replica, named after the replica, using no Ray CPU of its own
  (its work is serialised by a lock, and it must not starve verl's placement groups).
  On a GPU platform (verl's `get_platform().device_name` is not "cpu") the server runs on
  the node and the GPU of the replica's first training worker, as verl places its vLLM
  servers: Ray is told not to set its CUDA_VISIBLE_DEVICES (a task asking for no GPU would
  get none), and the server picks that GPU by its position among the node's visible ones.
  The model is then loaded in `rollout.dtype` (verl's default bfloat16); on the CPU in
  float32 whatever the config says.
- `HFServer.generate(request_id, prompt_ids=..., sampling_params=...)` samples up to
  `max_tokens` (capped by the rollout's model length) with `temperature`, `top_k`,
  `top_p` (temperature 0: greedy), stops after an end-of-sequence id (kept, as vLLM
  keeps it), and returns verl's `TokenOutput` with the sampled ids, their log-probs
  (`rollout.logprobs_mode`: "processed_logprobs", verl's default, after temperature, as
  verl's actor computes them; "raw_logprobs" before) and `stop_reason` "completed".
  One request at a time per replica.
- `HFServerAdapter` (registered in verl's rollout class registry as ("hf", "async")) lives
  in the training worker; verl's weight sync (`update_weights`) hands it the actor's
  parameters by name and it loads them into the replica's model (rollout rank 0 sends,
  every rank drains the generator, which may gather across ranks). Sleep, wake-up and
  the KV-cache calls are no-ops: the model stays where it is.
- Each weight load prints one line: tensors loaded, the new weight version, and the
  requests, sampled tokens and seconds the server spent generating since the previous
  load (one step's generation: the busy time of the replica, without the queueing that
  per-trajectory times include).
Not guaranteed: speed (one sequence at a time, no batching); multimodal inputs; LoRA
adapters; tensor parallelism (a replica is one process); GPU memory: the server's copy of
the model shares the GPU with the training worker's.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any

import ray
import torch
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

NAME = "hf"


def server_name(replica_rank: int, suffix: str = "") -> str:
    return f"cuda_agent_hf_server_{replica_rank}{suffix}"


def device_for(gpu_id: str | None, visible: str | None) -> torch.device:
    """Where the server computes: the CPU without a GPU id, else that GPU's index among `visible` (the node's
    CUDA_VISIBLE_DEVICES, which Ray's ids are members of; unset: every GPU, and the id is the index)."""
    if gpu_id is None:
        return torch.device("cpu")
    ids = [v.strip() for v in (visible or "").split(",") if v.strip()]
    return torch.device("cuda", ids.index(gpu_id) if ids else int(gpu_id))


def _placement() -> tuple[str, str]:
    """(node id, GPU id) of the Ray worker this runs in (called inside verl's training worker)."""
    from verl.utils.device import get_resource_name

    ctx = ray.get_runtime_context()
    return ctx.get_node_id(), str(ctx.get_accelerator_ids()[get_resource_name()][0])


def sample_next(
    logits: torch.Tensor, temperature: float, top_k: int, top_p: float, generator: torch.Generator | None = None
) -> int:
    """One token id from a row of logits (temperature 0 or less: the arg-max)."""
    if temperature is None or temperature <= 0:
        return int(torch.argmax(logits))
    scores = logits.float() / temperature
    if top_k and top_k > 0 and top_k < scores.numel():
        kth = torch.topk(scores, top_k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p is not None and 0 < top_p < 1:
        sorted_scores, order = torch.sort(scores, descending=True)
        cum = torch.softmax(sorted_scores, -1).cumsum(-1)
        drop = cum - torch.softmax(sorted_scores, -1) >= top_p  # keep the smallest prefix reaching top_p
        scores = scores.scatter(0, order, sorted_scores.masked_fill(drop, float("-inf")))
    return int(torch.multinomial(torch.softmax(scores, -1), 1, generator=generator))


class HFServer:
    """The model and its generate loop (a Ray actor; see the module docstring)."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int = 0, gpu_id: str | None = None):
        from transformers import AutoModelForCausalLM

        self.config, self.replica_rank = config, replica_rank
        self.device = device_for(gpu_id, os.environ.get("CUDA_VISIBLE_DEVICES"))
        dtype = (
            getattr(torch, str(getattr(config, "dtype", "") or "float32"))
            if self.device.type == "cuda"
            else torch.float32
        )
        path = getattr(model_config, "local_path", None) or model_config.path
        self.model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=dtype).to(self.device).eval()
        print(f"hf rollout {replica_rank}: generating on {self.device} in {dtype}", flush=True)
        gen = getattr(self.model, "generation_config", None)
        eos = getattr(gen, "eos_token_id", None) if gen is not None else None
        eos = eos if eos is not None else self.model.config.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [eos]) - {None}
        self.max_model_len = int(config.max_model_len or (config.prompt_length + config.response_length))
        self.global_steps = 0  # the weight version; verl syncs the first before any generation
        self.lock = threading.Lock()
        # on the device of the logits: torch.multinomial refuses a generator of another device
        self.rng = torch.Generator(device=self.device).manual_seed(int(getattr(config, "seed", 0) or 0) + replica_rank)
        self.processed = str(getattr(config, "logprobs_mode", "processed_logprobs") or "").startswith("processed")
        self.busy = {"requests": 0, "tokens": 0, "seconds": 0.0}  # since the last weight load

    def _generate(self, prompt_ids: list[int], sp: dict[str, Any]) -> TokenOutput:
        room = self.max_model_len - len(prompt_ids)
        max_tokens = int(sp.get("max_tokens") or sp.get("max_new_tokens") or self.config.response_length)
        max_tokens = max(1, min(max_tokens, room))
        temperature = float(sp.get("temperature", 1.0) or 0.0)
        top_k, top_p = int(sp.get("top_k", -1) or -1), float(sp.get("top_p", 1.0) or 1.0)
        ids, lps = [], []
        with self.lock, torch.inference_mode():
            t0 = time.monotonic()
            out = self.model(torch.tensor([prompt_ids], device=self.device), use_cache=True)
            for _ in range(max_tokens):
                logits = out.logits[0, -1]
                tok = sample_next(logits, temperature, top_k, top_p, self.rng)
                ids.append(tok)
                scaled = logits.float() / temperature if self.processed and temperature > 0 else logits.float()
                lps.append(float(torch.log_softmax(scaled, -1)[tok]))
                if tok in self.eos:
                    break
                out = self.model(
                    torch.tensor([[tok]], device=self.device), past_key_values=out.past_key_values, use_cache=True
                )
            self.busy["requests"] += 1
            self.busy["tokens"] += len(ids)
            self.busy["seconds"] += time.monotonic() - t0
        return TokenOutput(
            token_ids=ids, log_probs=lps, stop_reason="completed", extra_fields={"global_steps": self.global_steps}
        )

    async def generate(
        self, request_id: str = "", *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> TokenOutput:
        return await asyncio.to_thread(self._generate, list(prompt_ids), dict(sampling_params))

    def update_weights(self, named: dict[str, torch.Tensor], global_steps: int | None = None) -> int:
        with self.lock:
            own = self.model.state_dict()
            unknown = [k for k in named if k not in own]
            if unknown:
                raise KeyError(f"weights the rollout model does not have: {unknown[:3]}")
            with torch.no_grad():
                for k, v in named.items():
                    own[k].copy_(v.to(own[k].dtype))
            self.global_steps = global_steps
            busy, self.busy = self.busy, {"requests": 0, "tokens": 0, "seconds": 0.0}
        print(
            f"hf rollout {self.replica_rank}: {len(named)} tensors loaded, weight version {global_steps}; since the "
            f"last load {busy['requests']} requests, {busy['tokens']} tokens, {busy['seconds']:.2f} s generating",
            flush=True,
        )
        return len(named)

    def ready(self) -> bool:
        return True

    # verl's control calls; the model stays on the host, so there is nothing to release
    async def wake_up(self) -> None: ...
    async def sleep(self) -> None: ...
    async def wait_for_requests_to_drain(self) -> None: ...
    async def clear_kv_cache(self) -> None: ...
    async def release_kv_cache(self) -> None: ...
    async def resume_kv_cache(self) -> None: ...
    async def resume_generation(self) -> None: ...
    async def start_profile(self, **_: Any) -> None: ...
    async def stop_profile(self) -> None: ...

    async def abort_all_requests(self, reject_request: bool = False) -> dict[str, Any]:
        return {"aborted_count": 0, "request_ids": []}


class HFReplica(RolloutReplica):
    async def launch_servers(self) -> None:
        from verl.plugin.platform import get_platform

        name = server_name(self.replica_rank, self.name_suffix)
        opts: dict[str, Any] = {"name": name, "num_cpus": 0, "max_concurrency": self.max_concurrency}
        gpu_id = None
        platform = get_platform()
        if platform.device_name != "cpu" and self.workers:
            # without this the server would be a Ray task with no GPU: Ray hides every GPU from it, and it
            # generated on the CPU beside an idle GPU (seen with `--rollout hf` on a GPU config)
            node, gpu_id = await self.workers[0].__ray_call__.remote(lambda _self: _placement())
            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
            opts["runtime_env"] = {"env_vars": {v: "1" for v in platform.ray_noset_envvars()}}
        server = ray.remote(HFServer).options(**opts).remote(self.config, self.model_config, self.replica_rank, gpu_id)
        await server.ready.remote()
        self.servers = [server]
        self._server_handle = server
        self._server_address = name  # a name for verl's router; nothing listens on a port


class HFServerAdapter(BaseRollout):
    """In the training worker: verl's weight-sync hook, forwarded to the replica's server."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1, **_: Any):
        super().__init__(config, model_config, device_mesh)
        size = (
            self.config.tensor_model_parallel_size
            * self.config.data_parallel_size
            * self.config.pipeline_model_parallel_size
        )
        rank = int(os.environ.get("RANK", "0"))
        self.replica_rank = rank // size if replica_rank == -1 else replica_rank
        self.sends = rank % size == 0

    async def update_weights(
        self, weights: Any, wire_format: str = "named_tensors", global_steps: int | None = None, **kwargs: Any
    ) -> None:
        if wire_format != "named_tensors":
            raise NotImplementedError(f"the hf rollout takes full named tensors, not {wire_format!r}")
        if kwargs.get("peft_config") is not None:
            raise NotImplementedError("the hf rollout does not take LoRA adapters; merge them (model.lora.merge=true)")
        named = {}
        for name, tensor in weights:  # drained on every rank: the generator may gather across ranks
            if self.sends:
                full = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
                named[name] = full.detach().to("cpu", copy=True)
        if self.sends:
            server = ray.get_actor(server_name(self.replica_rank))
            await server.update_weights.remote(named, global_steps)

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None
