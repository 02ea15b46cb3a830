"""Evaluation child: runs one model, the candidate or the reference, for the parent.

Started by `procs.Child` as `python -m cuda_agent.eval.child --role R --fd-in A
--fd-out B`. It reads JSON commands from fd A and writes one JSON reply per
command to fd B; tensors travel through files the parent names
(`tensorfile`). Commands: `setup` (load the task, build Model under a seed;
for the candidate also load the built extension and ModelNew, copying
Model's state_dict into it), `run` (outputs for given input seeds, with
outputs poisoned before each call and inputs checked unchanged after it),
`time` (per-call device timing, `timing.time_calls`, with fresh inputs per
timed call when the parent sends `fresh_seed`), `compare` (reference role:
check a candidate's output file against outputs kept on the device, so large
outputs never cross to the parent), `controls` (reference role: negative
controls for `lint-task`), `bandwidth` (a device copy, for the speed-of-light
flag), `exit`. With `guard` at setup (candidate role), `run` and `time` also
report the runtime defences of `runtime_checks`: the ATen ops executed in the
forward (correctness runs and one untimed call on a fresh timing input) and
threads that outlived a call.

Contract: imports only the standard library, numpy and torch before the
candidate is loaded. The reference role never sees candidate code; the
candidate role never sees reference outputs. Any exception becomes a reply
with `ok: false`; the parent kills the process after it.

Not guaranteed: anything once candidate code runs in this process. It can
read this process's memory and fds; the parent treats every reply from the
candidate role as untrusted data.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from cuda_agent.eval.compare import compare_outputs
from cuda_agent.eval.result import CheckRecord
from cuda_agent.eval.runtime_checks import OpLog, new_threads, thread_ids
from cuda_agent.eval.tensorfile import Staging, TensorFileError, dtype_name, load_tensors, save_tensors
from cuda_agent.eval.timing import derive_seed, make_clock, time_calls


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


def _import_file(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _seed_all(seed: int) -> None:
    random.seed(seed)
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
    _seed_all(seed)
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
    return [torch.cat([x, y]) if isinstance(x, torch.Tensor) and x.dim() >= 1 and x.shape[0] == d else x
            for x, y in zip(a, b, strict=True)]


def _flatten(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _describe(t: Any, inputs: list[Any]) -> dict[str, Any]:
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


def _sync(st: State) -> None:
    if st.device.type == "cuda":
        torch.cuda.synchronize()


def _poison(st: State) -> None:
    # Fill a block of the size of the last outputs with NaN bytes and free it,
    # so an output that is allocated but never written reads as NaN.
    if st.out_nbytes:
        p = torch.empty(st.out_nbytes, dtype=torch.uint8, device=st.device)
        p.fill_(0xFF)
        del p


def cmd_setup(st: State, msg: dict[str, Any]) -> dict[str, Any]:
    if msg.get("precision", "fp32") == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
    st.guard = bool(msg.get("guard")) and st.role == "candidate"
    if msg.get("cwd"):
        # a child started ahead of its evaluation (eval.warm) moves into the staged dir now:
        # the candidate sees the same working dir and sibling imports as a child started there
        os.chdir(msg["cwd"])
        sys.path.insert(0, msg["cwd"])
    if msg.get("device") == "cpu":
        st.device = torch.device("cpu")
    else:
        torch.cuda.set_device(st.device)
    st.task = _import_file("model", Path(msg["task_path"]))
    _seed_all(msg["init_seed"])
    ref = st.task.Model(*st.task.get_init_inputs()).to(st.device)
    if st.role == "reference":
        st.model = ref
    else:
        sol = msg["solution"]
        if sol.get("so_path"):
            _import_file("cuda_extension", Path(sol["so_path"]))
        mod = _import_file("model_new", Path(sol["path"]))
        if not hasattr(mod, "ModelNew"):
            raise AttributeError(f"{Path(sol['path']).name} defines no class ModelNew")
        _seed_all(msg["init_seed"])
        new = mod.ModelNew(*st.task.get_init_inputs()).to(st.device)
        ref_keys, new_keys = set(ref.state_dict()), set(new.state_dict())
        if ref_keys == new_keys:
            new.load_state_dict(ref.state_dict())
        else:
            st.notes.append(
                "ModelNew's parameters differ from Model's "
                f"(missing {sorted(ref_keys - new_keys)[:5]}, extra {sorted(new_keys - ref_keys)[:5]}); "
                "weights were not copied, both models were built under the same seed"
            )
        del ref
        st.model = new
    name = torch.cuda.get_device_properties(st.device).name if st.device.type == "cuda" else "cpu"
    return {"gpu": name, "torch": torch.__version__, "notes": st.notes}


def _guarded_call(st: State, fn: Any, inputs: list[Any]) -> Any:
    """One forward under the op log, with a thread census around it."""
    before = thread_ids()
    log = OpLog()
    with torch.no_grad(), log:
        out = fn(*inputs)
    _sync(st)
    for name, n in log.ops.items():
        st.ops[name] = st.ops.get(name, 0) + n
    st.threads += new_threads(before)
    return out


def _run_one(st: State, fn: Any, inputs: list[Any]) -> tuple[list[Any], bool]:
    snapshot = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    _poison(st)
    if st.guard:
        outs = _flatten(_guarded_call(st, fn, inputs))
    else:
        with torch.no_grad():
            outs = _flatten(fn(*inputs))
    _sync(st)
    mutated = any(
        isinstance(a, torch.Tensor) and not torch.equal(a, b) for a, b in zip(inputs, snapshot, strict=True)
    )
    return outs, mutated


def _save(st: State, outs: list[Any], inputs: list[Any], path: str) -> dict[str, Any]:
    meta = [_describe(t, inputs) for t in outs]
    tensors = [t for t in outs if isinstance(t, torch.Tensor)]
    st.out_nbytes = sum(t.numel() * t.element_size() for t in tensors)
    if len(tensors) == len(outs):
        save_tensors(path, tensors, st.staging)
    return {"file": path, "meta": meta}


def cmd_run(st: State, msg: dict[str, Any]) -> dict[str, Any]:
    results = []
    split = {"inputs": 0.0, "call": 0.0, "save": 0.0}  # where the phase's seconds go (issue 2's turnaround)
    for i, seed in enumerate(msg["seeds"]):
        t0 = time.perf_counter()
        inputs = make_inputs(st, seed)
        if msg.get("grow_seed") is not None:
            inputs = grow_inputs(inputs, make_inputs(st, msg["grow_seed"]))
        t1 = time.perf_counter()
        outs, mutated = _run_one(st, st.model, inputs)
        t2 = time.perf_counter()
        if msg.get("keep"):  # reference role: keep on the device, compared later in this process
            st.kept[f"{msg['tag']}#{i}"] = outs
            rec = {"meta": [_describe(t, inputs) for t in outs]}
        else:
            rec = _save(st, outs, inputs, os.path.join(msg["out_dir"], f"{msg.get('tag', 'run')}_{i}.bin"))
        split["inputs"] += t1 - t0
        split["call"] += t2 - t1
        split["save"] += time.perf_counter() - t2
        rec["inputs_mutated"] = mutated
        rec["in_nbytes"] = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
        results.append(rec)
    reply: dict[str, Any] = {"outputs": results, "t": split}
    if st.guard:
        reply["guard"] = st.guard_report()
    return reply


def cmd_compare(st: State, msg: dict[str, Any]) -> dict[str, Any]:
    """Reference role only: compare a candidate's output file with kept outputs."""
    if st.role != "reference":
        raise PermissionError("compare runs in the reference process only")
    ref = [t for t in st.kept[msg["ref"]] if isinstance(t, torch.Tensor)]
    t0 = time.perf_counter()
    try:
        out = load_tensors(msg["file"], msg["max_bytes"], st.staging, st.device) if os.path.exists(msg["file"]) else []
    except (TensorFileError, OSError) as e:
        return {"check": asdict(CheckRecord(label=msg["label"], passed=False, message=f"outputs could not be read back: {e}"))}
    finally:
        if os.path.exists(msg["file"]):
            os.unlink(msg["file"])
    t1 = time.perf_counter()
    rec = compare_outputs(msg["label"], ref, out, msg["meta"], atol=msg["atol"], rtol=msg["rtol"], device=st.device.type)
    return {"check": asdict(rec), "t": {"load": t1 - t0, "compare": time.perf_counter() - t1}}


