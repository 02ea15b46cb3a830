"""A real HTTP server speaking the OpenAI chat-completions API with scripted replies.

Used by the agent and llm tests: it binds 127.0.0.1 on a random port, serves
from a thread, and answers each POST .../chat/completions with the next item of
its script. Items: `reply(...)` (content and/or native tool calls), `error(code)`
(an HTTP error with an OpenAI-style body), or a callable taking the request body
and returning one of those. An exhausted script answers a plain text reply.
Every request body is kept in `requests` so tests can check what was sent.

Like a real server, the reported prompt_tokens count the tool schemas (chars / 4)
unless `ignore_tools` is set (a server that silently drops the `tools` field).
The chat client's tools probe (tools and max_tokens 1) is answered apart, by
`probe` (default: a one-token reply with that usage), kept in `probes`, and
consumes no script item. GET .../models lists the model, with `max_model_len`
when `window` is set.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def call(name: str, args: dict[str, Any] | str | None = None) -> dict[str, Any]:
    """A native tool call; `args` may be a dict or raw (possibly broken) JSON text."""
    raw = args if isinstance(args, str) else json.dumps(args or {})
    return {"id": "call_" + uuid.uuid4().hex[:8], "type": "function", "function": {"name": name, "arguments": raw}}


def text_call(name: str, args: dict[str, Any]) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def reply(
    content: str | None = None,
    calls: list[dict[str, Any]] | None = None,
    usage: dict[str, int] | None = None,
    finish_reason: str | None = None,
    no_usage: bool = False,
) -> dict[str, Any]:
    return {
        "kind": "reply",
        "content": content,
        "calls": calls or [],
        "usage": usage,
        "finish_reason": finish_reason,
        "no_usage": no_usage,
    }


def error(code: int, message: str = "scripted failure") -> dict[str, Any]:
    return {"kind": "error", "code": code, "message": message}


class FakeOpenAI:
    def __init__(
        self,
        script: list[Any] | None = None,
        *,
        ignore_tools: bool = False,
        probe: Any = None,
        window: int | None = None,
    ):
        self.script: list[Any] = list(script or [])
        self.requests: list[dict[str, Any]] = []
        self.probes: list[dict[str, Any]] = []
        self.ignore_tools, self.probe, self.window = ignore_tools, probe, window
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                code, payload = server._answer(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                if self.path.endswith("/models"):
                    entry: dict[str, Any] = {"id": "fake", "object": "model", "owned_by": "tests"}
                    if server.window:
                        entry["max_model_len"] = server.window
                    code, payload = 200, {"object": "list", "data": [entry]}
                else:
                    code, payload = 404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if body.get("max_tokens") == 1 and body.get("tools"):  # the client's tools probe
                self.probes.append(body)
                item: Any = self.probe or reply("OK", finish_reason="length")
            else:
                self.requests.append(body)
                item = self.script.pop(0) if self.script else reply("(script exhausted)")
        if not path.endswith("/chat/completions"):
            return 404, {"error": {"message": f"no route {path}", "type": "not_found"}}
        if callable(item):
            item = item(body)
        if item["kind"] == "error":
            return item["code"], {"error": {"message": item["message"], "type": "scripted", "code": item["code"]}}
        prompt = len(json.dumps(body.get("messages", []))) // 4
        if body.get("tools") and not self.ignore_tools:
            prompt += len(json.dumps(body["tools"])) // 4
        completion = (len(item["content"] or "") + len(json.dumps(item["calls"]))) // 4
        usage = item["usage"] or {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        message: dict[str, Any] = {"role": "assistant", "content": item["content"]}
        if item["calls"]:
            message["tool_calls"] = item["calls"]
        finish = item["finish_reason"] or ("tool_calls" if item["calls"] else "stop")
        return 200, {
            "id": "chatcmpl-" + uuid.uuid4().hex[:8],
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "usage": None if item.get("no_usage") else usage,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }


@contextmanager
def serving(script: list[Any] | Callable[[], list[Any]] | None = None, **kw: Any) -> Iterator[FakeOpenAI]:
    s = FakeOpenAI(script() if callable(script) else script, **kw).start()
    try:
        yield s
    finally:
        s.stop()
