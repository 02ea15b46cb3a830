"""The clock's lighter loop's kernel source and its run-time compiler (NVRTC), for both sides of the evaluation.

Why here: the evaluation children run the kernels (`eval/child/hashed.py`); the trusted parent, which never
imports `eval/child/`, decides before any child starts whether the lighter loop can be built on this machine
(`unavailable`), so that a default that asks for it falls back to torch's draws and the dense digest where it
cannot, instead of failing every evaluation. Both compile the same source with the same NVRTC.

Contract: `CUDA_SRC` (no headers: NVRTC compiles it with its built-ins only); `find_nvrtc()` the NVRTC library
as torch finds it, else by its usual names and the pip packages' folders; `nvrtc_ptx(src, arch)` PTX or a
RuntimeError with NVRTC's log; `unavailable()` None when NVRTC compiles the source and torch has the private
module loader the children load it with (and its kernels' function handle, which they launch through the
driver), else why not (once per process; no CUDA context is created).

Not guaranteed: that the driver loads the PTX (an older driver than NVRTC's may refuse it): a child that
cannot then fails its burst prepare with the reason (`hashed.ready`), which from the reference ends the
evaluation as env_error (`timing/timed.py`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
from pathlib import Path

CUDA_SRC = r"""
// Counter-based draws and sign digests for the evaluator's clock (cuda_agent/eval/child/hashed.py runs them).
// No headers: NVRTC compiles it with nothing but the built-ins.
__device__ __forceinline__ unsigned ca_fmix(unsigned h) {
    h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; h ^= h >> 16; return h;
}
__device__ __forceinline__ unsigned ca_hash(unsigned k0, unsigned k1, unsigned i) {
    return ca_fmix(ca_fmix(i ^ k0) + k1);
}
__device__ __forceinline__ float ca_unit(unsigned h) { return (float)(h >> 8) * 5.9604644775390625e-08f; }
__device__ __forceinline__ unsigned short ca_half(int dtype, float v) {
    if (dtype == 1) {
        unsigned short h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
        return h;
    }
    unsigned u = __float_as_uint(v);
    u += 0x7fffu + ((u >> 16) & 1u);  // bf16: round to nearest even (no NaN here)
    return (unsigned short)(u >> 16);
}
__device__ __forceinline__ float ca_widen(int dtype, unsigned short h) {
    if (dtype == 2) return __uint_as_float(((unsigned)h) << 16);
    float v;
    asm("cvt.f32.f16 %0, %1;" : "=f"(v) : "h"(h));
    return v;
}
// a uniform in [lo, hi) that rounds up to hi in its dtype is stored as lo, as torch's uniform_ does
__device__ __forceinline__ void ca_store(void* out, int dtype, unsigned i, float v, bool upper, float lo, float hi) {
    if (dtype == 0) {
        ((float*)out)[i] = (upper && v >= hi) ? lo : v;
        return;
    }
    unsigned short h = ca_half(dtype, v);
    if (upper && ca_widen(dtype, h) >= hi) h = ca_half(dtype, lo);
    ((unsigned short*)out)[i] = h;
}
__device__ __forceinline__ float ca_load(const void* x, int dtype, unsigned i) {
    if (dtype == 0) return ((const float*)x)[i];
    return ca_widen(dtype, ((const unsigned short*)x)[i]);
}
// elements [0, n) of out (element i hashes base + i): normals (what=0, mean a, std b) or uniforms in
// [a, a + b) (what=1); each thread writes a pair, Box-Muller over the pair's two uniforms
extern "C" __global__ void ca_draw(void* out, const int* key, int dtype, int what, int n, int base, double a, double b) {
    unsigned k0 = (unsigned)key[0], k1 = (unsigned)key[1];
    float fa = (float)a, fb = (float)b;
    unsigned pairs = ((unsigned)n + 1u) >> 1;
    for (unsigned p = blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += gridDim.x * blockDim.x) {
        unsigned i = 2u * p;
        unsigned h0 = ca_hash(k0, k1, (unsigned)base + i), h1 = ca_hash(k0, k1, (unsigned)base + i + 1u);
        float v0, v1;
        if (what == 0) {
            float u = (float)((h0 >> 8) + 1u) * 5.9604644775390625e-08f;  // (0, 1]
            // the fast log's absolute error (~2^-22) may put log(u) above 0 for u just under 1: clamp, not NaN
            float r = sqrtf(fmaxf(-2.0f * __logf(u), 0.0f));
            float s, c;
            __sincosf((ca_unit(h1) - 0.5f) * 6.283185307179586f, &s, &c);
            v0 = fa + fb * r * c;
            v1 = fa + fb * r * s;
        } else {
            v0 = fa + fb * ca_unit(h0);
            v1 = fa + fb * ca_unit(h1);
        }
        ca_store(out, dtype, i, v0, what == 1, fa, fa + fb);
        if (i + 1u < (unsigned)n) ca_store(out, dtype, i + 1u, v1, what == 1, fa, fa + fb);
    }
}
// per block, the two sign sums of x[0, n) (element i hashes base + i) into partial[2 * block + j]
extern "C" __global__ void ca_digest(const void* x, int dtype, int n, int base, const int* key, float* partial) {
    unsigned k0 = (unsigned)key[0], k1 = (unsigned)key[1];
    float a0 = 0.0f, a1 = 0.0f;
    unsigned stride = gridDim.x * blockDim.x, i = blockIdx.x * blockDim.x + threadIdx.x;
    // four loads in flight per thread (a memory-bound read wants bytes in flight; 2-byte loads most)
    for (; i + 3u * stride < (unsigned)n; i += 4u * stride) {
        float v[4];
        for (int u = 0; u < 4; ++u) v[u] = ca_load(x, dtype, i + u * stride);
        for (int u = 0; u < 4; ++u) {
            unsigned h = ca_hash(k0, k1, (unsigned)base + i + u * stride);
            a0 += (h & 0x80000000u) ? -v[u] : v[u];
            a1 += (h & 0x40000000u) ? -v[u] : v[u];
        }
    }
    for (; i < (unsigned)n; i += stride) {
        float v = ca_load(x, dtype, i);
        unsigned h = ca_hash(k0, k1, (unsigned)base + i);
        a0 += (h & 0x80000000u) ? -v : v;
        a1 += (h & 0x40000000u) ? -v : v;
    }
    for (int off = 16; off > 0; off >>= 1) {
        a0 += __shfl_down_sync(0xffffffffu, a0, off);
        a1 += __shfl_down_sync(0xffffffffu, a1, off);
    }
    __shared__ float s0[32], s1[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { s0[warp] = a0; s1[warp] = a1; }
    __syncthreads();
    if (threadIdx.x == 0) {
        float t0 = 0.0f, t1 = 0.0f;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) { t0 += s0[w]; t1 += s1[w]; }
        partial[2 * blockIdx.x] = t0;
        partial[2 * blockIdx.x + 1] = t1;
    }
}
// dst[j] (+)= the sum of partial[2 * b + j] over b < blocks, one warp per j, in a fixed order (lane, then the
// warp's tree): deterministic, so a graph's replay and the eager sequence agree exactly
extern "C" __global__ void ca_reduce(const float* partial, int blocks, float* dst, int accumulate) {
    int j = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (j >= 2) return;
    float s = 0.0f;
    for (int b = lane; b < blocks; b += 32) s += partial[2 * b + j];
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    if (lane == 0) dst[j] = accumulate ? dst[j] + s : s;
}
"""


def find_nvrtc() -> ctypes.CDLL:
    """NVRTC, as torch finds it (its pip package or the system's), else by its usual names."""
    try:
        from torch.cuda import _utils as cu

        return cu._get_gpu_rtc_library()
    except Exception:  # noqa: BLE001 - a CPU build of torch has no CUDA version to look up by
        names = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
        # the pip packages' folders (nvidia/cu13/lib, nvidia/cuda_nvrtc/lib), found, not imported: no code runs
        spec = importlib.util.find_spec("nvidia")
        for root in (spec.submodule_search_locations or []) if spec is not None else []:
            names += sorted(str(p) for p in Path(root).glob("*/lib/libnvrtc.so*") if "builtins" not in p.name)
        for name in names:
            with contextlib.suppress(OSError):
                return ctypes.CDLL(name)
        raise OSError("no NVRTC library (libnvrtc.so) found") from None


def nvrtc_ptx(src: str, arch: str) -> bytes:
    """PTX for `src` (no headers, none searched: torch's own NVRTC wrapper wants a CUDA_HOME for its
    include paths, which a pip-only install lacks) for `arch` ("compute_90"); a failure raises with NVRTC's log."""
    lib = find_nvrtc()
    prog = ctypes.c_void_p()

    def check(rc: int, what: str) -> None:
        if rc != 0:
            log = b""
            size = ctypes.c_size_t()
            if lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)) == 0 and size.value > 1:
                buf = ctypes.create_string_buffer(size.value)
                lib.nvrtcGetProgramLog(prog, buf)
                log = buf.value
            raise RuntimeError(f"NVRTC {what} failed ({rc}): {log.decode(errors='replace')[:300]}")

    check(lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"hashed.cu", 0, None, None), "create")
    try:
        opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17"]
        check(lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts)), "compile")
        size = ctypes.c_size_t()
        check(lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "PTX size")
        buf = ctypes.create_string_buffer(size.value)
        check(lib.nvrtcGetPTX(prog, buf), "PTX")
        return buf.raw
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


