"""`cuda-agent lint-task` on the CPU: the real reference child and comparison run the
negative controls; a sound task passes none, weak tasks are caught."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES

from cuda_agent.cli.main import main
from cuda_agent.eval.checks.lint_task import lint_task
from cuda_agent.task import Task

pytestmark = pytest.mark.slow
WEAK = FIXTURES / "weak_tasks"


def test_sound_task_passes_no_control(capsys):
    rc = main(["lint-task", str(FIXTURES / "cpu_lane" / "task.py"), "--device", "cpu", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["passing"] == [] and out["error"] == ""
    assert set(out["controls"]) == {"zeros", "constant", "pass_through", "other_seed", "precomputed"}
    assert out["controls"]["pass_through"]["applicable"]


def test_mean_of_wide_randn_is_weak_zeros_pass():
    report = lint_task(Task.from_file(WEAK / "mean_of_wide_randn.py"), device="cpu", n_seeds=3)
    assert not report.error
    # the paper's elementwise rule accepts zeros and a constant; only the relative-L2 bound rejects them
    assert {"zeros", "constant"} <= set(report.weak)
    assert report.controls["zeros"]["passes_elementwise"] and not report.controls["zeros"]["passes"]
    assert not report.controls["pass_through"]["applicable"]


def test_constant_task_is_weak_and_exit_code_is_1(capsys):
    rc = main(["lint-task", str(WEAK / "constant_output.py"), "--device", "cpu"])
    text = capsys.readouterr().out
    assert rc == 1
    assert "weak" in text and "other_seed" in text and "precomputed" in text
    assert "zeros" not in text.splitlines()[-1]  # zeros (0 vs 1) fail


def test_bad_input_exits_2(tmp_path, capsys):
    bad = tmp_path / "nope.py"
    bad.write_text("x = 1\n")
    assert main(["lint-task", str(bad), "--device", "cpu"]) == 2
    raising = tmp_path / "raising.py"
    raising.write_text(
        (FIXTURES / "cpu_lane" / "task.py")
        .read_text()
        .replace("return torch.relu(x) * 2.0", "raise RuntimeError('boom')")
    )
    assert main(["lint-task", str(raising), "--device", "cpu"]) == 2
    assert "boom" in capsys.readouterr().err
