"""The GPU's ceilings, measured once per GPU model and cached, and the one-line roofline verdict.

Contract:
- `Ceilings`: the device-copy bandwidth (bytes/s: a large tensor copied, read + write counted) and
  the GEMM rate (FLOP/s) per dtype, as `child/profiling.py`'s `ceilings` mode measures them in the sandbox
  on the evaluated GPU. Measured, not a spec sheet: the ceiling is what this machine's own best
  library code reaches, which is the honest bar for a candidate on it.
- `load(gpu_name, root)` / `store(c, root)`: a JSON file per GPU model under `root`
  (`$CUDA_AGENT_CACHE/profile/`); a damaged or foreign file reads as missing (measured again).
- `verdict(...)` is one line per kernel: with counters, the achieved DRAM bytes/s and CUDA-core
  FLOP/s against the ceilings, bound by whichever share is larger (the kernel is nearer that roof);
  where tensor cores ran (their FLOPs are not counted), ncu's own SM throughput share stands in and
  the line says so. Without counters, `call_verdict` judges the whole call from the task's bytes
  floor (inputs read once, outputs written once) and the event time: a model, and the line says so.

Not guaranteed: the copy and GEMM ceilings are one size each (1 GiB copy; 8192^3 GEMM, 4096^3 in
fp32); a kernel can beat a ceiling by a few percent (caches, a better GEMM), shown as such, not
clipped. The dtype of a kernel's arithmetic is not known: the GEMM ceiling of the task's precision is
used. Standard library only.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

VERSION = 1


@dataclass
class Ceilings:
    gpu: str
    copy_bytes_per_s: float
    gemm_flops_per_s: dict[str, float] = field(default_factory=dict)  # dtype ("fp32", "bf16", ...) -> FLOP/s
    measured_at: str = ""  # ISO time of the measurement
    how: str = ""  # what was measured (sizes, repeats)
    version: int = VERSION

    def gemm(self, precision: str) -> float | None:
        return self.gemm_flops_per_s.get(precision) or self.gemm_flops_per_s.get("fp32")


def _file(gpu_name: str, root: Path) -> Path:
    return root / f"ceilings-{re.sub(r'[^A-Za-z0-9_.-]+', '_', gpu_name).strip('_') or 'gpu'}.json"


def load(gpu_name: str, root: Path) -> Ceilings | None:
    try:
        d = json.loads(_file(gpu_name, root).read_text())
        c = Ceilings(**d)
    except (OSError, ValueError, TypeError):
        return None
    ok = (
        c.version == VERSION
        and c.gpu == gpu_name
        and c.copy_bytes_per_s > 0
        and all(isinstance(v, float | int) and v > 0 for v in c.gemm_flops_per_s.values())
    )
    return c if ok else None


def store(c: Ceilings, root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    f = _file(c.gpu, root)
    tmp = f.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(c), indent=1))
    tmp.replace(f)
    return f


def from_child(gpu_name: str, reply: dict) -> Ceilings | None:
    """The `ceilings` reply of profile_child, checked: positive finite numbers only."""
    try:
        bw = float(reply["copy_bytes_per_s"])
        gemm = {str(k): float(v) for k, v in dict(reply["gemm_flops_per_s"]).items()}
    except (KeyError, TypeError, ValueError):
        return None
    if not (0 < bw < 1e15) or not all(0 < v < 1e17 for v in gemm.values()):
        return None
    return Ceilings(gpu_name, bw, gemm, str(reply.get("measured_at", "")), str(reply.get("how", ""))[:200])


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def verdict(
    duration_ns: float | None,
    dram_bytes: float | None,
    flops: float | None,
    tensor: bool,
    sm_pct: float | None,
    dram_pct: float | None,
    ceil: Ceilings | None,
    precision: str,
) -> str:
    """One line: 'memory-bound: 1.9 TB/s, 45 % of the measured copy bandwidth (4.2 TB/s)' or the like."""
    if not duration_ns or duration_ns <= 0:
        return "no verdict: no duration"
    s = duration_ns * 1e-9
    if ceil is None:
        if dram_pct is None or sm_pct is None:
            return "no verdict: no ceilings measured and no throughput counters"
        side = "memory" if dram_pct >= sm_pct else "compute"
        return f"{side}-bound by ncu's peaks (no measured ceilings): DRAM {dram_pct:.0f} %, SM {sm_pct:.0f} % of peak"
    bw = (dram_bytes or 0.0) / s
    mem_share = bw / ceil.copy_bytes_per_s
    gemm = ceil.gemm(precision)
    if tensor and sm_pct is not None:
        comp_share, comp = (
            sm_pct / 100,
            f"SM throughput {sm_pct:.0f} % of ncu's peak (tensor cores ran; their FLOPs are not counted)",
        )
    elif flops is not None and gemm:
        rate = flops / s
        comp_share, comp = (
            rate / gemm,
            f"{rate / 1e12:.3g} TFLOP/s, {_pct(rate / gemm)} of the measured {precision} GEMM ({gemm / 1e12:.3g} TFLOP/s)",
        )
    else:
        comp_share, comp = None, ""
    mem = f"{bw / 1e12:.3g} TB/s DRAM, {_pct(mem_share)} of the measured copy bandwidth ({ceil.copy_bytes_per_s / 1e12:.3g} TB/s)"
    if dram_bytes is None and comp_share is None:
        return "no verdict: no DRAM bytes or FLOP counters"
    if comp_share is None or (dram_bytes is not None and mem_share >= comp_share):
        return f"memory-bound at {_pct(mem_share)} of peak bandwidth: {mem}"
    return f"compute-bound at {_pct(comp_share)} of peak: {comp}"


def call_verdict(time_ms: float | None, bytes_moved: int | None, ceil: Ceilings | None) -> str:
    """Without counters: the whole call against the copy ceiling, from the task's bytes floor (modelled)."""
    if not time_ms or not bytes_moved or ceil is None:
        return "no verdict: needs the call's time, the task's bytes and a measured copy bandwidth"
    bw = bytes_moved / (time_ms * 1e-3)
    share = bw / ceil.copy_bytes_per_s
    word = (
        "memory-bound"
        if share >= 0.5
        else "well below the memory roof (compute, latency or launch bound, or wasteful access: counters would tell)"
    )
    return (
        f"whole call (modelled: inputs read once, outputs written once, no counters): {word}, "
        f"{bw / 1e12:.3g} TB/s = {_pct(share)} of the measured copy bandwidth ({ceil.copy_bytes_per_s / 1e12:.3g} TB/s)"
    )
