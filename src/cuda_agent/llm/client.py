"""A chat-completions client on the official `openai` SDK, with tool calls and retries.

Contract:
- `ChatClient.complete(messages, tools)` sends one request and returns a
  `Completion`: the reply text, its tool calls (native, or read from
  `<tool_call>` blocks in the text), the reasoning text when the server returns
  one, and the token usage the server reported (None when it reported none).
- Retries: 429, 5xx, timeouts and connection errors are retried with
  exponential backoff and jitter, at most `max_retries` times, each one said
  through `notify` as it starts (attempt, wait, reason) and kept in
  `retries_log`; then, like any other failure of the endpoint (bad key, unknown
  model, bad request), an `LLMError` with a one-line message and a `kind` is
  raised. That is the only exception this module raises on purpose.
- Tool mode: "native" sends the `tools` field (and `tool_choice` "auto");
  "text" describes the tools in the system prompt and reads `<tool_call>`
  blocks (so does native mode when a reply has them and no native calls);
  "auto" starts native and switches
  to text for good when the server rejects the `tools` field (vLLM without a tool
  parser answers 400), when a reply carries text blocks and no native calls, or
  when the server silently drops the field: before its first request an auto
  client on a local endpoint (`base_url` set) sends one probe, a one-word message
  with the tools and `max_tokens` 1, and a reported prompt shorter than the
  schemas alone could be (`_PROBE_SHARE` of their characters / 4) means the
  tools never reached the model (llama-cpp-python with a template without tool
  support, older Ollama, many proxies). `tool_check` records what the probe saw;
  `mode_switches` records why a switch happened, and each switch is said once
  through `notify`.
- `context_window()` asks the server's model list once for the model's window
  (vLLM's `max_model_len` and the like); None when it names none.
- Reply length: `config.max_tokens` when set; else, on a local endpoint, the
  `reply_cap` its caller sets (the context budget's reply reserve), so a reply
  never outgrows the room kept for it (a small model that never stops would
  otherwise fill the server's whole window, for minutes on a CPU). A server that
  answers 400 naming max_tokens to the cap gets no cap from then on, said once
  through `notify` and kept in `cap_refused`.

Not guaranteed: streaming is not used (a reply arrives whole); usage of servers
that do not report it stays None and callers must estimate; a server that
reports no usage cannot be probed, and stays native.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import openai

from cuda_agent.llm.textcalls import ToolCall, has_text_calls, parse_text_calls, to_text_messages

ToolMode = Literal["auto", "native", "text"]
_WIRE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")
# A template that renders the schemas at all renders at least this share of their chars / 4 as tokens (compact
# forms such as functionary's TypeScript signatures still keep every name and description); a server that
# dropped them reports only the probe's few words and the template's framing.
_PROBE_SHARE = 0.3
_PROBE_MIN_CHARS = 800  # below this the schemas are too small to tell apart from a template's framing
_WINDOW_KEYS = ("max_model_len", "context_length", "max_context_length", "context_window", "n_ctx", "max_seq_len")


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
    extra_body: dict[str, Any] | None = None  # server-specific fields (e.g. vLLM's top_k, llama.cpp's grammar)
    probe_tools: bool = True  # auto mode on a local endpoint: check once that the server uses the tools field


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
    notify: Callable[[str], None] | None = None  # one line per retry and per tool-mode switch, as they happen
    tool_check: dict[str, Any] | None = None  # what the tools probe saw (auto mode), once it ran
    reply_cap: int | None = None  # max_tokens when config.max_tokens is None, on a local endpoint (the reply reserve)
    cap_refused: str | None = None  # why the server refused reply_cap, once it did
    _window: int | None | bool = False  # False: the model list was not asked yet
    _cap_sent: bool = False  # the last request carried reply_cap as max_tokens

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

    def _say(self, line: str) -> None:
        if self.notify is not None:
            self.notify(line)

    def _switch_to_text(self, why: str) -> None:
        if self.mode != "text":
            self.mode = "text"
            self.mode_switches.append(why)
            self._say(f"switching to text tool calls (<tool_call> blocks): {why}")

    def _request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None = None
    ) -> Any:
        c = self.config
        kw: dict[str, Any] = {"model": c.model}
        if self.mode == "text":
            kw["messages"] = to_text_messages(messages, tools)
        else:
            kw["messages"] = [{k: m[k] for k in _WIRE_KEYS if k in m} for m in messages]
            if tools:
                # "auto" is every API's default with tools, but llama-cpp-python's function-calling chat formats
                # drop the tools unless it is said
                kw["tools"], kw["tool_choice"] = tools, "auto"
        if c.temperature is not None:
            kw["temperature"] = c.temperature
        self._cap_sent = max_tokens is None and c.max_tokens is None and bool(self.reply_cap) and bool(c.base_url)
        if max_tokens is not None or c.max_tokens is not None or self._cap_sent:
            kw["max_tokens"] = max_tokens if max_tokens is not None else (c.max_tokens or self.reply_cap)
        if c.extra_body:
            kw["extra_body"] = c.extra_body
        return self._sdk.chat.completions.create(**kw)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        if self.tool_check is None and self._should_probe(tools):
            self._probe_tools(tools)
        t0 = time.monotonic()
        resp, attempt = self._send(lambda: self._request(messages, tools))
        out = self._parse(resp, tools)
        out.attempts, out.latency_s = attempt, time.monotonic() - t0
        return out

    def _send(self, request: Callable[[], Any], probe: bool = False) -> tuple[Any, int]:
        """(response, attempts): `request` with the retry policy and the error mapping of the contract."""
        attempt = 0
        while True:
            attempt += 1
            try:
                resp = request()
                if not getattr(resp, "choices", None):
                    raise LLMError("empty", "the server returned no choices")
                return resp, attempt
            except openai.BadRequestError as e:
                text = _one_line(_error_text(e))
                low = text.lower()
                if "context" in low and ("length" in low or "maximum" in low or "too long" in low or "window" in low):
                    raise LLMError("context_length", text) from None
                if self._cap_sent and "max_tokens" in low:
                    self._say(
                        f"the server refused max_tokens {self.reply_cap} ({text}); replies are not capped from now on"
                    )
                    self.reply_cap, self.cap_refused = None, text
                    continue
                if self.config.tool_mode == "auto" and self.mode == "native" and "tool" in low:
                    self._switch_to_text(f"server rejected native tools: {text}")
                    if probe:
                        return None, attempt
                    continue
                raise LLMError("bad_request", f"bad request (400): {text}") from None
            except (openai.AuthenticationError, openai.PermissionDeniedError) as e:
                raise LLMError(
                    "auth", f"authentication failed ({e.status_code}): {_one_line(_error_text(e))}"
                ) from None
            except openai.NotFoundError as e:
                raise LLMError(
                    "not_found",
                    f"not found (404): {_one_line(_error_text(e))}; check --base-url (usually ends in /v1) and --model",
                ) from None
            except (
                openai.APIConnectionError,
                openai.RateLimitError,
                openai.InternalServerError,
                openai.APIStatusError,
                LLMError,
            ) as e:
                kind, text = _classify(e)
                if kind is None:
                    raise LLMError("bad_request", text) from None
                total = self.config.max_retries + 1
                if attempt >= total:
                    raise LLMError(kind, f"{text} (gave up after {_count(attempt, 'attempt')})") from None
                delay = min(self.config.backoff_max_s, self.config.backoff_s * 2 ** (attempt - 1))
                delay *= 0.5 + random.random() / 2  # jitter, so parallel agents do not retry in lockstep
                line = f"attempt {attempt} of {total} failed: {text}; retrying in {delay:.1f} s"
                self.retries_log.append(line)
                self._say(line)
                self.sleep(delay)

    def _should_probe(self, tools: list[dict[str, Any]]) -> bool:
        c = self.config
        return c.tool_mode == "auto" and self.mode == "native" and c.probe_tools and bool(c.base_url) and bool(tools)

    def _probe_tools(self, tools: list[dict[str, Any]]) -> None:
        """One short request: does the server put the tool schemas into the prompt at all?"""
        chars = len(json.dumps(tools))
        floor = int(chars / 4 * _PROBE_SHARE)
        check: dict[str, Any] = {"schema_chars": chars, "min_prompt_tokens": floor}
        self.tool_check = check
        if chars < _PROBE_MIN_CHARS:
            check["verdict"] = "skipped: schemas too small to tell"
            return
        t0 = time.monotonic()
        try:
            resp, _ = self._send(
                lambda: self._request([{"role": "user", "content": "Say OK."}], tools, max_tokens=1), probe=True
            )
        except LLMError as e:
            if e.kind not in ("bad_request", "context_length", "empty"):
                raise  # the endpoint itself fails: the real request would too, so say so now
            check["verdict"] = f"inconclusive: {e}"  # e.g. a server that refuses max_tokens 1
            return
        if resp is None:  # rejected the tools field outright: already switched
            check["verdict"] = "rejected"
            return
        check["latency_s"] = round(time.monotonic() - t0, 3)
        usage = getattr(resp, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0
        check["prompt_tokens"] = prompt or None
        if not prompt:
            check["verdict"] = "inconclusive: the server reports no token usage"
        elif prompt < floor:
            check["verdict"] = "ignored"
            self._switch_to_text(
                f"the server ignored the tools field: a probe carrying {chars} characters of tool "
                f"schemas reported {prompt} prompt tokens, at least {floor} expected"
            )
        else:
            check["verdict"] = "used"

    def context_window(self) -> int | None:
        """The model's context window as the server's model list reports it (asked once); None when unknown."""
        if self._window is False:
            self._window = None
            if self.config.base_url:
                try:
                    models = list(self._sdk.with_options(timeout=10.0).models.list().data)
                except Exception:  # noqa: BLE001 - a server without a usable model list simply names no window
                    models = []
                mine = [m for m in models if m.id == self.config.model] or (models if len(models) == 1 else [])
                for m in mine:
                    extra = {**(getattr(m, "model_extra", None) or {})}
                    if isinstance(extra.get("meta"), dict):  # llama.cpp's server: meta.n_ctx_train
                        extra = {**extra["meta"], **extra}
                    self._window = next(
                        (int(extra[k]) for k in _WINDOW_KEYS if isinstance(extra.get(k), int) and extra[k] > 0), None
                    )
        return self._window  # type: ignore[return-value]

    def _parse(self, resp: Any, tools: list[dict[str, Any]]) -> Completion:
        choice = resp.choices[0]
        msg = choice.message
        content = msg.content or ""
        calls = [
            ToolCall(tc.id or "", tc.function.name, tc.function.arguments or "{}") for tc in (msg.tool_calls or [])
        ]
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
        return Completion(
            content, calls, choice.finish_reason, reasoning if isinstance(reasoning, str) else None, usage, via_text
        )


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


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def window_from_error(text: str) -> int | None:
    """The context window a server's context-length error names, if it names one."""
    for pat in (
        r"maximum context length is (\d+)",
        r"context window of (\d+)",
        r"context length of (\d+)",
        r"n_ctx[^0-9]{0,10}(\d+)",
    ):
        if m := re.search(pat, text, re.IGNORECASE):
            return int(m.group(1))
    return None
