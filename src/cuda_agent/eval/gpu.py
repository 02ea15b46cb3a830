"""Which CUDA GPU the parent would evaluate on, without running candidate code.

Contract: `detect()` returns the name and compute capability of the current
CUDA device, or None when torch sees no CUDA GPU (a CPU-only build, no
driver, or CUDA_VISIBLE_DEVICES empty). It never raises for a missing GPU.
`arch_from_env()` reads the first entry of TORCH_CUDA_ARCH_LIST ("9.0").

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


def detect() -> GPU | None:
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        major, minor = torch.cuda.get_device_capability()
        return GPU(torch.cuda.get_device_name(), f"{major}.{minor}")
    except (RuntimeError, AssertionError, OSError):
        return None


def arch_from_env() -> str | None:
    value = os.environ.get("TORCH_CUDA_ARCH_LIST", "").replace(";", " ").split()
    if not value:
        return None
    first = value[0].removesuffix("+PTX")
    return first if first.replace(".", "").isdigit() and "." in first else None
