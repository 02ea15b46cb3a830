"""Issue 34: a task's precision follows its own tensors when it declares none (CPU only).

The bundled bf16 task (examples/silu_mul_bf16, no PRECISION line) is inferred as bf16 from its two
inputs without allocating them, so its honest bf16 kernel passes the static checks while the same
kernel doing fp8 does not; fp16, fp64, mixed, int-index and huge tasks; an explicit PRECISION wins;
findings name the precision and its source; `init` and `lint-task` print the precision line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT

from cuda_agent.cli.main import main
from cuda_agent.eval.checks.gate import workspace_findings
from cuda_agent.eval.checks.static import check_sources
from cuda_agent.eval.judge.result import Severity
from cuda_agent.task import Task, precision
from cuda_agent.task.precision import decide, infer_precision
from cuda_agent.task.workspace import read_agent_sources, stage

SILU = ROOT / "examples" / "silu_mul_bf16"
BAG = ROOT / "examples" / "embedding_bag_sum"


def task_source(
    inputs: str, init: str = "", forward: str = "return x", args: str = "x", init_inputs: str = "[]", extra: str = ""
) -> str:
    return textwrap.dedent(f"""\
        import torch
        import torch.nn as nn
        {extra}

        class Model(nn.Module):
            def __init__(self, *args):
                super().__init__()
                {init or "pass"}

            def forward(self, {args}):
                {forward}


        def get_inputs():
            return {inputs}


        def get_init_inputs():
            return {init_inputs}
        """)


@pytest.fixture(autouse=True)
def _fresh(cache_env, monkeypatch):
    """Every test infers afresh: its own cache dir (cache_env) and an empty in-process memo."""
    monkeypatch.setattr(precision, "_memo", {})


def _lowered(findings):
    return [f for f in findings if f.rule == "lowered-precision" and f.severity is Severity.REJECT]


# --------------------------------------------------------------------------- inference


def test_undeclared_bf16_task_is_bf16_from_its_inputs():
    t = Task.from_file(SILU / "task.py")
    assert "PRECISION =" not in t.source
    assert t.precision == "bf16" and t.atol == t.rtol == 5e-2
    assert t.precision_source == "inferred from inputs: bfloat16 x2"
    assert t.dtypes == ("bfloat16",)
    assert t.describe_precision() == (
        "precision bf16 (inferred from inputs: bfloat16 x2), atol 0.05 rtol 0.05 (the bf16 defaults)"
    )


@pytest.mark.slow
def test_fp16_fp64_and_scalar_inputs():
    fp16 = Task.from_source(task_source("[torch.randn(64, 64).half(), 0.5]", args="x, s"))
    assert (fp16.precision, fp16.atol) == ("fp16", 2e-2)
    assert fp16.precision_source == "inferred from inputs: float16 x1, scalar x1"
    fp64 = Task.from_source(task_source("[torch.randn(64, 64, dtype=torch.float64)]"))
    assert (fp64.precision, fp64.atol, fp64.precision_source) == ("fp64", 1e-5, "inferred from inputs: float64 x1")


@pytest.mark.slow
def test_mixed_task_takes_the_lowest_and_says_why():
    # fp32 parameters (an RMSNorm-like weight) with bf16 inputs on the GPU: the kernel must read bf16
    src = task_source(
        '[torch.randn(8, 4096, dtype=torch.bfloat16, device="cuda")]',
        init="self.weight = nn.Parameter(torch.ones(4096))",
        forward="return (x.float() * self.weight).to(x.dtype)",
    )
    t = Task.from_source(src)
    assert t.precision == "bf16"
    assert t.precision_source.startswith(
        "inferred from inputs: bfloat16 x1; parameters: float32 x1 (mixed bf16/fp32: bf16"
    )
    assert t.dtypes == ("bfloat16", "float32")
    # fp32 inputs whose forward returns bf16: the candidate writes bf16, so bf16 it is
    out = Task.from_source(task_source("[torch.randn(16, 16)]", forward="return (x * 2).to(torch.bfloat16)"))
    assert out.precision == "bf16" and "outputs: bfloat16 x1" in out.precision_source


@pytest.mark.slow
def test_explicit_precision_wins_and_tolerances_can_be_declared():
    src = (SILU / "task.py").read_text()
    t = Task.from_source(src + '\nPRECISION = "fp32"\n')
    assert (t.precision, t.precision_source, t.atol) == ("fp32", "declared", 1e-2)
    assert t.dtypes == ("bfloat16",)  # still known: its bf16 tensors are loaded and stored as they are
    t = Task.from_source(src + "\nATOL = 1e-3\n")
    assert (t.precision, t.atol, t.rtol) == ("bf16", 1e-3, 5e-2)
    assert t.describe_precision().endswith("atol 0.001 rtol 0.05 (ATOL declared, the other the bf16 default)")


@pytest.mark.slow
def test_int_index_tasks_keep_fp32_rules():
    bag = Task.from_file(BAG / "task.py")  # names no float dtype: fp32 without running anything
    assert (bag.precision, bag.precision_source) == ("fp32", precision.DEFAULT)
    # the same kind of task, run on meta tensors (the comment names "half", so the probe runs)
    src = task_source(
        "[torch.randint(0, 1 << 20, (64, 32))]  # half of the rows",
        args="idx",
        init="self.bag = nn.EmbeddingBag(1 << 20, 128, mode='sum')",
        forward="return self.bag(idx)",
    )
    t = Task.from_source(src)
    assert (t.precision, t.precision_source) == ("fp32", "inferred from inputs: int64 x1; parameters: float32 x1")
    ints = Task.from_source(
        task_source("[torch.randint(0, 9, (64, 32))]", forward="return x.sum(dim=1)", extra="# no half precision here")
    )
    assert ints.precision == "fp32" and ints.precision_source.startswith(
        "default: no floating-point tensors (inputs: int64"
    )


@pytest.mark.slow
def test_huge_task_is_inferred_without_allocating_it():
    # 2^40 fp16 elements (2 TB) as an input and a 2^36-element bf16 parameter (128 GB): meta tensors only
    src = task_source(
        "[torch.randn(1 << 20, 1 << 20, dtype=torch.float16, device='cuda').cuda()]",
        init="self.w = nn.Parameter(torch.empty(1 << 18, 1 << 18, dtype=torch.bfloat16)).cuda()",
        forward="return x * self.w[0, 0]",
    )
    # in a fresh interpreter, so that RUSAGE_CHILDREN covers the probe's processes alone (this test
    # process has run compilers of gigabytes by now in a full suite)
    code = (
        "import json, resource, sys; from cuda_agent.task import precision; "
        "got, why = precision.run_probe(sys.stdin.read()); "
        "print(json.dumps([got, why, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        input=src,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(precision.__file__).resolve().parents[2])},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got, why, maxrss = json.loads(out.stdout.strip().splitlines()[-1])
    assert why == "" and got is not None and got["stage"] == "meta", why
    assert maxrss < 2 << 20  # KiB: under 2 GiB for any child
    assert decide(got).precision == "bf16"


def test_untouched_fp32_sources_run_nothing(monkeypatch):
    def no_probe(*a, **k):
        raise AssertionError("the probe ran")

    monkeypatch.setattr(precision, "run_probe", no_probe)
    t = Task.from_file(ROOT / "examples" / "gelu_chain" / "task.py")
    assert (t.precision, t.precision_source) == ("fp32", precision.DEFAULT)


def test_inference_is_cached_on_disk(monkeypatch, cache_env):
    src = (SILU / "task.py").read_text()
    first = infer_precision(src)
    assert list((cache_env / "precision").glob("*.json"))
    monkeypatch.setattr(precision, "_memo", {})
    monkeypatch.setattr(precision, "run_probe", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran again")))
    assert infer_precision(src) == first


def test_a_task_that_does_not_run_falls_back_to_the_dtypes_it_names():
    src = task_source("[torch.randn(16, 16, dtype=torch.float16)]", extra="import no_such_module_anywhere")
    t = Task.from_source(src)
    assert t.precision == "fp16" and t.dtypes == ("float16",)
    assert t.precision_source.startswith("inferred from the dtypes the source names: float16; the task does not run")
    assert "no_such_module_anywhere" in t.precision_source
    # naming nothing below fp32, it stays fp32 and says why
    plain = Task.from_source(task_source("[torch.randn(4).double()]", extra="import no_such_module_anywhere"))
    assert plain.precision == "fp32" and plain.precision_source.startswith("default; the task does not run")


def test_decide_rule_table():
    assert decide({"inputs": {"bfloat16": 2}}).precision == "bf16"
    assert decide({"inputs": {"float16": 1}, "parameters": {"bfloat16": 1}}).precision == "bf16"
    assert decide({"inputs": {"complex64": 1}}).precision == "fp32"
    fp8 = decide({"inputs": {"float8_e4m3fn": 1, "bfloat16": 1}})
    assert fp8.precision == "bf16" and "fp8 counts as bf16" in fp8.source and "float8_e4m3fn" in fp8.dtypes
    cpu = decide({"stage": "cpu", "inputs": {"float32": 1}})
    assert cpu.source == "inferred from inputs: float32 x1 (built on the CPU, meta tensors failed)"
    # outputs are named only where they add a precision
    assert decide({"inputs": {"float32": 1}, "outputs": {"float32": 1}}).source == "inferred from inputs: float32 x1"


# --------------------------------------------------------------------------- static checks


def _silu_sources() -> dict[str, str]:
    return read_agent_sources(SILU / "solution")


def test_honest_bf16_kernel_passes_under_the_inferred_precision_and_fp8_does_not():
    t = Task.from_file(SILU / "task.py")
    kw = {"precision": t.precision, "precision_source": t.precision_source, "task_dtypes": t.dtypes}
    assert _lowered(check_sources(_silu_sources(), **kw)) == []
    fp8 = _silu_sources()
    fp8["kernels/silu_mul.cu"] = (
        fp8["kernels/silu_mul.cu"]
        .replace("#include <cuda_runtime.h>", "#include <cuda_runtime.h>\n#include <cuda_fp8.h>")
        .replace("return a / (1.0f + __expf(-a)) * b;", "return float(__nv_fp8_e4m3(a / (1.0f + __expf(-a)))) * b;")
    )
    bad = _lowered(check_sources(fp8, **kw))
    assert bad and all(f.file == "kernels/silu_mul.cu" for f in bad)
    msg = bad[0].message
    assert "__nv_fp8_e4m3" in msg and "the task is bf16 (inferred from inputs: bfloat16 x2)" in msg
    assert "fp8 and narrower types are below it" in msg and "compute in fp32" not in msg


def test_under_fp32_rules_the_advice_says_how_a_task_becomes_bf16():
    # the old behaviour, now with the precision and its source named: an fp32 task without bf16 tensors
    t = Task.from_file(ROOT / "examples" / "gelu_chain" / "task.py")
    bad = _lowered(
        check_sources(_silu_sources(), precision=t.precision, precision_source=t.precision_source, task_dtypes=t.dtypes)
    )
    assert bad
    msg = bad[0].message
    assert f"the task is fp32 ({precision.DEFAULT})" in msg and "compute in fp32" in msg
    assert 'PRECISION = "bf16"' in msg


def test_declared_fp32_task_with_bf16_inputs_allows_their_storage_not_bf16_math():
    t = Task.from_source((SILU / "task.py").read_text() + '\nPRECISION = "fp32"\n')
    kw = {"precision": t.precision, "precision_source": t.precision_source, "task_dtypes": t.dtypes}
    assert _lowered(check_sources(_silu_sources(), **kw)) == []  # loads, stores, conversions: fp32 math
    math = _silu_sources()
    math["kernels/silu_mul.cu"] += (
        "\n__device__ __nv_bfloat162 mul2(__nv_bfloat162 x, __nv_bfloat162 y) { return __hmul2(x, y); }\n"
    )
    bad = _lowered(check_sources(math, **kw))
    assert [f.message.split(" ")[0] for f in bad] == ["__hmul2"]
    assert "the task is fp32 (declared)" in bad[0].message and "bfloat16 tensors may be loaded" in bad[0].message
    # without the task's dtypes (a caller that does not know them) every bf16 name is below fp32
    assert len(_lowered(check_sources(_silu_sources(), precision="fp32"))) > 1


def test_workspace_check_of_the_bf16_example_is_clean(tmp_path, capsys):
    ws = tmp_path / "ws"
    assert main(["init", str(SILU / "task.py"), "-o", str(ws), "--solution", str(SILU / "solution")]) == 0
    out = capsys.readouterr().out
    assert (
        "precision bf16 (inferred from inputs: bfloat16 x2), atol 0.05 rtol 0.05 (the bf16 defaults)"
        in out.splitlines()
    )
    assert json.loads((ws / ".cuda-agent" / "task.json").read_text())["precision"] == "bf16"
    assert main(["check", str(ws)]) == 0
    staged = stage(ws, tmp_path / "staged")
    assert staged.task.precision == "bf16"
    assert [f for f in workspace_findings(staged) if f.severity is Severity.REJECT] == []


def test_init_prints_fp32_line_for_an_fp32_task(tmp_path, capsys):
    assert main(["init", str(BAG / "task.py"), "-o", str(tmp_path / "ws")]) == 0
    assert (
        f"precision fp32 ({precision.DEFAULT}), atol 0.01 rtol 0.01 (the fp32 defaults)"
        in capsys.readouterr().out.splitlines()
    )


@pytest.mark.slow
def test_lint_task_prints_the_precision_line(tmp_path, capsys):
    f = tmp_path / "small_silu.py"
    f.write_text(
        (SILU / "task.py").read_text().replace("TOKENS = 4096", "TOKENS = 64").replace("HIDDEN = 14336", "HIDDEN = 256")
    )
    main(["lint-task", str(f), "--device", "cpu", "--seeds", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "precision bf16 (inferred from inputs: bfloat16 x2), atol 0.05 rtol 0.05 (the bf16 defaults)"
    assert main(["lint-task", str(f), "--device", "cpu", "--seeds", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["precision"], out["precision_source"], out["atol"]) == (
        "bf16",
        "inferred from inputs: bfloat16 x2",
        0.05,
    )


HALF_CU = """\
#include <cuda_fp16.h>
#include <cuda_runtime.h>
__global__ void mul(const __half2* a, const __half2* b, __half2* o, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) o[i] = __hmul2(a[i], b[i]);
}
"""


def test_undeclared_fp16_and_mixed_tasks_name_their_precision_in_findings_and_init(tmp_path, capsys):
    fp16_src = task_source(
        "[torch.randn(64, 64).half(), torch.randn(64, 64).half()]", args="x, y", forward="return x * y"
    )
    f = tmp_path / "mul_fp16.py"
    f.write_text(fp16_src)
    assert main(["init", str(f), "-o", str(tmp_path / "ws")]) == 0
    assert (
        "precision fp16 (inferred from inputs: float16 x2), atol 0.02 rtol 0.02 (the fp16 defaults)"
        in capsys.readouterr().out.splitlines()
    )
    t = Task.from_source(fp16_src)
    kw = {"precision": t.precision, "precision_source": t.precision_source, "task_dtypes": t.dtypes}
    assert _lowered(check_sources({"kernels/mul.cu": HALF_CU}, **kw)) == []  # half2 math in an fp16 task
    fp8 = HALF_CU.replace("#include <cuda_runtime.h>", "#include <cuda_runtime.h>\n#include <cuda_fp8.h>").replace(
        "o[i] = __hmul2(a[i], b[i]);", "o[i] = __hmul2(a[i], __half2(__nv_fp8x2_e4m3(b[i])));"
    )
    bad = _lowered(check_sources({"kernels/mul.cu": fp8}, **kw))
    assert bad
    msg = bad[0].message
    assert "the task is fp16 (inferred from inputs: float16 x2)" in msg and "compute in fp16" in msg
    assert "compute in fp32" not in msg
    # the same half2 kernel under an fp32 task is below it, and the advice is fp32's
    fp32 = _lowered(check_sources({"kernels/mul.cu": HALF_CU}, precision="fp32", precision_source="declared"))
    assert fp32 and "the task is fp32 (declared)" in fp32[0].message and "compute in fp32" in fp32[0].message
    # mixed: bf16 inputs with an fp32 parameter; fp8 is named against bf16 and the mixed source
    mixed = Task.from_source(
        task_source(
            "[torch.randn(8, 4096, dtype=torch.bfloat16)]",
            init="self.weight = nn.Parameter(torch.ones(4096))",
            forward="return (x.float() * self.weight).to(x.dtype)",
        )
    )
    bad = _lowered(
        check_sources(
            {"kernels/mul.cu": fp8},
            precision=mixed.precision,
            precision_source=mixed.precision_source,
            task_dtypes=mixed.dtypes,
        )
    )
    assert bad and f"the task is bf16 ({mixed.precision_source})" in bad[0].message
    assert "mixed bf16/fp32" in bad[0].message and "compute in bf16" in bad[0].message
