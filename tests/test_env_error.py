"""Issue 17 item 6: a machine that cannot build is not a wrong candidate. A missing toolkit header
(cublasLt.h without the nvidia-cublas wheel) gives status env_error, no reward, the fix in the
message, and nothing cached; a forged message or the candidate's own missing header does not."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import ROOT

from cuda_agent.eval.api import evaluate_workspace
from cuda_agent.eval.build import env_check
from cuda_agent.eval.build import toolchain as toolchain_mod
from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.judge.result import EvalResult, Status
from cuda_agent.pool.jobs import GATE_STATUSES
from cuda_agent.task import Task
from cuda_agent.task.workspace import copy_solution, init_workspace


@dataclass
class FakeToolchain:
    include_dirs: tuple[str, ...]
    cuda_home: str = "/opt/cuda"
    nvcc: str = "/opt/cuda/bin/nvcc"
    cxx: str = "/usr/bin/c++"
    libs: set[str] = field(default_factory=set)

    def lib_flag(self, name: str) -> str | None:
        return f"-l{name}" if name in self.libs else None


@pytest.fixture
def fake_tc(tmp_path, monkeypatch):
    inc = tmp_path / "include"
    inc.mkdir()
    tc = FakeToolchain((str(inc),))
    monkeypatch.setattr(env_check, "toolchain", lambda arch: tc)
    monkeypatch.setattr(env_check, "_SYSTEM_INCLUDE", ())
    return tc, inc


def _compile_error(log: str) -> EvalResult:
    return EvalResult(
        status=Status.COMPILE_ERROR, reward=-1, correct=False, message="compilation failed; see log", log=log
    )


MISSING = (
    "== kernels/k.cu: compile failed (exit 1)\n/tmp/ws/kernels/k.cu:3:10: fatal error: {h}: No such file or directory\n"
)


def test_missing_toolkit_header_is_env_error_with_the_fix(fake_tc):
    r = env_check.classify(_compile_error(MISSING.format(h="cublasLt.h")))
    assert r.status is Status.ENV_ERROR and r.reward is None and not r.correct
    assert "cublasLt.h" in r.message and "pip install nvidia-cublas" in r.message and "not the candidate's" in r.message
    for header, fix in (
        ("cudnn.h", "nvidia-cudnn"),
        ("cuda_runtime.h", "CUDA_HOME"),
        ("torch/extension.h", "reinstall torch"),
        ("Python.h", "python3-dev"),
    ):
        assert fix in env_check.classify(_compile_error(MISSING.format(h=header))).message, header


@pytest.mark.parametrize(
    "log",
    [
        MISSING.format(h="my_helpers.h"),  # the candidate's own header: its compile error
        '/tmp/ws/kernels/k.cu:1:2: error: #error "fatal error: cublasLt.h: No such file or directory"\n',  # forged
        "/tmp/ws/kernels/k.cu:1:2: error: #error k.cu:1:2: fatal error: cublasLt.h: No such file or directory\n",
        'kernels/k.cu(4): error: identifier "foo" is undefined\n',
    ],
)
def test_candidate_faults_stay_compile_errors(fake_tc, log):
    r = env_check.classify(_compile_error(log))
    assert r.status is Status.COMPILE_ERROR and r.reward == -1


def test_a_header_the_machine_has_is_not_an_environment_problem(fake_tc):
    _, inc = fake_tc
    (inc / "cublasLt.h").write_text("// present\n")
    assert env_check.classify(_compile_error(MISSING.format(h="cublasLt.h"))).status is Status.COMPILE_ERROR


def test_missing_compiler_and_library(fake_tc):
    tc, _ = fake_tc
    r = env_check.classify(_compile_error(f"{toolchain_mod.CANNOT_RUN} {tc.nvcc}: No such file or directory\n"))
    assert r.status is Status.ENV_ERROR and "CUDA toolkit" in r.message
    load = EvalResult(
        status=Status.RUNTIME_ERROR,
        reward=-1,
        correct=False,
        message="load: the candidate raised ImportError",
        log="undefined symbol: cublasLtMatmul",
    )
    assert env_check.classify(load).status is Status.ENV_ERROR
    tc.libs.add("cublasLt")
    again = EvalResult(
        status=Status.RUNTIME_ERROR,
        reward=-1,
        correct=False,
        message="load: the candidate raised ImportError",
        log="undefined symbol: cublasLtMatmul",
    )
    assert env_check.classify(again).status is Status.RUNTIME_ERROR  # the library is there: the candidate's fault


def test_pool_does_not_send_an_env_error_to_a_gpu():
    assert Status.ENV_ERROR in GATE_STATUSES


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_cublaslt_example_without_the_wheel(tmp_path, cache_env, monkeypatch):
    """The issue's case end to end: linear_bias_relu's kernel includes cublasLt.h; with the
    nvidia-cublas wheel's include dir hidden from the toolchain, the build cannot find it."""
    if any(Path(d, "cublasLt.h").is_file() for d in ("/usr/include", "/usr/local/include", "/usr/local/cuda/include")):
        pytest.skip("this machine has cublasLt.h outside the wheel; it cannot be hidden")
    # toolchain() looks the wheel dirs up in its own module, for the build, env_check and the symbol check alike
    monkeypatch.setattr(toolchain_mod, "_nvidia_wheel_dirs", lambda: ([], []))
    toolchain_mod.toolchain.cache_clear()
    try:
        ex = ROOT / "examples" / "linear_bias_relu"
        ws = init_workspace(Task.from_file(ex / "task.py"), tmp_path / "ws")
        copy_solution(ex / "solution", ws)
        cfg = EvalConfig(device="cpu", compile_baseline=False)
        r = evaluate_workspace(ws, config=cfg, phase="compile")
        assert r.status is Status.ENV_ERROR and r.reward is None, (r.status, r.message, r.log[-500:])
        assert "pip install nvidia-cublas" in r.message
        again = evaluate_workspace(ws, config=EvalConfig(device="cpu", compile_baseline=False), phase="compile")
        assert again.status is Status.ENV_ERROR and not again.cache.get("result")  # never cached
    finally:
        toolchain_mod.toolchain.cache_clear()
