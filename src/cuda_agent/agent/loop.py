"""The ReAct loop: ask the model, run its tool calls, log everything, keep the best.

Contract of `run_episode`:
- Creates RUN_DIR/workspace (via `init_workspace`) and RUN_DIR/trajectory.jsonl,
  and appends one record per step (see `trajectory`). RUN_DIR/best/ always holds
  the best correct candidate evaluated so far (see `best`), not the last one.
- Ends cleanly, with an end record and the best candidate kept, on: finish
  ("finished"), the turn limit ("max_turns"), the total-token limit
  ("max_tokens"), the wall-time limit ("max_wall", checked between turns, so an
  evaluation in progress is not cut), a context that cannot be made to fit
  ("context_full"), `max_no_tool` replies in a row without a tool call
  ("no_tool_call"), or an endpoint failure after retries ("llm_error"; the
  summary carries the message).
- Policy for a reply without a tool call: the model gets a nudge message and
  another turn; the run ends after `max_no_tool` such replies in a row.
- Every tool call gets a tool message back, also malformed ones (bad JSON,
  unknown tool, bad arguments): the observation says how to fix the call.
- The final reward is the reward of the best candidate, -1 when there is none.

Not guaranteed: a harness bug inside the evaluator is reported to the model and
logged as a "harness_error" note, not raised; a crash of this process leaves a
trajectory without an end record (the loader reports it as incomplete).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cuda_agent import __version__
from cuda_agent.agent import best as best_mod
from cuda_agent.agent.context import ContextManager
from cuda_agent.agent.prompt import NUDGE_CUT_OFF, NUDGE_NO_TOOL, system_prompt, task_message
from cuda_agent.agent.toolbox import Evaluator, Observation, Renderer, Toolbox
from cuda_agent.agent.trajectory import TrajectoryWriter
from cuda_agent.llm.client import ChatClient, Completion, LLMError
from cuda_agent.llm.textcalls import new_call_id
from cuda_agent.sandbox.shell import cut_middle
from cuda_agent.task.taskfile import Task
from cuda_agent.task.workspace import init_workspace


@dataclass
class AgentConfig:
    max_turns: int = 200
    max_total_tokens: int | None = None
    max_wall_s: float | None = None
    context_tokens: int = 131072
    reply_reserve_tokens: int = 8192
    max_no_tool: int = 3
    bash_timeout_s: float = 180.0
    max_observation_chars: int = 30000


@dataclass
class RunSummary:
    run_dir: Path
    reason: str
    turns: int
    usage: dict[str, int]
    best: best_mod.Best | None
    reward: int
    wall_s: float
    error: str | None = None
    notes: list[str] = field(default_factory=list)


def _usage_of(c: Completion, messages: list[dict[str, Any]], ctx: ContextManager) -> tuple[dict[str, int], bool]:
    if c.usage:
        return c.usage, False
    prompt = ctx.estimate(messages)
    completion = (len(c.content) + sum(len(t.arguments) for t in c.tool_calls)) // 4
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}, True


def run_episode(task: Task, run_dir: str | Path, client: ChatClient, config: AgentConfig | None = None, *,
                evaluator: Evaluator | None = None, render: Renderer | None = None,
                progress: Callable[[dict[str, Any]], None] | None = None,
                header_extra: dict[str, Any] | None = None) -> RunSummary:
    cfg = config or AgentConfig()
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    ws = init_workspace(task, run / "workspace")
    tools = Toolbox(ws, evaluator=evaluator, render=render, bash_timeout_s=cfg.bash_timeout_s)
    schemas = tools.schemas()
    ctx = ContextManager(cfg.context_tokens, cfg.reply_reserve_tokens, tools_chars=len(json.dumps(schemas)))
    header = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "cuda_agent": __version__,
        "task": {"name": task.name, "hash": task.hash, "path": str(task.path) if task.path else None, "source": task.source},
        "workspace": str(ws),
        "model": client.config.model,
        "base_url": client.config.base_url,  # never the key
        "tool_mode": client.config.tool_mode,
        "config": asdict(cfg),
        "sandbox": tools.shell.level,
        "tools": schemas,
        **(header_extra or {}),
    }
    log = TrajectoryWriter(run / "trajectory.jsonl", header)
    t0 = time.monotonic()
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt()},
                                      {"role": "user", "content": task_message(ws)}]
    for m in messages:
        log.message(m, 0)
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    best: best_mod.Best | None = None
    turn, no_tool, switches_seen, retries_seen = 0, 0, 0, 0
    reason, error = "", None
    notes = [tools.shell.note] if tools.shell.level != "full" else []

    def add(msg: dict[str, Any], **meta: Any) -> None:
        messages.append(msg)
        log.message(msg, turn, **meta)

    try:
        while not reason:
            if turn >= cfg.max_turns:
                reason = "max_turns"
            elif cfg.max_total_tokens is not None and usage["total_tokens"] >= cfg.max_total_tokens:
                reason = "max_tokens"
            elif cfg.max_wall_s is not None and time.monotonic() - t0 >= cfg.max_wall_s:
                reason = "max_wall"
            if reason:
                break
            elided = ctx.fit(messages)
            if elided:
                log.note("elide", turn, indices=elided, estimate=ctx.estimate(messages))
            if not ctx.fits(messages):
                reason = "context_full"
                break
            try:
                comp = client.complete(messages, schemas)
            except LLMError as e:
                forced = ctx.fit(messages, force=True) if e.kind == "context_length" else []
                if forced:  # the server counts differently from our estimate: elide more and retry
                    log.note("elide", turn, indices=forced, forced=True, why=str(e))
                    continue
                reason, error = ("context_full" if e.kind == "context_length" else "llm_error"), str(e)
                break
            finally:
                for why in client.mode_switches[switches_seen:]:
                    log.note("tool_mode", turn, mode="text", why=why)
                for line in client.retries_log[retries_seen:]:
                    log.note("retry", turn, message=line)
                switches_seen, retries_seen = len(client.mode_switches), len(client.retries_log)
            turn += 1
            u, estimated = _usage_of(comp, messages, ctx)
            if not estimated:
                ctx.calibrate(messages, u["prompt_tokens"])
            for k in usage:
                usage[k] += u[k]
            seen_ids: set[str] = set()
            for c in comp.tool_calls:  # some servers send empty or repeated ids; replies must match them
                if not c.id or c.id in seen_ids:
                    c.id = new_call_id()
                seen_ids.add(c.id)
            add(comp.to_message(), usage=u, usage_estimated=estimated, latency_s=round(comp.latency_s, 3),
                attempts=comp.attempts, finish_reason=comp.finish_reason, reasoning=comp.reasoning,
                via_text=comp.via_text, mode=client.mode)
            if not comp.tool_calls:
                no_tool += 1
                if no_tool >= cfg.max_no_tool:
                    reason = "no_tool_call"
                    break
                add({"role": "user", "content": NUDGE_CUT_OFF if comp.finish_reason == "length" else NUDGE_NO_TOOL}, nudge=True)
                continue
            no_tool = 0
            for call in comp.tool_calls:
                if call.error:
                    obs = Observation(f"error: {call.error}. Write each call as "
                                      '<tool_call>{"name": "...", "arguments": {...}}</tool_call>', ok=False)
                else:
                    obs = tools.call(call.name, call.arguments)
                text = cut_middle(obs.text, cfg.max_observation_chars)
                if obs.error:
                    log.note("harness_error", turn, tool=call.name, traceback=obs.error)
                if obs.result is not None and obs.phase:
                    improved = best_mod.better(obs.result, best)
                    if improved:
                        best = best_mod.Best(obs.result, obs.sources or {}, turn)
                        best_mod.save(run / "best", best)
                    log.evaluation(turn, call.id, obs.phase, obs.result, improved)
                    text += "\n" + _best_line(best, improved)
                add({"role": "tool", "tool_call_id": call.id, "content": text}, name=call.name, ok=obs.ok,
                    elapsed_s=round(obs.elapsed_s, 3))
                if obs.finished:
                    reason = "finished"
            if progress:
                progress({"turn": turn, "usage": dict(usage), "calls": [c.name for c in comp.tool_calls],
                          "best": best.result if best else None})
    except KeyboardInterrupt:
        reason = "interrupted"
        raise
    finally:
        wall = time.monotonic() - t0
        reward = best.result.reward if best else -1
        log.end(reason=reason or "crashed", error=error, turns=turn, usage=usage, reward=reward,
                best_turn=best.turn if best else None, wall_s=round(wall, 3), tool_mode=client.mode)
        log.close()
        tools.close()
    return RunSummary(run, reason, turn, usage, best, reward, wall, error, notes)


def _best_line(best: best_mod.Best | None, improved: bool) -> str:
    if best is None:
        return "best so far: none (no correct candidate yet)"
    r = best.result
    sp = ", ".join(f"{v:.2f}x vs {k}" for k, v in (("eager", r.speedup_vs_eager), ("torch.compile", r.speedup_vs_compile)) if v)
    head = "new best, kept" if improved else f"best so far: turn {best.turn}"
    return f"{head} (reward {r.reward}{', ' + sp if sp else ''})"
