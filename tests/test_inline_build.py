"""Issue 13: single-file (load_inline) solutions built in the trusted parent with the cached split build."""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

import pytest
from conftest import FIXTURES
from test_pipeline_cpu import cpu_cfg

from cuda_agent.eval.api import evaluate_single_file
from cuda_agent.eval.build import single_file as inline_build
from cuda_agent.eval.judge.result import Status
from cuda_agent.task import Task

LANE = FIXTURES / "cpu_lane"


def test_static_arguments_are_read_from_the_syntax_tree():
    text = textwrap.dedent('''
        from torch.utils.cpp_extension import load_inline
        import torch.utils.cpp_extension as cpp
        HEAD = "#include <cstdint>\\n"
        CUDA = HEAD + r"""__global__ void k() {}"""
        FLAGS = ["-O3", "--use_fast_math"]
        a = load_inline(name="mod_a", cpp_sources="void f();", cuda_sources=[CUDA], functions={"f": "doc"},
                        extra_cuda_cflags=FLAGS, verbose=False)
        b = cpp.load_inline("mod_b", ["int g();"], functions=["g"], extra_cflags=[f"-O2"])
    ''')
    a, b = inline_build.find_calls(text)
    assert a.name == "mod_a" and a.cuda_sources == ("#include <cstdint>\n__global__ void k() {}",)
    assert a.functions == (("f", "doc"),) and a.extra_cuda_cflags == ("-O3", "--use_fast_math")
    assert b.name == "mod_b" and b.cpp_sources == ("int g();",) and b.extra_cflags == ("-O2",)
    src = inline_build.sources(a)
    assert (
        src["main.cpp"].startswith("#include <torch/extension.h>")
        and 'm.def("f", torch::wrap_pybind_function(f), "doc")' in src["main.cpp"]
    )
    assert src["cuda.cu"].splitlines()[:3] == [
        "#include <torch/types.h>",
        "#include <cuda.h>",
        "#include <cuda_runtime.h>",
    ]


@pytest.mark.parametrize(
    "call",
    [
        'load_inline(name=NAME, cpp_sources="x")\nNAME = "a"\nNAME = "b"',  # bound twice: not static
        'load_inline(name="m", cpp_sources=make_source())',
        'load_inline(name="m", cpp_sources="x", **opts)',
        'load_inline(name="m", cpp_sources="x", is_python_module=False)',
        'load_inline(name="m", cpp_sources="x", sycl_sources=["y"])',
    ],
)
def test_dynamic_arguments_leave_the_build_to_the_child(call):
    assert inline_build.find_calls("from torch.utils.cpp_extension import load_inline\n" + call + "\n") is None


@pytest.mark.parametrize(
    "flags,rule",
    [
        ('extra_cflags=["-O3", "-wrapper", "/bin/sh,-c,touch {planted}"]', "process-network"),
        ('extra_cuda_cflags=["-Xcompiler=-wrapper,/bin/sh,-c,touch {planted}"]', "process-network"),
        ('extra_cuda_cflags=["-ccbin", "/tmp/cc"]', "process-network"),
        ('extra_cflags="-B/tmp/tools/"', "process-network"),
        ('extra_cflags=["-fplugin=/tmp/p.so"]', "process-network"),
        ('extra_cflags=["@/tmp/flags"]', "file-access"),
        ('extra_cflags=["-MF", "{planted}"]', "file-access"),
    ],
)
def test_flags_that_run_programs_are_rejected_without_running_the_compiler(tmp_path, flags, rule):
    """The parent compiles static calls with their flags, before any check of the output: a flag that runs a
    program, loads a plugin or touches a file rejects the call unbuilt (where the static checks were skipped)."""
    planted = tmp_path / "planted"
    text = "from torch.utils.cpp_extension import load_inline\n" + (
        f'ext = load_inline(name="m", cpp_sources="int f() {{ return 1; }}", {flags.format(planted=planted)})\n'
    )
    (call,) = inline_build.find_calls(text)
    r = inline_build.build_call(call, tmp_path / "cache", arch="9.0", timeout=60)
    assert not r.ok and r.so_path is None and [f.rule for f in r.findings] == [rule], r.log
    assert "nothing was compiled" in r.findings[0].message and not planted.exists()
    assert not (tmp_path / "cache" / "objects").exists() or not any((tmp_path / "cache" / "objects").iterdir())


@pytest.mark.slow
def test_a_single_file_solution_is_built_once_in_the_parent(tmp_path, cache_env):
    task = Task.from_file(LANE / "task.py")
    sol = tmp_path / "solution.py"
    # a source no other test built (build objects are shared across the test session)
    sol.write_text(
        (LANE / "solution_inline.py")
        .read_text()
        .replace("#include <torch/extension.h>\n", f"#include <torch/extension.h>\n// {uuid.uuid4().hex}\n")
    )
    first = evaluate_single_file(task, sol, config=cpu_cfg(), phase="verify")
    assert first.status is Status.OK and first.correct, (first.message, first.log[-2000:])
    assert first.defences["inline_build"] == "in the evaluator: cpu_lane_inline" and first.cache["build"] is False
    again = evaluate_single_file(task, sol, config=cpu_cfg(reuse_results=False), phase="verify")
    assert again.status is Status.OK and again.cache["build"] is True and again.phases_s["compile"] < 1.0
    # an edit of the source rebuilds; a compile error is the candidate's, from the parent's build
    sol.write_text(sol.read_text().replace("2.f * in[i]", "2.f * in[i] +"))
    broken = evaluate_single_file(task, sol, config=cpu_cfg(reuse_results=False), phase="verify")
    assert broken.status is Status.COMPILE_ERROR and broken.reward == -1 and "cpp_sources" in broken.log


@pytest.mark.slow
def test_the_compile_phase_needs_no_gpu_for_a_static_single_file(tmp_path, cache_env):
    task = Task.from_file(LANE / "task.py")
    r = evaluate_single_file(task, Path(LANE / "solution_inline.py"), config=cpu_cfg(), phase="compile")
    assert r.status is Status.OK and r.message == "compiled", (r.status, r.message, r.log[-1500:])
