"""The synthesis filter on the CPU (`--device cpu`): each stage rejects the crafted candidate it
exists for, a too-fast candidate is re-shaped into the window, decontamination drops a renamed
copy of a reference task, and a killed filter run resumes without evaluating anything twice."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_agent.pool.local import LocalPool
from cuda_agent.synth import records
from cuda_agent.synth.device_job import FilterSettings
from cuda_agent.synth.filter import FilterConfig, run_filter, work_dir
from cuda_agent.synth.records import Candidate
from cuda_agent.task.suites import load_suite

ROOT = Path(__file__).resolve().parents[1]


def task(init: str, forward: str, batch: int = 8, dims: str = "64") -> str:
    return f"""import torch
import torch.nn as nn

batch_size = {batch}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init or "        pass"}

    def forward(self, x):
{forward}


def get_inputs():
    return [torch.randn(batch_size, {dims})]


def get_init_inputs():
    return []
"""


CRAFTED = {
    "dropout": task("        self.drop = nn.Dropout(0.5)", "        return self.drop(x) * 2.0"),
    "constant": task("", "        return torch.zeros_like(x) + 1.5"),
    "pass_through": task("", "        return x.clone()"),
    # dynamo turns a raise into a graph break (eager again), so a compile "failure" a test can craft
    # is a different answer under compilation
    "compile_fails": task(
        "",
        "        if torch.compiler.is_compiling():\n"
        "            return torch.tanh(x) * 4.0\n"
        "        return torch.tanh(x) * 3.0",
    ),
    "too_fast": task("", "        return torch.sigmoid(x) * x", batch=1),
    "no_batch_dim": "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
    "    def forward(self, x):\n        return torch.exp(x)\n\n\n"
    "def get_inputs():\n    return [torch.arange(8.0) + torch.randn(())]\n\n\n"
    "def get_init_inputs():\n    return []\n",
    "raises": task("", "        return x @ torch.randn(3, 3)"),
    "not_a_task": "import torch\n\ndef forward(x):\n    return x\n",
}


def renamed_reference() -> str:
    src = (ROOT / "examples/linear_bias_relu/task.py").read_text()
    return (
        src.replace("self.linear", "self.dense")
        .replace("def forward(self, x)", "def forward(self, h)")
        .replace("self.dense(x)", "self.dense(h)")
    )


def write_candidates(path: Path, codes: dict[str, str]) -> list[str]:
    ids = []
    for i, (name, code) in enumerate(codes.items()):
        cid = f"cand-{i:06d}"
        records.append(path, Candidate(cid, code, [name], "torch#1", [name], "test"))
        ids.append(cid)
    return ids


def refs() -> list[tuple[str, str]]:
    return [(p.parent.name, p.read_text()) for p in sorted(ROOT.glob("examples/*/task.py"))]


@pytest.mark.slow
def test_each_stage_rejects_the_candidate_it_exists_for(tmp_path, cache_env):
    codes = {
        **CRAFTED,
        "renamed_copy": renamed_reference(),
        "duplicate": CRAFTED["too_fast"].replace("x)", "y)").replace("(x", "(y").replace("* x", "* y"),
    }
    ids = dict(zip(codes, write_candidates(tmp_path / "c.jsonl", codes), strict=True))
    # the window is a setting: a CPU is slower than a GPU, so the test's window starts lower
    settings = FilterSettings(device="cpu", window_ms=(0.3, 5000.0), max_reshapes=4, lock_dir=str(tmp_path))
    out = tmp_path / "tasks.parquet"
    with LocalPool(device="cpu", call_workers=2) as pool:
        summary = run_filter(tmp_path / "c.jsonl", out, FilterConfig(settings, refs()), pool)
    assert not summary.harness_errors
    rej = {r["id"]: r for r in map(json.loads, Path(str(out) + ".rejections.jsonl").read_text().splitlines())}
    expect = {
        "dropout": "deterministic",
        "constant": "anti_hack",
        "pass_through": "anti_hack",
        "compile_fails": "compile",
        "raises": "runs",
        "not_a_task": "parse",
        "renamed_copy": "decontam",
        "duplicate": "dedup",
        "no_batch_dim": "timing",
    }
    assert {name: rej[ids[name]]["stage"] for name in expect} == expect
    assert "random ops" in rej[ids["dropout"]]["reason"]
    assert "pass_through" in rej[ids["pass_through"]]["reason"] and "constant" in rej[ids["constant"]]["reason"]
    assert "torch.compile disagrees with eager" in rej[ids["compile_fails"]]["reason"]
    assert "semantic copy of linear_bias_relu" in rej[ids["renamed_copy"]]["reason"]
    assert rej[ids["renamed_copy"]]["measure"] == "semantic"
    assert "no batch-like dimension" in rej[ids["no_batch_dim"]]["reason"]
    # the only survivor: the too-fast one, re-shaped into the window
    assert summary.kept == 1 and ids["too_fast"] not in rej
    row = json.loads(out.with_suffix(".jsonl").read_text())
    reshapes = json.loads(row["reshapes"])
    assert reshapes and reshapes[0]["batch"][0] == 1 and reshapes[-1]["batch"][1] > 1
    assert all(r["eager_ms"] < 0.3 for r in reshapes)
    assert 0.3 <= row["eager_ms"] <= 5000.0 and row["compile_ms"] > 0
    assert f"batch_size = {reshapes[-1]['batch'][1]}" in row["code"]
    assert summary.counts["parse"] == [len(codes), len(codes) - 1]
    assert summary.counts["compile"] == [2, 1]
    stages = list(summary.counts)
    for a, b in zip(stages, stages[1:], strict=False):  # a funnel: nobody enters a stage they did not pass into
        assert summary.counts[b][0] <= summary.counts[a][1], (a, b, summary.counts)
    assert load_suite(out).counts() == {"torch#1": (1, 0)}


@pytest.mark.slow
def test_a_killed_filter_resumes_and_evaluates_no_candidate_twice(tmp_path, cache_env):
    codes = {f"k{i}": task("", f"        return torch.tanh(x) * {i + 2}.0 + x", batch=64, dims="256") for i in range(6)}
    write_candidates(tmp_path / "c.jsonl", codes)
    out = tmp_path / "tasks.jsonl"
    argv = [
        sys.executable,
        "-m",
        "cuda_agent",
        "synth",
        "filter",
        str(tmp_path / "c.jsonl"),
        "-o",
        str(out),
        "--device",
        "cpu",
        "--no-compile",
        "--jobs-per-gpu",
        "1",
        "--window-ms",
        "0.0001",
        "100000",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    dev = work_dir(out) / "device.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(records.read_dicts(dev)) < 2 and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the parent and its pool workers, mid-run
    proc.wait()
    before = {d["id"]: d for d in records.read_dicts(dev)}
    assert 2 <= len(before) < len(codes), "the kill should land mid-run"
    settings = FilterSettings(device="cpu", window_ms=(0.0001, 100000.0), compile=False, lock_dir=str(tmp_path))
    with LocalPool(device="cpu", call_workers=2) as pool:
        summary = run_filter(tmp_path / "c.jsonl", out, FilterConfig(settings), pool)
    after = records.read_dicts(dev)
    assert summary.evaluated_now == len(codes) - len(before)
    assert sorted(d["id"] for d in after) == sorted({d["id"] for d in after})  # one record per candidate
    assert all(d == next(a for a in after if a["id"] == i) for i, d in before.items())
    assert summary.kept == len(codes) and summary.counts["timing"] == [len(codes), len(codes)]


def test_filter_cli_refuses_cuda_without_a_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("has a GPU")
    from cuda_agent.cli.main import main

    write_candidates(tmp_path / "c.jsonl", {"a": CRAFTED["too_fast"]})
    assert main(["synth", "filter", str(tmp_path / "c.jsonl"), "-o", str(tmp_path / "t.jsonl")]) == 2


@pytest.mark.slow
def test_a_candidates_code_runs_in_the_sandbox(tmp_path, cache_env):
    """Composed code may come from an LLM: the filter runs it with the candidate's treatment. A
    task that writes outside its own dirs fails there (read-only file system) and the file never
    appears; with the sandbox off (the setting for machines without user namespaces) it does."""
    from cuda_agent.sandbox import box
    from cuda_agent.synth.device_job import TaskCheckJob

    if box.probe("cpu")[0] != ():
        pytest.skip(f"full sandbox unavailable: {box.probe('cpu')}")
    target = tmp_path / "outside" / "planted.txt"
    target.parent.mkdir()
    code = task(f"        open({str(target)!r}, 'w').write('x')", "        return torch.tanh(x) * 3.0 + x")
    boxed = FilterSettings(device="cpu", window_ms=(0.0001, 100000.0), compile=False, lock_dir=str(tmp_path / "locks"))
    r = TaskCheckJob("c1", code, boxed).run()
    assert r.sandbox == "on" and not r.passed and r.verdicts[-1].stage == "runs"
    assert "Read-only file system" in r.verdicts[-1].reason and not target.exists()
    honest = TaskCheckJob("c2", task("", "        return torch.tanh(x) * 3.0 + x"), boxed).run()
    assert honest.sandbox == "on" and honest.passed, honest.verdicts
    import dataclasses

    r = TaskCheckJob("c3", code, dataclasses.replace(boxed, sandbox="off")).run()
    assert r.sandbox == "off" and r.passed and target.read_text() == "x"


@pytest.mark.slow
def test_the_next_job_gets_a_spare_child_that_has_run_nothing(tmp_path, cache_env, monkeypatch):
    """A pool worker starts the next job's child while a job runs (its torch import and CUDA
    start-up leave the critical path); a child that ran a task is closed with that job."""
    from cuda_agent.synth import device_job
    from cuda_agent.synth.device_job import TaskCheckJob

    device_job.discard_spare()
    started: list[device_job._Box] = []
    real = device_job._start_child

    def start(s, precision):
        started.append(real(s, precision))
        return started[-1]

    monkeypatch.setattr(device_job, "_start_child", start)
    cfg = FilterSettings(
        device="cpu", window_ms=(0.0001, 100000.0), compile=False, lock_dir=str(tmp_path / "locks"), sandbox="off"
    )
    code = task("", "        return torch.tanh(x) * 3.0 + x")
    try:
        first = TaskCheckJob("c1", code, cfg).run()
        assert first.passed, first.verdicts
        assert len(started) == 2 and device_job._slot.item is started[1]  # its own child, and the next one's
        assert not started[0].alive() and started[1].alive()
        second = TaskCheckJob("c2", code, cfg).run()
        assert second.passed, second.verdicts
        assert len(started) == 3 and device_job._slot.item is started[2] and not started[1].alive()
        assert {"start", "runs", "deterministic", "timing"} <= set(second.stage_s), second.stage_s
        assert second.warm_s.get("process", 0) > 0, second.warm_s  # the child's start-up, as it saw it
        no_spare = TaskCheckJob("c3", code, dataclasses.replace(cfg, spare_child=False)).run()
        assert no_spare.passed and len(started) == 3  # took the spare, started none
        assert device_job._slot.item is None and not started[2].alive()
    finally:
        device_job.discard_spare()


def test_a_launch_bound_task_is_re_shaped_by_a_fit_not_another_proportional_step():
    """H200 figures: 64x the batch took a task from 0.036 to 0.052 ms. A proportional second step
    (61x) reached 1.0 ms, at the window's edge; the fit of time = c + k * batch aims at the target."""
    from cuda_agent.synth.device_job import _factor

    target = 1.0 * 100.0**0.25
    assert _factor([], 0.036, target) == 64.0  # first step: proportional, bounded
    f = _factor([{"batch": [128, 8192], "eager_ms": 0.036}], 0.052, target)
    k = (0.052 - 0.036) / (8192 - 128)
    assert abs((0.036 + k * (8192 * f - 128)) - target) < 1e-6 * target  # lands on the target on that line
    assert f > 64  # where the proportional step would have stopped short
    # a time that fell as the batch grew is noise: back to the proportional step
    assert _factor([{"batch": [128, 8192], "eager_ms": 0.05}], 0.04, target) == 64.0
    assert _factor([{"batch": [128, 8192], "eager_ms": 0.036}], 0.0361, target) == 1024.0  # bounded


