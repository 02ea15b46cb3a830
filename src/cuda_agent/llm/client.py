"""A chat-completions client on the official `openai` SDK, with tool calls and retries.

Contract:
- `ChatClient.complete(messages, tools)` sends one request and returns a
  `Completion`: the reply text, its tool calls (native, or read from
  `<tool_call>` blocks in the text), the reasoning text when the server returns
  one, and the token usage the server reported (None when it reported none).
- Retries: 429, 5xx, timeouts and connection errors are retried with
  exponential backoff and jitter, at most `max_retries` times; then, like any
  other failure of the endpoint (bad key, unknown model, bad request), an
  `LLMError` with a one-line message and a `kind` is raised. That is the only
  exception this module raises on purpose.
- Tool mode: "native" sends the `tools` field; "text" describes the tools in the
  system prompt and reads `<tool_call>` blocks; "auto" starts native and switches
  to text for good when the server rejects the `tools` field (vLLM without a tool
  parser answers 400) or when a reply carries text blocks and no native calls.
  `mode_switches` records why a switch happened.

Not guaranteed: streaming is not used (a reply arrives whole); usage of servers
that do not report it stays None and callers must estimate.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import openai

from cuda_agent.llm.textcalls import ToolCall, has_text_calls, parse_text_calls, to_text_messages

ToolMode = Literal["auto", "native", "text"]
_WIRE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


class LLMError(Exception):
    """The endpoint could not produce a reply. `kind`: connection, auth, not_found,
    bad_request, context_length, rate_limit, server, empty."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass
class ClientConfig:
    model: str
    base_url: str | None = None
    api_key: str | None = None
    tool_mode: ToolMode = "auto"
    max_retries: int = 5
    backoff_s: float = 1.0  # first retry delay; doubles per retry
    backoff_max_s: float = 30.0
    request_timeout_s: float = 600.0  # a long reasoning reply on a busy server takes minutes
    temperature: float | None = None
    max_tokens: int | None = None  # per reply; None lets the server decide
    extra_body: dict[str, Any] | None = None  # server-specific fields (e.g. vLLM's top_k)


@dataclass
class Completion:
    content: str
    tool_calls: list[ToolCall]
    finish_reason: str | None = None
    reasoning: str | None = None
    usage: dict[str, int] | None = None
    via_text: bool = False  # tool calls were read from the text
    attempts: int = 1
    latency_s: float = 0.0

    def to_message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation (OpenAI form)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        return msg


@dataclass
class ChatClient:
    config: ClientConfig
    sleep: Callable[[float], None] = time.sleep
    mode: Literal["native", "text"] = "native"
    mode_switches: list[str] = field(default_factory=list)
    retries_log: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        c = self.config
        if c.tool_mode == "text":
            self.mode = "text"
        # A local server needs no key, but the SDK refuses to start without one.
        key = c.api_key or ("EMPTY" if c.base_url else None)
        try:
            self._sdk = openai.OpenAI(base_url=c.base_url, api_key=key, max_retries=0, timeout=c.request_timeout_s)
        except openai.OpenAIError as e:
            raise LLMError("auth", _one_line(str(e))) from None

    def _switch_to_text(self, why: str) -> None:
        if self.mode != "text":
            self.mode = "text"
            self.mode_switches.append(why)

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        c = self.config
        kw: dict[str, Any] = {"model": c.model}
        if self.mode == "text":
            kw["messages"] = to_text_messages(messages, tools)
        else:
            kw["messages"] = [{k: m[k] for k in _WIRE_KEYS if k in m} for m in messages]
            if tools:
                kw["tools"] = tools
        if c.temperature is not None:
            kw["temperature"] = c.temperature
        if c.max_tokens is not None:
            kw["max_tokens"] = c.max_tokens
        if c.extra_body:
            kw["extra_body"] = c.extra_body
        return self._sdk.chat.completions.create(**kw)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        t0 = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                resp = self._request(messages, tools)
                if not getattr(resp, "choices", None):
                    raise LLMError("empty", "the server returned no choices")
                out = self._parse(resp, tools)
                out.attempts, out.latency_s = attempt, time.monotonic() - t0
                return out
            except openai.BadRequestError as e:
                text = _one_line(_error_text(e))
                low = text.lower()
                if "context" in low and ("length" in low or "maximum" in low or "too long" in low):
                    raise LLMError("context_length", text) from None
                if self.config.tool_mode == "auto" and self.mode == "native" and "tool" in low:
                    self._switch_to_text(f"server rejected native tools: {text}")
                    continue
                raise LLMError("bad_request", f"bad request (400): {text}") from None
            except (openai.AuthenticationError, openai.PermissionDeniedError) as e:
                raise LLMError("auth", f"authentication failed ({e.status_code}): {_one_line(_error_text(e))}") from None
            except openai.NotFoundError as e:
                raise LLMError("not_found", f"not found (404): {_one_line(_error_text(e))}; check --base-url (usually ends in /v1) and --model") from None
            except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError, openai.APIStatusError, LLMError) as e:
                kind, text = _classify(e)
                if kind is None:
                    raise LLMError("bad_request", text) from None
                if attempt > self.config.max_retries:
                    raise LLMError(kind, f"{text} (gave up after {attempt} attempts)") from None
                delay = min(self.config.backoff_max_s, self.config.backoff_s * 2 ** (attempt - 1))
                delay *= 0.5 + random.random() / 2  # jitter, so parallel agents do not retry in lockstep
                self.retries_log.append(f"attempt {attempt}: {text}; retrying in {delay:.1f}s")
                self.sleep(delay)

    def _parse(self, resp: Any, tools: list[dict[str, Any]]) -> Completion:
        choice = resp.choices[0]
        msg = choice.message
        content = msg.content or ""
        calls = [ToolCall(tc.id or "", tc.function.name, tc.function.arguments or "{}") for tc in (msg.tool_calls or [])]
        via_text = False
        if not calls and has_text_calls(content):
            calls, via_text = parse_text_calls(content, tools), True
            if self.config.tool_mode == "auto":
                self._switch_to_text("reply carried <tool_call> blocks in its text")
        # vLLM and SGLang reasoning parsers put the thinking in `reasoning_content`.
        reasoning = getattr(msg, "reasoning_content", None) or getattr(msg, "reasoning", None)
        usage = None
        if resp.usage is not None:
            usage = {
                "prompt_tokens": int(resp.usage.prompt_tokens or 0),
                "completion_tokens": int(resp.usage.completion_tokens or 0),
                "total_tokens": int(resp.usage.total_tokens or 0),
            }
        return Completion(content, calls, choice.finish_reason, reasoning if isinstance(reasoning, str) else None, usage, via_text)


def _classify(e: Exception) -> tuple[str | None, str]:
    """(kind, one-line text) for retryable failures; kind None means do not retry."""
    if isinstance(e, LLMError):
        return e.kind, str(e)
    if isinstance(e, openai.APITimeoutError):
        return "connection", "request timed out"
    if isinstance(e, openai.APIConnectionError):
        cause = e.__cause__ or e
        return "connection", f"cannot connect: {_one_line(str(cause)) or type(cause).__name__}"
    if isinstance(e, openai.APIStatusError):
        code = e.status_code
        text = f"HTTP {code}: {_one_line(_error_text(e))}"
        if code == 429:
            return "rate_limit", text
        if code >= 500 or code in (408, 409):
            return "server", text
        return None, text
    return None, _one_line(str(e))


def _error_text(e: openai.APIStatusError) -> str:
    body = e.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if body.get("message"):
            return str(body["message"])
    return e.message or str(e)


def _one_line(s: str, limit: int = 300) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 3] + "..."
