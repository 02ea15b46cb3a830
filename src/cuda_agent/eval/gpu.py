"""Which CUDA GPU the parent would evaluate on, without running candidate code.

Contract: `detect()` returns the name, compute capability and UUID of the
current CUDA device, read in the trusted parent, or None when torch sees no
CUDA GPU (a CPU-only build, no driver, or CUDA_VISIBLE_DEVICES empty). It never
raises for a missing GPU. `GPU.key` names the physical device (its UUID; the
index only where no UUID is readable) for per-GPU locks.
`arch_from_env()` reads the first entry of TORCH_CUDA_ARCH_LIST ("9.0").
A process asks the CUDA driver once: the devices it sees are fixed by CUDA_VISIBLE_DEVICES at
that first query, and a later change of the variable is not seen. So `detect()` never asks
under an empty CUDA_VISIBLE_DEVICES (no device, by definition: a pool worker started for a
CPU task, as Ray starts them, stays free to evaluate on a GPU it leases later), and
`view_fixed_under()` says the visibility of the first query, for a caller that changes the
variable in-process (`pool.gpu_lease`) and must know whether the change can still take.

Not guaranteed: that the device is idle or exclusive; the pool that schedules
evaluations owns that.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class GPU:
    name: str
    capability: str  # "9.0"
    uuid: str = ""  # "GPU-..." as nvidia-smi prints it; "" where unreadable

    @property
    def key(self) -> str:
        if self.uuid:
            return self.uuid
        if self.name == "cpu":
            return "cpu"
        return "index-" + (os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0")


_first_query: str | None = None  # CUDA_VISIBLE_DEVICES at this process's first driver query ("" for unset)


def view_fixed_under() -> str | None:
    """CUDA_VISIBLE_DEVICES ("" for unset) when this process first asked the driver, None if it never did."""
    return _first_query


def detect() -> GPU | None:
    global _first_query
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and not visible.strip():
        return None  # asking the driver now would fix this process's view at no device
    if _first_query is None:
        _first_query = visible or ""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        major, minor = torch.cuda.get_device_capability()
        raw = str(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "uuid", "") or "")
        uuid = raw if not raw or raw.startswith(("GPU-", "MIG-")) else f"GPU-{raw}"
        return GPU(torch.cuda.get_device_name(), f"{major}.{minor}", uuid)
    except (RuntimeError, AssertionError, OSError):
        return None


def arch_from_env() -> str | None:
    value = os.environ.get("TORCH_CUDA_ARCH_LIST", "").replace(";", " ").split()
    if not value:
        return None
    first = value[0].removesuffix("+PTX")
    return first if first.replace(".", "").isdigit() and "." in first else None
