"""The agent's tools on a real workspace: shell confinement and timeout, file
rules (protected files, read before write, exact edits), argument checking."""

from __future__ import annotations

import json
import os
import socket
import threading

import pytest

from cuda_agent.env.toolbox import Toolbox, check_arguments
from cuda_agent.eval.judge.result import EvalResult, Status
from cuda_agent.sandbox.shell import BashSession, isolation_level
from cuda_agent.task.taskfile import Task
from cuda_agent.task.workspace import init_workspace

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


@pytest.fixture
def ws(tmp_path):
    return init_workspace(Task.from_source(TASK, "relu2"), tmp_path / "ws")


@pytest.fixture
def box(ws):
    t = Toolbox(
        ws,
        evaluator=lambda w, phase: EvalResult(Status.OK, 1, True, message=f"{phase} fine"),
        bash_timeout_s=5,
        shell_factory=BashSession,
    )
    yield t
    t.close()


def test_bash_is_persistent_and_starts_in_the_workspace(box, ws):
    assert box.call("bash", {"command": "pwd"}).text.splitlines()[0] == str(ws.resolve())
    box.call("bash", {"command": "cd kernels && export FOO=bar"})
    obs = box.call("bash", {"command": "echo $FOO; pwd; cat"})  # `cat` must not hang on stdin
    assert obs.text.splitlines()[:2] == ["bar", str(ws.resolve() / "kernels")] and obs.ok


def test_bash_timeout_kills_and_restarts(box, ws):
    obs = box.call("bash", {"command": "sleep 30", "timeout": 1})
    assert not obs.ok and "timed out after 1s" in obs.text and "restarted" in obs.text and obs.elapsed_s < 5
    assert box.call("bash", {"command": "pwd"}).text.startswith(str(ws.resolve()))


def test_bash_cuts_long_output(box):
    obs = box.call("bash", {"command": "seq 1 200000"})
    assert "characters cut" in obs.text and obs.text.startswith("1\n2\n") and "200000" in obs.text
    assert len(obs.text) < 25000


