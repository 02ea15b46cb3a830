"""verl agent loops: the CUDA-Agent environment (`cuda_agent`) and the replay of
stored trajectories for value pretraining (`cuda_agent_replay`).

Registered through `actor_rollout_ref.rollout.agent.agent_loop_config_path`
(`rl config` writes that YAML); verl builds one loop object per trajectory inside
a coroutine (the base class keeps the running event loop) and passes every extra
key of the YAML entry as a constructor argument.

Contract of `CudaAgentLoop.run` (the rest is rl.rollout's contract):
- reads the task from the row's `extra_info` (`task_source`, `task_name`;
  rl.prompts writes them), makes a fresh workspace under `workdir_root` and
  removes it afterwards unless `keep_workdirs` (then episode.json there holds the
  messages, the final turn's tool results, the reason, the reward and the metrics:
  the one place a failed verify's message can be read after the run);
- tokens through verl's continuous-token builders (`VerlTokens`): the prompt,
  sampled ids appended unchanged with their log-probs, observations as mask-0
  context; an initial prompt longer than `rollout.prompt_length` raises instead
  of being cut;
- evaluations go to this process's shared pool (rl.scoring), on Ray with the
  evaluation GPUs as a custom resource;
- returns an `AgentLoopOutput` with `reward_score` set (verl puts it on the last
  response token, which is always a sampled one), the fixed per-trajectory
  metrics in `extra_fields["reward_extra_info"]`, and the policy versions the
  trajectory was sampled with (`min_global_steps`/`max_global_steps`: the lowest
  and highest weight version the servers reported over its turns; verl's trainer
  needs them as numbers; 0 when no turn reported one).
- with `log_rollouts` (a key of the loop's YAML entry; off by default: a real batch has
  a thousand trajectories), prints one line per trajectory, `cuda_agent rollout: {JSON}`
  with the task, the reward, how it ended and the metrics: verl 0.9.1's v1 trainer keeps
  `reward_extra_info` out of its console metrics and its rollout dump, and this is how a
  run shows where a step's rollout time went (generation vs the environment).
`ReplayAgentLoop.run` never calls the server: it returns the stored trajectory of
the row (`extra_info.messages`, `tools`, `reward` as written by `rl vp`) as
rl.replay renders it, marked as sampled by policy version 0 (before any training).
Not guaranteed: multimodal input (none exists in this task).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput

from cuda_agent.env.core import EnvConfig, Environment
from cuda_agent.eval.config import EvalConfig
from cuda_agent.rl.replay import replay_stream
from cuda_agent.rl.rollout import PromptTooLong, Rollout, RolloutConfig, roll_out
from cuda_agent.rl.scoring import pool_evaluator, shared_pool
from cuda_agent.rl.tokens import Stream, TemplateTokens
from cuda_agent.task.taskfile import Task

_executor: ThreadPoolExecutor | None = None


def env_executor(threads: int = 256) -> ThreadPoolExecutor:
    """One executor per worker process for the environments' blocking work. Its threads mostly
    wait (shell commands, pool futures), so it is far wider than the CPU count."""
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="cuda-agent-env")
    return _executor


class VerlTokens:
    """rl.tokens.Tokens over verl's continuous-token builder of the loop's model family."""

    def __init__(self, agent_loop: AgentLoopBase):
        self.agent_loop = agent_loop

    async def initial(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        builder = self.agent_loop.continuous_token_builder
        # not ct_build_initial_tokens: that one cuts an overlong prompt from the left with only a warning
        return await self.agent_loop.loop.run_in_executor(
            None, lambda: builder.build_initial_tokens(messages, tools=tools)
        )

    async def add_model(self, stream: Stream, ids: list[int], logprobs: list[float] | None) -> None:
        have = stream.logprobs if stream.logprobs is not None else ([0.0] * len(stream.mask) if logprobs else None)
        merged, mask, lps = await self.agent_loop.ct_merge_assistant_token(
            stream.ids, ids, stream.mask, have, assistant_logprobs=logprobs
        )
        stream.ids, stream.mask, stream.logprobs = list(merged.token_ids), list(mask), lps

    async def add_context(
        self, stream: Stream, before: list[dict[str, Any]], after: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> None:
        merged, mask, lps = await self.agent_loop.ct_merge_context_msg(
            before, after, stream.ids, stream.mask, stream.logprobs, tools=tools
        )
        stream.ids, stream.mask, stream.logprobs = list(merged.token_ids), list(mask), lps


class VersionsSeen:
    """verl's server client, recording the weight versions (`global_steps`) its replies report."""

    def __init__(self, server: Any):
        self.server, self.seen = server, []

    async def generate(self, request_id: str, **kwargs: Any) -> Any:
        out = await self.server.generate(request_id, **kwargs)
        extra = getattr(out, "extra_fields", None) or {}
        self.seen += [v for v in (extra.get("min_global_steps"), extra.get("max_global_steps")) if v is not None]
        return out

    def fields(self) -> dict[str, int]:
        return {"min_global_steps": int(min(self.seen, default=0)), "max_global_steps": int(max(self.seen, default=0))}


