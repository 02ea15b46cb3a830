"""GPU: a scripted agent episode against the real evaluator. The scripted model
writes an honest kernel for a bundled example, compiles, verifies, profiles and
finishes; the run must end with reward 3 and that kernel in RUN_DIR/best/."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT
from fake_openai_server import call, reply, serving

from cuda_agent.agent.loop import AgentConfig, run_episode
from cuda_agent.agent.trajectory import load_trajectory
from cuda_agent.llm.client import ChatClient, ClientConfig
from cuda_agent.task import Task

pytestmark = pytest.mark.gpu
EX = ROOT / "examples" / "diag_matmul"


def test_scripted_episode_reaches_reward_3_with_real_evaluator(tmp_path):
    sol = EX / "solution"
    writes = [
        call("write", {"path": f"kernels/{p.name}", "content": p.read_text()})
        for p in sorted((sol / "kernels").iterdir())
    ]
    script = [
        reply("Reading the task.", [call("read", {"path": "model.py"}), call("read", {"path": "model_new.py"})]),
        reply(
            "Row scaling instead of a dense GEMM.",
            writes + [call("write", {"path": "model_new.py", "content": (sol / "model_new.py").read_text()})],
        ),
        reply(None, [call("compile")]),
        reply(None, [call("verify")]),
        reply(None, [call("profile")]),
        reply("Done.", [call("finish", {"summary": "diag(a) @ B as a row scale"})]),
    ]
    with serving(script) as srv:
        client = ChatClient(ClientConfig(model="scripted", base_url=srv.base_url), sleep=lambda s: None)
        s = run_episode(Task.from_file(EX / "task.py"), tmp_path / "run", client, AgentConfig(bash_timeout_s=30))
    traj = load_trajectory(tmp_path / "run")
    phases = [e.result.status.value for e in traj.evals]
    assert s.reason == "finished" and s.reward == 3, (
        phases,
        [m["content"][:400] for m in traj.messages if m["role"] == "tool"],
    )
    best = tmp_path / "run" / "best"
    for p in (sol / "kernels").iterdir():
        assert (best / "kernels" / p.name).read_text() == p.read_text()
    result = json.loads((best / "result.json").read_text())
    assert result["reward"] == 3 and result["speedup_vs_compile"] > 1.05
    print(
        f"GPU episode: reward {s.reward}, turns {s.turns}, time {result['time_ms']:.4g} ms, "
        f"x{result['speedup_vs_eager']:.2f} vs eager, x{result['speedup_vs_compile']:.2f} vs compile"
    )
