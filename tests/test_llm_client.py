"""The chat client against a real local HTTP server: native and text tool calls,
mode switching, retries, and endpoint failures as one-line LLMErrors."""

from __future__ import annotations

import socket

import pytest
from fake_openai_server import call, error, reply, serving, text_call

from cuda_agent.llm.client import ChatClient, ClientConfig, LLMError
from cuda_agent.llm.textcalls import parse_text_calls, strip_text_calls, to_text_messages

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
MSGS = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]


def client(url: str, **kw) -> ChatClient:
    kw.setdefault("backoff_s", 0.01)
    return ChatClient(ClientConfig(model="m", base_url=url, **kw), sleep=lambda s: None)


def test_native_tool_call_and_usage():
    with serving(
        [
            reply(
                "thinking",
                [call("read", {"path": "model.py"})],
                usage={"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16},
            )
        ]
    ) as srv:
        c = client(srv.base_url).complete(MSGS, TOOLS)
    assert [t.name for t in c.tool_calls] == ["read"] and c.tool_calls[0].arguments == '{"path": "model.py"}'
    assert c.usage == {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}
    assert srv.requests[0]["tools"] == TOOLS and not c.via_text


def test_text_calls_switch_auto_mode_to_text():
    with serving([reply("I will read.\n" + text_call("read", {"path": "model.py"})), reply("done")]) as srv:
        cl = client(srv.base_url)
        c = cl.complete(MSGS, TOOLS)
        assert c.via_text and c.tool_calls[0].name == "read" and cl.mode == "text"
        cl.complete(
            MSGS + [c.to_message(), {"role": "tool", "tool_call_id": c.tool_calls[0].id, "content": "x = 1"}], TOOLS
        )
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
    calls = parse_text_calls(
        'a <tool_call>{"name": "read", "arguments": "{\\"path\\": \\"x\\"}"}</tool_call>'
        '<tool_call>{not json}</tool_call><tool_call>{"arguments": {}}</tool_call>'
        '<tool_call>{"name": "glob", "arguments": {"pattern": "*"}}'
    )  # last one unclosed
    assert [c.name for c in calls] == ["read", "", "", "glob"]
    assert calls[0].arguments == '{"path": "x"}' and calls[0].error is None
    assert "not valid JSON" in calls[1].error and "name" in calls[2].error
    assert calls[3].arguments == '{"pattern": "*"}'
    assert strip_text_calls("hi <tool_call>{}</tool_call>") == "hi"


def test_to_text_messages_renders_native_history():
    msgs = MSGS + [
        {"role": "assistant", "content": "", "tool_calls": [call("read", {"path": "a"})]},
        {"role": "tool", "tool_call_id": "x", "content": "A"},
        {"role": "tool", "tool_call_id": "y", "content": "B"},
    ]
    out = to_text_messages(msgs, TOOLS)
    assert out[2]["content"].startswith("<tool_call>") and '"path": "a"' in out[2]["content"]
    assert out[3]["role"] == "user" and out[3]["content"].count("<tool_response>") == 2 and len(out) == 4


# A schema set as large as the agent's own (about 4.9k characters), so the tools probe can tell.
BIG_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{i}",
            "description": f"tool number {i}: " + "does one careful thing with the workspace. " * 6,
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "a relative path"},
                    "text": {"type": "string", "description": "what to write"},
                },
                "required": ["path"],
            },
        },
    }
    for i in range(8)
]


def test_auto_probe_finds_a_server_that_drops_the_tools_and_switches_to_text():
    said = []
    with serving([reply(text_call("tool_0", {"path": "a"})), reply("ok")], ignore_tools=True) as srv:
        cl = client(srv.base_url)
        cl.notify = said.append
        c = cl.complete(MSGS, BIG_TOOLS)
        cl.complete(MSGS, BIG_TOOLS)
    assert len(srv.probes) == 1 and srv.probes[0]["max_tokens"] == 1 and srv.probes[0]["tools"] == BIG_TOOLS
    assert cl.mode == "text" and cl.tool_check["verdict"] == "ignored"
    assert cl.tool_check["prompt_tokens"] < cl.tool_check["min_prompt_tokens"]
    assert all("tools" not in r for r in srv.requests) and "<tool_call>" in srv.requests[0]["messages"][0]["content"]
    assert c.tool_calls[0].name == "tool_0"
    assert len(said) == 1 and "ignored the tools field" in said[0] and len(cl.mode_switches) == 1


