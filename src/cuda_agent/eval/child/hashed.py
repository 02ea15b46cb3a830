"""A lighter burst loop for the evaluator's clock: counter-based draws and sign digests (the GPU's default).

Why: a burst's loop (the task's next input set, then the digests of each output) is measured in the
reference and taken out of every side's bursts; where it is several times the kernel, the clock's
net is a small difference of large numbers, and its spread between evaluations is the leak that
issue 28 measures. On the H200 (2026-12-06, docs/throughput.md "Call 10") the loop cost about 3x
what its memory traffic alone would take: relu at 2^23 floats 0.090 ms a call, row_softmax_wide
0.54 ms, silu_mul_bf16 0.69 ms. Timed alone on an H100 (2026-12-07, `benchmarks/clock_placement.py`;
docs/throughput.md "Call 11"), relu's loop was mostly the dense digest (54 us, reading a 2 x n fp32 weight
matrix besides the output; a bf16 output is first copied to fp32), not torch's draws (23.5 us); the sign
digest and these draws together took the loop from 96 to 42 us a call.

What this module gives, per burst draw and per output digest:
- `patched(device)`: inside it, torch.randn / rand / randn_like / rand_like and Tensor.normal_ /
  uniform_ on a CUDA float32/float16/bfloat16 tensor (no explicit generator) fill it from a keyed
  integer hash (murmur3's finaliser, twice) of each element's index: a uniform from 24 of its bits;
  a normal by Box-Muller over two neighbouring elements' uniforms with the GPU's fast log and sincos.
  One thread writes two elements: the kernel is bound by the memory write. The key (62 bits) is
  drawn per call from torch's default generator (`fresh_key`), so the burst's salt decides every
  draw and a CUDA graph's replays differ as torch's own draws do. Anything else falls through to
  torch. The task's get_inputs keeps its shapes, dtypes and distributions (normal or uniform), so
  its kernels see inputs of the same kind; the numbers are not torch's.
- `digest_into(x, key, dst)`: DIGESTS_PER_OUTPUT sums of +-x_i, each sign one bit of the keyed hash
  of i: one read of the output in its own dtype (fp32, fp16, bf16; others are copied to fp32 first),
  no weight matrix. Each digest's variance over the key is the squared norm of the output's error,
  as the dense digest's, so the reference's tolerance scales hold; an error on one element moves the
  digest by exactly that error (a normal weight could make it small). Block partial sums, then one
  sum: deterministic for a given size, so a graph's replay and the eager sequence agree exactly.
- The CPU lane computes the same hash with torch's integer ops (`_hash_cpu`): the same numbers for
  the integers, the floats within rounding of the GPU's fast intrinsics. It tests the machinery.

On a GPU the kernels (`shared/lightloop.py`'s source) are compiled at run time with NVRTC (no headers) and loaded
by torch's private driver wrapper (`torch.cuda._utils`); `available` says why not where either is missing or
fails, and a burst that asks for them then fails with that reason. They are compiled once per process,
before any timed request (`warm`, about 0.1 s). They are launched through the driver's cuLaunchKernel with
an argument block made once per kernel (`_Kernel`), not through torch's wrapper, which opened the driver
library and built its arguments on every launch. A draw or digest issued from Python took 60-180 us of the
H100 host's time (2026-12-07: their event times were host-bound), the wrapper about 21 us of it on this
project's CPU machine against under 1 us for a block made once; a burst's loop issues two or three a
call, in each graph's capture and in the reference's eager re-run of a burst's sequence. On an H100
(2026-12-07, `benchmarks/light_launch.py`, docs/throughput.md "Call 13") a draw took 10.2 us of host time
through `_Kernel` against 33.3 us through torch's wrapper, a digest 17.8 against 76.0 us; the defences'
cost (`defences-cost`) went from +34 % to +17 % with this and the jumped output check together
(`trusted_clock` 0.144 -> 0.096 s, `burst_check` 0.154 -> 0.033 s an evaluation).
The sign digest's block sums are summed by a kernel of its own into the burst's row (no torch op).

Not guaranteed: the statistical quality of a cryptographic generator (none is needed: the key is
secret only until the request, as torch's seed is); draws for other dtypes, other distributions or
an explicit generator (torch's own, unchanged); a candidate's process keeping these functions as
they are (it controls its process: its burst's digests are checked against the reference's, as
before); that a later torch keeps the private loader and its kernels' function handle (without them
the loop is unavailable, with the reason: the parent's probe falls back to the loop before it).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
from collections.abc import Iterator
from typing import Any

import torch

from cuda_agent.eval.child.state import device_index
from cuda_agent.eval.shared import lightloop

DIGESTS_PER_OUTPUT = 2
MAX_ELEMENTS = (1 << 31) - 1  # per tensor: indices are 32-bit and the launch's ints are C ints
_THREADS = 256
_MAX_BLOCKS = 2048  # fixed, not per GPU: the digest's partial sums (and so its rounding) depend on it
_DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
DTYPES = frozenset(_DTYPES)  # what the kernels read and write in place (others are copied or left to torch)
_M1, _M2 = 0x85EBCA6B, 0xC2B2AE35  # murmur3's fmix32 multipliers

_kernels: dict[str, Any] = {}
_unavailable: str | None = None
_warmed: set[torch.device] = set()


def available(device: torch.device) -> str | None:
    """None when the GPU kernels are ready in this process (compiled now if need be), else why not.
    On the CPU lane always None: the torch version needs nothing."""
    global _unavailable
    if device.type != "cuda" or _kernels:
        return None
    if _unavailable is not None:
        return _unavailable
    try:
        from torch.cuda import _utils as cu  # private: the driver's module loader and kernel launcher

        major, minor = torch.cuda.get_device_capability(device)
        ptx = lightloop.nvrtc_ptx(lightloop.CUDA_SRC, f"compute_{major}{minor}")
        with torch.cuda.device(device):
            loaded = cu._cuda_load_module(ptx, list(_ARGS))
        launch = _driver_launch(cu._get_gpu_runtime_library())
        _kernels.update({name: _Kernel(k, _ARGS[name], launch) for name, k in loaded.items()})
    except Exception as e:  # noqa: BLE001 - NVRTC or the loader missing or failing: reported, never raised here
        _kernels.clear()
        _unavailable = f"{lightloop.UNAVAILABLE}: {type(e).__name__}: {e}"[:400]
    return _unavailable


# each kernel's parameters: p a pointer, i a C int, d a double (lightloop.CUDA_SRC's signatures)
_ARGS = {"ca_draw": "ppiiiidd", "ca_digest": "piiipp", "ca_reduce": "pipi"}
_CTYPES = {"p": ctypes.c_void_p, "i": ctypes.c_int, "d": ctypes.c_double}


def _driver_launch(lib: Any) -> Any:
    """The driver's cuLaunchKernel with its signature declared (opened once, here)."""
    f = lib.cuLaunchKernel
    f.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    f.restype = ctypes.c_int
    return f


