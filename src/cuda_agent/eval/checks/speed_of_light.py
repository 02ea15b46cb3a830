"""The speed-of-light flag: a time no correct kernel can reach on this device.

Contract: `floor_ms(bytes_moved, bytes_per_s)` is the time to read every input
once and write every output once at the device's memory bandwidth;
`finding(time_ms, floor)` returns a WARN finding `faster-than-light` when the
measured time is below `MARGIN` times that floor (a result that good means
the work was skipped, cached or hidden from the timer, or the task reads only
part of its inputs). `bandwidth_for(gpu_name)` gives a known figure for common
GPUs (H200: about 4.3e12 B/s measured with a device copy); for others the
pipeline measures a device copy once in the reference child and caches it per
GPU name. Pure functions, standard library only.

Not guaranteed: flops are not counted (a compute-bound task's real floor is
higher, so the flag is conservative), and inputs a task never reads make the
floor too high: that is why the finding is a warning, not a rejection.
"""

from __future__ import annotations

from cuda_agent.eval.judge.result import Finding, Severity

MARGIN = 0.5
_KNOWN_BYTES_PER_S = {"H200": 4.3e12, "H100": 3.0e12, "A100": 1.7e12, "H20": 3.6e12}


def bandwidth_for(gpu_name: str | None) -> float | None:
    name = (gpu_name or "").upper()
    for key, bw in _KNOWN_BYTES_PER_S.items():
        if key in name.split() or f" {key}" in f" {name}":
            return bw
    return None


def floor_ms(bytes_moved: int, bytes_per_s: float) -> float:
    return bytes_moved / bytes_per_s * 1e3


def finding(time_ms: float | None, floor: float | None, bytes_moved: int, bytes_per_s: float | None) -> Finding | None:
    if not time_ms or not floor or time_ms >= MARGIN * floor:
        return None
    return Finding(
        "faster-than-light",
        f"{time_ms:.4g} ms is below {MARGIN:g}x the memory floor of this task ({floor:.4g} ms to move "
        f"{bytes_moved / 1e6:.4g} MB at {bytes_per_s / 1e9:.4g} GB/s): work skipped, cached or hidden from the timer?",
        Severity.WARN,
    )
