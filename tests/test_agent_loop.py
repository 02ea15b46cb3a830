"""The agent loop end to end against a real local HTTP server with scripted
replies and a fake evaluator: best-candidate keeping, text tool calls, malformed
calls, retries, nudges, limits, context elision, trajectory round-trip, and the
`optimize` / `show` commands."""

from __future__ import annotations

import json
import socket

import pytest
from fake_openai_server import call, error, reply, serving, text_call

from cuda_agent.agent.context import ELIDED
from cuda_agent.agent.loop import AgentConfig, run_episode
from cuda_agent.agent.trajectory import FORMAT, load_trajectory
from cuda_agent.cli.main import main
from cuda_agent.eval.judge.result import EvalResult, Status
from cuda_agent.llm.client import ChatClient, ClientConfig
from cuda_agent.task.taskfile import Task

TASK = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2

def get_inputs():
    return [torch.randn(4096)]

def get_init_inputs():
    return []
"""


def profiled(speedup_vs_compile: float | None, correct: bool = True) -> EvalResult:
    if not correct:
        return EvalResult(Status.INCORRECT, -1, False, message="max abs error 0.5 on seed#2")
    t = 1.0 / speedup_vs_compile
    reward = 3 if t < 0.95 else 1
    return EvalResult(
        Status.OK,
        reward,
        True,
        message="timed",
        time_ms=t,
        eager_ms=2.0,
        compile_ms=1.0,
        speedup_vs_eager=2.0 / t,
        speedup_vs_compile=speedup_vs_compile,
    )


class FakeEvaluator:
    """Answers profile calls from a queue; compile and verify always pass."""

    def __init__(self, profiles: list[EvalResult]):
        self.profiles = list(profiles)
        self.calls: list[str] = []

    def __call__(self, workspace, phase):
        self.calls.append(phase)
        if phase == "profile":
            return self.profiles.pop(0)
        return EvalResult(Status.OK, 1, True, message=f"{phase} passed")


def episode(tmp_path, script, *, evaluator=None, cfg=None, **client_kw):
    with serving(script) as srv:
        client = ChatClient(
            ClientConfig(model="fake", base_url=srv.base_url, backoff_s=0.01, **client_kw), sleep=lambda s: None
        )
        summary = run_episode(
            Task.from_source(TASK, "relu2"),
            tmp_path / "run",
            client,
            cfg or AgentConfig(bash_timeout_s=10),
            evaluator=evaluator or FakeEvaluator([]),
        )
    return summary, srv, load_trajectory(tmp_path / "run")


def tool_messages(traj):
    return [m for m in traj.messages if m["role"] == "tool"]


def test_normal_episode_keeps_the_best_not_the_last(tmp_path):
    ev = FakeEvaluator([profiled(1.5), profiled(1.1), profiled(None, correct=False)])
    script = [
        reply("Reading the placeholder.", [call("read", {"path": "model_new.py"})]),
        reply(
            None,
            [
                call("write", {"path": "kernels/relu.cu", "content": "// v1 fast\n"}),
                call("write", {"path": "model_new.py", "content": "# ModelNew v1\n"}),
            ],
        ),
        reply(None, [call("verify"), call("profile")]),
        reply(None, [call("edit", {"path": "kernels/relu.cu", "old_string": "v1 fast", "new_string": "v2 slower"})]),
        reply(None, [call("profile")]),
        reply(None, [call("write", {"path": "kernels/relu.cu", "content": "// v3 broken\n"})]),
        reply(None, [call("bash", {"command": "ls kernels"}), call("profile")]),
        reply("Done.", [call("finish", {"summary": "relu*2 fused"})]),
    ]
    s, srv, traj = episode(tmp_path, script, evaluator=ev)
    assert s.reason == "finished" and s.turns == 8 and s.reward == 3
    assert ev.calls == ["verify", "profile", "profile", "profile"]
    best = tmp_path / "run" / "best"
    assert (best / "kernels" / "relu.cu").read_text() == "// v1 fast\n"
    assert (best / "model_new.py").read_text() == "# ModelNew v1\n"
    assert EvalResult.from_dict(json.loads((best / "result.json").read_text())).speedup_vs_compile == 1.5
    assert (tmp_path / "run" / "workspace" / "kernels" / "relu.cu").read_text() == "// v3 broken\n"
    assert [e.best for e in traj.evals] == [True, True, False, False]  # verify, then profile 1.5 beats it
    assert traj.best.result.speedup_vs_compile == 1.5 and traj.end["reward"] == 3 and traj.end["reason"] == "finished"
    assert "new best" in tool_messages(traj)[3]["content"]
    assert s.usage["total_tokens"] > 0 and traj.end["usage"] == s.usage
    assert srv.requests[0]["messages"][1]["content"].startswith("Workspace:")
    assert [t["function"]["name"] for t in srv.requests[0]["tools"]][-1] == "finish"


def test_tool_calls_written_in_text(tmp_path):
    script = [
        reply("Let me look.\n" + text_call("read", {"path": "model.py"})),
        reply(text_call("write", {"path": "kernels/a.cu", "content": "// a\n"}) + text_call("finish", {})),
    ]
    s, srv, traj = episode(tmp_path, script)
    assert s.reason == "finished" and (tmp_path / "run/workspace/kernels/a.cu").read_text() == "// a\n"
    assert "tools" not in srv.requests[1] and "<tool_response>" in srv.requests[1]["messages"][-1]["content"]
    assert any(n["kind"] == "tool_mode" for n in traj.notes) and traj.end["tool_mode"] == "text"
    assert "torch.relu" in tool_messages(traj)[0]["content"]


def test_malformed_calls_get_fixing_errors(tmp_path):
    script = [
        reply(
            None,
            [
                call("read", "{not json"),
                call("frobnicate", {}),
                call("write", {"path": "kernels/x.cu"}),
                call("read", {"path": "model.py", "mode": "fast"}),
            ],
        ),
        reply("<tool_call>{broken</tool_call>"),
        reply(None, [call("finish")]),
    ]
    s, _, traj = episode(tmp_path, script)
    texts = [m["content"] for m in tool_messages(traj)]
    assert "not valid JSON" in texts[0] and "unknown tool 'frobnicate'" in texts[1] and "available tools" in texts[1]
    assert "missing content" in texts[2] and "unknown mode" in texts[3] and "Expected read(path: string" in texts[3]
    assert "<tool_call>" in texts[4] and "not valid JSON" in texts[4]
    assert s.reason == "finished" and s.reward == -1


def test_http_500_then_success(tmp_path):
    s, srv, traj = episode(tmp_path, [error(500, "overloaded"), reply(None, [call("finish")])])
    assert s.reason == "finished" and len(srv.requests) == 2
    retries = [n for n in traj.notes if n["kind"] == "retry"]
    assert len(retries) == 1 and "overloaded" in retries[0]["message"]
    assert traj.message_meta[2]["attempts"] == 2


def test_reply_without_tool_call_is_nudged_then_ends(tmp_path):
    s, srv, traj = episode(
        tmp_path,
        [
            reply("I think the kernel should fuse."),
            reply(None, [call("glob", {"pattern": "*"})]),
            reply("hmm"),
            reply("still thinking", finish_reason="length"),
            reply("no"),
        ],
    )
    assert s.reason == "no_tool_call" and s.turns == 5
    nudges = [m for m, meta in zip(traj.messages, traj.message_meta, strict=True) if meta.get("nudge")]
    assert len(nudges) == 3 and "no tool call" in nudges[0]["content"] and "cut off" in nudges[2]["content"]


def test_turn_limit_ends_cleanly_with_best_kept(tmp_path):
    ev = FakeEvaluator([profiled(1.3)] * 10)
    s, srv, traj = episode(tmp_path, [reply(None, [call("profile")])] * 10, evaluator=ev, cfg=AgentConfig(max_turns=3))
    assert s.reason == "max_turns" and s.turns == 3 and len(srv.requests) == 3
    assert traj.complete and traj.end["reward"] == 3 and (tmp_path / "run/best/result.json").exists()


def test_token_limit_ends_the_run(tmp_path):
    s, _, _ = episode(
        tmp_path,
        [
            reply(
                None,
                [call("glob", {"pattern": "*"})],
                usage={"prompt_tokens": 900, "completion_tokens": 100, "total_tokens": 1000},
            )
        ]
        * 5,
        cfg=AgentConfig(max_total_tokens=2500),
    )
    assert s.reason == "max_tokens" and s.turns == 3


def test_context_budget_elides_old_outputs_and_keeps_the_task(tmp_path):
    big = "seq 1 2500"  # about 11k characters of output per call
    script = [
        reply(None, [call("write", {"path": "kernels/k.cu", "content": "// kernel v1\n"})]),
        reply(None, [call("read", {"path": "kernels/k.cu"})]),
    ]
    script += [reply(f"step {i}", [call("bash", {"command": big})]) for i in range(8)] + [reply(None, [call("finish")])]
    cfg = AgentConfig(context_tokens=12000, reply_reserve_tokens=1000, bash_timeout_s=10)
    s, srv, traj = episode(tmp_path, script, cfg=cfg)
    assert s.reason == "finished"
    assert any(n["kind"] == "elide" for n in traj.notes)
    last = srv.requests[-1]["messages"]
    assert last[1]["content"] == srv.requests[0]["messages"][1]["content"]  # the task message survives
    assert any(m.get("content") == ELIDED for m in last)
    assert any(
        m["role"] == "tool" and "1\t// kernel v1" in m["content"] for m in last
    )  # latest read of the kernel kept
    assert len(json.dumps(last)) / 4 < 12000
    assert ELIDED not in [m.get("content") for m in traj.messages]  # the log keeps everything


def test_trajectory_round_trip_and_crash_tolerance(tmp_path):
    ev = FakeEvaluator([profiled(1.2)])
    s, _, traj = episode(tmp_path, [reply("go", [call("profile")]), reply(None, [call("finish")])], evaluator=ev)
    path = tmp_path / "run" / "trajectory.jsonl"
    head = json.loads(path.read_text().splitlines()[0])
    assert (
        head["format"] == FORMAT
        and head["model"] == "fake"
        and head["task"]["hash"]
        and "api_key" not in json.dumps(head)
    )
    assert [m["role"] for m in traj.messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert (
        traj.evals[0].result == ev_result_copy(traj.evals[0].result) and traj.evals[0].result.speedup_vs_compile == 1.2
    )
    assert traj.complete and traj.reward == s.reward == 3
    with path.open("a") as f:  # a crash in the middle of a line
        f.write('{"type": "note", "ki')
    again = load_trajectory(path)
    assert again.truncated and len(again.messages) == len(traj.messages)
    bad = tmp_path / "other.jsonl"
    bad.write_text(json.dumps({"type": "header", "format": "cuda-agent-trajectory/2"}) + "\n")
    with pytest.raises(ValueError, match="not supported"):
        load_trajectory(bad)


def ev_result_copy(r: EvalResult) -> EvalResult:
    return EvalResult.from_dict(json.loads(json.dumps(r.to_dict())))


def test_cli_unreachable_endpoint_is_one_line_exit_2(tmp_path, capsys):
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    rc = main(
        [
            "optimize",
            str(task),
            "--model",
            "m",
            "--base-url",
            f"http://127.0.0.1:{port}/v1",
            "--retries",
            "0",
            "-o",
            str(tmp_path / "run"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "cannot connect" in err and "Traceback" not in err
    rc = main(["optimize", str(task), "--model", "m", "--base-url", "localhost:8000", "-o", str(tmp_path / "r2")])
    assert rc == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1


def test_cli_optimize_then_show(tmp_path, capsys, monkeypatch):
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with serving(
        [reply("look", [call("bash", {"command": "ls"})]), reply("done", [call("finish", {"summary": "nothing"})])]
    ) as srv:
        rc = main(["optimize", str(task), "--model", "fake", "--base-url", srv.base_url, "-o", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert rc == 0 and "reward" in out and "finished" in out and "turns" in out
    assert main(["show", str(tmp_path / "run")]) == 0
    shown = capsys.readouterr().out
    assert "bash" in shown and "ls" in shown and "finish" in shown and "relu2" in shown


def test_wall_time_limit_ends_before_the_first_turn(tmp_path):
    s, srv, traj = episode(tmp_path, [reply(None, [call("finish")])], cfg=AgentConfig(max_wall_s=0))
    assert s.reason == "max_wall" and s.turns == 0 and not srv.requests and traj.end["reward"] == -1


def cli_task(tmp_path):
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    return str(task)


@pytest.mark.parametrize(
    "flags,names",
    [
        (
            ["--context", "1000", "--reply-tokens", "100"],
            ["--context 1,000", "--reply-tokens 100", "raise --context to at least"],
        ),
        (["--context", "3000"], ["--context 3,000", "minimal reply (512 tokens)", "raise --context to at least"]),
        (["--context", "8192", "--reply-tokens", "8000"], ["--reply-tokens 8,000", "lower --reply-tokens to at most"]),
    ],
)
def test_a_budget_that_cannot_hold_the_first_prompt_is_a_usage_error(tmp_path, capsys, flags, names):
    with serving([reply(None, [call("finish")])]) as srv:
        rc = main(
            [
                "optimize",
                cli_task(tmp_path),
                "--model",
                "fake",
                "--base-url",
                srv.base_url,
                "-o",
                str(tmp_path / "run"),
                *flags,
            ]
        )
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "first prompt (about" in err and "Traceback" not in err, err
    assert all(n in err for n in names), err
    assert not srv.requests and not (tmp_path / "run").exists()  # nothing sent, nothing left behind


def test_the_reply_reserve_is_capped_to_a_share_of_a_small_context(tmp_path):
    s, srv, traj = episode(
        tmp_path, [reply(None, [call("finish")])], cfg=AgentConfig(context_tokens=8192, bash_timeout_s=10)
    )
    assert s.reason == "finished" and traj.header["budget"]["reserve_tokens"] == 2048
    assert traj.header["budget"]["first_prompt_tokens"] + 512 < 8192 - 2048


def test_each_reply_is_capped_to_the_reserve_unless_reply_tokens_says(tmp_path):
    # llama-cpp-python asked for no max_tokens fills its whole window: 4,828 tokens, 643 s on a CPU, past the timeout
    s, srv, traj = episode(
        tmp_path, [reply(None, [call("finish")])], cfg=AgentConfig(context_tokens=8192, bash_timeout_s=10)
    )
    assert s.reason == "finished" and srv.requests[0]["max_tokens"] == 2048 == traj.header["budget"]["reply_cap"]
    s, srv, traj = episode(
        tmp_path / "b",
        [reply(None, [call("finish")])],
        max_tokens=300,
        cfg=AgentConfig(context_tokens=8192, reply_reserve_tokens=300, bash_timeout_s=10),
    )
    assert srv.requests[0]["max_tokens"] == 300 and traj.header["budget"]["reply_cap"] is None


def test_a_server_that_refuses_max_tokens_gets_no_cap(tmp_path):
    said = []
    refusal = error(400, "Unsupported parameter: 'max_tokens' is not supported with this model.")
    with serving([refusal, reply(None, [call("finish")])]) as srv:
        client = ChatClient(ClientConfig(model="fake", base_url=srv.base_url), sleep=lambda s: None, notify=said.append)
        s = run_episode(
            Task.from_source(TASK, "relu2"),
            tmp_path / "run",
            client,
            AgentConfig(bash_timeout_s=10),
            evaluator=FakeEvaluator([]),
        )
    assert s.reason == "finished" and [("max_tokens" in r) for r in srv.requests] == [True, False]
    assert len(said) == 1 and "refused max_tokens 8192" in said[0], said
    note = next(n for n in load_trajectory(tmp_path / "run").notes if n["kind"] == "budget")
    assert note["reply_cap"] is None and "not supported" in note["why"]


def test_the_servers_window_sets_and_caps_the_budget(tmp_path):
    with serving([reply(None, [call("finish")])] * 2, window=16000) as srv:
        client = ChatClient(ClientConfig(model="fake", base_url=srv.base_url), sleep=lambda s: None)
        run_episode(
            Task.from_source(TASK, "relu2"),
            tmp_path / "a",
            client,
            AgentConfig(bash_timeout_s=10),
            evaluator=FakeEvaluator([]),
        )
        client = ChatClient(ClientConfig(model="fake", base_url=srv.base_url), sleep=lambda s: None)
        s = run_episode(
            Task.from_source(TASK, "relu2"),
            tmp_path / "b",
            client,
            AgentConfig(context_tokens=100000, bash_timeout_s=10),
            evaluator=FakeEvaluator([]),
        )
    a, b = load_trajectory(tmp_path / "a"), load_trajectory(tmp_path / "b")
    assert a.header["budget"] == {
        **a.header["budget"],
        "context_tokens": 16000,
        "reserve_tokens": 4000,
        "source": "server",
    }
    assert b.header["budget"]["context_tokens"] == 16000 and any("below --context 100,000" in n for n in s.notes)
    assert [n["kind"] for n in b.notes] == ["budget", "tool_check"]


def test_a_smaller_window_named_by_the_server_becomes_the_budget(tmp_path):
    big = "seq 1 400"  # about 400 tokens of output per call
    script = [reply(f"step {i}", [call("bash", {"command": big})]) for i in range(3)]
    script += [
        error(400, "This model's maximum context length is 6000 tokens. However, you requested 9000 tokens"),
        reply(None, [call("finish")]),
    ]
    s, srv, traj = episode(tmp_path, script, cfg=AgentConfig(context_tokens=20000, bash_timeout_s=10))
    assert s.reason == "finished"
    note = next(n for n in traj.notes if n["kind"] == "budget")
    assert note["context_tokens"] == 6000 and note["reserve_tokens"] == 1500
    assert any(n["kind"] == "elide" and n.get("forced") for n in traj.notes)


BAD = reply(None, [call("frobnicate", {})])


def test_replies_with_only_malformed_calls_end_the_episode(tmp_path):
    s, srv, traj = episode(
        tmp_path, [BAD, reply("<tool_call>{broken</tool_call>"), reply(None, [call("read", "{not json")])] * 3
    )
    assert s.reason == "malformed_calls" and s.turns == 3 and len(srv.requests) == 3
    assert traj.end["reason"] == "malformed_calls" and traj.header["config"]["max_malformed"] == 3


def test_a_usable_call_resets_the_malformed_streak_and_no_tool_replies_do_not(tmp_path):
    good = reply(None, [call("glob", {"pattern": "*"}), call("frobnicate", {})])  # one usable call is enough
    s, _, _ = episode(tmp_path / "a", [BAD, BAD, good, BAD, BAD, reply(None, [call("finish")])])
    assert s.reason == "finished" and s.turns == 6
    # before issue 31 this alternation never ended: each malformed reply reset the no-tool count
    s, _, _ = episode(tmp_path / "b", [BAD, reply("thinking"), BAD, reply("still"), BAD, reply(None, [call("finish")])])
    assert s.reason == "malformed_calls" and s.turns == 5


def test_cli_limits_for_both_early_ends_and_what_show_says(tmp_path, capsys):
    task = cli_task(tmp_path)
    with serving([reply("hmm")] * 3) as srv:
        rc = main(
            [
                "optimize",
                task,
                "--model",
                "fake",
                "--base-url",
                srv.base_url,
                "--max-no-tool",
                "1",
                "-o",
                str(tmp_path / "a"),
            ]
        )
    out = capsys.readouterr().out
    assert rc == 0 and len(srv.requests) == 1 and "no_tool_call" in out and "--max-no-tool" in out
    with serving([BAD] * 5) as srv:
        rc = main(
            [
                "optimize",
                task,
                "--model",
                "fake",
                "--base-url",
                srv.base_url,
                "--max-malformed",
                "2",
                "-o",
                str(tmp_path / "b"),
            ]
        )
    out = capsys.readouterr().out
    assert rc == 0 and len(srv.requests) == 2 and "malformed_calls" in out and "--max-malformed" in out
    assert main(["show", str(tmp_path / "b")]) == 0
    shown = capsys.readouterr().out
    assert "2 replies in a row with only malformed tool calls (--max-malformed)" in shown and "malformed)" in shown


def test_cli_says_the_text_fallback_once_on_stderr_and_logs_it(tmp_path, capsys):
    script = [reply("I'll look. " + text_call("read", {"path": "model.py"})), reply(text_call("finish", {}))]
    with serving(script, ignore_tools=True) as srv:
        rc = main(
            ["optimize", cli_task(tmp_path), "--model", "fake", "--base-url", srv.base_url, "-o", str(tmp_path / "run")]
        )
    err = capsys.readouterr().err
    assert rc == 0 and len(srv.probes) == 1 and all("tools" not in r for r in srv.requests)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "switching to text tool calls" in lines[0] and "ignored the tools field" in lines[0]
    traj = load_trajectory(tmp_path / "run")
    assert [n["kind"] for n in traj.notes] == ["tool_check", "tool_mode"] and traj.end["tool_mode"] == "text"
    assert traj.notes[0]["verdict"] == "ignored"


def test_cli_retries_print_progress(tmp_path, capsys):
    with serving([error(503, "warming up"), reply(None, [call("finish")])]) as srv:
        rc = main(
            [
                "optimize",
                cli_task(tmp_path),
                "--model",
                "fake",
                "--base-url",
                srv.base_url,
                "-q",
                "-o",
                str(tmp_path / "run"),
            ]
        )
    err = capsys.readouterr().err
    assert rc == 0 and "attempt 1 of 6 failed: HTTP 503: warming up; retrying in" in err
