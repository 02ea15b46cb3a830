"""The environment core's contract (reset / step / settle / close) with a scripted
evaluator: observations per call, malformed calls, nudges, the turn limit, the best
candidate and the reward, call-id repair, and the shell seam."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.env.core import EnvConfig, Environment
from cuda_agent.env.toolbox import tool_schemas
from cuda_agent.eval.judge.result import EvalResult, Status
from cuda_agent.llm.textcalls import ToolCall, parse_text_calls
from cuda_agent.sandbox.shell import BashSession
from cuda_agent.task.taskfile import Task

TASK = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2

def get_inputs():
    return [torch.randn(1024)]

def get_init_inputs():
    return []
"""


def assistant(*calls: tuple[str, dict]) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for n, a in calls
        ],
    }


class Evaluator:
    def __init__(self, results: dict[str, list[EvalResult]]):
        self.results = results
        self.calls: list[tuple[str, str]] = []

    def __call__(self, ws, phase):
        self.calls.append((str(ws), phase))
        return self.results[phase].pop(0)


def timed(reward: int) -> EvalResult:
    return EvalResult(
        Status.OK, reward, True, time_ms=1.0, eager_ms=2.0, compile_ms=1.5, speedup_vs_eager=2.0, speedup_vs_compile=1.5
    )


@pytest.fixture
def env_of(tmp_path):
    made = []

    def make(ev=None, **cfg):
        env = Environment(EnvConfig(bash_timeout_s=10, **cfg), evaluator=ev or Evaluator({}), shell_factory=BashSession)
        made.append(env)
        return env, env.reset(Task.from_source(TASK, "relu2"), tmp_path / f"run{len(made)}")

    yield make
    for e in made:
        e.close()


def test_reset_gives_messages_tools_and_a_workspace(env_of):
    env, start = env_of()
    assert [m["role"] for m in start.messages] == ["system", "user"] and "torch.relu" in start.messages[1]["content"]
    assert start.tools == tool_schemas() and len(start.tools) == 11
    assert (start.workspace / "model.py").exists() and env.reward == -1 and not env.done
    with pytest.raises(RuntimeError, match="twice"):
        env.reset(Task.from_source(TASK, "x"), start.workspace.parent)


def test_step_runs_each_call_and_keeps_the_best(env_of):
    ev = Evaluator({"profile": [timed(3), EvalResult(Status.INCORRECT, -1, False, message="wrong")]})
    env, start = env_of(ev)
    msg = assistant(
        ("write", {"path": "kernels/k.cu", "content": "// v1\n"}), ("profile", {}), ("bash", {"command": "echo hi"})
    )
    r = env.step(msg)
    ids = [c["id"] for c in msg["tool_calls"]]
    assert len(set(ids)) == 3 and all(ids)  # empty ids were replaced, in the message too
    assert [o.message["tool_call_id"] for o in r.observations] == ids
    assert [o.name for o in r.observations] == ["write", "profile", "bash"] and r.observations[2].message[
        "content"
    ].startswith("hi")
    assert r.observations[1].eval.improved and "new best" in r.observations[1].message["content"]
    assert not r.done and r.reward == 3 == env.reward
    r = env.step(assistant(("write", {"path": "kernels/k.cu", "content": "// v2\n"}), ("profile", {})))
    assert not r.observations[1].eval.improved and r.reward == 3  # the best stays, not the last
    assert (env._run_dir / "best" / "kernels" / "k.cu").read_text() == "// v1\n"
    assert env.counts["profile"] == 2 and env.turns == 2


def test_malformed_calls_are_observations(env_of):
    env, _ = env_of()
    calls = parse_text_calls(
        "<tool_call>{oops</tool_call><tool_call><function=read><parameter=path>model.py"
        "</parameter></function></tool_call>",
        tool_schemas(),
    )
    r = env.step({"role": "assistant", "content": "x"}, calls + [ToolCall("", "frobnicate", "{}")])
    texts = [o.message["content"] for o in r.observations]
    assert "not valid JSON" in texts[0] and "<tool_call>" in texts[0] and not r.observations[0].ok
    assert "torch.relu" in texts[1]
    assert "unknown tool 'frobnicate'" in texts[2] and env.counts["malformed"] == 2 and env.calls == 3
    assert [o.malformed for o in r.observations] == [True, False, True]


