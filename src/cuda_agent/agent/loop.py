"""The `optimize` driver: the environment core (cuda_agent.env) over a chat API.

Contract of `run_episode`:
- Creates RUN_DIR/workspace and RUN_DIR/trajectory.jsonl through the environment
  and appends one record per event (see `trajectory`). RUN_DIR/best/ always holds
  the best correct candidate evaluated so far (env.best), not the last one.
- Before anything is logged, the context budget is planned (`context.plan_budget`:
  `context_tokens`, else the window the client reports, the reply reserve capped
  to a share of it); a budget that cannot hold the first prompt plus a minimal
  reply raises `BudgetError` and leaves no run behind (the workspace it laid out
  is removed), so a caller can report a usage error. A client on a local
  endpoint without its own max_tokens is asked to cap each reply to the reserve
  (`ChatClient.reply_cap`).
- Ends cleanly, with an end record and the best candidate kept, on the
  environment's reasons, finish ("finished"), the turn limit ("max_turns"),
  `max_no_tool` replies in a row without a tool call ("no_tool_call") and
  `max_malformed` replies in a row holding only malformed calls
  ("malformed_calls"), and on this driver's own: the total-token limit
  ("max_tokens"), the wall-time limit ("max_wall", checked between turns, so an
  evaluation in progress is not cut), a context that cannot be made to fit
  ("context_full", with the numbers in `error`), or an endpoint failure after
  retries ("llm_error"; the summary carries the message).
- What the client found out on the way (the tools probe, a switch to text tool
  calls, retries, a smaller window named by the server) is logged as notes; the
  client's `notify` says switches and retries as they happen.
- The driver owns what only a chat API needs: token accounting and context
  elision (`context`); the log keeps the unelided conversation. A training
  token stream never elides, so elision stays here and not in the environment.
- The final reward is the environment's: the best candidate's, -1 when none.

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
from cuda_agent.agent.context import REPLY_SHARE, Budget, BudgetError, ContextManager, plan_budget
from cuda_agent.agent.trajectory import TrajectoryWriter
from cuda_agent.env import best as best_mod
from cuda_agent.env.core import EnvConfig, Environment, fix_call_ids
from cuda_agent.env.shell import ShellFactory
from cuda_agent.env.toolbox import Evaluator, Renderer
from cuda_agent.llm.client import ChatClient, Completion, LLMError, window_from_error
from cuda_agent.task.taskfile import Task


@dataclass
class AgentConfig:
    max_turns: int = 200
    max_total_tokens: int | None = None
    max_wall_s: float | None = None
    context_tokens: int | None = None  # None: the server's reported window, else 131072
    reply_reserve_tokens: int | None = None  # None: 8192 capped to a share of the budget (context.plan_budget)
    max_no_tool: int = 3
    max_malformed: int = 3
    bash_timeout_s: float = 180.0
    max_observation_chars: int = 30000

    def env_config(self) -> EnvConfig:
        return EnvConfig(
            max_turns=self.max_turns,
            max_no_tool=self.max_no_tool,
            max_malformed=self.max_malformed,
            bash_timeout_s=self.bash_timeout_s,
            max_observation_chars=self.max_observation_chars,
        )


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
    limits: dict[str, int] = field(
        default_factory=dict
    )  # the limits behind the early ends (max_no_tool, max_malformed)


def _usage_of(c: Completion, messages: list[dict[str, Any]], ctx: ContextManager) -> tuple[dict[str, int], bool]:
    if c.usage:
        return c.usage, False
    prompt = ctx.estimate(messages)
    completion = (len(c.content) + sum(len(t.arguments) for t in c.tool_calls)) // 4
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}, True


def run_episode(
    task: Task,
    run_dir: str | Path,
    client: ChatClient,
    config: AgentConfig | None = None,
    *,
    evaluator: Evaluator | None = None,
    render: Renderer | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    header_extra: dict[str, Any] | None = None,
    shell_factory: ShellFactory | None = None,
) -> RunSummary:
    cfg = config or AgentConfig()
    run = Path(run_dir)
    fresh = not run.exists()
    env = Environment(cfg.env_config(), evaluator=evaluator, render=render, shell_factory=shell_factory)
    start = env.reset(task, run)
    schemas = start.tools
    ctx = ContextManager(tools_chars=len(json.dumps(schemas)))
    try:
        window = client.context_window()  # asked even under --context: a budget above the window is capped
        budget = plan_budget(ctx.estimate(start.messages), cfg.context_tokens, window, cfg.reply_reserve_tokens)
    except BudgetError:
        env.close()
        _remove_fresh(run, start.workspace, fresh)
        raise
    ctx.budget_tokens, ctx.reserve_tokens = budget.context_tokens, budget.reserve_tokens
    if client.config.max_tokens is None and client.config.base_url:
        client.reply_cap = budget.reserve_tokens  # a reply never outgrows the room kept for it
    header = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "cuda_agent": __version__,
        "task": {
            "name": task.name,
            "hash": task.hash,
            "path": str(task.path) if task.path else None,
            "source": task.source,
        },
        "workspace": str(start.workspace),
        "model": client.config.model,
        "base_url": client.config.base_url,  # never the key
        "tool_mode": client.config.tool_mode,
        "config": asdict(cfg),
        "budget": {**_budget_record(budget), "reply_cap": client.reply_cap},
        "sandbox": env.shell_level,
        "tools": schemas,
        **(header_extra or {}),
    }
    log = TrajectoryWriter(run / "trajectory.jsonl", header)
    t0 = time.monotonic()
    messages = start.messages
    for m in messages:
        log.message(m, 0)
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    turn, switches_seen, retries_seen, checked, cap_said = 0, 0, 0, False, False
    reason, error = "", None
    notes = [env.shell_note] if env.shell_level != "full" else []
    notes += budget.notes
    for n in budget.notes:
        log.note("budget", 0, message=n)

    def add(msg: dict[str, Any], **meta: Any) -> None:
        messages.append(msg)
        log.message(msg, turn, **meta)

    try:
        while not reason:
            if cfg.max_total_tokens is not None and usage["total_tokens"] >= cfg.max_total_tokens:
                reason = "max_tokens"
            elif cfg.max_wall_s is not None and time.monotonic() - t0 >= cfg.max_wall_s:
                reason = "max_wall"
            elif turn >= cfg.max_turns:
                reason = "max_turns"
            if reason:
                break
            elided = ctx.fit(messages)
            if elided:
                log.note("elide", turn, indices=elided, estimate=ctx.estimate(messages))
            if not ctx.fits(messages):
                reason, error = "context_full", _full_message(ctx, messages)
                break
            try:
                comp = client.complete(messages, schemas)
            except LLMError as e:
                if e.kind == "context_length" and _shrink_to_named_window(ctx, str(e), cfg, client):
                    log.note(
                        "budget", turn, context_tokens=ctx.budget_tokens, reserve_tokens=ctx.reserve_tokens, why=str(e)
                    )
                forced = ctx.fit(messages, force=True) if e.kind == "context_length" else []
                if forced:  # the server counts differently from our estimate: elide more and retry
                    log.note("elide", turn, indices=forced, forced=True, why=str(e))
                    continue
                reason, error = ("context_full" if e.kind == "context_length" else "llm_error"), str(e)
                break
            finally:
                if client.tool_check is not None and not checked:
                    log.note("tool_check", turn, **client.tool_check)
                    checked = True
                for why in client.mode_switches[switches_seen:]:
                    log.note("tool_mode", turn, mode="text", why=why)
                for line in client.retries_log[retries_seen:]:
                    log.note("retry", turn, message=line)
                switches_seen, retries_seen = len(client.mode_switches), len(client.retries_log)
                if client.cap_refused and not cap_said:
                    log.note("budget", turn, reply_cap=None, why=f"the server refused max_tokens: {client.cap_refused}")
                    cap_said = True
            turn += 1
            u, estimated = _usage_of(comp, messages, ctx)
            if not estimated:
                ctx.calibrate(messages, u["prompt_tokens"])
            for k in usage:
                usage[k] += u[k]
            msg = comp.to_message()
            fix_call_ids(msg, comp.tool_calls)  # before logging: the log must show the ids the replies use
            add(
                msg,
                usage=u,
                usage_estimated=estimated,
                latency_s=round(comp.latency_s, 3),
                attempts=comp.attempts,
                finish_reason=comp.finish_reason,
                reasoning=comp.reasoning,
                via_text=comp.via_text,
                mode=client.mode,
            )
            step = env.step(msg, comp.tool_calls, comp.finish_reason)
            for o in step.observations:
                if o.error:
                    log.note("harness_error", turn, tool=o.name, traceback=o.error)
                if o.eval:
                    log.evaluation(turn, o.eval.call_id, o.eval.phase, o.eval.result, o.eval.improved)
                if o.nudge:
                    add(o.message, nudge=True)
                else:
                    extra = {"malformed": True} if o.malformed else {}
                    add(o.message, name=o.name, ok=o.ok, elapsed_s=round(o.elapsed_s, 3), **extra)
            reason = step.reason or ""
            if progress:
                progress(
                    {
                        "turn": turn,
                        "usage": dict(usage),
                        "calls": [c.name for c in comp.tool_calls],
                        "best": env.best.result if env.best else None,
                    }
                )
    except KeyboardInterrupt:
        reason = "interrupted"
        raise
    finally:
        wall = time.monotonic() - t0
        reward = env.finish_as(reason or "crashed")
        best = env.best
        log.end(
            reason=reason or "crashed",
            error=error,
            turns=turn,
            usage=usage,
            reward=reward,
            best_turn=best.turn if best else None,
            wall_s=round(wall, 3),
            tool_mode=client.mode,
        )
        log.close()
        env.close()
    return RunSummary(
        run,
        reason,
        turn,
        usage,
        best,
        reward,
        wall,
        error,
        notes,
        {"max_no_tool": cfg.max_no_tool, "max_malformed": cfg.max_malformed},
    )


def _budget_record(b: Budget) -> dict[str, Any]:
    return {
        "context_tokens": b.context_tokens,
        "reserve_tokens": b.reserve_tokens,
        "first_prompt_tokens": b.first_prompt_tokens,
        "source": b.source,
    }


def _full_message(ctx: ContextManager, messages: list[dict[str, Any]]) -> str:
    return (
        f"the conversation needs about {ctx.estimate(messages):,} tokens after eliding old output, more than the "
        f"budget of {ctx.budget_tokens:,} less {ctx.reserve_tokens:,} kept for the reply (--context)"
    )


def _shrink_to_named_window(ctx: ContextManager, text: str, cfg: AgentConfig, client: ChatClient) -> bool:
    """Take a smaller window the server named in its context-length error as the budget; True when it changed."""
    named = window_from_error(text)
    if not named or named >= ctx.budget_tokens:
        return False
    ctx.budget_tokens = named
    if cfg.reply_reserve_tokens is None:
        ctx.reserve_tokens = min(ctx.reserve_tokens, int(named * REPLY_SHARE))
        if client.reply_cap:
            client.reply_cap = ctx.reserve_tokens
    return True


def _remove_fresh(run: Path, workspace: Path, fresh: bool) -> None:
    """Undo what reset laid out for a run that never started: its workspace, and the run dir if it made it."""
    import shutil

    shutil.rmtree(workspace, ignore_errors=True)
    if fresh:
        try:
            run.rmdir()
        except OSError:
            pass
