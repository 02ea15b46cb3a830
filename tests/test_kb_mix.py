"""The throughput benchmark's KernelBench mix (benchmarks/kb_mix): MIX.json is complete and every
listed candidate is a solution that passes the static checks; each broken candidate differs from
its honest one in a kernel only (so it compiles and loads, and can only fail on its outputs);
benchmarks/kb_mix_carry.py copies task files out of a git repository. Whether the honest ones are
correct and the broken ones are not is decided on the GPU (benchmarks/eval_throughput.py prints
any outcome that differs from MIX.json's).

With CUDA_AGENT_KERNELBENCH set to a KernelBench checkout (e.g. .kb from kb_mix_carry.py), the
tasks are loaded too: the file MIX.json names is the one found by level and problem number, the
workspace passes `cuda-agent check`'s checks, and ModelNew has Model's constructor and parameters
(names and shapes, so the evaluator's state_dict copy fits). Without it those tests skip.
Compiling every .cu with nvcc is marked slow.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
from conftest import ROOT

from cuda_agent.eval.checks.gate import static_findings, workspace_findings
from cuda_agent.eval.judge.result import Severity
from cuda_agent.task import Task
from cuda_agent.task.workspace import copy_solution, init_workspace, read_agent_sources, stage

MIX_DIR = ROOT / "benchmarks" / "kb_mix"
MIX = json.loads((MIX_DIR / "MIX.json").read_text())
CANDIDATES = [(t, v) for t in MIX["tasks"] for v in t["candidates"]]
KB = os.environ.get("CUDA_AGENT_KERNELBENCH")


def cid(x) -> str:
    t, v = x if isinstance(x, tuple) else (x, "")
    return f"{t['dir']}/{v}" if v else t["dir"]


def test_mix_has_twenty_kernelbench_tasks_of_levels_1_and_2_honest_and_broken():
    tasks = MIX["tasks"]
    assert len(tasks) >= 20
    assert {t["level"] for t in tasks} == {1, 2}
    assert len({(t["level"], t["problem"]) for t in tasks}) == len(tasks)
    assert len({t["dir"] for t in tasks}) == len(tasks)
    for t in tasks:
        assert t["dir"].startswith(f"{t['level']}_{t['problem']}_"), t["dir"]
        assert t["file"].startswith(f"{t['problem']}_") and t["file"].endswith(".py"), t["file"]
        assert t["candidates"].get("solution") == "correct", t["dir"]
        assert set(t["candidates"]) <= {"solution", "broken"}
        if "broken" in t["candidates"]:
            assert t["candidates"]["broken"] == "incorrect" and t.get("bug"), t["dir"]
    assert sum("broken" in t["candidates"] for t in tasks) >= 5
    assert len(MIX["kernelbench"]["commit"]) == 40
    # the folders on disk are exactly the ones listed (no stray, unlisted candidate)
    assert sorted(p.name for p in MIX_DIR.iterdir() if p.is_dir()) == sorted(t["dir"] for t in tasks)


@pytest.mark.parametrize("cand", CANDIDATES, ids=cid)
def test_candidate_is_a_solution_that_passes_the_static_checks(cand):
    t, variant = cand
    d = MIX_DIR / t["dir"] / variant
    assert (d / "model_new.py").is_file()
    cus, bindings = sorted((d / "kernels").glob("*.cu")), sorted((d / "kernels").glob("*_binding.cpp"))
    assert cus and bindings, d
    sources = {
        "model_new.py": (d / "model_new.py").read_text(),
        **{f"kernels/{p.name}": p.read_text() for p in (d / "kernels").iterdir()},
    }
    found = static_findings(sources, "fp32")
    assert found == [], [f"{f.rule} {f.file}:{f.line} {f.message}" for f in found]


def _code(path: Path) -> str:
    """A Python file's code without its docstrings and comments."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