_GET_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # absent from CPU builds


def _raw_stream(device: torch.device) -> int:
    """The current stream's handle on `device` (the capturing stream inside a graph's capture)."""
    index = device_index(device)
    if _GET_RAW_STREAM is not None:
        return int(_GET_RAW_STREAM(index))
    return int(torch.cuda.current_stream(index).cuda_stream)


class _Kernel:
    """One loaded kernel, launched through the driver with an argument block built once (why not torch's
    wrapper, torch.cuda._utils._CudaKernel: the module docstring). The parameter values are copied by the
    driver at launch (and into the graph's node at capture), so reusing one block is safe in this
    single-threaded child."""

    def __init__(self, torch_kernel: Any, kinds: str, launch: Any) -> None:
        self.torch_kernel = torch_kernel  # holds the module (and its function handle) alive
        func = getattr(torch_kernel, "func", None)  # torch's private attribute: without it, no lighter loop
        if not isinstance(func, ctypes.c_void_p) or not func.value:
            raise RuntimeError("torch's loaded kernel has no function handle (torch.cuda._utils._CudaKernel.func)")
        self.func = ctypes.c_void_p(func.value)
        self.values = [_CTYPES[k]() for k in kinds]
        self.argv = (ctypes.c_void_p * len(kinds))(
            *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in self.values]
        )
        self.launch = launch

    def __call__(self, device: torch.device, blocks: int, threads: int, *args: Any) -> None:
        if len(args) != len(self.values):
            raise TypeError(f"{len(args)} arguments for {len(self.values)} parameters")
        for v, a in zip(self.values, args, strict=True):
            v.value = a.data_ptr() if isinstance(a, torch.Tensor) else a  # a pointer may come as an address
        rc = self.launch(self.func, blocks, 1, 1, threads, 1, 1, 0, _raw_stream(device), self.argv, None)
        if rc != 0:
            raise RuntimeError(f"CUDA error {rc} launching the lighter loop's kernel")


