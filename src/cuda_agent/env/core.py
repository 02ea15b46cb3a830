"""The environment core: one episode of one task, as reset / step / close.

Every driver uses it: `cuda-agent optimize` (agent.loop, over a chat API) and the
RL rollouts (rl, over sampled tokens). The core knows nothing of tokens, context
budgets or HTTP; drivers own those.

Contract:
- `reset(task, run_dir)` lays out RUN_DIR/workspace and returns the initial
  messages (system prompt, task message) and the tool schemas (OpenAI form).
- `step(message, calls)` takes one assistant message (OpenAI form) and the tool
  calls read from it (`ToolCall`s; when omitted they come from
  `message["tool_calls"]`), runs every call in order and returns a `StepResult`:
  one observation per call (a `tool` message, also for malformed calls, whose
  text says how to fix them), or a nudge (`user` message) when the reply held no
  call; `done` and `reason` ("finished", "max_turns", "no_tool_call",
  "malformed_calls"); `reward`. `max_no_tool` replies in a row without a call end
  the episode ("no_tool_call"), and so do `max_malformed` replies in a row whose
  calls were all malformed ("malformed_calls"); a reply with one usable call resets
  both counts, and neither kind of useless reply resets the other's.
  Call ids are made unique first (`fix_call_ids`), in the message too.
- The reward is the reward of the best correct candidate evaluated so far (see
  `best`), -1 while there is none; when `done` it is the episode's reward.
  RUN_DIR/best/ always holds that candidate.
- `step` never raises for anything the model sends; a harness bug inside the
  evaluator becomes an observation plus `Observation.error` (not scored).
- `settle()` gives the final reward; a best candidate that was verified but
  never profiled is profiled first (from its kept snapshot), so a trainer's
  reward is always a timed one when a correct candidate exists.
- `counts` holds the tool calls made per tool name, and under "malformed" the
  calls that could not be used at all; `calls` all calls; `turns` the steps taken.
Not guaranteed: limits on tokens, wall time or context (drivers own them and end
an episode with `finish_as`); isolation of the shell (see `shell`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.env import best as best_mod
from cuda_agent.env.prompt import NUDGE_CUT_OFF, NUDGE_NO_TOOL, system_prompt, task_message
from cuda_agent.env.shell import ShellFactory, clip_middle
from cuda_agent.env.toolbox import Evaluator, Observation, Renderer, Toolbox
from cuda_agent.eval.judge.result import EvalResult
from cuda_agent.llm.textcalls import ToolCall, new_call_id
from cuda_agent.task.taskfile import Task
from cuda_agent.task.workspace import init_workspace

FIX_CALL = 'Write each call as <tool_call>{"name": "...", "arguments": {...}}</tool_call>'


@dataclass
class EnvConfig:
    max_turns: int = 200  # assistant messages per episode (the paper: 150 in training, 200 in evaluation)
    max_no_tool: int = 3  # replies in a row without a tool call before the episode ends
    max_malformed: int = 3  # replies in a row holding only malformed calls before the episode ends
    bash_timeout_s: float = 180.0
    max_observation_chars: int = 30000


@dataclass
class Reset:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    workspace: Path


@dataclass
class EvalEvent:
    call_id: str
    phase: str
    result: EvalResult
    improved: bool  # this result became the kept best candidate


@dataclass
class StepObservation:
    message: dict[str, Any]  # a `tool` message, or a `user` nudge
    name: str | None = None  # the tool called; None for a nudge
    ok: bool = True
    elapsed_s: float = 0.0
    eval: EvalEvent | None = None
    error: str | None = None  # traceback of a harness bug
    nudge: bool = False
    malformed: bool = False  # unreadable call, unknown tool or bad arguments (the RFT filter rejects these)


@dataclass
class StepResult:
    observations: list[StepObservation]
    done: bool
    reason: str | None
    reward: int

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [o.message for o in self.observations]


def fix_call_ids(message: dict[str, Any], calls: list[ToolCall]) -> None:
    """Give every call a unique id (some servers send empty or repeated ones); replies must match them."""
    seen: set[str] = set()
    for c in calls:
        if not c.id or c.id in seen:
            c.id = new_call_id()
        seen.add(c.id)
    if calls and len(message.get("tool_calls") or []) == len(calls):
        for wire, c in zip(message["tool_calls"], calls, strict=True):
            wire["id"] = c.id


def calls_of(message: dict[str, Any]) -> list[ToolCall]:
    return [
        ToolCall(c.get("id") or "", c["function"]["name"], c["function"].get("arguments") or "{}")
        for c in message.get("tool_calls") or []
    ]


@dataclass
class Environment:
    config: EnvConfig = field(default_factory=EnvConfig)
    evaluator: Evaluator | None = None  # default: the trusted evaluator in this process
    render: Renderer | None = None
    shell_factory: ShellFactory | None = None  # see env.shell: the seam for the sandbox's move
    turns: int = 0
    calls: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    best: best_mod.Best | None = None
    done: bool = False
    reason: str | None = None
    _tools: Toolbox | None = None
    _run_dir: Path | None = None
    _task: Task | None = None
    _no_tool: int = 0
    _malformed: int = 0

    def reset(self, task: Task, run_dir: str | Path) -> Reset:
        if self._tools is not None:
            raise RuntimeError("reset called twice: an Environment runs one episode")
        self._run_dir, self._task = Path(run_dir), task
        self._run_dir.mkdir(parents=True, exist_ok=True)
        ws = init_workspace(task, self._run_dir / "workspace")
        self._tools = Toolbox(
            ws,
            evaluator=self.evaluator,
            render=self.render,
            shell_factory=self.shell_factory,
            bash_timeout_s=self.config.bash_timeout_s,
        )
        messages = [{"role": "system", "content": system_prompt()}, {"role": "user", "content": task_message(ws)}]
        return Reset(messages, self._tools.schemas(), ws)

    @property
    def reward(self) -> int:
        return best_mod.reward_of(self.best)

    @property
    def shell_level(self) -> str:
        return self._box.shell.level

    @property
    def shell_note(self) -> str:
        return self._box.shell.note

    @property
    def _box(self) -> Toolbox:
        if self._tools is None:
            raise RuntimeError("step before reset")
        return self._tools

    def step(
        self, message: dict[str, Any], calls: list[ToolCall] | None = None, finish_reason: str | None = None
    ) -> StepResult:
        box = self._box
        if self.done:
            raise RuntimeError(f"step after the episode ended ({self.reason})")
        calls = calls_of(message) if calls is None else calls
        fix_call_ids(message, calls)
        self.turns += 1
        obs: list[StepObservation] = []
        if not calls:
            self._no_tool += 1
            if self._no_tool >= self.config.max_no_tool:
                return self._end("no_tool_call", obs)
            nudge = NUDGE_CUT_OFF if finish_reason == "length" else NUDGE_NO_TOOL
            obs.append(StepObservation({"role": "user", "content": nudge}, nudge=True))
            return (
                self._end("max_turns", obs)
                if self.turns >= self.config.max_turns
                else StepResult(obs, False, None, self.reward)
            )
        finished = False
        for call in calls:
            self.calls += 1
            if call.name:
                self.counts[call.name] += 1
            o = (
                Observation(f"error: {call.error}. {FIX_CALL}", ok=False, malformed=True)
                if call.error
                else box.call(call.name, call.arguments)
            )
            if o.malformed:
                self.counts["malformed"] += 1
            obs.append(self._observe(call, o))
            finished |= o.finished
        if finished:
            return self._end("finished", obs)
        if all(o.malformed for o in obs):  # not a single usable call: the no-tool count stays as it is
            self._malformed += 1
            if self._malformed >= self.config.max_malformed:
                return self._end("malformed_calls", obs)
        else:
            self._no_tool = self._malformed = 0
        if self.turns >= self.config.max_turns:
            return self._end("max_turns", obs)
        return StepResult(obs, False, None, self.reward)

    def _observe(self, call: ToolCall, o: Observation) -> StepObservation:
        text = clip_middle(o.text, self.config.max_observation_chars)
        event = None
        if o.result is not None and o.phase:
            improved = best_mod.better(o.result, self.best)
            if improved:
                self.best = best_mod.Best(o.result, o.sources or {}, self.turns)
                best_mod.save(self._run_dir / "best", self.best)  # type: ignore[operator]
            event = EvalEvent(call.id, o.phase, o.result, improved)
            text += "\n" + best_mod.summary_line(self.best, improved)
        msg = {"role": "tool", "tool_call_id": call.id, "content": text}
        return StepObservation(msg, call.name, o.ok, o.elapsed_s, event, o.error, malformed=o.malformed)

    def _end(self, reason: str, obs: list[StepObservation]) -> StepResult:
        self.done, self.reason = True, reason
        return StepResult(obs, True, reason, self.reward)

    def settle(self) -> int:
        """The final reward, after profiling the kept best when it was verified but never timed."""
        b = self.best
        if b is None or b.result.time_ms is not None or self._task is None:
            return self.reward
        ws = init_workspace(self._task, self._run_dir / "settle", force=True)  # type: ignore[operator]
        for rel, text in b.sources.items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(text)
        o = self._box.evaluate_at(ws, "profile")
        if o.result is not None and best_mod.better(o.result, b):
            self.best = best_mod.Best(o.result, b.sources, b.turn)
            best_mod.save(self._run_dir / "best", self.best)  # type: ignore[operator]
        return self.reward

    def finish_as(self, reason: str) -> int:
        """End the episode for a reason the driver decided (token, time or context limits); returns the reward."""
        if not self.done:
            self.done, self.reason = True, reason
        return self.reward

    def close(self) -> None:
        if self._tools is not None:
            self._tools.close()
