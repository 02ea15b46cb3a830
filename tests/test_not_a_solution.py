"""Issue 17 item 7: what cannot be a solution says so on a machine without a GPU, in `check`
and in `eval` (which used to say "clean" and "compiled with nvcc")."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import FIXTURES, ROOT

from cuda_agent.cli.main import main
from cuda_agent.eval.checks.solution_form import RULE, form_findings
from cuda_agent.task import Task
from cuda_agent.task.workspace import init_workspace, template_text

LANE = FIXTURES / "cpu_lane"
GOOD = (LANE / "model_new.py").read_text()
KERNELS = {"kernels/k.cu": "__global__ void k() {}\n"}


@pytest.mark.parametrize(
    "text,needle",
    [
        ("", "is empty"),
        ("   \n\n", "is empty"),
        ("import torch\x00\x01\x02", "not UTF-8 text"),
        ("bad \ufffd bytes", "not UTF-8 text"),
        ("class ModelNew(:\n", "not valid Python (line 1"),
        ("import torch\n", "defines no ModelNew"),
        ((ROOT / "examples" / "diag_matmul" / "task.py").read_text(), "is a task file"),
        (
            "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n",
            "without a forward",
        ),
    ],
)
def test_what_is_not_a_solution_is_rejected(text, needle):
    found = form_findings({"model_new.py": text, **KERNELS}, single_file=False)
    assert [f.rule for f in found] == [RULE] and needle in found[0].message


@pytest.mark.parametrize(
    "text",
    [
        GOOD,
        "from kernels.impl import ModelNew\n",  # defined elsewhere, imported
        "import torch.nn as nn\nclass Base(nn.Module):\n    def forward(self, x):\n        return x\nclass ModelNew(Base):\n    pass\n",
    ],
)
def test_solutions_are_not_rejected_by_form(text):
    assert form_findings({"model_new.py": text, **KERNELS}, single_file=False) == []


def test_workspace_form_needs_kernels_and_more_than_the_template():
    tpl = template_text("model_new.py")
    found = form_findings({"model_new.py": tpl}, single_file=False, template=tpl)
    assert [(f.file, f.severity.value) for f in found] == [
        ("kernels/", "reject")
    ] and "nothing is written yet" in found[0].message
    early = form_findings(
        {"model_new.py": tpl, **KERNELS}, single_file=False, template=tpl
    )  # kernels first: still builds
    assert [(f.file, f.severity.value) for f in early] == [("model_new.py", "warn")]
    assert [f.file for f in form_findings({"model_new.py": GOOD}, single_file=False, template=tpl)] == ["kernels/"]
    assert form_findings({"model_new.py": GOOD}, single_file=True) == []  # a single file has no kernels/
    assert "no model_new.py" in form_findings({}, single_file=False)[0].message


def _ws(tmp_path, text: str | bytes):
    ws = init_workspace(Task.from_file(LANE / "task.py"), tmp_path / "ws")
    shutil.copytree(LANE / "kernels", ws / "kernels", dirs_exist_ok=True)
    (ws / "model_new.py").write_bytes(text if isinstance(text, bytes) else text.encode())
    return ws


@pytest.mark.parametrize("text", ["", b"\x7fELF\x02\x01\x01\x00\x00", "def broken(:\n"])
def test_check_and_eval_say_so_without_a_gpu(tmp_path, cache_env, capsys, text):
    ws = _ws(tmp_path, text)
    assert main(["check", str(ws)]) == 1
    out = capsys.readouterr().out
    assert "not-a-solution" in out and out.splitlines()[-1].startswith("rejected")
    assert main(["eval", str(ws), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["status"] == "rejected" and d["reward"] == -1 and "not-a-solution" in d["message"]
    assert "compiled" not in d["message"]


def test_check_of_a_task_file_says_it_is_a_task(capsys):
    assert main(["check", str(ROOT / "examples" / "diag_matmul" / "task.py")]) == 1
    out = capsys.readouterr().out
    assert "is a task file" in out and "clean" not in out
    assert main(["check", str(ROOT / "examples" / "diag_matmul" / "solution_inline.py")]) == 0


def test_fresh_workspace_is_not_clean(tmp_path, cache_env, capsys):
    ws = init_workspace(Task.from_file(LANE / "task.py"), tmp_path / "fresh")
    assert main(["check", str(ws)]) == 1
    assert "nothing is written yet" in capsys.readouterr().out
