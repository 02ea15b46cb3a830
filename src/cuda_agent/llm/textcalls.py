"""Tool calls written in the reply text: the one parser for every caller.

Open chat models write a call in their text in one of two forms:
- Hermes style (Qwen2.5, many others): `<tool_call>{"name": "...", "arguments": {...}}</tool_call>`;
- Qwen3-Coder's XML style: `<tool_call><function=NAME><parameter=KEY>value</parameter>...</function></tool_call>`.
This module (a) finds such blocks in a reply, for the chat client's text mode and
for the RL rollout that decodes sampled tokens itself, (b) describes the tools in
the system prompt when a server is driven in text mode, and (c) rewrites a
conversation held in the native OpenAI form (assistant `tool_calls`, `tool`
messages) into plain text messages such a server's chat template accepts.

Contract: `parse_text_calls` never raises; a block that cannot be read (bad JSON,
no name, an unclosed XML element) comes back as a `ToolCall` with `error` set, so
the caller can tell the model what to fix. Arguments always come back as JSON
text. XML parameter values are text; with the tool schemas given, a parameter
declared integer, number, boolean, array or object is decoded as JSON (a value
that does not decode stays text and the tool's argument check reports it).
Not guaranteed: other formats (e.g. Llama's `<|python_tag|>`, Mistral's
`[TOOL_CALLS]`) are not recognised; a `<tool_call>` written inside a code block
counts as a call.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

OPEN, CLOSE = "<tool_call>", "</tool_call>"
# A block may lack its closing tag when the server stopped on the tag as a stop
# word; such a block runs to the end of the reply.
_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_XML_FUNCTION = re.compile(r"<function=([^>\n]*)>(.*?)(?:</function>|\Z)", re.DOTALL)
_XML_PARAM = re.compile(r"<parameter=([^>\n]*)>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.DOTALL)
_NON_TEXT = ("integer", "number", "boolean", "array", "object")


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text as the model wrote it (not yet validated)
    error: str | None = None  # set when the call could not even be read

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:20]


def has_text_calls(text: str | None) -> bool:
    return bool(text) and OPEN in text  # type: ignore[operator]


def parse_text_calls(text: str, tools: list[dict[str, Any]] | None = None) -> list[ToolCall]:
    """Every `<tool_call>` block of `text`, in order, Hermes JSON or Qwen3-Coder XML."""
    calls: list[ToolCall] = []
    for m in _BLOCK.finditer(text):
        body = m.group(1).strip()
        if body.startswith("<function="):
            calls.append(_parse_xml(body, _param_types(tools)))
        else:
            calls.append(_parse_json(body))
    return calls


def _parse_json(body: str) -> ToolCall:
    # Some models wrap the JSON in a code fence inside the block.
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        return ToolCall(
            new_call_id(), "", body, error=f"the <tool_call> block is not valid JSON ({e.msg} at char {e.pos})"
        )
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return ToolCall(
            new_call_id(), "", body, error='the <tool_call> block must be a JSON object with a string "name"'
        )
    args = obj.get("arguments", obj.get("parameters", {}))
    # Arguments may arrive as an object or as a JSON string; keep JSON text either way.
    arg_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return ToolCall(new_call_id(), obj["name"], arg_text)


def _parse_xml(body: str, types: dict[str, dict[str, str]]) -> ToolCall:
    fm = _XML_FUNCTION.match(body)
    name = fm.group(1).strip() if fm else ""
    if not fm or not name:
        return ToolCall(
            new_call_id(), "", body, error="the <function=NAME> element of the <tool_call> block has no name"
        )
    if not fm.group(0).endswith("</function>"):
        return ToolCall(
            new_call_id(), name, body, error=f"the <function={name}> element is not closed with </function>"
        )
    args: dict[str, Any] = {}
    for pm in _XML_PARAM.finditer(fm.group(2)):
        key = pm.group(1).strip()
        # The format puts the value on its own lines: one newline each side is framing, not value.
        value: Any = pm.group(2).removeprefix("\n").removesuffix("\n")
        if types.get(name, {}).get(key) in _NON_TEXT:
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                pass  # left as text: the tool's argument check names the expected type
        args[key] = value
    return ToolCall(new_call_id(), name, json.dumps(args, ensure_ascii=False))


def _param_types(tools: list[dict[str, Any]] | None) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for t in tools or []:
        fn = t.get("function", t)
        props = (fn.get("parameters") or {}).get("properties") or {}
        out[fn.get("name", "")] = {k: v.get("type", "string") for k, v in props.items() if isinstance(v, dict)}
    return out


def strip_text_calls(text: str) -> str:
    """The reply text without its <tool_call> blocks."""
    return _BLOCK.sub("", text).strip()


def tools_prompt(tools: list[dict[str, Any]]) -> str:
    """The system-prompt section that replaces the `tools` request field in text mode."""
    lines = [
        "# Tools",
        "",
        "You call tools by writing, anywhere in your reply, one block per call:",
        '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>',
        "The block must hold a single JSON object. Results come back in <tool_response> blocks.",
        "Available tools (JSON schema of each):",
    ]
    for t in tools:
        fn = t.get("function", t)
        lines.append(
            json.dumps(
                {"name": fn["name"], "description": fn.get("description", ""), "parameters": fn.get("parameters", {})},
                ensure_ascii=False,
            )
        )
    return "\n".join(lines)


def render_call(call: dict[str, Any]) -> str:
    fn = call["function"]
    try:
        args: Any = json.loads(fn.get("arguments") or "{}")
    except json.JSONDecodeError:
        args = fn.get("arguments")
    return OPEN + json.dumps({"name": fn["name"], "arguments": args}, ensure_ascii=False) + CLOSE


def to_text_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Native-form conversation -> plain system/user/assistant messages.

    Tool results become user messages with <tool_response> blocks (consecutive
    results merged into one message, since some chat templates insist on
    alternating roles); assistant calls are written back as <tool_call> blocks
    unless the text already holds them.
    """
    out: list[dict[str, Any]] = []
    system_done = False
    for m in messages:
        role = m["role"]
        if role == "system" and not system_done:
            out.append({"role": "system", "content": (m.get("content") or "") + "\n\n" + tools_prompt(tools)})
            system_done = True
        elif role == "assistant":
            text = m.get("content") or ""
            calls = m.get("tool_calls") or []
            if calls and not has_text_calls(text):
                text = (text + "\n" if text else "") + "\n".join(render_call(c) for c in calls)
            out.append({"role": "assistant", "content": text})
        elif role == "tool":
            block = f"<tool_response>\n{m.get('content') or ''}\n</tool_response>"
            if out and out[-1]["role"] == "user" and out[-1].get("_tool_results"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "_tool_results": True})
        else:
            out.append({"role": role, "content": m.get("content") or ""})
    if not system_done:
        out.insert(0, {"role": "system", "content": tools_prompt(tools)})
    for m in out:
        m.pop("_tool_results", None)
    return out