def test_replies_with_only_malformed_calls_end_the_episode(env_of):
    env, _ = env_of(max_malformed=2, max_no_tool=2)
    bad = [ToolCall("", "frobnicate", "{}")]
    r = env.step({"role": "assistant", "content": "x"}, bad)
    assert not r.done and r.observations[0].malformed
    r = env.step({"role": "assistant", "content": "no call"})  # neither kind of useless reply resets the other
    assert not r.done and r.observations[0].nudge
    r = env.step({"role": "assistant", "content": "x"}, bad)
    assert r.done and r.reason == "malformed_calls" and len(r.observations) == 1 and r.reward == -1


def test_one_usable_call_resets_both_counts(env_of):
    env, _ = env_of(max_malformed=2, max_no_tool=2)
    bad = [ToolCall("", "frobnicate", "{}")]
    env.step({"role": "assistant", "content": "x"}, bad)
    env.step({"role": "assistant", "content": "none"})
    assert not env.step({"role": "assistant", "content": "x"}, bad + [ToolCall("", "glob", '{"pattern": "*"}')]).done
    assert not env.step({"role": "assistant", "content": "x"}, bad).done
    assert not env.step({"role": "assistant", "content": "none"}).done


def test_no_tool_nudges_then_ends(env_of):
    env, _ = env_of(max_no_tool=2)
    r = env.step({"role": "assistant", "content": "thinking"}, finish_reason="length")
    assert r.observations[0].nudge and "cut off" in r.observations[0].message["content"] and not r.done
    r = env.step({"role": "assistant", "content": "still"})
    assert r.done and r.reason == "no_tool_call" and r.observations == [] and r.reward == -1
    with pytest.raises(RuntimeError, match="ended"):
        env.step({"role": "assistant", "content": "more"})


def test_finish_and_turn_limit(env_of):
    env, _ = env_of()
    r = env.step(assistant(("glob", {"pattern": "*"}), ("finish", {"summary": "done"})))
    assert r.done and r.reason == "finished" and len(r.observations) == 2
    env2, _ = env_of(max_turns=2)
    assert not env2.step(assistant(("glob", {"pattern": "*"}))).done
    r = env2.step(assistant(("glob", {"pattern": "*"})))
    assert r.done and r.reason == "max_turns"


def test_settle_profiles_a_best_that_was_only_verified(env_of):
    ev = Evaluator({"verify": [EvalResult(Status.OK, None, True, message="correct")], "profile": [timed(2)]})
    env, start = env_of(ev)
    env.step(assistant(("write", {"path": "kernels/k.cu", "content": "// v1\n"}), ("verify", {})))
    assert env.reward == 1  # correct, speed unknown: the floor of a correct candidate
    env.step(assistant(("write", {"path": "kernels/k.cu", "content": "// broken later\n"})))
    assert env.settle() == 2
    settle_ws, phase = ev.calls[-1]
    assert phase == "profile" and settle_ws != str(start.workspace)  # the kept snapshot, not the current files
    assert (Path(settle_ws) / "kernels" / "k.cu").read_text() == "// v1\n"
    assert env.best.result.time_ms == 1.0


def test_the_default_shell_is_the_sandbox_with_the_workspace_pins(tmp_path, monkeypatch):
    from cuda_agent.env.shell import PROTECTED_IN_WORKSPACE, make_shell
    from cuda_agent.sandbox.shell import BashSession as SandboxShell

    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path / "cache"))
    sh = make_shell(tmp_path, 5)
    try:
        assert isinstance(sh, SandboxShell) and sh._protected == PROTECTED_IN_WORKSPACE
        assert sh.run("echo $CUDA_AGENT_CACHE").output.strip() == str(tmp_path / "cache")  # tools/* find the task
    finally:
        sh.close()
