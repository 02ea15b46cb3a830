"""Issue 13, part 3: a single file's CUDA text split into a torch-free device unit and a host unit.

An edit of a KernelBench-style CUDA string used to send torch's headers through nvcc's three passes
(56 s for one edit on the H200, 80 s here); split, the edit recompiles the host unit against a
precompiled header and the kernels without torch. The split must refuse what it cannot read, and a
split that does not build must fall back to the one unit load_inline would build.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from cuda_agent.eval.build import single_file as inline_build
from cuda_agent.eval.build import split as sp

ROOT = Path(__file__).resolve().parents[1]
DIAG = ROOT / "examples" / "diag_matmul" / "solution_inline.py"


def _diag_cuda() -> str:
    calls = inline_build.find_calls(DIAG.read_text())
    assert calls and calls[0].cuda_sources
    return "\n".join(calls[0].cuda_sources)


def test_the_bundled_single_file_solution_splits_into_kernels_and_a_torch_host_unit():
    s = sp.split(_diag_cuda())
    assert isinstance(s, sp.Split), s
    assert s.kernels == ("row_scale_scalar", "row_scale_vec4")
    assert "torch" not in s.device and "c10" not in s.device and "__global__ void row_scale_vec4" in s.device
    # the device unit defines a typed launcher per kernel; the host unit declares and calls it
    assert "void __ca_launch_row_scale_vec4(dim3 __ca_grid" in s.device
    assert (
        "row_scale_vec4<<<__ca_grid, __ca_block, __ca_smem, __ca_stream>>>(a, b, out, n_vec, vec_per_row)" in s.device
    )
    assert "__global__" not in s.host and "<<<" not in s.host
    assert "__ca_launch_row_scale_vec4((int)blocks, threads, 0, stream, a.data_ptr<float>()" in s.host
    assert "torch/extension.h" not in s.host and "torch::Tensor diag_scale_rows" in s.host
    decl = s.host.index("void __ca_launch_row_scale_vec4(dim3, dim3, size_t, cudaStream_t")
    assert decl < s.host.index("torch::Tensor diag_scale_rows")


def test_launch_configurations_of_two_to_four_parts_and_no_arguments():
    src = """
#include <torch/extension.h>
struct P { int n; };
__global__ void k(float* x, P p) { x[threadIdx.x] = p.n; }
__global__ void z() {}
void run(torch::Tensor t, cudaStream_t st) {
  k<<<dim3(1, 2), 32>>>(t.data_ptr<float>(), P{3});
  k <<< 1, 32, 64 >>> (t.data_ptr<float>(), P{4});
  z<<<1, 1, 0, st>>>();
}
"""
    s = sp.split(src)
    assert isinstance(s, sp.Split), s
    assert "__ca_launch_k(dim3(1, 2), 32, 0, 0, t.data_ptr<float>(), P{3})" in s.host
    assert "__ca_launch_k(1, 32, 64, 0, t.data_ptr<float>(), P{4})" in s.host
    assert "__ca_launch_z(1, 1, 0, st)" in s.host and "void __ca_launch_z(dim3, dim3, size_t, cudaStream_t);" in s.host
    assert "struct P { int n; };" in s.device and "struct P { int n; };" in s.host  # types go to both units
    tpl = sp.split("template <int N> struct Q { float v[N]; };\n" + src)
    assert isinstance(tpl, sp.Split) and "template <int N> struct Q { float v[N]; };" in tpl.device
    u = sp.split("using namespace torch;\n" + src)
    assert isinstance(u, sp.Split) and "using namespace torch;" in u.host and "using namespace torch;" not in u.device


@pytest.mark.parametrize(
    "src,why",
    [
        (
            "template <typename T> __global__ void k(T* x) {}\nvoid f(torch::Tensor t) { k<float><<<1, 1>>>(t.data_ptr<float>()); }",
            "kernel template",
        ),
        (
            "namespace { __global__ void k(float* x) {} }\nvoid f(torch::Tensor t) { k<<<1, 1>>>(t.data_ptr<float>()); }",
            "namespace",
        ),
        (
            "#ifdef FAST\n#define W 4\n#endif\n__global__ void k(float* x) {}\nvoid f(torch::Tensor t) { k<<<1, 1>>>(t.data_ptr<float>()); }",
            "conditional compilation",
        ),
        (
            "#define LAUNCH(x) k<<<1, 1>>>(x)\n__global__ void k(float* x) {}\nvoid f(torch::Tensor t) { LAUNCH(t.data_ptr<float>()); }",
            "macro that launches",
        ),
        (
            "__global__ void k(float* x, int n = 3) {}\nvoid f(torch::Tensor t) { k<<<1, 1>>>(t.data_ptr<float>()); }",
            "cannot read",
        ),
        (
            "__device__ float g(at::Half h) { return 0; }\n__global__ void k(float* x) {}\nvoid f(torch::Tensor t) { k<<<1, 1>>>(t.data_ptr<float>()); }",
            "torch names in device code",
        ),
        (
            "__global__ void k(float* x) {}\nvoid f(torch::Tensor t) {\n#ifdef __CUDACC__\n k<<<1, 1>>>(t.data_ptr<float>());\n#endif\n}",
            "__CUDACC__",
        ),
        ("void f(torch::Tensor t) { other<<<1, 1>>>(t.data_ptr<float>()); }", "not a kernel defined"),
        (
            "__global__ void c(float* x) {}\n__global__ void p(float* x) { c<<<1, 1>>>(x); }\n"
            "void f(torch::Tensor t) { p<<<1, 1>>>(t.data_ptr<float>()); }",
            "a launch from device code",
        ),
        ("__global__ void k(float* x) {}\nPYBIND11_MODULE(m, m2) {}", "Python module"),
    ],
)
def test_what_it_cannot_read_is_built_as_one_unit(src, why):
    r = sp.split(src)
    assert isinstance(r, str) and why in r, r


def test_comments_and_strings_do_not_confuse_the_scan():
    src = """