def test_bash_has_no_network(ws, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    if isolation_level() == "none":
        pytest.skip("unshare is not usable here")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def accept_quietly() -> None:  # reachable from outside the sandbox; closed at the end
        try:
            srv.accept()
        except OSError:
            pass

    threading.Thread(target=accept_quietly, daemon=True).start()
    sh = BashSession(ws, timeout_s=10)
    try:
        probe = f'python3 -c \'import socket; socket.create_connection(("127.0.0.1", {port}), timeout=2); print("CONNECTED")\''
        r = sh.run(probe)
        assert "CONNECTED" not in r.output and r.exit_code != 0
        assert "sk-must-not-leak" not in sh.run("env").output
    finally:
        sh.close()
        srv.close()


def test_bash_cannot_write_outside_or_to_protected(ws, tmp_path):
    if isolation_level() != "full":
        pytest.skip("mount namespaces are not usable here")
    outside = tmp_path / "outside.txt"
    sh = BashSession(ws, timeout_s=10)
    try:
        sh.run(
            f"echo x > {outside}; chmod u+w model.py; echo y >> model.py; mount -o remount,rw /; echo z > kernels/ok.cu"
        )
        assert not outside.exists()
        assert (ws / "model.py").read_text() == TASK
        assert (ws / "kernels" / "ok.cu").read_text() == "z\n"
    finally:
        sh.close()


def test_bash_cannot_reach_the_gpu_lock_files(ws, tmp_path, monkeypatch):
    """The agent's shell is hostile too: it sees an empty folder where the evaluator's lock files are
    (holding one would stall every timing on the GPU)."""
    if isolation_level() != "full":
        pytest.skip("mount namespaces are not usable here")
    locks = tmp_path / "locks"
    locks.mkdir()
    (locks / "GPU-x.lock").write_text("")
    monkeypatch.setenv("CUDA_AGENT_LOCK_DIR", str(locks))
    sh = BashSession(ws, timeout_s=10)
    try:
        out = sh.run(f"ls -A {locks} | wc -l; flock -s {locks}/GPU-x.lock true && echo took || echo refused").output
    finally:
        sh.close()
    lines = [x.strip() for x in out.splitlines() if x.strip()]
    assert lines[0] == "0" and lines[-1] == "refused", out  # (flock's own complaint between them)


@pytest.mark.parametrize(
    "path", ["model.py", "SKILL.md", "binding.cpp", "binding_registry.h", "tools/verify", ".cuda-agent/task.json"]
)
def test_protected_files_cannot_be_written(box, path):
    box.call("read", {"path": path})
    for name, args in (
        ("write", {"path": path, "content": "x"}),
        ("edit", {"path": path, "old_string": "a", "new_string": "b"}),
    ):
        obs = box.call(name, args)
        assert not obs.ok and "protected" in obs.text


def test_paths_outside_and_symlinks_are_refused(box, ws, tmp_path):
    os.symlink(ws / "model.py", ws / "kernels" / "sneaky.cu")
    os.symlink(tmp_path, ws / "kernels" / "out")
    for p in ("../x.cu", str(tmp_path / "x.cu"), "kernels/out/x.cu"):
        obs = box.call("write", {"path": p, "content": "x"})
        assert not obs.ok and "outside the workspace" in obs.text, p
    obs = box.call("write", {"path": "kernels/sneaky.cu", "content": "x"})
    assert not obs.ok and "protected" in obs.text
    assert (ws / "model.py").read_text() == TASK


def test_write_needs_a_fresh_read(box, ws):
    obs = box.call("write", {"path": "model_new.py", "content": "x"})
    assert not obs.ok and "read it before" in obs.text
    assert "1\t" in box.call("read", {"path": "model_new.py"}).text
    assert box.call("write", {"path": "model_new.py", "content": "a = 1\n"}).ok
    assert box.call("write", {"path": "kernels/new.cu", "content": "// new\n"}).ok  # new files need no read
    (ws / "model_new.py").write_text("changed = 2\n")
    obs = box.call("edit", {"path": "model_new.py", "old_string": "changed", "new_string": "c"})
    assert not obs.ok and "changed on disk" in obs.text


def test_edit_and_multi_edit(box, ws):
    box.call("write", {"path": "kernels/k.cu", "content": "int a = 1;\nint b = 1;\n"})
    obs = box.call("edit", {"path": "kernels/k.cu", "old_string": "= 1", "new_string": "= 2"})
    assert not obs.ok and "occurs 2 times" in obs.text
    obs = box.call("edit", {"path": "kernels/k.cu", "old_string": "int c", "new_string": "x"})
    assert not obs.ok and "not found" in obs.text
    obs = box.call(
        "multi_edit",
        {
            "path": "kernels/k.cu",
            "edits": [{"old_string": "int a", "new_string": "long a"}, {"old_string": "missing", "new_string": "x"}],
        },
    )
    assert (
        not obs.ok and "edit 2" in obs.text and (ws / "kernels/k.cu").read_text().startswith("int a")
    )  # all or nothing
    assert box.call("edit", {"path": "kernels/k.cu", "old_string": "= 1", "new_string": "= 3", "replace_all": True}).ok
    assert (ws / "kernels/k.cu").read_text() == "int a = 3;\nint b = 3;\n"
    out = box.call("read", {"path": "kernels/k.cu", "offset": 2, "limit": 1}).text
    assert out.startswith("     2\tint b = 3;") and "lines 2-2 of 2" in out


def test_glob_and_grep(box):
    box.call("write", {"path": "kernels/a.cu", "content": "__global__ void relu_kernel() {}\n"})
    assert "kernels/a.cu" in box.call("glob", {"pattern": "kernels/*.cu"}).text
    assert (
        box.call("grep", {"pattern": r"relu_\w+", "glob": "*.cu"}).text
        == "kernels/a.cu:1:__global__ void relu_kernel() {}"
    )
    assert "model.py:6:" in box.call("grep", {"pattern": "RELU", "ignore_case": True}).text


def test_malformed_arguments_say_how_to_fix():
    cases = [
        ("nope", "{}", "unknown tool"),
        ("read", "{bad json", "not valid JSON"),
        ("read", "{}", "missing path"),
        ("read", '{"path": "a", "colour": 1}', "unknown colour"),
        ("read", '{"path": 3}', "must be a string"),
        ("read", "[1]", "JSON object"),
    ]
    for name, raw, want in cases:
        with pytest.raises(Exception) as e:
            check_arguments(name, raw)
        assert want in str(e.value), (name, raw, str(e.value))
    assert check_arguments("compile", "") == {}


def test_eval_tools_call_the_evaluator_and_snapshot_sources(box):
    box.call("write", {"path": "kernels/a.cu", "content": "// v1\n"})
    obs = box.call("profile", {})
    assert obs.ok and obs.phase == "profile" and "profile fine" in obs.text and "reward: 1" in obs.text
    assert obs.sources["kernels/a.cu"] == "// v1\n" and "model_new.py" in obs.sources


def test_evaluator_bug_is_an_observation_not_a_crash(ws):
    def broken(w, phase):
        raise RuntimeError("harness bug")

    t = Toolbox(ws, evaluator=broken, shell_factory=BashSession)
    try:
        obs = t.call("verify", {})
        assert not obs.ok and "internal error" in obs.text and "RuntimeError" in obs.error and obs.result is None
    finally:
        t.close()


def test_schemas_are_valid_openai_tools(box):
    names = [s["function"]["name"] for s in box.schemas()]
    assert names == [
        "bash",
        "read",
        "write",
        "edit",
        "multi_edit",
        "glob",
        "grep",
        "compile",
        "verify",
        "profile",
        "finish",
    ]
    json.dumps(box.schemas())
