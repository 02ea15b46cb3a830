"""Runtime defences inside the candidate child: an ATen op log and a thread census.

Contract:
- `OpLog` is a `TorchDispatchMode`; the child enters it around the candidate's
  forward during the correctness runs and around one extra call on a fresh
  timing input after the timed calls (never around a timed call, so it adds no
  time to them). It counts every ATen op that reaches the dispatcher on that
  thread, including the ones the C++ extension issues through `torch::` / `at::`
  (those go through the same dispatcher). Raw CUDA kernels launched by the
  extension are not ATen ops and are not seen, which is the point: they are the
  candidate's own work.
- The allow-list (`checks/runtime.py`, the parent's) is: allocation (the same set the static
  rule admits: empty / empty_like / empty_strided / zeros / zeros_like, their
  `new_*` method forms and `zero_`), views and reshapes that create no values
  (view, _unsafe_view, reshape, as_strided, expand, t, transpose, permute,
  squeeze, unsqueeze, slice, select, narrow, unflatten, split/chunk views,
  alias, detach) and same-dtype copies (clone, copy_, _to_copy, contiguous).
  A copy that changes the dtype is logged as `<op>(dtype change)` and is not
  allowed: a cast is computation (and lowers precision). Everything else
  (add, mul, relu, mm, sum, fill_, ...) is reported; the parent turns it into a
  REJECT finding `runtime-aten-op`.
- `thread_ids()` / `new_threads(before)` take a census of this process's
  threads (`/proc/self/task`, with `threading.active_count()` as a fallback).
  A thread that appears during the candidate's forward (or during the timed
  calls) and is still alive afterwards gives REJECT finding `runtime-thread`.
  Threads the CUDA driver names itself (`cuda-EvtHandlr`, `cuda0000...`) are
  ignored: the driver starts them lazily and they do no candidate work.
- `checks/runtime.py` turns the child's report into `Finding`s in the parent
  (the allow-list decision is made in the trusted process).

Imports only the standard library and torch (it runs inside evaluation children).

Not guaranteed: the child process also runs candidate code, which can detect
the mode (`torch._C._get_dispatch_mode`, `_DisableTorchDispatch`), behave
differently without it, or forge the report; the static checks reject the
`torch._C` / frame / monkey-patching forms of that, and the correctness of the
timed outputs is checked independently. Ops issued from a thread other than
the forward's are not logged (the thread census covers threads that outlive
the call; a thread that starts and finishes inside the call is not seen).
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Copies the op log inspects for a dtype change (a cast is computation); the parent's allow-list has the same set.
COPIES = frozenset({"aten::clone", "aten::copy_", "aten::_to_copy", "aten::contiguous"})
_CUDA_DRIVER_THREAD_PREFIXES = ("cuda-", "cuda0")


def _first_dtype(x: Any) -> torch.dtype | None:
    if isinstance(x, torch.Tensor):
        return x.dtype
    if isinstance(x, (list, tuple)):
        for y in x:
            d = _first_dtype(y)
            if d is not None:
                return d
    return None


class OpLog(TorchDispatchMode):
    """Counts the ATen ops executed while active (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        name = func._schema.name
        if name in COPIES:
            src = _first_dtype(args[1] if name == "aten::copy_" and len(args) > 1 else args[:1])
            dst = _first_dtype(out)
            if src is not None and dst is not None and src != dst:
                name += "(dtype change)"
        self.ops[name] += 1
        return out


def thread_ids() -> set[str]:
    """Ids of this process's live threads (tids from /proc; Python idents elsewhere)."""
    try:
        return set(os.listdir("/proc/self/task"))
    except OSError:
        return {f"py{t.ident}" for t in threading.enumerate()}


def _thread_name(tid: str) -> str:
    try:
        with open(f"/proc/self/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def new_threads(before: set[str]) -> list[str]:
    """Threads alive now that were not in `before`, minus CUDA driver threads."""
    names = []
    for tid in sorted(thread_ids() - before):
        name = _thread_name(tid)
        if not name.startswith(_CUDA_DRIVER_THREAD_PREFIXES):
            names.append(f"{name} (tid {tid})")
    return names
