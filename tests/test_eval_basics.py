"""CPU tests of the evaluator's pure parts and its GPU-free path: reward table,
task loading, workspace creation, the split nvcc build and its cache, the
no-GPU result, the JSON schema and the CLI's bad-input handling."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch
from conftest import FIXTURES, ROOT

from cuda_agent.cli.main import main
from cuda_agent.eval.build.workspace import build
from cuda_agent.eval.judge.result import EvalResult, Status
from cuda_agent.eval.judge.reward import milestone_reward
from cuda_agent.eval.shared.compare import compare_outputs
from cuda_agent.task import Task, TaskError
from cuda_agent.task.workspace import init_workspace, stage

LANE = FIXTURES / "cpu_lane"
HAS_NVCC = shutil.which("nvcc") is not None


# ---------------------------------------------------------------- reward
@pytest.mark.parametrize(
    "correct,t,te,tc,expected",
    [
        (False, 0.1, 1.0, 1.0, -1),  # wrong is -1 however fast
        (True, 0.5, 1.0, 1.0, 3),  # faster than both
        (True, 0.5, 1.0, 0.4, 2),  # faster than eager only
        (True, 1.0, 1.0, 1.0, 1),  # correct, not faster
        (True, 0.5, 0.4, 1.0, 1),  # beats compile but not eager: still 1
        (True, 0.95, 1.0, 1.0, 1),  # exactly 5 % faster is not "more than 5 %"
        (True, 0.9499, 1.0, 1.0, 3),  # just past the edge
        (True, 0.9499, 1.0, 0.9999, 3),
        (True, 0.9501, 1.0, 2.0, 1),  # just short of the eager edge
        (True, 0.95 * 2.0 - 1e-9, 2.0, 2.0, 3),
    ],
)
def test_milestone_reward_table(correct, t, te, tc, expected):
    assert milestone_reward(correct, t, te, tc) == expected


def test_reward_rejects_nonsense_times():
    assert milestone_reward(True, float("nan"), 1.0, 1.0) == 1
    assert milestone_reward(True, 0.0, 1.0, 1.0) == 1


# ---------------------------------------------------------------- tasks
def test_task_loads_and_hash_tracks_content(tmp_path):
    t = Task.from_file(LANE / "task.py")
    assert t.name == "cpu_lane" and t.precision == "fp32" and t.atol == t.rtol == 1e-2
    f = tmp_path / "t2.py"
    f.write_text(t.source.replace("* 2.0", "* 3.0") + "\nPRECISION = 'bf16'\n")
    t2 = Task.from_file(f)
    assert t2.hash != t.hash and t2.precision == "bf16" and t2.atol == 5e-2


@pytest.mark.parametrize(
    "source,needle",
    [
        ("def get_inputs(): pass\ndef get_init_inputs(): pass\n", "missing Model"),
        ("class Model:\n  def forward(self): pass\ndef get_inputs(): pass\n", "missing get_init_inputs"),
        ("class Model:\n  pass\ndef get_inputs(): pass\ndef get_init_inputs(): pass\n", "no forward"),
        ("def broken(:\n", "not valid Python"),
        (
            "class Model:\n  def forward(self): pass\ndef get_inputs(): pass\ndef get_init_inputs(): pass\nPRECISION='fp8'\n",
            "PRECISION",
        ),
    ],
)
def test_bad_task_files_raise_task_error(tmp_path, source, needle):
    f = tmp_path / "bad.py"
    f.write_text(source)
    with pytest.raises(TaskError, match=needle):
        Task.from_file(f)


def test_missing_task_file():
    with pytest.raises(TaskError, match="not found"):
        Task.from_file("/nonexistent/task.py")


# ---------------------------------------------------------------- workspace
def test_workspace_layout_and_protection(tmp_path, cache_env):
    ws = init_workspace(Task.from_file(LANE / "task.py"), tmp_path / "ws")
    for rel in (
        "model.py",
        "model_new.py",
        "binding.cpp",
        "binding_registry.h",
        "SKILL.md",
        "tools/compile",
        "tools/verify",
        "tools/profile",
    ):
        assert (ws / rel).is_file(), rel
    assert (ws / "kernels").is_dir()
    assert not (ws / "model.py").stat().st_mode & 0o222  # read-only
    assert (ws / "model_new.py").stat().st_mode & 0o200  # writable
    assert (
        "cuda_agent eval" in (ws / "tools/verify").read_text() and "--phase verify" in (ws / "tools/verify").read_text()
    )
    with pytest.raises(FileExistsError):
        init_workspace(Task.from_file(LANE / "task.py"), ws)


def test_stage_takes_protected_files_from_pristine_copy(tmp_path, cache_env):
    ws = init_workspace(Task.from_file(LANE / "task.py"), tmp_path / "ws")
    for rel in ("binding.cpp", "model.py"):
        (ws / rel).chmod(0o644)
        (ws / rel).write_text("// tampered\n")
    (ws / "kernels" / "k.cu").write_text("// my kernel\n")
    st = stage(ws, tmp_path / "staged")
    assert "tampered" not in (st.root / "binding.cpp").read_text()
    assert (st.root / "model.py").read_text() == (LANE / "task.py").read_text()
    assert (st.root / "kernels" / "k.cu").read_text() == "// my kernel\n"
    assert {f[1] for f in st.findings if f[0] == "protected-file-modified"} == {"binding.cpp", "model.py"}
    assert set(st.sources) == {"model_new.py", "kernels/k.cu"}


# ---------------------------------------------------------------- compare
def test_compare_catches_nan_shape_and_tolerance():
    ref = [torch.randn(8, 8)]
    meta = [{"tensor": True, "plain": True, "device": "cuda:0", "aliases_input": False}]
    assert compare_outputs("a", ref, [ref[0] + 1e-4], meta, atol=1e-2, rtol=1e-2).passed
    bad = ref[0].clone()
    bad[3, 3] = float("nan")
    r = compare_outputs("b", ref, [bad], meta, atol=1e-2, rtol=1e-2)
    assert not r.passed and "NaN" in r.message
    assert not compare_outputs("c", ref, [ref[0].t().contiguous()[:4]], meta, atol=1e-2, rtol=1e-2).passed
    off = compare_outputs("d", ref, [ref[0] * 1.5], meta, atol=1e-2, rtol=1e-2)
    assert not off.passed and off.rel_l2_err == pytest.approx(0.5, rel=1e-6)
    alias = [{**meta[0], "aliases_input": True}]
    assert "shares storage" in compare_outputs("e", ref, ref, alias, atol=1e-2, rtol=1e-2).message


# ---------------------------------------------------------------- build
TWO_KERNELS = {
    "kernels/a.cu": "#include <cuda_runtime.h>\n__global__ void ka(float* x){ x[threadIdx.x] *= 2.f; }\n"
    'extern "C" void la(float* x, cudaStream_t s){ ka<<<1, 32, 0, s>>>(x); }\n',
    "kernels/b.cu": '#include <cuda_runtime.h>\n#include "shared.cuh"\n__global__ void kb(float* x){ x[threadIdx.x] = twice(x[threadIdx.x]); }\n'
    'extern "C" void lb(float* x, cudaStream_t s){ kb<<<1, 32, 0, s>>>(x); }\n',
    "kernels/shared.cuh": "#pragma once\n__device__ inline float twice(float v){ return 2.f * v; }\n",
}


@pytest.mark.slow
@pytest.mark.skipif(not HAS_NVCC, reason="nvcc not installed")
def test_split_build_recompiles_only_the_edited_kernel(tmp_path, cache_env):
    ws = init_workspace(Task.from_file(LANE / "task.py"), tmp_path / "ws")
    shutil.copytree(LANE / "kernels", ws / "kernels", dirs_exist_ok=True)
    for rel, text in TWO_KERNELS.items():
        (ws / rel).write_text(text)
    cache = cache_env / "build"
    first = build(ws, cache, arch="9.0", timeout=600)
    assert first.ok, first.log
    assert set(first.rebuilt) >= {"kernels/a.cu", "kernels/b.cu"}
    again = build(ws, cache, arch="9.0", timeout=600)
    assert again.ok and again.cached and again.rebuilt == [] and again.so_path == first.so_path
    (ws / "kernels/a.cu").write_text(TWO_KERNELS["kernels/a.cu"] + "// edited\n")
    edited = build(ws, cache, arch="9.0", timeout=600)
    assert edited.ok and edited.rebuilt == ["kernels/a.cu"] and edited.so_path != first.so_path
    # a header change reaches the unit that includes it, and only that one
    (ws / "kernels/shared.cuh").write_text(TWO_KERNELS["kernels/shared.cuh"] + "// edited\n")
    hdr = build(ws, cache, arch="9.0", timeout=600)
    assert hdr.ok and hdr.rebuilt == ["kernels/b.cu"]


@pytest.mark.skipif(not HAS_NVCC, reason="nvcc not installed")
@pytest.mark.slow
def test_compile_error_is_reported_with_the_compiler_output(tmp_path, cache_env):
    ws = init_workspace(Task.from_file(LANE / "task.py"), tmp_path / "ws")
    (ws / "kernels/bad.cu").write_text("__global__ void k(float* x) { x[0] = undefined_symbol; }\n")
    r = build(ws, cache_env / "build", arch="9.0", timeout=600)
    assert not r.ok and not r.timed_out and "undefined_symbol" in r.log and "kernels/bad.cu" in r.log


@pytest.mark.skipif(not HAS_NVCC, reason="nvcc not installed")
def test_compile_that_never_ends_is_killed(tmp_path, cache_env, monkeypatch):
    ws = init_workspace(Task.from_file(LANE / "task.py"), tmp_path / "ws")
    (ws / "kernels/k.cu").write_text("__global__ void k() {}\n")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvcc").write_text("#!/bin/sh\nsleep 600 & sleep 600\n")  # a child too: the group must die
    (fake / "nvcc").chmod(0o755)
    from cuda_agent.eval.build import workspace as build_mod
    from cuda_agent.eval.build.toolchain import Toolchain

    used = []

    def fake_toolchain(arch):
        used.append(arch)
        return Toolchain(
            nvcc=str(fake / "nvcc"),
            cxx=str(fake / "nvcc"),
            cuda_home="",
            include_dirs=(),
            lib_dirs=(),
            torch_libs=(),
            defines=(),
            arch=arch,
            versions="fake",
        )

    monkeypatch.setattr(build_mod, "toolchain", fake_toolchain)  # where build() looks it up
    import time

    t0 = time.monotonic()
    r = build(ws, cache_env / "build", arch="9.0", timeout=2)
    assert not r.ok and r.timed_out and time.monotonic() - t0 < 30
    assert used == ["9.0"]  # the fake compiler ran, not the machine's


def test_concurrent_builds_compile_a_shared_unit_once(tmp_path, cache_env, monkeypatch):
    """Several evaluations at once (the RL warm-up's rollouts) share units: the pristine binding.cpp always,
    the same answer often. Each unit key is compiled once; the other builds wait for its object."""
    from concurrent.futures import ThreadPoolExecutor

    from cuda_agent.eval.build import workspace as build_mod
    from cuda_agent.eval.build.toolchain import Toolchain

    log = tmp_path / "compiles.txt"
    fake = tmp_path / "bin" / "cc"
    fake.parent.mkdir()
    # a compiler that takes a second and writes its -o file; every call leaves a line
    fake.write_text(
        '#!/bin/sh\nout=""; prev=""\nfor a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done\n'
        f'echo "$out" >> {log}\nsleep 1\necho obj > "$out"\n'
    )
    fake.chmod(0o755)
    tc = Toolchain(
        nvcc=str(fake),
        cxx=str(fake),
        cuda_home="",
        include_dirs=(),
        lib_dirs=(),
        torch_libs=(),
        defines=(),
        arch="9.0",
        versions="fake",
    )
    monkeypatch.setattr(build_mod, "toolchain", lambda arch: tc)
    roots = []
    for i in range(3):
        ws = init_workspace(Task.from_file(LANE / "task.py"), tmp_path / f"ws{i}")
        (ws / "kernels/k.cu").write_text("__global__ void k() {}\n")
        roots.append(ws)
    cache = cache_env / "build"
    with ThreadPoolExecutor(3) as ex:
        results = list(ex.map(lambda r: build(r, cache, arch="9.0", timeout=120, check_symbols=False), roots))
    assert all(r.ok for r in results), [r.log for r in results]
    compiles = [ln for ln in log.read_text().splitlines() if ln.endswith(".tmp.o")]
    assert len(compiles) == 2, compiles  # kernels/k.cu and binding.cpp, once each across the three builds
    assert len({r.so_path for r in results}) == 1  # the same objects, so the same module


# ---------------------------------------------------------------- CLI
SCHEMA = {
    "status",
    "reward",
    "correct",
    "time_ms",
    "eager_ms",
    "compile_ms",
    "speedup_vs_eager",
    "speedup_vs_compile",
    "findings",
    "gpu",
    "torch",
}


@pytest.mark.slow
@pytest.mark.skipif(not HAS_NVCC, reason="nvcc not installed")
def test_eval_without_gpu_compiles_and_says_so(tmp_path, cache_env, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    ws = init_workspace(Task.from_file(LANE / "task.py"), tmp_path / "ws")
    shutil.copytree(LANE / "kernels", ws / "kernels", dirs_exist_ok=True)
    shutil.copy(LANE / "model_new.py", ws / "model_new.py")
    assert main(["eval", str(ws), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert SCHEMA <= set(d) and d["status"] == "no_gpu" and d["gpu"] is None and d["reward"] is None
    assert EvalResult.from_dict(d).status is Status.NO_GPU
    assert main(["eval", str(ws)]) == 0
    captured = capsys.readouterr()
    assert "no_gpu" in captured.out and "need a CUDA GPU" in captured.out


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["eval", "/nonexistent/ws"], "workspace not found"),
        (["eval"], "give a workspace"),
        (["eval", "--solution", "x.py"], "needs --task"),
        (["eval", "--task", "/nonexistent/t.py", "--solution", "x.py"], "not found"),
        (["init", "/nonexistent/t.py", "-o", "/tmp/x"], "not found"),
    ],
)
def test_bad_input_exits_2_with_one_line(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_not_a_task_exits_2_via_subprocess(tmp_path):
    f = tmp_path / "nota.py"
    f.write_text("x = 1\n")
    p = subprocess.run(
        [sys.executable, "-m", "cuda_agent", "init", str(f), "-o", str(tmp_path / "w")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert p.returncode == 2 and "not a KernelBench task" in p.stderr and "Traceback" not in p.stderr


def test_result_json_round_trip():
    r = EvalResult(status=Status.INCORRECT, reward=-1, correct=False, message="m")
    assert EvalResult.from_dict(json.loads(r.to_json())) == r


def test_calls_per_round_grows_for_short_calls_and_is_capped():
    from cuda_agent.eval.shared.events import MAX_TIMED, calls_per_round

    assert calls_per_round(50, 0.01) == 50  # 10 ms calls: the configured count
    assert calls_per_round(50, 30e-6) == MAX_TIMED  # 30 us calls: capped
    assert 50 < calls_per_round(50, 500e-6) < MAX_TIMED


@pytest.mark.slow
@pytest.mark.skipif(not HAS_NVCC, reason="nvcc not installed")
def test_compile_phase_needs_no_gpu(tmp_path, cache_env, capsys):
    ws = init_workspace(Task.from_file(LANE / "task.py"), tmp_path / "ws")
    shutil.copytree(LANE / "kernels", ws / "kernels", dirs_exist_ok=True)
    shutil.copy(LANE / "model_new.py", ws / "model_new.py")
    assert main(["eval", str(ws), "--phase", "compile", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["status"] == "ok" and d["message"] == "compiled" and d["reward"] is None and not d["correct"]