def test_auto_probe_sees_the_tools_used_and_stays_native():
    with serving([reply(None, [call("tool_1", {"path": "a"})]), reply("ok")]) as srv:
        cl = client(srv.base_url)
        cl.complete(MSGS, BIG_TOOLS)
        cl.complete(MSGS, BIG_TOOLS)
    assert len(srv.probes) == 1 and cl.tool_check["verdict"] == "used" and cl.mode == "native" and not cl.mode_switches
    assert srv.requests[0]["tools"] == BIG_TOOLS and srv.requests[0]["tool_choice"] == "auto"


@pytest.mark.parametrize(
    "probe,verdict",
    [
        (reply("OK", no_usage=True), "inconclusive: the server reports no token usage"),
        (error(400, "max_tokens must be at least 16"), "inconclusive"),
    ],
)
def test_an_inconclusive_probe_keeps_native_mode(probe, verdict):
    with serving([reply("ok")], probe=probe) as srv:
        cl = client(srv.base_url)
        assert cl.complete(MSGS, BIG_TOOLS).content == "ok"
    assert cl.mode == "native" and cl.tool_check["verdict"].startswith(verdict) and "tools" in srv.requests[0]


def test_a_probe_rejected_for_its_tools_switches_to_text():
    msg = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    with serving([reply("ok")], probe=error(400, msg)) as srv:
        cl = client(srv.base_url)
        cl.complete(MSGS, BIG_TOOLS)
    assert cl.mode == "text" and cl.tool_check["verdict"] == "rejected" and "tools" not in srv.requests[0]


def test_no_probe_in_native_or_text_mode_or_with_small_schemas():
    for kw, tools in (({"tool_mode": "native"}, BIG_TOOLS), ({"tool_mode": "text"}, BIG_TOOLS), ({}, TOOLS)):
        with serving([reply("ok")]) as srv:
            client(srv.base_url, **kw).complete(MSGS, tools)
        assert not srv.probes, kw


def test_retries_are_said_as_they_happen_with_attempt_wait_and_reason():
    said = []
    with serving([error(503, "loading model"), error(429, "slow down"), reply("ok")]) as srv:
        cl = client(srv.base_url, max_retries=3)
        cl.notify = said.append
        cl.complete(MSGS, TOOLS)
    assert len(said) == 2 and said == cl.retries_log
    assert said[0].startswith("attempt 1 of 4 failed: HTTP 503: loading model; retrying in ") and said[0].endswith(" s")
    assert said[1].startswith("attempt 2 of 4 failed: HTTP 429: slow down")


@pytest.mark.parametrize("retries,text", [(0, "gave up after 1 attempt)"), (1, "gave up after 2 attempts)")])
def test_gave_up_counts_attempts_in_the_right_number(retries, text):
    with serving([error(503)] * 3) as srv:
        with pytest.raises(LLMError) as e:
            client(srv.base_url, max_retries=retries).complete(MSGS, TOOLS)
    assert str(e.value).endswith(text)


def test_context_window_from_the_model_list():
    with serving(window=32768) as srv:
        assert client(srv.base_url).context_window() == 32768
    with serving() as srv:
        assert client(srv.base_url).context_window() is None
    assert client("http://127.0.0.1:9/v1").context_window() is None  # nothing listens there


def test_window_named_in_context_length_errors():
    from cuda_agent.llm.client import window_from_error

    assert window_from_error("This model's maximum context length is 8192 tokens. However, you requested 9000") == 8192
    assert window_from_error("Requested tokens (9001) exceed context window of 4096") == 4096
    assert window_from_error("prompt too long") is None
