"""Keep a conversation under the model's context budget by eliding old material.

Contract: `ContextManager.fit(messages)` changes `messages` in place, never
touching the system message, the task message (the first user message) or the
last `keep_recent` messages, and returns what it elided. Order, oldest first
within each pass, stopping as soon as the estimate is below `target` of the
budget (hysteresis: eliding a chunk at once keeps the prompt prefix stable for
the server's cache over the next turns):
1. tool outputs, except the latest read of each file and the latest evaluator
   output: the current state of the kernels stays visible;
2. file contents inside old write / edit / multi_edit calls of files written
   again later (the arguments stay valid JSON);
3. the text of old assistant messages.
Token counts are estimated as characters / 4, scaled by the ratio the server's
reported prompt_tokens showed on the last call (`calibrate`).

`plan_budget` turns the settings into numbers that add up before a run starts:
the budget is `--context`, else the window the server reports, else 131,072
(and never more than a reported window); the reply reserve is `--reply-tokens`
when given, else 8,192 capped to a quarter of the budget and, when the first
prompt leaves less, what it leaves (a local server is asked for at most the
reserve per reply either way: `loop.run_episode`). A
budget that cannot hold the first prompt plus a reply of `MIN_REPLY_TOKENS`
(or of `--reply-tokens`) raises `BudgetError`, whose message names the numbers
and the setting to change.

Not guaranteed: that the result fits; `fits()` says so and the loop ends the run
when it does not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from cuda_agent.llm.textcalls import has_text_calls, strip_text_calls

ELIDED = "[output elided to save context; run the tool again if you need it]"
DEFAULT_CONTEXT_TOKENS = 131072
DEFAULT_REPLY_TOKENS = 8192
REPLY_SHARE = 0.25  # the reply reserve takes at most this share of the budget unless --reply-tokens says otherwise
MIN_REPLY_TOKENS = 512  # a reply that can still hold one small kernel write


class BudgetError(ValueError):
    """The context budget cannot hold the first prompt plus a reply; the message names the numbers and the flag."""


@dataclass
class Budget:
    context_tokens: int
    reserve_tokens: int
    first_prompt_tokens: int
    source: str  # where context_tokens came from: "--context", "server", "default"
    notes: list[str] = field(default_factory=list)


def _k(n: int) -> str:
    return f"{n:,}"


def plan_budget(first_prompt: int, context: int | None, window: int | None, reply_tokens: int | None) -> Budget:
    """The budget and reply reserve for a run whose first prompt is about `first_prompt` tokens (see the module doc)."""
    notes: list[str] = []
    if context:
        budget, source = context, "--context"
        if window and window < context:
            notes.append(
                f"the server reports a context window of {_k(window)} tokens, below --context {_k(context)}; using {_k(window)}"
            )
            budget, source = window, "server"
    else:
        budget, source = (window, "server") if window else (DEFAULT_CONTEXT_TOKENS, "default")
    where = {
        "--context": f"--context {_k(budget)}",
        "server": f"the server's context window of {_k(budget)} tokens",
        "default": f"the default budget of {_k(budget)} tokens (--context)",
    }[source]
    fix = "raise --context" if source != "server" else "run the model with a larger window (the server reports its own)"
    if reply_tokens:
        if first_prompt + reply_tokens > budget:
            room = budget - first_prompt
            lower = f", or lower --reply-tokens to at most {_k(room)}" if room >= MIN_REPLY_TOKENS else ""
            raise BudgetError(
                f"{where} cannot hold the first prompt (about {_k(first_prompt)} tokens) plus a reply of "
                f"--reply-tokens {_k(reply_tokens)}: {fix} to at least {_k(first_prompt + reply_tokens)}{lower}"
            )
        return Budget(budget, reply_tokens, first_prompt, source, notes)
    if first_prompt + MIN_REPLY_TOKENS > budget:
        raise BudgetError(
            f"{where} cannot hold the first prompt (about {_k(first_prompt)} tokens) plus a minimal reply "
            f"({_k(MIN_REPLY_TOKENS)} tokens): {fix} to at least {_k(first_prompt + MIN_REPLY_TOKENS)}"
        )
    reserve = min(DEFAULT_REPLY_TOKENS, int(budget * REPLY_SHARE), budget - first_prompt)
    return Budget(budget, reserve, first_prompt, source, notes)


def message_chars(m: dict[str, Any]) -> int:
    n = len(m.get("content") or "") + 16  # role and framing tokens, roughly
    for c in m.get("tool_calls") or []:
        n += len(c["function"]["name"]) + len(c["function"].get("arguments") or "") + 16
    return n


@dataclass
class ContextManager:
    budget_tokens: int = 131072
    reserve_tokens: int = 8192  # room for the reply
    target: float = 0.7  # after eliding, aim for this fraction of the budget
    keep_recent: int = 4
    tools_chars: int = 0  # size of the tool schemas sent with every request
    ratio: float = 1.0  # real tokens per (chars / 4), learned from usage
    elided: list[int] = field(default_factory=list)

    def estimate(self, messages: list[dict[str, Any]]) -> int:
        chars = self.tools_chars + sum(message_chars(m) for m in messages)
        return int(chars / 4 * self.ratio)

    def calibrate(self, messages: list[dict[str, Any]], prompt_tokens: int | None) -> None:
        if prompt_tokens:
            raw = (self.tools_chars + sum(message_chars(m) for m in messages)) / 4
            if raw > 0:
                # clamp: one odd report (e.g. a cached-prefix count) must not wreck the estimate
                self.ratio = min(2.5, max(0.4, prompt_tokens / raw))

    def fits(self, messages: list[dict[str, Any]]) -> bool:
        return self.estimate(messages) <= self.budget_tokens - self.reserve_tokens

    def fit(self, messages: list[dict[str, Any]], force: bool = False) -> list[int]:
        """Elide until under the target when over the limit (or when `force`); returns indices elided."""
        if self.fits(messages) and not force:
            return []
        goal = int(self.target * (self.budget_tokens - self.reserve_tokens))
        done: list[int] = []
        first_user = next((i for i, m in enumerate(messages) if m["role"] == "user"), -1)
        frozen = {i for i, m in enumerate(messages) if m["role"] == "system"} | {first_user}
        frozen |= set(range(max(0, len(messages) - self.keep_recent), len(messages)))
        frozen |= _latest_views(messages)
        for pass_fn in (_elide_tool_output, _elide_written_content, _elide_assistant_text):
            superseded = _superseded_writes(messages)
            for i, m in enumerate(messages):
                if self.estimate(messages) <= goal:
                    break
                if i not in frozen and pass_fn(m, i, superseded):
                    done.append(i)
        self.elided.extend(done)
        return done


def _calls_by_id(messages: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for m in messages:
        for c in m.get("tool_calls") or []:
            try:
                args = json.loads(c["function"].get("arguments") or "{}")
            except json.JSONDecodeError:
                args = {}
            out[c["id"]] = (c["function"]["name"], args if isinstance(args, dict) else {})
    return out


def _latest_views(messages: list[dict[str, Any]]) -> set[int]:
    """Indices of the latest read output per file and the latest evaluator output."""
    calls = _calls_by_id(messages)
    latest: dict[str, int] = {}
    for i, m in enumerate(messages):
        if m["role"] != "tool" or m.get("tool_call_id") not in calls:
            continue
        name, args = calls[m["tool_call_id"]]
        if name == "read" and isinstance(args.get("path"), str):
            latest["read:" + args["path"]] = i
        elif name in ("compile", "verify", "profile"):
            latest["eval"] = i
    return set(latest.values())


def _superseded_writes(messages: list[dict[str, Any]]) -> set[tuple[int, int]]:
    """(message index, call index) of write/edit calls whose file was written again later."""
    last: dict[str, tuple[int, int]] = {}
    all_calls: list[tuple[str, tuple[int, int]]] = []
    for i, m in enumerate(messages):
        for j, c in enumerate(m.get("tool_calls") or []):
            if c["function"]["name"] in ("write", "edit", "multi_edit"):
                try:
                    path = json.loads(c["function"].get("arguments") or "{}").get("path")
                except (json.JSONDecodeError, AttributeError):
                    continue
                if isinstance(path, str):
                    last[path] = (i, j)
                    all_calls.append((path, (i, j)))
    return {ij for path, ij in all_calls if last[path] != ij}


def _elide_tool_output(m: dict[str, Any], i: int, superseded: set) -> bool:
    if m["role"] != "tool" or m.get("content") == ELIDED or len(m.get("content") or "") < 200:
        return False
    m["content"] = ELIDED
    return True


def _elide_written_content(m: dict[str, Any], i: int, superseded: set) -> bool:
    changed = False
    for j, c in enumerate(m.get("tool_calls") or []):
        if (i, j) not in superseded:
            continue
        args = json.loads(c["function"]["arguments"])
        for key in ("content", "old_string", "new_string", "edits"):
            if key in args and args[key] != "[elided]":
                args[key] = "[elided]"
                changed = True
        c["function"]["arguments"] = json.dumps(args)
    if changed and has_text_calls(m.get("content")):
        # text mode: the calls are re-rendered from the (now elided) tool_calls
        m["content"] = strip_text_calls(m["content"])
    return changed


def _elide_assistant_text(m: dict[str, Any], i: int, superseded: set) -> bool:
    if m["role"] != "assistant" or len(m.get("content") or "") < 200:
        return False
    m["content"] = "[earlier reasoning elided to save context]"
    return True