def warm(device: torch.device) -> None:
    """Compile and run each kernel once (before any timed request): a first launch loads the module.
    Once per process and device; where the kernels are missing, nothing (`ready` raises the reason)."""
    if available(device) is not None or device in _warmed:
        return
    _warmed.add(device)
    if device.type == "cuda":
        _partial(device)
    key = torch.tensor([12345, 678], dtype=torch.int32, device=device)
    t = torch.empty(1 << 12, device=device)
    fill(t, key, "normal", 0.0, 1.0)
    digest_into(t, key, torch.empty(DIGESTS_PER_OUTPUT, device=device))


def fresh_key(device: torch.device) -> torch.Tensor:
    """Two 31-bit words from torch's default generator of `device` (seeded by the burst's salt; graph-safe)."""
    return torch.empty(2, dtype=torch.int32, device=device).random_()


def _need(device: torch.device) -> None:
    if (why := available(device)) is not None:
        raise RuntimeError(why)


def ready(device: torch.device) -> None:
    """The kernels compiled and each launched once on `device` (before any capture: a module may load
    lazily), or a RuntimeError with the reason they cannot be (the same in every child)."""
    _need(device)
    warm(device)


def _blocks(pairs_or_items: int) -> int:
    return max(1, min(_MAX_BLOCKS, -(-pairs_or_items // _THREADS)))


def _chunks(n: int) -> Iterator[tuple[int, int]]:
    """(base, length) pieces of [0, n), each within a C int."""
    if n > 2 * MAX_ELEMENTS:
        raise ValueError(f"a tensor of {n} elements is beyond the counter-based draws' 32-bit index")
    for base in range(0, n, MAX_ELEMENTS):
        yield base, min(MAX_ELEMENTS, n - base)


def fill(t: torch.Tensor, key: torch.Tensor, what: str, a: float, b: float) -> torch.Tensor:
    """Fill contiguous `t` (a dtype in _DTYPES) in place: normals (mean a, std b) or uniforms [a, a+b)."""
    code = 0 if what == "normal" else 1
    if t.device.type == "cuda":
        if not t.is_contiguous():
            raise ValueError("the counter-based draws fill a contiguous tensor")
        _need(t.device)
        # the pieces' addresses by arithmetic, not by slicing: a launch with no torch op (see _Kernel)
        ptr, size = t.data_ptr(), t.element_size()
        for base, n in _chunks(t.numel()):
            _kernels["ca_draw"](
                t.device,
                _blocks((n + 1) // 2),
                _THREADS,
                ptr + base * size,
                key,
                _DTYPES[t.dtype],
                code,
                n,
                base,
                float(a),
                float(b),
            )
        return t
    flat = t.view(-1)
    v = _draw_cpu(flat.numel(), key, code, a, b).to(t.dtype)
    if code == 1:  # one that rounds up to the interval's end is its start (the kernel's ca_store)
        top = torch.tensor(a, dtype=torch.float32) + torch.tensor(b, dtype=torch.float32)
        v = torch.where(v.float() >= top, torch.tensor(a, dtype=t.dtype), v)
    flat.copy_(v)
    return t


def digest_into(x: torch.Tensor, key: torch.Tensor, dst: torch.Tensor) -> None:
    """dst[j] = sum_i s_j(i) x_i for j < DIGESTS_PER_OUTPUT, s_j(i) = +-1 from the keyed hash of i
    (x flat and contiguous; a dtype outside _DTYPES is copied to fp32 first)."""
    if x.dtype not in _DTYPES:
        x = x.to(torch.float32)
    if not x.is_contiguous():  # a strided 1-D view reshapes to itself: the kernel reads plain memory
        x = x.reshape(-1).contiguous()
    if x.device.type != "cuda":
        h = _hash_cpu(key, 0, x.numel())
        v = x.reshape(-1).to(torch.float64)
        for j, bit in enumerate((31, 30)):
            sign = 1.0 - 2.0 * ((h >> bit) & 1).to(torch.float64)
            dst[j] = (sign * v).sum()
        return
    _need(x.device)
    # two launches and no torch op: the partial sums in a buffer made before any capture, then one warp
    # per digest sums them in a fixed order straight into dst (a plain fp32 pair, as a burst's row is)
    out = dst if dst.dtype == torch.float32 and dst.is_contiguous() and dst.device == x.device else None
    into = out if out is not None else torch.empty(DIGESTS_PER_OUTPUT, device=x.device)
    partial = _partial(x.device)
    first = True
    for base, n in _chunks(x.numel()):
        blocks = _blocks(n)
        _kernels["ca_digest"](
            x.device, blocks, _THREADS, x.data_ptr() + base * x.element_size(), _DTYPES[x.dtype], n, base, key, partial
        )
        _kernels["ca_reduce"](x.device, 1, 64, partial, blocks, into, 0 if first else 1)
        first = False
    if first:
        into.zero_()
    if out is None:
        dst.copy_(into)


_partials: dict[int, torch.Tensor] = {}  # by CUDA device index


def _partial(device: torch.device) -> torch.Tensor:
    """The digest's per-block partial sums on `device`, one buffer reused by every digest in stream order.
    Made by `warm`, before any capture (a buffer allocated inside a capture would belong to that graph)."""
    index = device_index(device)
    buf = _partials.get(index)
    if buf is None:
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError("the lighter loop's digest buffer is made by hashed.warm, before any capture")
        buf = _partials[index] = torch.empty(_MAX_BLOCKS * DIGESTS_PER_OUTPUT, device=torch.device("cuda", index))
    return buf


# -- the CPU lane's version of the same numbers ------------------------------------------------------


def _fmix_cpu(h: torch.Tensor) -> torch.Tensor:
    mask = 0xFFFFFFFF
    h = h ^ (h >> 16)
    h = (h * _M1) & mask
    h = h ^ (h >> 13)
    h = (h * _M2) & mask
    return h ^ (h >> 16)


def _hash_cpu(key: torch.Tensor, base: int, n: int) -> torch.Tensor:
    """The kernels' ca_hash of indices base .. base+n-1 under `key`, as int64 holding uint32 values."""
    k0, k1 = (int(v) & 0xFFFFFFFF for v in key.tolist()[:2])
    i = torch.arange(base, base + n, dtype=torch.int64) & 0xFFFFFFFF
    return _fmix_cpu((_fmix_cpu(i ^ k0) + k1) & 0xFFFFFFFF)


def _draw_cpu(n: int, key: torch.Tensor, code: int, a: float, b: float) -> torch.Tensor:
    h = _hash_cpu(key, 0, n + (n & 1))
    if code == 1:
        return (a + b * ((h >> 8).to(torch.float32) * 2.0**-24))[:n]
    h0, h1 = h[0::2], h[1::2]
    u = ((h0 >> 8) + 1).to(torch.float32) * 2.0**-24
    theta = ((h1 >> 8).to(torch.float32) * 2.0**-24 - 0.5) * (2 * math.pi)
    r = torch.sqrt(-2.0 * torch.log(u))
    out = torch.stack([a + b * r * torch.cos(theta), a + b * r * torch.sin(theta)], dim=1).reshape(-1)
    return out[:n]


# -- the draws' patch ---------------------------------------------------------------------------------

_ORIGINAL: dict[str, Any] = {}


def _size(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, ...] | None:
    if "size" in kwargs:
        args = (kwargs.pop("size"),)
    if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)):
        args = tuple(args[0])
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in args):
        return None
    return tuple(args)


def _same(a: torch.device, b: torch.device) -> bool:
    """ "cuda" and "cuda:0" are one device where either leaves the index to the current one."""
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


_PLAIN = {"dtype", "device", "requires_grad", "layout", "memory_format"}


def _ours(dtype: torch.dtype, device: torch.device, kwargs: dict[str, Any]) -> bool:
    """Whether a draw is one this module makes: a float dtype it writes, on the evaluation's device,
    no generator, out= or other option it does not honour."""
    if set(kwargs) - _PLAIN or kwargs.get("layout", torch.strided) != torch.strided:
        return False
    return dtype in _DTYPES and device.type in ("cuda", "cpu")


_NAMES = ("randn", "rand", "randn_like", "rand_like", "normal_", "uniform_")


def _owner(name: str) -> Any:
    return torch.Tensor if name.endswith("_") else torch


_TORCH = {n: getattr(_owner(n), n) for n in _NAMES}  # at import, before any task


def _orig(name: str) -> Any:
    """torch's draw as found when the patch was entered (import time's, for a wrapper kept past the patch)."""
    return _ORIGINAL.get(name) or _TORCH[name]


_wrappers: dict[torch.device, dict[str, Any]] = {}


def _settle_device_context() -> None:
    """Have torch's device context (`with torch.device(...)`) list its constructors now, from torch's own.
    It builds that set once, on its first use in the process; built while the patch stands, the set holds the
    patch's wrappers instead of torch.randn and the rest, and for the rest of the process every such draw under
    a device context lands on the CPU, from the CPU's generator (seen on an H100, 2026-12-07: a task's
    torch.randn under `with device` after a burst whose loop was the first to use the context)."""
    with contextlib.suppress(ImportError, AttributeError):
        from torch.utils._device import _device_constructors

        _device_constructors()


def _make_wrappers(device: torch.device) -> dict[str, Any]:
    """The six draws served by `fill` on `device`, made once per device: entering the patch then only swaps
    six attributes (a burst's loop enters it once a call, in a capture and in the reference's re-run).
    Each calls torch's own, as found when the patch was entered, for a draw it does not serve."""

    def make(what: str, like: bool) -> Any:
        name = ("rand" if what == "uniform" else "randn") + ("_like" if like else "")

        def draw(*args: Any, **kwargs: Any) -> Any:
            opts = dict(kwargs)
            if like:
                if len(args) != 1 or not isinstance(args[0], torch.Tensor):
                    return _orig(name)(*args, **kwargs)
                size, dtype = tuple(args[0].shape), opts.pop("dtype", None) or args[0].dtype
                dev = torch.device(opts.pop("device", None) or args[0].device)
            else:
                size = _size(args, opts)
                dtype = opts.pop("dtype", None) or torch.get_default_dtype()
                dev = torch.device(opts.pop("device", None) or device)
            if size is None or not _same(dev, device) or not _ours(dtype, dev, opts):
                return _orig(name)(*args, **kwargs)
            t = torch.empty(size, dtype=dtype, device=dev)
            fill(t, fresh_key(dev), what, 0.0, 1.0)
            return t.requires_grad_(bool(opts.get("requires_grad", False)))

        return draw

    def make_inplace(what: str) -> Any:
        name = "normal_" if what == "normal" else "uniform_"

        def draw_(self: torch.Tensor, a: float = 0.0, b: float = 1.0, *, generator: Any = None) -> torch.Tensor:
            if (
                generator is not None
                or not _same(self.device, device)
                or self.dtype not in _DTYPES
                or not self.is_contiguous()
            ):
                return _orig(name)(self, a, b, generator=generator)
            return fill(self, fresh_key(device), what, float(a), float(b) if what == "normal" else float(b) - float(a))

        return draw_

    return {
        "randn": make("normal", False),
        "rand": make("uniform", False),
        "randn_like": make("normal", True),
        "rand_like": make("uniform", True),
        "normal_": make_inplace("normal"),
        "uniform_": make_inplace("uniform"),
    }


@contextlib.contextmanager
def patched(device: torch.device) -> Iterator[None]:
    """torch's float draws on `device` served by `fill` with a fresh key each (module docstring)."""
    if _ORIGINAL:  # nested: the outer patch stands
        yield
        return
    wrappers = _wrappers.get(device)
    if wrappers is None:
        _settle_device_context()  # before the first swap, ever
        wrappers = _wrappers[device] = _make_wrappers(device)
    for name in _NAMES:
        _ORIGINAL[name] = getattr(_owner(name), name)
    try:
        for name in _NAMES:
            setattr(_owner(name), name, wrappers[name])
        yield
    finally:
        for name in _NAMES:
            setattr(_owner(name), name, _ORIGINAL[name])
        _ORIGINAL.clear()