@pytest.mark.parametrize("task", [t for t in MIX["tasks"] if "broken" in t["candidates"]], ids=cid)
def test_broken_candidate_differs_from_the_honest_one_in_a_kernel_only(task):
    honest, broken = MIX_DIR / task["dir"] / "solution", MIX_DIR / task["dir"] / "broken"
    assert _code(honest / "model_new.py") == _code(broken / "model_new.py")
    names = sorted(p.name for p in (honest / "kernels").iterdir())
    assert names == sorted(p.name for p in (broken / "kernels").iterdir())
    changed = [n for n in names if (honest / "kernels" / n).read_text() != (broken / "kernels" / n).read_text()]
    assert changed and all(n.endswith(".cu") and not n.endswith("_binding.cpp") for n in changed), changed


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_carry_copies_the_pinned_files_out_of_a_git_repository(tmp_path):
    repo = tmp_path / "kb"
    repo.mkdir()
    _git(repo, "init", "-q")
    for t in MIX["tasks"]:
        f = repo / "KernelBench" / f"level{t['level']}" / t["file"]
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"# stand-in for {t['file']}\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "tasks")
    commit = _git(repo, "rev-parse", "HEAD")
    carry = [
        sys.executable,
        str(ROOT / "benchmarks" / "kb_mix_carry.py"),
        "--repo",
        str(repo / ".git"),
        "--commit",
        commit,
    ]
    p = subprocess.run([*carry, "--dest", str(tmp_path / "dest")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    for t in MIX["tasks"]:
        got = tmp_path / "dest" / "KernelBench" / f"level{t['level']}" / t["file"]
        assert got.read_text() == f"# stand-in for {t['file']}\n"
    assert json.loads((tmp_path / "dest" / "SOURCE.json").read_text())["commit"] == commit
    # a file missing at that commit: exit 1, and the old destination is left as it was
    first = MIX["tasks"][0]
    _git(repo, "rm", "-q", f"KernelBench/level{first['level']}/{first['file']}")
    _git(repo, "commit", "-q", "-m", "drop one")
    p = subprocess.run(
        [*carry[:-1], _git(repo, "rev-parse", "HEAD"), "--dest", str(tmp_path / "dest")], capture_output=True, text=True
    )
    assert p.returncode == 1 and first["file"] in p.stderr
    assert (tmp_path / "dest" / "SOURCE.json").is_file() and not (tmp_path / "dest.tmp").exists()


def task_file(kb: Path, level: int, problem: int) -> Path:
    for base in (kb / "KernelBench" / f"level{level}", kb / f"level{level}"):
        hits = sorted(base.glob(f"{problem}_*.py")) if base.is_dir() else []
        if hits:
            return hits[0]
    raise FileNotFoundError(f"level{level}/{problem}_*.py under {kb}")


needs_kb = pytest.mark.skipif(
    not KB, reason="set CUDA_AGENT_KERNELBENCH to a KernelBench checkout (benchmarks/kb_mix_carry.py)"
)


@needs_kb
@pytest.mark.parametrize("cand", CANDIDATES, ids=cid)
def test_workspace_on_the_kernelbench_task_passes_check(cand, tmp_path, cache_env):
    t, variant = cand
    f = task_file(Path(KB), t["level"], t["problem"])
    assert f.name == t["file"]
    task = Task.from_file(f)
    assert task.precision == "fp32"
    ws = init_workspace(task, tmp_path / "ws")
    copy_solution(MIX_DIR / t["dir"] / variant, ws)
    staged = stage(ws, tmp_path / "staged", task)
    assert staged.sources == read_agent_sources(ws)
    bad = [f for f in workspace_findings(staged) if f.severity is Severity.REJECT or f.severity is Severity.WARN]
    assert bad == [], [f"{x.rule}: {x.message}" for x in bad]


def _module(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@needs_kb
@pytest.mark.parametrize("task", MIX["tasks"], ids=cid)
def test_model_new_has_the_reference_constructor_and_parameters(task, monkeypatch):
    import inspect

    import torch

    ref = _module(task_file(Path(KB), task["level"], task["problem"]), f"kbtask_{task['dir']}")
    # model_new.py imports the compiled extension at the top; a stand-in module is enough to build ModelNew
    monkeypatch.setitem(sys.modules, "cuda_extension", types.ModuleType("cuda_extension"))
    new = _module(MIX_DIR / task["dir"] / "solution" / "model_new.py", f"kbnew_{task['dir']}")
    with torch.device("meta"):  # shapes only: no 8192 x 8192 weights in this process
        init = ref.get_init_inputs()
        m, n = ref.Model(*init), new.ModelNew(*init)
    want = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert {k: tuple(v.shape) for k, v in n.state_dict().items()} == want
    arity = lambda f: len(inspect.signature(f).parameters)  # noqa: E731
    assert arity(n.forward) == arity(m.forward)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("cand", CANDIDATES, ids=cid)
def test_every_kernel_compiles_with_nvcc(cand, tmp_path):
    from cuda_agent.eval.build.toolchain import toolchain

    t, variant = cand
    d = MIX_DIR / t["dir"] / variant
    tc = toolchain("9.0")
    for cu in sorted((d / "kernels").glob("*.cu")):
        p = subprocess.run(tc.nvcc_cmd(cu, tmp_path / (cu.stem + ".o"), d), capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
