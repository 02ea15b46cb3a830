"""Run a task just far enough to see the dtypes of its tensors; a script, run in its own process.

`python dtype_probe.py TASK.py OUT.json` builds `Model(*get_init_inputs())`, draws `get_inputs()` and
runs `forward` once, all on the meta device (no memory behind any tensor, so a 1M x 128 table or two
4096 x 14336 inputs cost nothing), and writes to OUT.json the dtype counts of the inputs, the init
inputs, the parameters, the buffers and the outputs. A device the task names (`device="cuda"`,
`.cuda()`, `.to("cuda")`, `Module.cuda()`) is redirected to the meta device too, so the task needs no
GPU and touches none. Where the meta run fails (a `.item()` in `__init__`, tensors from numpy), the
task is built again on the CPU for real under a cap on the process's data (2 GiB beyond what torch
itself takes), and `forward` runs on meta copies of its model and inputs. Only the standard library and torch are imported (it is
run by path, outside the package); the caller (`precision.py`) owns the timeout and reads OUT.json,
never the task's own output.
"""

from __future__ import annotations

import importlib.util
import json
import resource
import sys
from collections import Counter
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

DATA_CAP = 2 << 30  # bytes of data the CPU fallback may add to what torch itself holds


class Redirect(TorchFunctionMode):
    """Every device the task names becomes `target`; dtype conversions stay what they are."""

    def __init__(self, target: str) -> None:
        super().__init__()
        self.target = target

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        if func in (torch.Tensor.cuda, torch.Tensor.cpu):
            return args[0]
        if func is torch.Tensor.to:
            dtype = kwargs.get("dtype")
            for a in args[1:]:
                if isinstance(a, torch.dtype):
                    dtype = a
                elif isinstance(a, torch.Tensor):
                    dtype = a.dtype
            return args[0] if dtype is None else func(args[0], dtype)
        if kwargs.get("device") is not None:
            kwargs["device"] = self.target
        return func(*args, **kwargs)


def _tensors(x: Any, out: list) -> list:
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _tensors(v, out)
    elif isinstance(x, dict):
        for v in x.values():
            _tensors(v, out)
    return out


def _count(items: Any) -> dict[str, int]:
    c: Counter[str] = Counter()
    for x in items if isinstance(items, (list, tuple)) else [items]:
        ts = _tensors(x, [])
        if ts:
            c.update(str(t.dtype).removeprefix("torch.") for t in ts)
        elif isinstance(x, (bool, int, float)):
            c["scalar"] += 1
    return dict(c)


def _to_meta(x: Any) -> Any:
    if isinstance(x, (torch.Tensor, torch.nn.Module)):
        return x.to("meta")
    if isinstance(x, (list, tuple)):
        return type(x)(_to_meta(v) for v in x)
    return x


def probe(path: str, target: str) -> dict[str, Any]:
    """Build the task on `target` ("meta", or "cpu" for real) and count its dtypes; `forward` runs on meta."""
    spec = importlib.util.spec_from_file_location("cuda_agent_dtype_probe_task", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    torch.manual_seed(0)
    with torch.device(target), Redirect(target), torch.no_grad():
        spec.loader.exec_module(mod)
        init = list(mod.get_init_inputs())
        model = mod.Model(*init)
        inputs = list(mod.get_inputs())
    got: dict[str, Any] = {
        "inputs": _count(inputs),
        "init_inputs": {k: n for k, n in _count(init).items() if k != "scalar"},
        "parameters": _count([p for _, p in model.named_parameters()]) if hasattr(model, "named_parameters") else {},
        "buffers": _count([b for _, b in model.named_buffers()]) if hasattr(model, "named_buffers") else {},
    }
    try:
        if target != "meta":  # a forward on the CPU could take long: its dtypes are the same on meta copies
            model, inputs = _to_meta(model), _to_meta(inputs)
        with torch.device("meta"), Redirect("meta"), torch.no_grad():
            got["outputs"] = _count(model(*inputs))
    except Exception as e:  # noqa: BLE001 - a forward that meta cannot run tells us nothing more
        got["forward_error"] = f"{type(e).__name__}: {e}"[:200]
    return got


def _data_now() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def main(path: str, out: str) -> None:
    result: dict[str, Any]
    try:
        result = {"stage": "meta", **probe(path, "meta")}
    except Exception as e:  # noqa: BLE001 - any failure of the task sends us to the fallback
        meta_error = f"{type(e).__name__}: {e}"[:200]
        try:
            cap = _data_now() + DATA_CAP
            resource.setrlimit(resource.RLIMIT_DATA, (cap, resource.getrlimit(resource.RLIMIT_DATA)[1]))
        except (OSError, ValueError):
            pass
        try:
            result = {"stage": "cpu", "meta_error": meta_error, **probe(path, "cpu")}
        except BaseException as e2:  # noqa: BLE001 - MemoryError included
            cpu_error = f"{type(e2).__name__}: {e2}"[:200]
            result = {
                "error": meta_error
                if cpu_error == meta_error
                else f"on meta tensors {meta_error}; on the CPU {cpu_error}"
            }
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
