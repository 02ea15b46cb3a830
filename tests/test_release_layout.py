"""Issue 13: a workspace in the public CUDA-Agent release's layout is evaluated as it is, against its
own model.py with the evaluator's pristine binding files, and can be imported with `init --from`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES

from cuda_agent.cli.main import main
from cuda_agent.eval.api import evaluate_workspace
from cuda_agent.eval.checks.static import check_sources
from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.judge.result import Severity, Status
from cuda_agent.task import Task
from cuda_agent.task.workspace import is_release_layout, read_agent_sources, stage, template_text

RELEASE = FIXTURES / "release_layout"

HOST_BINDING = r"""
#include <torch/types.h>
#include "../binding_registry.h"

static torch::Tensor scale_add(torch::Tensor a, torch::Tensor b, double alpha) {
  TORCH_CHECK(a.is_contiguous() && b.is_contiguous() && a.sizes() == b.sizes(), "scale_add: contiguous, one shape");
  auto y = torch::empty_like(a);
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* py_ = y.data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) py_[i] = static_cast<float>(alpha) * pa[i] + pb[i];
  return y;
}

static void register_scale_add(pybind11::module& m) { m.def("scale_add", &scale_add); }

REGISTER_BINDING(scale_add, register_scale_add);
"""


def test_the_fixture_is_in_the_release_layout_and_its_sources_are_clean():
    assert is_release_layout(RELEASE)
    found = check_sources(read_agent_sources(RELEASE))
    assert not [f for f in found if f.severity is Severity.REJECT], [f.to_dict() for f in found]


def test_staging_uses_its_model_and_our_binding_files(tmp_path):
    st = stage(RELEASE, tmp_path / "staged")
    assert st.task.source == (RELEASE / "model.py").read_text()
    assert [f[0] for f in st.findings] == ["imported-layout"]  # its own binding files are not "tampering"
    for name in ("binding.cpp", "binding_registry.h"):
        assert (st.root / name).read_text() == template_text(name)
    assert not (st.root / "utils").exists()


@pytest.mark.slow
def test_a_release_workspace_is_scored_against_its_own_model(tmp_path, cache_env):
    ws = tmp_path / "agent_workdir"
    shutil.copytree(RELEASE, ws)
    (ws / "kernels" / "scale_add.cu").unlink()
    (ws / "kernels" / "scale_add_binding.cpp").write_text(HOST_BINDING)  # host code: the CPU lane runs it
    r = evaluate_workspace(ws, config=EvalConfig(device="cpu", compile_baseline=False, n_timed=10, max_rounds=1))
    assert r.status is Status.OK and r.correct, (r.message, r.log[-2000:])
    assert r.task_hash == Task.from_file(RELEASE / "model.py").hash
    note = [f for f in r.findings if f.rule == "imported-layout"]
    assert note and note[0].severity is Severity.WARN and "release" in note[0].message


@pytest.mark.slow
def test_the_release_cuda_kernel_builds(tmp_path, cache_env):
    r = evaluate_workspace(RELEASE, config=EvalConfig(device="cpu"), phase="compile")
    assert r.status is Status.OK and r.message == "compiled", (r.message, r.log[-2000:])


def test_init_from_imports_it_into_our_layout(tmp_path, capsys):
    out = tmp_path / "ws"
    assert main(["init", "--from", str(RELEASE), "-o", str(out)]) == 0
    assert (out / ".cuda-agent" / "task.json").is_file() and (out / "tools" / "verify").is_file()
    assert (out / "model_new.py").read_text() == (RELEASE / "model_new.py").read_text()
    assert (out / "kernels" / "scale_add.cu").is_file() and not (out / "utils").exists()
    assert (out / "binding_registry.h").read_text() == template_text("binding_registry.h")
    assert main(["check", str(out)]) == 0


def test_init_from_refuses_another_layout(tmp_path, capsys):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "model.py").write_text((RELEASE / "model.py").read_text())
    assert main(["init", "--from", str(tmp_path / "src"), "-o", str(tmp_path / "ws")]) == 2
    assert "release's layout" in capsys.readouterr().err
    assert not Path(tmp_path / "ws").exists()
