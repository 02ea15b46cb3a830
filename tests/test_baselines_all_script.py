"""benchmarks/baselines_all.py (issue 32 item 3's GPU measurement) on the CPU: the KernelBench mix's
solutions laid out where `bench` looks them up, and the per-task rows read back from a bench store."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from cuda_agent.bench.runner import find_solution
from cuda_agent.bench.store import ResultStore
from cuda_agent.eval.judge.result import EvalResult, Status
from cuda_agent.task.suites import load_suite

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("baselines_all", ROOT / "benchmarks" / "baselines_all.py")
ba = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ba)

TASK = """import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x * 2
def get_inputs():
    return [torch.randn(8)]
def get_init_inputs():
    return []
"""


def test_the_mix_solutions_are_where_bench_finds_them(tmp_path):
    tasks = json.loads(ba.MIX.read_text())["tasks"]
    l1, l2 = next(t for t in tasks if t["level"] == 1), next(t for t in tasks if t["level"] == 2)
    kb = tmp_path / "kb"
    for t in (l1, l2):  # two of the mix's files present; the rest missing (skipped with a note)
        f = kb / "KernelBench" / f"level{t['level']}" / t["file"]
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(TASK)
    sols = tmp_path / "sols"
    assert ba.kb_solutions(kb, sols, {1}) == 1  # level 2 not asked for
    assert ba.kb_solutions(kb, sols, {1, 2}) == 2  # a rerun keeps the first link
    suite = load_suite(kb / "KernelBench", levels=[1, 2])
    found = {item.task_id: find_solution(item, sols) for item in suite}
    assert len(found) == 2 and all(v is not None and v[0] == "workspace" for v in found.values()), found
    want = {(ba.MIX.parent / t["dir"] / "solution").resolve() for t in (l1, l2)}
    assert {v[1].resolve() for v in found.values()} == want


def test_rows_give_each_baselines_speedup_and_the_best(tmp_path):
    store = ResultStore(tmp_path / "run")
    r = EvalResult(
        Status.OK,
        3,
        True,
        time_ms=0.1,
        eager_ms=1.2,
        compile_ms=0.15,
        speedup_vs_eager=12.0,
        speedup_vs_compile=1.5,
        baselines_ms={"max-autotune": 0.14, "cuda-graph": 1.3},
        task_hash="h",
    )
    store.record("L1-88_MinGPTNewGelu", "level1", r, phase="full")
    bad = EvalResult(Status.INCORRECT, -1, False, task_hash="h")
    store.record("L1-40_LayerNorm", "level1", bad, phase="full")
    got = {g["task"]: g for g in ba.rows(tmp_path / "run")}
    ok = got["L1-88_MinGPTNewGelu"]
    assert ok["speedups"] == pytest.approx({"eager": 12.0, "compile": 1.5, "max-autotune": 1.4, "cuda-graph": 13.0})
    assert ok["best"] == "max-autotune" and ok["vs_best"] == pytest.approx(1.4)
    assert got["L1-40_LayerNorm"]["speedups"] == {} and got["L1-40_LayerNorm"]["vs_best"] is None
