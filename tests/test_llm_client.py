"""The chat client against a real local HTTP server: native and text tool calls,
mode switching, retries, and endpoint failures as one-line LLMErrors."""

from __future__ import annotations

import socket

import pytest
from fake_openai_server import call, error, reply, serving, text_call

from cuda_agent.llm.client import ChatClient, ClientConfig, LLMError
from cuda_agent.llm.textcalls import parse_text_calls, strip_text_calls, to_text_messages

TOOLS = [{"type": "function", "function": {"name": "read", "description": "read a file",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]
MSGS = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]


def client(url: str, **kw) -> ChatClient:
    kw.setdefault("backoff_s", 0.01)
    return ChatClient(ClientConfig(model="m", base_url=url, **kw), sleep=lambda s: None)


def test_native_tool_call_and_usage():
    with serving([reply("thinking", [call("read", {"path": "model.py"})], usage={"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16})]) as srv:
        c = client(srv.base_url).complete(MSGS, TOOLS)
    assert [t.name for t in c.tool_calls] == ["read"] and c.tool_calls[0].arguments == '{"path": "model.py"}'
    assert c.usage == {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}
    assert srv.requests[0]["tools"] == TOOLS and not c.via_text


def test_text_calls_switch_auto_mode_to_text():
    with serving([reply("I will read.\n" + text_call("read", {"path": "model.py"})), reply("done")]) as srv:
        cl = client(srv.base_url)
        c = cl.complete(MSGS, TOOLS)
        assert c.via_text and c.tool_calls[0].name == "read" and cl.mode == "text"
        cl.complete(MSGS + [c.to_message(), {"role": "tool", "tool_call_id": c.tool_calls[0].id, "content": "x = 1"}], TOOLS)
    second = srv.requests[1]
    assert "tools" not in second
    assert "<tool_call>" in second["messages"][0]["content"]  # tools described in the system prompt
    assert second["messages"][-1] == {"role": "user", "content": "<tool_response>\nx = 1\n</tool_response>"}


def test_server_rejecting_tools_switches_to_text():
    msg = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    with serving([error(400, msg), reply(text_call("read", {"path": "a"}))]) as srv:
        cl = client(srv.base_url)
        c = cl.complete(MSGS, TOOLS)
    assert cl.mode == "text" and cl.mode_switches and c.tool_calls[0].name == "read"
    assert "tools" in srv.requests[0] and "tools" not in srv.requests[1]


def test_forced_text_mode_never_sends_tools():
    with serving([reply(text_call("read", {"path": "a"}))]) as srv:
        client(srv.base_url, tool_mode="text").complete(MSGS, TOOLS)
    assert "tools" not in srv.requests[0]


def test_500_and_429_are_retried_then_succeed():
    with serving([error(500), error(429), reply("ok")]) as srv:
        cl = client(srv.base_url)
        c = cl.complete(MSGS, TOOLS)
    assert c.content == "ok" and c.attempts == 3 and len(cl.retries_log) == 2


def test_retries_are_bounded():
    with serving([error(503)] * 5) as srv:
        with pytest.raises(LLMError) as e:
            client(srv.base_url, max_retries=2).complete(MSGS, TOOLS)
    assert e.value.kind == "server" and len(srv.requests) == 3 and "\n" not in str(e.value)


def test_auth_error_is_not_retried():
    with serving([error(401, "bad key"), reply("never")]) as srv:
        with pytest.raises(LLMError) as e:
            client(srv.base_url).complete(MSGS, TOOLS)
    assert e.value.kind == "auth" and len(srv.requests) == 1


def test_unreachable_endpoint():
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(LLMError) as e:
        client(f"http://127.0.0.1:{port}/v1", max_retries=1).complete(MSGS, TOOLS)
    assert e.value.kind == "connection" and "\n" not in str(e.value)


def test_parse_text_calls_variants():
    calls = parse_text_calls('a <tool_call>{"name": "read", "arguments": "{\\"path\\": \\"x\\"}"}</tool_call>'
                             '<tool_call>{not json}</tool_call><tool_call>{"arguments": {}}</tool_call>'
                             '<tool_call>{"name": "glob", "arguments": {"pattern": "*"}}')  # last one unclosed
    assert [c.name for c in calls] == ["read", "", "", "glob"]
    assert calls[0].arguments == '{"path": "x"}' and calls[0].error is None
    assert "not valid JSON" in calls[1].error and "name" in calls[2].error
    assert calls[3].arguments == '{"pattern": "*"}'
    assert strip_text_calls("hi <tool_call>{}</tool_call>") == "hi"


def test_to_text_messages_renders_native_history():
    msgs = MSGS + [{"role": "assistant", "content": "", "tool_calls": [call("read", {"path": "a"})]},
                   {"role": "tool", "tool_call_id": "x", "content": "A"}, {"role": "tool", "tool_call_id": "y", "content": "B"}]
    out = to_text_messages(msgs, TOOLS)
    assert out[2]["content"].startswith("<tool_call>") and '"path": "a"' in out[2]["content"]
    assert out[3]["role"] == "user" and out[3]["content"].count("<tool_response>") == 2 and len(out) == 4