def cmd_time(st: State, msg: dict[str, Any]) -> dict[str, Any]:
    input_sets = [make_inputs(st, s) for s in msg["seeds"]]
    fn = torch.compile(st.model) if msg.get("compiled") else st.model
    base = msg.get("fresh_seed")
    fresh = (lambda g: make_inputs(st, derive_seed(base, g))) if base is not None else None
    kept: dict[int, Any] = {}
    before = thread_ids() if st.guard else set()
    stats, last = time_calls(
        fn, input_sets, clock="cuda" if st.device.type == "cuda" else "host", n_warmup=msg["n_warmup"], n_timed=msg["n_timed"],
        max_cv=msg["max_cv"], max_rounds=msg["max_rounds"], before_call=lambda: _poison(st),
        fresh_inputs=fresh, checked=int(msg.get("checked", 0)) if msg.get("out_dir") else 0, kept=kept,
        sync_before_end=bool(msg.get("sync_before_end")),
    )
    reply: dict[str, Any] = {"stats": stats, "outputs": []}
    if st.guard:
        st.threads += new_threads(before)
        # one untimed call on a fresh timing input, under the op log
        extra = make_inputs(st, derive_seed(base, -1)) if base is not None else input_sets[0]
        _poison(st)
        _guarded_call(st, fn, extra)
        reply["guard"] = st.guard_report()
    if msg.get("out_dir"):
        if fresh is not None:
            for g, out in sorted(kept.items()):
                rec = _save(st, _flatten(out), [], os.path.join(msg["out_dir"], f"timed_call_{g}.bin"))
                reply["outputs"].append({**rec, "call": g})
        else:
            for i, (out, inputs) in enumerate(zip(last, input_sets, strict=True)):
                reply["outputs"].append(_save(st, _flatten(out), inputs, os.path.join(msg["out_dir"], f"timed_{i}.bin")))
    return reply