def _write_episode(path: Path, task: str, r: Rollout) -> None:
    """The kept workdir's record of its episode (what the response tokens cannot show: the last turn's
    tool results are never tokenized, and a cut response drops observations too)."""
    rec = {
        "task": task,
        "reason": r.reason,
        "reward": r.reward,
        "metrics": r.metrics,
        "messages": r.messages,
        "final_observation": r.final_observation,
    }
    path.write_text(json.dumps(rec, indent=1, default=str))


def to_output(r: Rollout, versions: dict[str, int] | None = None) -> AgentLoopOutput:
    return AgentLoopOutput(
        prompt_ids=r.prompt_ids,
        response_ids=r.response_ids,
        response_mask=r.response_mask,
        response_logprobs=r.response_logprobs,
        reward_score=r.reward,
        num_turns=len(r.messages),
        metrics={"generate_sequences": r.metrics["generate_s"], "tool_calls": r.metrics["env_s"]},
        extra_fields={
            "reward_extra_info": dict(r.metrics),
            "turn_scores": [],
            "tool_rewards": [],
            **(versions or {"min_global_steps": 0, "max_global_steps": 0}),
        },
    )


class CudaAgentLoop(AgentLoopBase):
    def __init__(
        self,
        *args: Any,
        max_turns: int = 150,
        episode_timeout_s: float = 7200.0,
        max_tokens_per_turn: int | None = 16384,
        bash_timeout_s: float = 180.0,
        eval_device: str = "cuda",
        eval_options: dict[str, Any] | None = None,
        workdir_root: str | None = None,
        keep_workdirs: bool = False,
        env_threads: int = 256,
        log_rollouts: bool = False,
        **kwargs: Any,
    ):
        kwargs.pop("tools", None)  # verl's own tool list; this environment brings its tools
        super().__init__(*args, **kwargs)
        rc = self.rollout_config
        self.rollout = RolloutConfig(
            max_turns=max_turns,
            prompt_length=rc.prompt_length,
            response_length=rc.response_length,
            max_tokens_per_turn=max_tokens_per_turn,
            episode_timeout_s=episode_timeout_s,
        )
        self.bash_timeout_s, self.eval_device = bash_timeout_s, eval_device
        self.eval_options = dict(eval_options or {})  # further EvalConfig fields (the CPU lane's lighter protocol)
        self.workdir_root, self.keep_workdirs, self.env_threads = workdir_root, keep_workdirs, env_threads
        self.log_rollouts = log_rollouts

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        info = kwargs.get("extra_info") or {}
        if "task_source" not in info:
            raise ValueError("the row has no extra_info.task_source: build the dataset with `cuda-agent rl prompts`")
        task = Task.from_source(info["task_source"], info.get("task_name", "task"))
        env = Environment(
            EnvConfig(max_turns=self.rollout.max_turns, bash_timeout_s=self.bash_timeout_s),
            evaluator=pool_evaluator(shared_pool(), task, EvalConfig(device=self.eval_device, **self.eval_options)),
        )
        root = self.workdir_root or os.environ.get("CUDA_AGENT_RL_WORKDIR")
        if root:
            os.makedirs(root, exist_ok=True)
        run_dir = tempfile.mkdtemp(prefix=f"{task.name}-", dir=root)
        server = VersionsSeen(self.server_manager)
        try:
            r = await roll_out(
                env,
                task,
                run_dir,
                server,
                VerlTokens(self),
                lambda ids: self.tokenizer.decode(ids, skip_special_tokens=True),
                self.rollout,
                sampling_params,
                executor=env_executor(self.env_threads),
            )
            if self.keep_workdirs:
                _write_episode(Path(run_dir) / "episode.json", task.name, r)
        finally:
            env.close()
            if not self.keep_workdirs:
                shutil.rmtree(run_dir, ignore_errors=True)
        if self.log_rollouts:
            line = {"task": task.name, "reason": r.reason, **{k: round(v, 3) for k, v in r.metrics.items()}}
            print("cuda_agent rollout: " + json.dumps(line), flush=True)
        return to_output(r, server.fields())


class ReplayAgentLoop(AgentLoopBase):
    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.pop("tools", None)
        super().__init__(*args, **kwargs)
        self.tokens = TemplateTokens(self.tokenizer, self.apply_chat_template_kwargs)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        info = kwargs.get("extra_info") or {}
        messages, tools = json.loads(info["messages"]), json.loads(info["tools"])
        s = await self.loop.run_in_executor(None, replay_stream, self.tokens, messages, tools)
        rc = self.rollout_config
        if len(s.prompt_ids) > rc.prompt_length:
            raise PromptTooLong(
                f"stored prompt has {len(s.prompt_ids)} tokens, rollout.prompt_length is {rc.prompt_length}"
            )
        s.cut_response(rc.response_length)
        s.end_on_model_token()
        return AgentLoopOutput(
            prompt_ids=s.prompt_ids,
            response_ids=s.response_ids,
            response_mask=s.mask,
            reward_score=float(info["reward"]),
            num_turns=len(messages),
            metrics={},
            extra_fields={"turn_scores": [], "tool_rewards": [], "min_global_steps": 0, "max_global_steps": 0},
        )
