"""Suite loaders on small synthetic suites built here (nothing from KernelBench is
committed): KernelBench layout, Ops-6K parquet/jsonl/json, a folder of task
files, the bundled examples, and the one-line errors of `cuda-agent tasks list`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.cli.main import main
from cuda_agent.task.suites import load_suite
from cuda_agent.task.taskfile import TaskError


def task_src(op: str = "torch.relu(x)", n: int = 16) -> str:
    return (
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n\n"
        f"    def forward(self, x):\n        return {op}\n\n\n"
        f"def get_inputs():\n    return [torch.randn({n}, {n})]\n\n\ndef get_init_inputs():\n    return []\n"
    )


def make_kernelbench(root: Path, per_level: dict[int, int], nested: bool = True) -> Path:
    base = root / "KernelBench" if nested else root
    for lv, n in per_level.items():
        d = base / f"level{lv}"
        d.mkdir(parents=True)
        for i in range(1, n + 1):
            (d / f"{i}_Op_{lv}_{i}.py").write_text(task_src(f"torch.relu(x) * {i}"))
    return root


def ops_rows(n: int) -> list[dict]:
    sources = ["torch#1", "torch#2", "torch#2", "transformers#1"]
    return [
        {"ops": json.dumps(["relu", "mul"]), "data_source": sources[i % len(sources)], "code": task_src(f"x * {i}")}
        for i in range(n)
    ]


def test_kernelbench_checkout_levels_ids_and_level4_skipped(tmp_path):
    root = make_kernelbench(tmp_path / "kb", {1: 3, 2: 2, 3: 1, 4: 2})
    (root / "KernelBench" / "level1" / "10_Broken.py").write_text("class Model: pass\n")
    s = load_suite(root)
    assert s.kind == "kernelbench"
    assert s.counts() == {"level1": (3, 1), "level2": (2, 0), "level3": (1, 0)}
    assert [i.task_id for i in s if i.group == "level1"] == ["L1-1_Op_1_1", "L1-2_Op_1_2", "L1-3_Op_1_3"]
    first = s.items[0]
    assert (first.level, first.problem) == (1, 1) and first.task.name == "1_Op_1_1"
    assert s.invalid[0][0] == "L1-10_Broken" and "missing" in s.invalid[0][2]
    assert any("level 4" in n and "hub" in n for n in s.notes)
    assert len({i.task_id for i in s}) == len(s)


def test_kernelbench_level_selection_and_direct_level_folder(tmp_path):
    root = make_kernelbench(tmp_path / "kb", {1: 2, 2: 3, 4: 1}, nested=False)
    assert [i.group for i in load_suite(root, [2])] == ["level2"] * 3
    direct = load_suite(root / "level2")
    assert direct.kind == "kernelbench" and len(direct) == 3 and direct.items[0].task_id == "L2-1_Op_2_1"
    with pytest.raises(TaskError, match="level 4 .*hub"):
        load_suite(root, [1, 4])
    with pytest.raises(TaskError, match="no level3"):
        load_suite(root, [3])


def test_ops6k_parquet_jsonl_and_json_agree(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = ops_rows(9) + [{"ops": "[]", "data_source": "torch#3", "code": "def f(): pass\n"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "ops.parquet")
    (tmp_path / "ops.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "ops.json").write_text(json.dumps(rows))
    suites = [load_suite(tmp_path / f"ops.{ext}") for ext in ("parquet", "jsonl", "json")]
    for s in suites:
        assert s.kind == "ops6k"
        assert s.counts() == {"torch#1": (3, 0), "torch#2": (4, 0), "torch#3": (0, 1), "transformers#1": (2, 0)}
        assert s.items[0].task_id == "ops6k-00000" and s.items[0].level is None
    assert [i.task.hash for i in suites[0]] == [i.task.hash for i in suites[1]] == [i.task.hash for i in suites[2]]


def test_ops6k_bad_inputs_are_one_line_errors(tmp_path):
    (tmp_path / "nocode.jsonl").write_text(json.dumps({"ops": "[]", "data_source": "x"}) + "\n")
    with pytest.raises(TaskError, match="missing column.*code"):
        load_suite(tmp_path / "nocode.jsonl")
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(TaskError, match="not valid JSON"):
        load_suite(tmp_path / "bad.jsonl")
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(TaskError):
        load_suite(tmp_path / "bad.parquet")
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(TaskError, match=r"\.parquet, \.jsonl or \.json"):
        load_suite(tmp_path / "x.csv")
    with pytest.raises(TaskError, match="levels"):
        load_suite(tmp_path / "nocode.jsonl", [1])


def test_folder_of_task_files_and_bundled_examples(tmp_path):
    for name in ("b_task", "a_task"):
        (tmp_path / f"{name}.py").write_text(task_src())
    (tmp_path / "notes.py").write_text("x = 1\n")
    s = load_suite(tmp_path)
    assert s.kind == "folder" and [i.task_id for i in s] == ["a_task", "b_task"]
    assert [t for t, _, _ in s.invalid] == ["notes"]
    ex = load_suite("examples")
    assert ex.kind == "examples" and len(ex) >= 4 and all(i.group == "examples" for i in ex)
    forced = load_suite(f"folder:{tmp_path}")
    assert forced.kind == "folder"


def test_tasks_list_cli(tmp_path, capsys):
    root = make_kernelbench(tmp_path / "kb", {1: 2, 2: 1, 4: 1})
    assert main(["tasks", "list", str(root)]) == 0
    out = capsys.readouterr().out
    assert "level1" in out and "level2" in out and "level4" not in out.split("note")[0] and "hub" in out
    total = next(line for line in out.splitlines() if "total" in line)
    assert "3" in total
    assert main(["tasks", "list", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "suite not found" in err
    assert main(["tasks", "list", str(root), "--levels", "1,x"]) == 2
    assert main(["tasks", "list", str(root), "--levels", "4"]) == 2
    assert "hub" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["tasks", "list", str(empty)]) == 2


def test_example_dirs_skip_a_folder_without_a_task(tmp_path):
    """A moved example's leftover build folder (no task.py) is not an example: the GPU check
    and the turnaround benchmark enumerate examples through this helper."""
    from cuda_agent.task.suites import example_dirs

    for name in ("b_task", "a_task"):
        (tmp_path / name / "solution").mkdir(parents=True)
        (tmp_path / name / "task.py").write_text("# a task\n")
    (tmp_path / "leftover" / "solution").mkdir(parents=True)
    (tmp_path / "notes.md").write_text("not a folder\n")
    assert [p.name for p in example_dirs(tmp_path)] == ["a_task", "b_task"]