UNAVAILABLE = "the lighter loop's kernels could not be built"  # the start of every reason why not, on both sides
PROBE_ARCH = "compute_80"  # any arch the source compiles for: the probe asks whether NVRTC works, not for which GPU


@functools.lru_cache(maxsize=1)
def unavailable() -> str | None:
    """None when this machine can build the lighter loop (NVRTC compiles `CUDA_SRC`, and torch has the
    driver's module loader), else why not. Cached: NVRTC's compile costs about 0.1 s."""
    try:
        from torch.cuda import _utils as cu  # private: the children load and launch the kernels through it

        if not hasattr(cu, "_cuda_load_module"):
            return f"{UNAVAILABLE}: torch has no torch.cuda._utils._cuda_load_module to load them with"
        # the children launch through the driver with the loaded kernel's function handle (child/hashed.py
        # _Kernel); making one touches no GPU
        if not isinstance(
            getattr(cu._CudaKernel(ctypes.c_void_p(1), ctypes.c_void_p(1)), "func", None), ctypes.c_void_p
        ):
            return (
                f"{UNAVAILABLE}: torch's loaded kernels carry no function handle (torch.cuda._utils._CudaKernel.func)"
            )
        nvrtc_ptx(CUDA_SRC, PROBE_ARCH)
    except Exception as e:  # noqa: BLE001 - NVRTC or torch missing or failing: reported, never raised here
        return f"{UNAVAILABLE}: {type(e).__name__}: {e}"[:400]
    return None
