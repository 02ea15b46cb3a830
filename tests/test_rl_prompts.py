"""`rl prompts` rows (agent and single-turn) from the bundled examples, and the
single-turn reward function over a scripted pool: files read from the answer,
only allowed paths, a missing model_new.py scoring -1 without a job."""

from __future__ import annotations

import asyncio
import json

import pytest
from rl_helpers import ScriptedPool, timed

from cuda_agent.cli.main import main
from cuda_agent.rl import scoring
from cuda_agent.rl.prompts import prompt_rows
from cuda_agent.rl.scoring import SCORE_KEYS, answer_sources, compute_score
from cuda_agent.task.suites import load_suite
from cuda_agent.task.taskfile import Task

pq = pytest.importorskip("pyarrow.parquet")


def test_rows_for_both_modes(tmp_path, capsys):
    suite = load_suite("examples")
    rows = prompt_rows(suite, "agent")
    r = rows[0]
    assert r["agent_name"] == "cuda_agent" and r["data_source"] == "cuda_agent/examples"
    assert Task.from_source(r["extra_info"]["task_source"]).hash == r["reward_model"]["ground_truth"]
    assert [m["role"] for m in r["prompt"]] == ["system", "user"] and "Workspace: /workspace" in r["prompt"][1][
        "content"
    ]
    st = prompt_rows(suite, "single_turn", limit=2)
    assert (
        len(st) == 2
        and st[0]["agent_name"] == "single_turn_agent"
        and '<file path="model_new.py">' in st[0]["prompt"][0]["content"]
    )
    assert main(["rl", "prompts", "examples", "-o", str(tmp_path / "t.parquet"), "--limit", "3"]) == 0
    back = pq.read_table(tmp_path / "t.parquet").to_pylist()
    assert len(back) == 3 and back[1]["extra_info"]["task_source"] == rows[1]["extra_info"]["task_source"]
    assert "3 agent rows" in capsys.readouterr().out


ANSWER = """Here it is.
<file path="model_new.py">
import cuda_extension
</file>
<file path="kernels/relu.cu">
__global__ void k() {}
</file>
<file path="../evil.py">
boom
</file>
<file path="model.py">
class Model: pass
</file>"""


def test_answer_files_keep_only_agent_paths():
    assert answer_sources(ANSWER) == {
        "model_new.py": "import cuda_extension\n",
        "kernels/relu.cu": "__global__ void k() {}\n",
    }


def test_single_turn_reward_through_the_pool(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_AGENT_SCORE_LOG", str(tmp_path / "scores.jsonl"))
    pool = ScriptedPool({"profile": [timed(3, speedup=1.4)]})
    scoring.use_pool(pool)
    task = Task.from_file(load_suite("examples").items[0].task.path)
    info = {"task_source": task.source, "task_name": task.name}
    try:
        out = asyncio.run(compute_score("cuda_agent/x", ANSWER, task.hash, info))
        assert (
            tuple(out) == SCORE_KEYS and out["score"] == 3.0 and out["speedup_vs_compile"] == 1.4 and out["files"] == 2
        )
        assert pool.jobs[0].phase == "profile" and set(pool.jobs[0].sources) == {"model_new.py", "kernels/relu.cu"}
        none = asyncio.run(compute_score("cuda_agent/x", "I cannot.", task.hash, info))
        assert none["score"] == -1.0 and len(pool.jobs) == 1  # no job for an answer without model_new.py
        # each reward's reason, one line per call, in the order they came
        lines = [json.loads(x) for x in (tmp_path / "scores.jsonl").read_text().splitlines()]
        assert [(x["task"], x["status"], x["reward"]) for x in lines] == [
            (task.name, "ok", 3.0),
            (task.name, "no-answer", -1.0),
        ], lines
        assert "no model_new.py" in lines[1]["message"] and lines[0]["message"]
        with pytest.raises(ValueError, match="hash"):
            asyncio.run(compute_score("cuda_agent/x", ANSWER, "0" * 16, info))
    finally:
        scoring.use_pool(None)
