"""Issue 17 item 1: a cached verdict is keyed on everything that decided it, so one workspace's
state (a tampered protected file) is never served to another workspace with the same agent files."""

from __future__ import annotations

import dataclasses
import shutil

import pytest
from conftest import FIXTURES

from cuda_agent.eval.api import evaluate_workspace
from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.judge.result import Finding, Severity, Status
from cuda_agent.eval.judge.result_key import NOT_DECIDING, result_key
from cuda_agent.task import Task
from cuda_agent.task.workspace import init_workspace

LANE = FIXTURES / "cpu_lane"


def _key(findings=(), **cfg):
    return result_key(
        evaluator="e",
        task_hash="t",
        candidate_hash="c",
        findings=list(findings),
        gpu="g",
        torch_version="2",
        cfg=EvalConfig(**cfg),
    )


def test_key_covers_findings_and_deciding_settings_only():
    base = _key()
    tampered = _key([Finding("protected-file-modified", "model.py differs", Severity.REJECT, "model.py")])
    assert tampered != base
    for field, value in (
        ("n_timed", 7),
        ("n_correctness", 2),
        ("shape_probe", False),
        ("sandbox", "off"),
        ("device", "cpu"),
        ("arch", "8.0"),
        ("max_cv", 0.5),
    ):
        assert _key(**{field: value}) != base, field
    for field, value in (("use_cache", False), ("reuse_results", False), ("spare_children", True), ("jobs", 3)):
        assert field in NOT_DECIDING and _key(**{field: value}) == base, field
    assert _key(phase="verify") != base
    assert {f.name for f in dataclasses.fields(EvalConfig)} >= NOT_DECIDING


def _ws(tmp_path, name):
    ws = init_workspace(Task.from_file(LANE / "task.py"), tmp_path / name)
    shutil.copytree(LANE / "kernels", ws / "kernels", dirs_exist_ok=True)
    shutil.copy(LANE / "model_new.py", ws / "model_new.py")
    return ws


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_tampered_workspace_verdict_does_not_leak_to_a_clean_one(tmp_path, cache_env):
    a, b = _ws(tmp_path, "a"), _ws(tmp_path, "b")
    cfg = EvalConfig(device="cpu", compile_baseline=False)
    model = a / "model.py"
    model.chmod(0o644)
    model.write_text(model.read_text() + "\n# an edit\n")
    ra = evaluate_workspace(a, config=dataclasses.replace(cfg), phase="compile")
    assert ra.status is Status.REJECTED and any(f.rule == "protected-file-modified" for f in ra.findings)
    rb = evaluate_workspace(b, config=dataclasses.replace(cfg), phase="compile")
    assert rb.status is Status.OK and rb.message == "compiled", (rb.status, rb.message)
    assert not rb.cache.get("result") and not any(f.rule == "protected-file-modified" for f in rb.findings)
    # a restored a is b's state: now b's verdict is the right one to reuse
    model.write_text((LANE / "task.py").read_text())
    again = evaluate_workspace(a, config=dataclasses.replace(cfg), phase="compile")
    assert again.status is Status.OK and again.cache.get("result") is True
