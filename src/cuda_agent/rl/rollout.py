"""One RL episode at the token level: sampled ids in, environment observations out.

The framework-free half of the verl agent loop (rl.verl_loop wraps it in verl's
types); the GPU smoke runs it without verl. Asyncio throughout; the environment's
blocking work (shell, file tools, waiting on the evaluation pool) runs in a
thread executor so one event loop drives many trajectories.

Contract of `roll_out`:
- The prompt is the environment's initial messages and tool schemas rendered by
  `tokens`; a prompt longer than `prompt_length` raises `PromptTooLong` (verl
  would cut it from the left with only a warning).
- Each turn: the server samples at most min(`max_tokens_per_turn`, what is left
  of `response_length`) tokens; they enter the stream as returned (mask 1, with
  their log-probs), are decoded, and the tool calls are read with the shared
  parser (llm.textcalls: Hermes JSON or Qwen3-Coder XML); `Environment.step`
  runs them. Observations enter the stream masked (mask 0).
- Ends when the environment ends the episode (finish, `max_turns`, replies
  without calls, replies with only malformed calls), when the next observation
  would leave no room for another sampled token ("max_response"), or at
  `episode_timeout_s` ("timeout"). The last observation is never added: the
  stream always ends on a sampled token, where the trainer puts the reward.
- Reward: -1 on timeout; otherwise `Environment.settle()` (the best candidate's
  milestone reward, timed; -1 when there is none).
- `metrics` has the same keys for every trajectory (METRIC_KEYS), as verl's
  batch concatenation needs.
Not guaranteed: an environment step that overruns the deadline keeps running in
its thread until its shell command or evaluation returns; its result is dropped.
A trajectory cut by the timeout during its first generation has no sampled
token, so its reward reaches no gradient.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from cuda_agent.env.core import Environment
from cuda_agent.llm.textcalls import parse_text_calls, strip_text_calls
from cuda_agent.rl.tokens import Stream, Tokens
from cuda_agent.task.taskfile import Task

T = TypeVar("T")
METRIC_KEYS = (
    "turns",
    "tool_calls",
    "compile_calls",
    "verify_calls",
    "profile_calls",
    "malformed_calls",
    "best_speedup_vs_eager",
    "best_speedup_vs_compile",
    "reward",
    "timed_out",
    "ended_no_tool_call",
    "ended_malformed_calls",
    "model_tokens",
    "response_tokens",
    "generate_s",
    "env_s",
)


class PromptTooLong(ValueError):
    """The initial prompt does not fit rollout.prompt_length: raise it in the config."""


class Server(Protocol):
    """verl's LLM server client, or a scripted stand-in: `generate` returns an object
    with `token_ids` and `log_probs` (None when the server gives none)."""

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]) -> Any: ...


@dataclass
class RolloutConfig:
    max_turns: int = 150
    prompt_length: int = 8192
    response_length: int = 122880  # context 131,072 minus the prompt budget
    max_tokens_per_turn: int | None = 16384
    episode_timeout_s: float = 7200.0


@dataclass
class Rollout:
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float] | None
    reward: float
    reason: str
    metrics: dict[str, float]
    messages: list[dict[str, Any]] = field(default_factory=list)
    # the tool results of the turn that ended the episode: never tokenized (nothing follows them), kept
    # for the record (`keep_workdirs` writes them to episode.json: why a verify failed is there)
    final_observation: list[dict[str, Any]] = field(default_factory=list)


class _Deadline:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    async def within(self, aw: Awaitable[T]) -> T:
        left = self.end - time.monotonic()
        if left <= 0:
            if asyncio.iscoroutine(aw):
                aw.close()
            raise TimeoutError
        return await asyncio.wait_for(aw, timeout=left)


async def roll_out(
    env: Environment,
    task: Task,
    run_dir: str | Path,
    server: Server,
    tokens: Tokens,
    decode: Callable[[list[int]], str],
    cfg: RolloutConfig,
    sampling_params: dict[str, Any],
    executor: Executor | None = None,
) -> Rollout:
    loop = asyncio.get_running_loop()
    timer = {"generate_s": 0.0, "env_s": 0.0}

    async def blocking(fn: Callable[..., T], *args: Any) -> T:
        t0 = time.monotonic()
        try:
            return await deadline.within(loop.run_in_executor(executor, fn, *args))
        finally:
            timer["env_s"] += time.monotonic() - t0

    deadline = _Deadline(cfg.episode_timeout_s)
    start = await loop.run_in_executor(executor, env.reset, task, Path(run_dir))
    prompt = await tokens.initial(start.messages, start.tools)
    if len(prompt) > cfg.prompt_length:
        raise PromptTooLong(
            f"the initial prompt has {len(prompt)} tokens, rollout.prompt_length is {cfg.prompt_length}"
        )
    stream, messages, reason = Stream(list(prompt)), list(start.messages), ""
    final: list[dict[str, Any]] = []
    request_id = uuid.uuid4().hex  # one id per trajectory: the server may keep its prefix cache
    try:
        while not reason:
            budget = cfg.response_length - len(stream.mask)
            if budget <= 0:
                reason = "max_response"
                break
            sp = {**sampling_params, "max_tokens": min(budget, cfg.max_tokens_per_turn or budget)}
            t0 = time.monotonic()
            out = await deadline.within(server.generate(request_id, prompt_ids=list(stream.ids), sampling_params=sp))
            timer["generate_s"] += time.monotonic() - t0
            ids = list(out.token_ids)[:budget]
            lps = list(out.log_probs)[: len(ids)] if getattr(out, "log_probs", None) else None
            await tokens.add_model(stream, ids, lps)
            text = decode(ids)
            calls = parse_text_calls(text, start.tools)
            msg: dict[str, Any] = {"role": "assistant", "content": strip_text_calls(text) if calls else text}
            if good := [c.to_openai() for c in calls if not c.error]:
                msg["tool_calls"] = good
            cut = len(ids) >= sp["max_tokens"]
            step = await blocking(env.step, msg, calls, "length" if cut else "stop")
            messages.append(msg)
            if step.done:
                reason, final = step.reason or "done", list(step.messages)
                break
            snap = stream.snapshot()
            await tokens.add_context(stream, messages, messages + step.messages, start.tools)
            if len(stream.mask) >= cfg.response_length:
                stream.restore(snap)  # no room left for a sampled token after this observation
                reason = "max_response"
                break
            messages += step.messages
        reward = float(await blocking(env.settle))
    except TimeoutError:
        reason, reward = "timeout", -1.0
    env.finish_as(reason)
    stream.end_on_model_token()
    return Rollout(
        stream.prompt_ids,
        stream.response_ids,
        list(stream.mask),
        stream.logprobs,
        reward,
        reason,
        _metrics(env, stream, reward, reason, timer),
        messages,
        final,
    )


def _metrics(env: Environment, s: Stream, reward: float, reason: str, timer: dict[str, float]) -> dict[str, float]:
    r = env.best.result if env.best else None
    m = {
        "turns": env.turns,
        "tool_calls": env.calls,
        "compile_calls": env.counts["compile"],
        "verify_calls": env.counts["verify"],
        "profile_calls": env.counts["profile"],
        "malformed_calls": env.counts["malformed"],
        "best_speedup_vs_eager": (r.speedup_vs_eager or 0.0) if r else 0.0,
        "best_speedup_vs_compile": (r.speedup_vs_compile or 0.0) if r else 0.0,
        "reward": reward,
        "timed_out": float(reason == "timeout"),
        # the environment's early ends: a batch's mean says how often the policy lost the tool-call format
        "ended_no_tool_call": float(reason == "no_tool_call"),
        "ended_malformed_calls": float(reason == "malformed_calls"),
        "model_tokens": sum(s.mask),
        "response_tokens": len(s.mask),
        **timer,
    }
    assert tuple(m) == METRIC_KEYS
    return {k: float(v) for k, v in m.items()}
