"""What every evaluation child command shares: its state, the task's inputs, outputs described.

Contract: `State` is one child's state (role, task, model, device, kept reference outputs, guard
log). `make_inputs(st, seed)` draws the task's inputs on the evaluation device under one seed, so
both children draw the same tensors; `grow_inputs` joins two sets along the batch-like
dimension (the shape probe). `hijack()` reads the test-only switch (`child`'s docstring).
Imports only the standard library and torch.

Not guaranteed: anything once candidate code runs in the process (see `child`).
"""

from __future__ import annotations

import importlib.util
import os
import random
import sys
from pathlib import Path
from typing import Any

import torch

from cuda_agent.eval.channel.tensorfile import Staging, dtype_name


class State:
    def __init__(self, role: str):
        self.role = role
        self.task: Any = None
        self.model: Any = None
        self.device = torch.device("cuda", 0)  # setup may switch to "cpu" (harness tests only)
        self.out_nbytes = 0
        self.notes: list[str] = []
        self.kept: dict[str, list[Any]] = {}  # reference role: outputs by label, for `compare`
        self.guard = False  # candidate role: op log and thread census (runtime_checks)
        self.peer_io: str | None = None  # reference role: the candidate's io dir (setup)
        self.compiled: Any = None  # reference role: torch.compile of the model, made once (baselines, bursts)
        self.extra_baselines: dict[str, Any] = {}  # reference role: the extra baselines' callables (baseline_set)
        self.loop_outs: list[Any] | None = None  # reference role: the outputs a "loop" burst returns (Warm)
        self.bursts: dict[tuple[str, int], Any] = {}  # prepared bursts by (mode, k): child_burst.Plan
        self.ops: dict[str, int] = {}
        self.threads: list[str] = []
        self._staging: Staging | None = None

    @property
    def staging(self) -> Staging:
        """The host buffer every output file passes through (pinned on a GPU), made on first use."""
        if self._staging is None:
            self._staging = Staging(pin=self.device.type == "cuda")
        return self._staging

    def guard_report(self) -> dict[str, Any]:
        return {"ops": dict(self.ops), "new_threads": list(self.threads)}


def import_file(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def device_index(device: torch.device) -> int:
    """A CUDA device's index, the current one where the device leaves it open ("cuda")."""
    return device.index if device.index is not None else torch.cuda.current_device()


def seed_all(seed: int) -> None:
    random.seed(seed)
    if torch.cuda.is_initialized():
        # What torch.manual_seed does to the two generators a task can draw from (the CPU's and each
        # GPU's), without its walk over the mps/xpu/mtia and custom back-ends (55 us a call): fresh
        # timing inputs reseed before each of up to 1000 timed calls (timing.time_calls).
        for gen in torch.cuda.default_generators:
            gen.manual_seed(seed)
        torch.default_generator.manual_seed(seed)
    else:  # before CUDA's start, torch queues the GPUs' seeding for it; let it
        torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % (2**32))
    except ImportError:
        pass


def make_inputs(st: State, seed: int) -> list[Any]:
    # Drawn on the evaluation device: tensors the task creates without a device
    # come straight from the device generator (seconds faster than CPU randn for
    # large inputs) and are identical in both children for the same seed.
    seed_all(seed)
    with st.device:
        inputs = st.task.get_inputs()
    return [x.to(st.device) if isinstance(x, torch.Tensor) else x for x in inputs]


def grow_inputs(a: list[Any], b: list[Any]) -> list[Any]:
    """The shape probe's inputs: two input sets joined along dim 0, for every tensor whose dim 0
    equals the first tensor's (the batch-like dimension); other inputs come from `a`."""
    first = next((x for x in a if isinstance(x, torch.Tensor) and x.dim() >= 1), None)
    if first is None:
        raise ValueError("no tensor input with a leading dimension to grow")
    d = first.shape[0]
    return [
        torch.cat([x, y]) if isinstance(x, torch.Tensor) and x.dim() >= 1 and x.shape[0] == d else x
        for x, y in zip(a, b, strict=True)
    ]


def flatten(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def describe(t: Any, inputs: list[Any]) -> dict[str, Any]:
    if not isinstance(t, torch.Tensor):
        return {"tensor": False, "type": type(t).__name__}
    input_ptrs = {x.untyped_storage().data_ptr() for x in inputs if isinstance(x, torch.Tensor)}
    return {
        "tensor": True,
        "plain": type(t) is torch.Tensor or type(t) is torch.nn.Parameter,
        "dtype": dtype_name(t.dtype),
        "shape": list(t.shape),
        "device": str(t.device),
        "contiguous": t.is_contiguous(),
        "nbytes": t.numel() * t.element_size(),
        "aliases_input": t.untyped_storage().data_ptr() in input_ptrs,
    }


def sync(st: State) -> None:
    if st.device.type == "cuda":
        torch.cuda.synchronize()


def poison(st: State) -> None:
    # Fill a block of the size of the last outputs with NaN bytes and free it,
    # so an output that is allocated but never written reads as NaN.
    if st.out_nbytes:
        p = torch.empty(st.out_nbytes, dtype=torch.uint8, device=st.device)
        p.fill_(0xFF)
        del p


def hijack() -> dict[str, str]:
    """The test-only hijack switch (module docstring), e.g. "fake_time=0.1" (report faster times),
    "spoof_gpu=NAME", "reply_path=/p" (name another file for the reference), "remount=/p" (make the
    file system writable and plant /p), "fake_digest=1" (skip the burst's work), "drop_guard=1"."""
    raw = os.environ.get("CUDA_AGENT_TEST_HIJACK", "")
    return dict(kv.split("=", 1) for kv in raw.split(",") if "=" in kv)
