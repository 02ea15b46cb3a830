"""verl datasets from any suite (`cuda-agent rl prompts`): one row per task.

Contract: `prompt_rows(suite, mode)` returns rows in verl's RL dataset form:
`data_source` ("cuda_agent/<group>"), `prompt` (chat messages), `ability`,
`reward_model` ({"style": "rule", "ground_truth": task hash}), `extra_info`
({index, task_id, task_name, task_source}) and `agent_name`.
- mode "agent": `agent_name` "cuda_agent" (rl.verl_loop.CudaAgentLoop); the
  prompt is the environment's initial messages with the workspace path written
  as WORKSPACE_LABEL (the loop renders its own, with the real path, from
  `extra_info.task_source`; the dataset's copy only sizes prompts);
- mode "single_turn": `agent_name` "single_turn_agent" (verl's own loop); the
  prompt asks for the whole solution in one answer as `<file path="...">`
  blocks, which rl.scoring.compute_score reads and evaluates.
`write_parquet(rows, path)` stores them (pyarrow); `extra_info.task_source` is the
task file's text, so a dataset is self-contained.
Not guaranteed: that the tasks are good training tasks (use the synthesis
filters and `cuda-agent lint-task` for that).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from cuda_agent.env.prompt import system_prompt, task_text
from cuda_agent.task.suites import Suite
from cuda_agent.task.taskfile import Task
from cuda_agent.task.workspace import template_text

Mode = Literal["agent", "single_turn"]
WORKSPACE_LABEL = "/workspace"

SINGLE_TURN_SYSTEM = """\
You are a CUDA performance engineer. Make the PyTorch program in model.py faster \
with CUDA kernels you write yourself, following the rules of SKILL.md (given with \
the task). You get one answer and no feedback: write every file of your solution \
in it, each as

<file path="model_new.py">
...the whole file...
</file>

with model_new.py (class ModelNew) and your kernels as kernels/<name>.cu plus \
kernels/<name>_binding.cpp. Only those paths count. Reward: -1 if it does not \
compile or is wrong, 3 if more than 5 % faster than both eager PyTorch and \
torch.compile, 2 if only faster than eager, else 1.
"""


def messages_for(task: Task, mode: Mode) -> list[dict[str, str]]:
    if mode == "agent":
        return [
            {"role": "system", "content": system_prompt()},
            {"role": "user", "content": task_text(task.source, template_text("SKILL.md"), WORKSPACE_LABEL)},
        ]
    user = (
        f"## model.py\n\n```python\n{task.source.rstrip()}\n```\n\n"
        f"## SKILL.md\n\n{template_text('SKILL.md').rstrip()}\n\nWrite your solution now."
    )
    return [{"role": "system", "content": SINGLE_TURN_SYSTEM}, {"role": "user", "content": user}]


def prompt_rows(suite: Suite, mode: Mode = "agent", limit: int | None = None) -> list[dict[str, Any]]:
    rows = []
    for i, item in enumerate(suite.items[:limit]):
        t = item.task
        rows.append(
            {
                "data_source": f"cuda_agent/{item.group}",
                "prompt": messages_for(t, mode),
                "ability": "cuda",
                "reward_model": {"style": "rule", "ground_truth": t.hash},
                "extra_info": {"index": i, "task_id": item.task_id, "task_name": t.name, "task_source": t.source},
                "agent_name": "cuda_agent" if mode == "agent" else "single_turn_agent",
            }
        )
    return rows


def write_parquet(rows: list[dict[str, Any]], path: str | Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out)
    return out
