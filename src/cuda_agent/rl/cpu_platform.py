"""verl's device platform for a machine without an accelerator: torch on the CPU, gloo.

Registered under the name "cpu" by rl.verl_plugins (verl picks it with VERL_PLATFORM=cpu,
which `rl train` sets for a config with `trainer.device=cpu`).

Contract: `PlatformCPU` answers verl's platform interface for the CPU: device name "cpu",
collective backend "gloo", current device "cpu" (not an index: verl moves tensors
to whatever this returns), no IPC, no profiler, no CUDA runtime. Its `device_module`
is `torch.cpu` plus the calls verl makes on a CUDA-like module (`empty_cache`,
`mem_get_info`, RNG state, memory counters), which are no-ops or host figures here.
Ray placements still ask for the resource "GPU": each training process is one slot, and
`rl train` starts a local Ray with as many "GPU" slots as the config's
`trainer.n_gpus_per_node` (verl's resource check counts only GPU or NPU). The slots are
bookkeeping; nothing touches a GPU.
Not guaranteed: speed (this is the debugging mode: one machine, a tiny model, the whole
loop); anything verl does only for CUDA (fused kernels, remove-padding, torch.compile,
vLLM/SGLang rollouts).
"""

from __future__ import annotations

import types
from contextlib import contextmanager
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase


def _device_module() -> types.ModuleType:
    m = types.ModuleType("cuda_agent_cpu_device")
    for name in dir(torch.cpu):
        if not name.startswith("_"):
            setattr(m, name, getattr(torch.cpu, name))

    def mem_get_info(device: Any = None) -> tuple[int, int]:
        import psutil

        vm = psutil.virtual_memory()
        return vm.available, vm.total

    zero = lambda *a, **k: 0  # noqa: E731 - memory counters of a device that does not exist
    none = lambda *a, **k: None  # noqa: E731
    m.empty_cache = none
    m.ipc_collect = none
    m.set_per_process_memory_fraction = none
    m.reset_peak_memory_stats = none
    m.mem_get_info = mem_get_info
    m.memory_allocated = m.memory_reserved = m.max_memory_allocated = m.max_memory_reserved = zero
    m.get_rng_state = lambda *a, **k: torch.get_rng_state()
    m.set_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
    m.manual_seed = m.manual_seed_all = lambda seed: torch.manual_seed(seed)
    m.get_device_name = lambda *a, **k: "cpu"
    return m


class PlatformCPU(PlatformBase):
    _module: types.ModuleType | None = None

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        if PlatformCPU._module is None:
            PlatformCPU._module = _device_module()
        return PlatformCPU._module

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return False  # never auto-detected: chosen only by name (VERL_PLATFORM=cpu)

    def current_device(self) -> str:  # type: ignore[override]
        # verl passes this to `.to(...)` and `torch.device(...)`; an index would mean cuda:0
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):  # noqa: ANN201 - verl's signature
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"  # a training slot (see the module docstring)

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None