// a comment with a brace { and a launch k<<<1,1>>>(x);
__global__ void k(float* x) { /* } */ x[0] = 1; }
void f(torch::Tensor t) { TORCH_CHECK(t.numel() > 0, "need } elements <<<"); k<<<1, 1>>>(t.data_ptr<float>()); }
"""
    s = sp.split(src)
    assert isinstance(s, sp.Split), s
    assert '"need } elements <<<"' in s.host and "__ca_launch_k(1, 1, 0, 0, t.data_ptr<float>())" in s.host


def test_extra_cuda_flags_that_may_change_host_code_keep_one_unit():
    call = inline_build.find_calls(DIAG.read_text())[0]
    assert inline_build.split_reason(call) is None
    assert inline_build.split_reason(dataclasses.replace(call, extra_cuda_cflags=("-O3", "--use_fast_math"))) is None
    assert "-DFOO=1" in inline_build.split_reason(dataclasses.replace(call, extra_cuda_cflags=("-DFOO=1",)))
    assert "-Xcompiler" in inline_build.split_reason(
        dataclasses.replace(call, extra_cuda_cflags=("-Xcompiler", "-fopenmp"))
    )


needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(), reason="nvcc not installed"
)


@pytest.mark.slow
@needs_nvcc
def test_an_edit_of_the_cuda_text_rebuilds_only_the_host_unit(tmp_path):
    """Cold: the three units (and the precompiled header); an edit of a launch width: the host unit alone;
    the module defines every launcher it calls (nothing left undefined for the loader)."""
    call = inline_build.find_calls(DIAG.read_text())[0]
    tag = f"// {uuid.uuid4().hex}\n"
    call = dataclasses.replace(call, cuda_sources=tuple(tag + s for s in call.cuda_sources))
    cold = inline_build.build_call(call, tmp_path, arch="9.0", timeout=600)
    assert cold.ok and cold.note.startswith("split"), (cold.note, cold.log[-2000:])
    assert sorted(cold.rebuilt) == sorted(f"{call.name}:{u}" for u in ("main.cpp", "device.cu", "host.cpp"))
    # one precompiled header kept (with ATen/cuda/CUDAContext.h where the CUDA libraries' headers exist)
    assert len(list((tmp_path / "pch").glob("*/ca_pch.h.gch"))) == 1
    edited = dataclasses.replace(
        call,
        cuda_sources=tuple(
            s.replace("const int threads = 256;", "const int threads = 128;") for s in call.cuda_sources
        ),
    )
    edit = inline_build.build_call(edited, tmp_path, arch="9.0", timeout=600)
    assert edit.ok and edit.rebuilt == [f"{call.name}:host.cpp"], (edit.rebuilt, edit.note)
    assert edit.so_path != cold.so_path
    undefined = subprocess.run(
        ["nm", "-D", "--undefined-only", str(edit.so_path)], capture_output=True, text=True
    ).stdout
    defined = subprocess.run(["nm", "-D", "--defined-only", str(edit.so_path)], capture_output=True, text=True).stdout
    assert "__ca_launch" not in undefined and "__ca_launch_row_scale_vec4" in defined


@pytest.mark.slow
@needs_nvcc
def test_a_split_that_does_not_build_falls_back_to_one_unit(tmp_path):
    """Host code that needs a device symbol (a __constant__ copied from the host) cannot be compiled
    apart from it: the split's host unit fails, and the text is built as load_inline would, successfully."""
    src = """
#include <torch/extension.h>
__constant__ float scale[1];
__global__ void k(float* x, long n) { long i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= scale[0]; }
torch::Tensor f(torch::Tensor t) {
  float s = 2.f;
  cudaMemcpyToSymbol(scale, &s, sizeof(float));
  k<<<1, 256>>>(t.data_ptr<float>(), t.numel());
  return t;
}
"""
    call = inline_build.InlineCall(
        name=f"fb_{uuid.uuid4().hex[:8]}",
        cpp_sources=("torch::Tensor f(torch::Tensor t);",),
        cuda_sources=(src,),
        functions=(("f", ""),),
    )
    assert isinstance(sp.split(src), sp.Split)  # it looks splittable, but the host unit needs `scale`
    b = inline_build.build_call(call, tmp_path, arch="9.0", timeout=900)
    assert b.ok, b.log[-2000:]
    assert b.note.startswith("one CUDA unit: the split's host.cpp did not build"), b.note
    assert f"{call.name}:cuda.cu" in b.rebuilt


@pytest.mark.parametrize(
    "decl",
    [
        "__global__ __launch_bounds__(256) void k(float* x)",
        "__global__ void __launch_bounds__(256, 2) k(float* x)",
        "static __global__ void k(float* x)",
    ],
)
def test_launch_bounds_and_static_kernels_split(decl):
    s = sp.split(decl + " { x[0] = 1; }\nvoid f(torch::Tensor t) { k<<<1, 1>>>(t.data_ptr<float>()); }")
    assert isinstance(s, sp.Split) and s.kernels == ("k",), s