@pytest.mark.slow
def test_the_filter_runs_its_device_jobs_as_ray_tasks(tmp_path, cache_env):
    """The same filter through the Ray backend of the pool (a local Ray cluster on the CPU): a kept
    task and a rejected one come back with their stages, as on the local pool."""
    ray = pytest.importorskip("ray")
    from cuda_agent.pool.ray_pool import RayPool

    codes = {
        "keep": task("", "        return torch.tanh(x) * 2.0 + x", batch=64, dims="256"),
        "dropout": CRAFTED["dropout"],
    }
    ids = dict(zip(codes, write_candidates(tmp_path / "c.jsonl", codes), strict=True))
    settings = FilterSettings(device="cpu", window_ms=(0.0001, 100000.0), compile=False, lock_dir=str(tmp_path))
    out = tmp_path / "tasks.jsonl"
    ray.init(
        num_cpus=2,
        num_gpus=0,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"CUDA_AGENT_CACHE": str(cache_env), "PYTHONPATH": str(ROOT / "src")}},
    )
    try:
        summary = run_filter(tmp_path / "c.jsonl", out, FilterConfig(settings), RayPool())
    finally:
        ray.shutdown()
    assert not summary.harness_errors and summary.kept == 1
    rej = {r["id"]: r for r in map(json.loads, Path(str(out) + ".rejections.jsonl").read_text().splitlines())}
    assert list(rej) == [ids["dropout"]] and rej[ids["dropout"]]["stage"] == "deterministic"
    assert json.loads(out.read_text().splitlines()[0])["id"] == ids["keep"]