def cmd_controls(st: State, msg: dict[str, Any]) -> dict[str, Any]:
    """Reference role only: would trivial outputs pass correctness on this task? (lint-task)"""
    if st.role != "reference":
        raise PermissionError("controls run in the reference process only")
    from cuda_agent.eval.negative_controls import run_controls

    return {"controls": run_controls(lambda s: make_inputs(st, s), st.model, msg["seeds"], msg["fixed_seed"],
                                     atol=msg["atol"], rtol=msg["rtol"], device=st.device.type)}


def cmd_bandwidth(st: State, msg: dict[str, Any]) -> dict[str, Any]:
    """Bytes per second of a large device copy (read + write), best of a few."""
    nbytes = int(msg.get("nbytes", 1 << 30))
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=st.device)
    dst = torch.empty_like(src)
    clock = make_clock("cuda" if st.device.type == "cuda" else "host")
    best = min(clock.measure(dst.copy_, [src])[1] for _ in range(int(msg.get("repeats", 5)))) / 1e3
    return {"bytes_per_s": 2 * src.numel() * 4 / best if best > 0 else None}


HANDLERS = {"setup": cmd_setup, "run": cmd_run, "time": cmd_time, "compare": cmd_compare,
            "controls": cmd_controls, "bandwidth": cmd_bandwidth}


def _is_cuda_error(e: BaseException) -> bool:
    return "CUDA" in type(e).__name__ or "CUDA error" in str(e) or "cuda" in type(e).__module__.lower()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", choices=("candidate", "reference"), required=True)
    ap.add_argument("--fd-in", type=int, required=True)
    ap.add_argument("--fd-out", type=int, required=True)
    ap.add_argument("--warm-cuda", action="store_true", help="start CUDA before the first command")
    ap.add_argument("--warm-oplog", action="store_true", help="pay the op log's first-use cost before the first command")
    a = ap.parse_args(argv)
    if a.warm_cuda:
        try:  # overlaps the parent's build; a failure here shows up again at setup
            torch.cuda.init()
            torch.empty(1, device="cuda")
        except Exception:  # noqa: BLE001
            pass
    if a.warm_oplog:
        # The first dispatch mode entered in a process costs about a second of lazy
        # imports: pay it now, while the parent builds, not inside the correctness runs.
        with torch.no_grad(), OpLog():
            torch.empty(1)
    st = State(a.role)
    rin = os.fdopen(a.fd_in, "rb")
    for line in rin:
        msg = json.loads(line)
        if msg.get("cmd") == "exit":
            break
        try:
            reply = HANDLERS[msg["cmd"]](st, msg)
            reply["ok"] = True
        except BaseException as e:  # noqa: BLE001 - everything the candidate raises is data
            tb = "".join(traceback.format_exception(e))
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000], "traceback": tb[-4000:],
                     "cuda_error": _is_cuda_error(e)}
        os.write(a.fd_out, (json.dumps(reply) + "\n").encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
