"""The expert profile (issue 32) on a machine without a GPU or Nsight Compute.

What is real here: ncu's output. tests/fixtures/ncu/h100_gelu_chain.csv and h100_linear_bias_relu.csv
are captures from an H100 80GB HBM3 (ncu 2025.3.1, commit 0467285, 2026-12-06, `python3 -m benchmarks
expert-profile`), next to the profile text that run printed from them (h100_*.profile.txt): the parsing
tests assert the values the GPU printed, and the text rendered here again from the CSV must match it.
Also real: nvcc's `-Xptxas -v` report on kernels compiled in the test (registers, a real spill, shared
memory), the workspace staging, the bounded runner's timeout, the summary's length.
What is modelled: tests/fixtures/ncu/modelled_multi_kernel.csv, hand-written on ncu's documented raw
page for what the captures lack (several kernels, a kernel launched twice, an `n/a` value, the target's
stdout between `==PROF==` lines); its figures are invented. What is a stand-in: the profile child
(tests/fixtures/profile/stand_in_child.py, with its own ceilings) and ncu (small shell scripts that print
a saved capture or an error), where the GPU path's plumbing is tested (detect() is patched to name a GPU
that is not there).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_agent.eval.profile import expert as ep
from cuda_agent.eval.profile import ncu
from cuda_agent.eval.profile import resources as profile_resources
from cuda_agent.eval.profile import roofline as roof
from cuda_agent.eval.profile.resources import (
    ResourceReport,
    Resources,
    compile_report,
    ptxas_report,
    short_name,
)

FIX = Path(__file__).resolve().parent / "fixtures"
NCU = FIX / "ncu"
H100_GELU = (NCU / "h100_gelu_chain.csv").read_text()  # real capture, see tests/fixtures/ncu/README.md
H100_GEMM = (NCU / "h100_linear_bias_relu.csv").read_text()  # real capture
MODELLED = (NCU / "modelled_multi_kernel.csv").read_text()  # hand-written: several kernels, two launches, n/a
# The ceilings the H100 run measured, as its profile text printed them (three significant digits).
H100 = roof.Ceilings(
    "NVIDIA H100 80GB HBM3", 3.02e12, {"fp32": 52.1e12, "bf16": 788e12, "fp16": 758e12}, "2026-12-06T06:25:09Z"
)
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").is_file() else None)
CEIL = roof.Ceilings("NVIDIA H200", 4.3e12, {"fp32": 5.0e13, "bf16": 7.0e14}, "2026-12-05T00:00:00Z")  # stand-in


# ---- ncu's output ----------------------------------------------------------------------------------------------------


def test_parse_real_h100_capture_memory_bound():
    assert H100_GELU.startswith("==WARNING==") and "==PROF== Connected" in H100_GELU  # ncu's own lines, skipped
    [g] = ncu.parse_csv(H100_GELU)
    assert g.name == "<unnamed>::gelu_chain_vec4(const float4 *, float4 *, long long)"
    assert g.duration_ns == 89600.0  # "89,600" in ns: the H100 printed 89.6 us
    assert g.get("dram__bytes_read.sum") == pytest.approx(8192 * 4096 * 4, rel=1e-3)  # the task's input, read once
    assert g.dram_bytes() == 134_231_040 + 115_263_744
    assert g.get("dram__throughput.avg.pct_of_peak_sustained_elapsed") == 83.12  # printed "DRAM 83 %"
    assert g.get("sm__warps_active.avg.pct_of_peak_sustained_active") == 92.73  # printed "occupancy 93 %"
    assert g.get("launch__registers_per_thread") == 29
    assert (g.get("launch__grid_size"), g.get("launch__block_size")) == (1056, 256)  # "1,056" blocks
    assert g.stalls()[:3] == [("long_scoreboard", 41.5), ("mio_throttle", 1.93), ("wait", 1.32)]
    assert g.get("launch__tpc_enabled") is None  # one of ncu's own text columns ("all"): None, never a number


def test_parse_real_h100_capture_gemm():
    [k] = ncu.parse_csv(H100_GEMM)
    assert k.name.startswith("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8") and "cublas" in k.name
    assert k.duration_ns == 779488.0  # printed 779.5 us
    assert k.get("launch__registers_per_thread") == 255
    assert k.get("launch__shared_mem_per_block_dynamic") == 33792  # printed "33 KiB dynamic"
    assert (k.get("launch__grid_size"), k.get("launch__block_size")) == (4096, 128)
    assert k.get(ncu.TENSOR_METRIC) == 0 and k.get("sm__maximum_warps_per_active_cycle_pct") == 12.5
    assert k.flops() == pytest.approx(2 * 16384 * 256 * 4096, rel=0.01)  # the task's GEMM (FMA = 2), fp32 FFMAs
    assert [r for r, _ in k.stalls()[:3]] == ["not_selected", "short_scoreboard", "long_scoreboard"]


def _kernel_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith(("kernel ", "  "))]


@pytest.mark.parametrize("example", ["gelu_chain", "linear_bias_relu"])
def test_real_capture_renders_what_the_h100_printed(example):
    rows = ncu.parse_csv((NCU / f"h100_{example}.csv").read_text())
    printed = (NCU / f"h100_{example}.profile.txt").read_text()
    counters = f"ncu --clock-control none (clocks untouched), {len(rows)} launch(es) profiled"
    views = ep.views_from_counters(rows, ResourceReport(), H100, "fp32")
    got = ep.ExpertProfile(counters=counters, kernels=views, ceilings=H100, ceilings_note=", cached").text()
    assert got.splitlines()[1] == printed.splitlines()[1]  # the counters line
    ceil_line = [ln for ln in got.splitlines() if ln.startswith("ceilings (")][0]
    assert ceil_line.split("): ", 1)[1] == printed.splitlines()[2].split("): ", 1)[1]  # copy 3.02 TB/s; GEMM ...
    want, have = _kernel_lines(printed), _kernel_lines(got)
    assert len(have) == 5 and have[:-1] == want[:-1]  # name, time, shares, occupancy, resources, stalls
    # the verdict: same words; its numbers within the rounding of the three-digit ceilings copied above
    assert re.sub(r"[\d.]+", "#", have[-1]) == re.sub(r"[\d.]+", "#", want[-1]), (have[-1], want[-1])
    num = re.compile(r"\d+(?:\.\d+)?")
    nums = list(zip(map(float, num.findall(have[-1])), map(float, num.findall(want[-1])), strict=True))
    assert len(nums) >= 4 and all(h == pytest.approx(w, rel=0.015) for h, w in nums), (have[-1], want[-1])


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="needs c++filt")
def test_ncu_unnamed_namespace_meets_the_compiler_report():
    # ncu names gelu_chain's kernel "<unnamed>::gelu_chain_vec4(...)", c++filt "(anonymous namespace)::..." (this is
    # nvcc's mangled name of it): on the H100 the two did not meet and the spill figures were lost
    mangled = "_ZN46_GLOBAL__N__984078b0_13_gelu_chain_cu_3dca15b715gelu_chain_vec4EPK6float4PS0_x"
    rep = ResourceReport(kernels={mangled: Resources(registers=29, spill_stores=0, spill_loads=0, smem_static=0)})
    [v] = ep.views_from_counters(ncu.parse_csv(H100_GELU), rep, H100, "fp32")
    assert (v.spill_stores, v.spill_loads) == (0, 0)
    assert "registers 29/thread, no spills, smem 0 B static" in ep.ExpertProfile(counters="ncu", kernels=[v]).text()


def test_parse_modelled_multi_kernel_page():
    # invented figures (tests/fixtures/ncu/README.md): what the real captures lack
    rows = ncu.parse_csv(MODELLED)
    assert [r.name.split("(")[0] for r in rows] == ["gelu_kernel", "void sgemm_tiled<128, 8>", "gelu_kernel"]
    g = rows[0]
    assert g.duration_ns == 33184.0  # "33,184" nsecond
    assert g.dram_bytes() == 2 * 16 * 1024 * 1024 * 4
    assert g.get("launch__grid_size") == 65536
    assert g.get("smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio") is None  # "n/a", not 0
    assert g.flops() == 16 * 1024 * 1024 * (2 * 6 + 4 + 2)  # an FMA counts 2
    assert [r for r, _ in g.stalls()][:3] == ["long_scoreboard", "lg_throttle", "wait"]  # 'selected' is no stall
    merged = ncu.merge_launches(rows)
    assert [(k.name.split("(")[0], k.launches) for k in merged] == [("gelu_kernel", 2), ("void sgemm_tiled<128, 8>", 1)]
    assert merged[0].duration_ns == pytest.approx((33184 + 33376) / 2)


def test_parse_details_page_and_units():
    text = "\n".join(
        [
            '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name","Metric Name",'
            '"Metric Unit","Metric Value"',
            '"0","1","python3","h","k(float*)","1","7","Command line profiler metrics","gpu__time_duration.sum","usecond","1.50"',
            '"0","1","python3","h","k(float*)","1","7","Command line profiler metrics","dram__bytes_read.sum","Mbyte","2.00"',
            '"0","1","python3","h","k(float*)","1","7","Command line profiler metrics","dram__bytes_write.sum","byte","n/a"',
        ]
    )
    [k] = ncu.parse_csv(text)
    assert k.duration_ns == pytest.approx(1500.0)
    assert k.dram_bytes() == pytest.approx(2e6)


def test_no_header_gives_no_rows_and_a_reason():
    assert ncu.parse_csv("==PROF== Connected to process 1\nhello\n") == []
    perm = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"
    assert ncu.failure(perm, 1).startswith("refused: ERR_NVGPUCTRPERM")
    assert "does not know a metric" in ncu.failure("==ERROR== Failed to find metric sm__foo.sum", 1)
    assert "no kernel" in ncu.failure("==WARNING== No kernels were profiled.", 0)
    assert ncu.failure("==ERROR== something else broke", 1) == "ncu failed: something else broke"
    assert ncu.failure("", 0) is None


def test_ncu_command_never_touches_clocks():
    argv = ncu.ncu_command("/opt/ncu", ["python3", "x.py"])
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert "--set" not in argv and "base" != argv[argv.index("--clock-control") + 1]
    assert argv[argv.index("--profile-from-start") + 1] == "off"
    assert argv[argv.index("--page") + 1] == "raw" and "--csv" in argv
    metrics = argv[argv.index("--metrics") + 1].split(",")
    assert set(ncu.CORE_METRICS) <= set(metrics) and "gpu__time_duration.sum" in metrics
    assert argv[-2:] == ["python3", "x.py"]


# ---- verdicts and ceilings -------------------------------------------------------------------------------------------


def test_roofline_verdicts_from_the_h100_captures():
    [gelu] = ep.views_from_counters(ncu.parse_csv(H100_GELU), ResourceReport(), H100, "fp32")
    [gemm] = ep.views_from_counters(ncu.parse_csv(H100_GEMM), ResourceReport(), H100, "fp32")
    assert gelu.verdict.startswith("memory-bound at 92 % of peak bandwidth: 2.78 TB/s")  # 249 MB in 89.6 us, of 3.02
    assert gemm.verdict.startswith("compute-bound at 85 % of peak: 44.3 TFLOP/s")  # 34.5 GFLOP in 779 us, of 52.1
    # against a bf16 ceiling the same fp32 counts are a small share, and the bytes then decide
    [low] = ep.views_from_counters(ncu.parse_csv(H100_GEMM), ResourceReport(), H100, "bf16")
    assert low.verdict.startswith("memory-bound at 18 %"), low.verdict  # 0.546 TB/s of 3.02; 44.3 of 788 is 6 %
    # several kernels in one (modelled) report: each its own verdict, static smem from ncu
    views = {
        short_name(v.name): v for v in ep.views_from_counters(ncu.parse_csv(MODELLED), ResourceReport(), CEIL, "fp32")
    }
    gemm_m = views["sgemm_tiled<128, 8>"]
    assert views["gelu_kernel"].verdict.startswith("memory-bound at 9")  # 134 MB in 33.3 us = 4.03 TB/s of 4.3
    assert gemm_m.verdict.startswith("compute-bound at 38 % of peak")  # 17.2 GFLOP in 905 us = 19 TFLOP/s of 50
    assert gemm_m.registers == 128 and gemm_m.smem_static == 16384 and gemm_m.occupancy_pct == pytest.approx(48.77)
    # tensor cores ran: their FLOPs are not counted, ncu's SM share stands in and the line says so
    v = roof.verdict(1e6, 1e6, 0.0, True, 80.0, 5.0, CEIL, "bf16")
    assert v.startswith("compute-bound at 80 %") and "tensor cores" in v
    # no measured ceilings: ncu's own peaks decide, said so
    assert "no measured ceilings" in roof.verdict(1e3, 1e6, 1e6, False, 10.0, 70.0, None, "fp32")
    assert roof.verdict(None, 1, 1, False, 1, 1, CEIL, "fp32").startswith("no verdict")
    line = roof.call_verdict(0.035, 2 * 16 * 1024 * 1024 * 4, CEIL)  # 134 MB in 35 us: 3.8 TB/s of 4.3
    assert "modelled" in line and "memory-bound" in line and "89 %" in line
    assert "well below the memory roof" in roof.call_verdict(0.35, 2 * 16 * 1024 * 1024 * 4, CEIL)


def test_a_stray_tensor_pipe_instruction_per_warp_is_not_tensor_core_work():
    """gelu_chain's H100 capture counts one tensor-pipe instruction per warp and no matrix math: were its
    bytes small, the verdict must come from its CUDA-core FLOPs, not from "tensor cores ran"."""
    [k] = ncu.parse_csv(H100_GELU)
    assert k.get(ncu.TENSOR_METRIC) == 8448 and k.get("launch__grid_size") * 256 // 32 == 8448
    assert not ep.tensor_cores_ran(8448, 1056, 256)
    assert ep.tensor_cores_ran(8448 * 200, 1056, 256)  # a GEMM's K loop: hundreds per warp
    assert ep.tensor_cores_ran(3, None, None) and not ep.tensor_cores_ran(0, 1056, 256)
    k.values["dram__bytes_read.sum"] = k.values["dram__bytes_write.sum"] = 1e3  # as if it were compute-bound
    [v] = ep.views_from_counters([k], ResourceReport(), H100, "fp32")
    assert "tensor cores" not in v.verdict and "TFLOP/s" in v.verdict, v.verdict


def test_ceilings_cache_per_gpu_model(tmp_path):
    assert roof.load("NVIDIA H200", tmp_path) is None
    f = roof.store(CEIL, tmp_path)
    got = roof.load("NVIDIA H200", tmp_path)
    assert got is not None and got.copy_bytes_per_s == 4.3e12 and got.gemm("bf16") == 7.0e14
    assert got.gemm("fp64") == 5.0e13  # unknown dtype: the fp32 GEMM
    assert roof.load("NVIDIA H100 80GB HBM3", tmp_path) is None  # another model measures its own
    f.write_text("{not json")
    assert roof.load("NVIDIA H200", tmp_path) is None  # damaged: measured again
    assert roof.from_child("g", {"copy_bytes_per_s": -1, "gemm_flops_per_s": {}}) is None
    assert roof.from_child("g", {"copy_bytes_per_s": float("nan"), "gemm_flops_per_s": {}}) is None
    assert roof.from_child("g", {"copy_bytes_per_s": 1e12, "gemm_flops_per_s": {"fp32": "x"}}) is None
    assert roof.from_child("g", {"copy_bytes_per_s": 1e12, "gemm_flops_per_s": {"fp32": 1e13}}) is not None


# ---- the compiler's report (real nvcc) -------------------------------------------------------------------------------

KERNELS = r"""
__global__ void scale(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}
__global__ void tiled(const float* x, float* y, int n) {
  __shared__ float buf[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x] = x[i % n];
  __syncthreads();
  if (i < n) y[i] = buf[(threadIdx.x + 1) % 256];
}
__global__ void __launch_bounds__(1024, 2) spill(const float* x, float* y, int n) {
  float acc[48];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
  for (int k = 0; k < 48; ++k) acc[k] = x[(i + k * 977) % n];
#pragma unroll
  for (int r = 0; r < 8; ++r)
#pragma unroll
    for (int k = 0; k < 48; ++k) acc[k] = acc[k] * acc[(k * 7 + r) % 48] + 1.0f;
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 48; ++k) s += acc[k];
  y[i] = s;
}
"""


def _nvcc_cmd(src: Path, obj: Path, root: Path) -> list[str]:
    return [NVCC or "nvcc", "-O3", "-gencode=arch=compute_90,code=sm_90", "-c", str(src), "-o", str(obj)]


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_compiler_report_from_a_real_nvcc_build(tmp_path, monkeypatch):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.cu").write_text(KERNELS)
    rep = compile_report(tmp_path, _nvcc_cmd, timeout_s=120)
    assert rep.note == "" and set(rep.kernels) == {"_Z5scalePKfPffi", "_Z5tiledPKfPfi", "_Z5spillPKfPfi"}
    assert rep.kernels["_Z5tiledPKfPfi"].smem_static == 1024 and rep.kernels["_Z5tiledPKfPfi"].barriers == 1
    assert rep.kernels["_Z5scalePKfPffi"].spill_stores == 0 and 0 < rep.kernels["_Z5scalePKfPffi"].registers <= 32
    sp = rep.kernels["_Z5spillPKfPfi"]
    assert sp.registers <= 32 and sp.spill_stores > 0 and sp.spill_loads > 0  # __launch_bounds__(1024, 2) forces it
    text = ep.ExpertProfile(counters="not available: test", kernels=ep.views_from_compiler(rep)).text()
    assert "SPILLS" in text and "spill" in text and "smem 1 KiB static" in text
    # cached per unit: the second report compiles nothing; an edit compiles again
    cache = tmp_path / "ptxas"
    compile_report(tmp_path, _nvcc_cmd, timeout_s=120, cache_dir=cache)
    assert len(list(cache.glob("*.txt"))) == 1

    def no_compiler(*a, **k):
        raise OSError(2, "no compiler in this part of the test")

    monkeypatch.setattr(profile_resources.subprocess, "run", no_compiler)
    again = compile_report(tmp_path, _nvcc_cmd, cache_dir=cache)
    assert again.kernels.keys() == rep.kernels.keys() and again.note == ""  # no nvcc was run
    (tmp_path / "kernels" / "k.cu").write_text(KERNELS.replace("a * x[i]", "a * x[i] + 1.0f"))
    assert "nvcc could not run" in compile_report(tmp_path, _nvcc_cmd, cache_dir=cache).note


def test_compiler_report_without_nvcc_or_kernels_says_so(tmp_path):
    assert "no kernels/*.cu" in compile_report(tmp_path, _nvcc_cmd).note
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "host.cu").write_text("int host_only() { return 1; }\n")
    if NVCC is not None:  # a unit with no kernel (cuBLAS calls only, like linear_bias_relu) says so, as on the H100
        note = compile_report(tmp_path, _nvcc_cmd, timeout_s=120).note
        printed = (NCU / "h100_linear_bias_relu.profile.txt").read_text().splitlines()[-1]
        assert "no __global__ kernel" in note and printed == f"note: compiler report: {note}"
    (tmp_path / "kernels" / "host.cu").unlink()
    (tmp_path / "kernels" / "k.cu").write_text(KERNELS)
    rep = compile_report(tmp_path, lambda s, o, r: ["/nonexistent/nvcc", str(s)], timeout_s=5)
    assert rep.kernels == {} and "nvcc could not run" in rep.note


def test_ptxas_and_cuobjdump_formats():
    from cuda_agent.eval.profile.resources import cuobjdump_report

    old = (
        "ptxas info    : Compiling entry function '_Z1kPf' for 'sm_80'\nptxas info    : Function properties for _Z1kPf\n"
        "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 255 registers, 2048 bytes smem, 368 bytes cmem[0]\n"
    )
    k = ptxas_report(old)["_Z1kPf"]
    assert (k.registers, k.spill_stores, k.smem_static, k.stack) == (255, 4, 2048, 8)
    dump = (
        "Fatbin elf code:\n================\narch = sm_90\n\nResource usage:\n Common:\n  GLOBAL:0\n"
        " Function _Z5scalePKfPffi:\n  REG:10 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:380 TEXTURE:0 SURFACE:0 SAMPLER:0\n"
        " Function _Z5tiledPKfPfi:\n  REG:32 STACK:256 SHARED:1024 LOCAL:0 CONSTANT[0]:372 TEXTURE:0\n"
    )
    got = cuobjdump_report(dump)
    assert got["_Z5scalePKfPffi"].registers == 10 and got["_Z5tiledPKfPfi"].smem_static == 1024
    assert got["_Z5tiledPKfPfi"].stack == 256


# ---- the summary -----------------------------------------------------------------------------------------------------


def test_summary_fits_forty_lines():
    rows = ncu.parse_csv(H100_GEMM)
    for i in range(12):
        rows += ncu.parse_csv(H100_GELU.replace("gelu_chain_vec4", f"gelu_chain_vec4_{i}"))
    views = ep.views_from_counters(rows, ResourceReport(), CEIL, "fp32")
    p = ep.ExpertProfile(counters="ncu", kernels=views, ceilings=CEIL, notes=[f"note {i}" for i in range(20)])
    text = p.text()
    assert len(text.splitlines()) <= 40
    assert "more lines cut" in text
    short = ep.ExpertProfile(counters="ncu", kernels=views, ceilings=CEIL).text(max_lines=40, max_kernels=5)
    assert len(short.splitlines()) <= 40 and "(8 more kernels" in short
    assert short.count("verdict:") == 5


def test_bounded_run_times_out_with_a_line():
    t0 = time.monotonic()
    r = ep.run_bounded(["sleep", "30"], timeout_s=1)
    assert r.returncode is None and r.why == "timed out after 1 s" and time.monotonic() - t0 < 15
    r = ep.run_bounded(["/nonexistent/ncu"], timeout_s=5)
    assert r.returncode is None and r.why.startswith("could not start ncu")


# ---- the whole profile: no GPU here (real), and the GPU path's plumbing with stand-ins ------------------------------


@pytest.fixture
def workspace(tmp_path, cache_env):
    from cuda_agent.task.taskfile import Task
    from cuda_agent.task.workspace import copy_solution, init_workspace

    ex = Path(__file__).resolve().parents[1] / "examples" / "gelu_chain"
    ws = init_workspace(Task.from_file(ex / "task.py"), tmp_path / "ws")
    copy_solution(ex / "solution", ws)
    return ws


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_no_gpu_gives_the_compiler_report_and_says_why(workspace, monkeypatch):
    monkeypatch.setattr("cuda_agent.eval.gpu.detect", lambda: None)
    p = ep.profile_workspace(workspace, settings=ep.ProfileSettings(timeout_s=120, sandbox="off"))
    text = p.text()
    assert "counters: not available: no CUDA GPU visible" in text
    names = {short_name(k.name) for k in p.kernels}
    assert {"(anonymous namespace)::gelu_chain_vec4", "(anonymous namespace)::gelu_chain_scalar"} <= names
    assert all(k.registers and k.spill_stores == 0 for k in p.kernels)
    assert "Traceback" not in text and len(text.splitlines()) <= 40


def _fake_gpu(monkeypatch, tmp_path):
    from cuda_agent.eval.build.workspace import BuildResult
    from cuda_agent.eval.gpu import GPU

    monkeypatch.setattr("cuda_agent.eval.gpu.detect", lambda: GPU("NVIDIA Stand-in", "9.0", "GPU-standin"))
    so = tmp_path / "cuda_extension.so"
    so.write_bytes(b"")
    monkeypatch.setattr("cuda_agent.eval.build.workspace.build", lambda *a, **k: BuildResult(True, so))
    monkeypatch.setattr(ep, "CHILD", [str(FIX / "profile" / "stand_in_child.py")])
    monkeypatch.setenv("CUDA_AGENT_LOCK_DIR", str(tmp_path / "locks"))


def _fake_ncu(tmp_path, body: str) -> str:
    f = tmp_path / "fake_ncu.sh"
    f.write_text("#!/bin/sh\n" + body + "\n")
    f.chmod(0o755)
    return str(f)


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_gpu_path_with_counters_and_cached_ceilings(workspace, monkeypatch, tmp_path, cache_env):
    _fake_gpu(monkeypatch, tmp_path)
    monkeypatch.setenv(ncu.OVERRIDE, _fake_ncu(tmp_path, f"cat '{NCU / 'h100_gelu_chain.csv'}'"))  # the real capture
    st = ep.ProfileSettings(timeout_s=120, sandbox="off")
    p = ep.profile_workspace(workspace, settings=st)
    text = p.text()
    assert p.counters.startswith("ncu --clock-control none") and "1 launch(es)" in p.counters, text
    assert "measured now" in p.ceilings_note and (cache_env / "profile").is_dir()
    assert "<unnamed>::gelu_chain_vec4" in text and "top stalls" in text
    assert "memory-bound at 66 % of peak bandwidth" in text  # 2.78 TB/s of the stand-in child's 4.2
    if shutil.which("c++filt"):  # ncu's kernel met the compiler's report of the example's gelu_chain.cu
        assert "registers 29/thread, no spills" in text, text
    again = ep.profile_workspace(workspace, settings=st)
    assert again.ceilings_note == ", cached" and again.ceilings.copy_bytes_per_s == 4.2e12


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
@pytest.mark.parametrize(
    "body, expect",
    [
        (
            "echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters'; "
            "exit 1",
            "refused: ERR_NVGPUCTRPERM",
        ),
        pytest.param("sleep 60", "ncu timed out after", marks=pytest.mark.slow),
        (None, "ncu (Nsight Compute) is not installed here"),
    ],
)
def test_gpu_path_without_counters_says_why(workspace, monkeypatch, tmp_path, body, expect):
    _fake_gpu(monkeypatch, tmp_path)
    if body is None:
        monkeypatch.delenv(ncu.OVERRIDE, raising=False)
        if ncu.find_ncu() is not None:
            pytest.skip("ncu is installed here")
    else:
        monkeypatch.setenv(ncu.OVERRIDE, _fake_ncu(tmp_path, body))
    # the timeout case: a budget that the sleeping ncu overruns, with time left for nothing else
    st = ep.ProfileSettings(timeout_s=20 if body and "sleep" in body else 120, sandbox="off")
    p = ep.profile_workspace(workspace, settings=st)
    text = p.text()
    assert p.counters.startswith("not available: ") and expect in p.counters, text
    assert "Traceback" not in text
    if "sleep" not in (body or ""):  # the stand-in's event times and the modelled whole-call verdict
        assert "gelu_chain_vec4" in text and "[events + compiler]" in text and "modelled" in text


def test_a_failing_child_is_a_line(workspace, monkeypatch, tmp_path):
    _fake_gpu(monkeypatch, tmp_path)
    monkeypatch.setenv(ncu.OVERRIDE, _fake_ncu(tmp_path, "exit 3"))
    monkeypatch.setattr(ep, "CHILD", [str(FIX / "profile" / "stand_in_child.py")])
    original = ep._Session.child

    def failing(self, mode, extra, prefix=None, cap_s=None):
        return original(self, mode, [*extra[:1], "STAND_IN_FAIL", *extra[2:]] if extra else extra, prefix, cap_s)

    monkeypatch.setattr(ep._Session, "child", failing)
    text = ep.profile_workspace(workspace, settings=ep.ProfileSettings(timeout_s=60, sandbox="off")).text()
    assert "ncu exited with status 3" in text and "illegal memory access" in text and "Traceback" not in text


def test_profile_child_without_a_gpu_writes_a_failure(tmp_path):
    out = tmp_path / "r.json"
    r = subprocess.run(
        [sys.executable, "-m", "cuda_agent.eval.child.profiling", "ceilings", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if r.returncode == 0:
        pytest.skip("a CUDA device is visible here")
    import json

    d = json.loads(out.read_text())
    assert d["ok"] is False and "no CUDA device" in d["error"]


# ---- the agent's tool ------------------------------------------------------------------------------------------------


def test_profile_tool_appends_the_expert_text_only_when_correct(tmp_path):
    from cuda_agent.env.toolbox import Toolbox
    from cuda_agent.eval.judge.result import EvalResult, Status

    (tmp_path / "model_new.py").write_text("x = 1\n")
    seen = []
    ok = Toolbox(
        tmp_path,
        evaluator=lambda w, phase: EvalResult(Status.OK, 3, True, message="fast"),
        expert=lambda w: seen.append(w) or "expert profile (0.1 s; ...):\ncounters: ncu",
        bash_timeout_s=5,
    )
    try:
        assert "counters: ncu" in ok.call("profile", "{}").text
        assert "counters: ncu" not in ok.call("verify", "{}").text  # only the profile tool
        assert len(seen) == 1
    finally:
        ok.close()
    bad = Toolbox(
        tmp_path,
        evaluator=lambda w, phase: EvalResult(Status.INCORRECT, -1, False, message="wrong"),
        expert=lambda w: "counters: ncu",
        bash_timeout_s=5,
    )
    boom = Toolbox(
        tmp_path,
        evaluator=lambda w, phase: EvalResult(Status.OK, 2, True, message="fine"),
        expert=lambda w: 1 / 0,
        bash_timeout_s=5,
    )
    plain = Toolbox(
        tmp_path, evaluator=lambda w, phase: EvalResult(Status.OK, 2, True, message="fine"), bash_timeout_s=5
    )
    try:
        assert "counters" not in bad.call("profile", "{}").text
        o = boom.call("profile", "{}")
        assert "expert profile: internal error" in o.text and "ZeroDivisionError" in o.text and o.ok
        assert "expert profile" not in plain.call("profile", "{}").text  # an injected evaluator alone: none
    finally:
        for t in (bad, boom, plain):
            t.close()
