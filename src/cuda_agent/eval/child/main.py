"""Evaluation child: runs one model, the candidate or the reference, for the parent.

Started by `channel.processes.Child` as `python -m cuda_agent.eval.child.main --role R --fd-in A
--fd-out B`. It reads JSON commands from fd A and writes one JSON reply per
command to fd B, both in the typed shapes of `channel/messages.py`; tensors travel
through files at paths the parent computes (`channel.messages.output_path`,
`channel/tensorfile.py`). Commands: `setup` (load the task, build Model under a seed;
for the candidate also load the built extension and ModelNew, copying
Model's state_dict into it), `run` (outputs for given input seeds, with
outputs poisoned before each call and inputs checked unchanged after it),
`time` (per-call device timing, `shared.events.time_calls`, with fresh inputs per
timed call when the parent sends `fresh_seed`), `compare` (reference role:
check a candidate's output file against outputs kept on the device, so large
outputs never cross to the parent), `controls` (reference role: negative
controls for `lint-task`), `bandwidth` (a device copy, for the speed-of-light
flag), `prepare` (a side's burst made ready, untimed: on a GPU a CUDA graph of
its k calls), `burst` (back-to-back calls on fresh inputs, each output reduced to a
digest under secret weights; the parent clocks it: `timing/clock.py`),
`digests` (reference role: the same digests of the reference's outputs),
`warm` (reference role: compile and call once before a baseline's burst);
those four live in `child/burst.py`, the state and input draws they share in
`child/state.py`.
`exit`. The reference reads and removes output files only inside the
candidate's io dir it was given at setup (`peer_io`), never through a link. With `guard` at setup (candidate role), `run` and `time` also
report the runtime defences of `child/guards.py`: the ATen ops executed in the
forward (correctness runs and one untimed call on a fresh timing input) and
threads that outlived a call.

Contract: imports only the standard library, numpy and torch before the
candidate is loaded. The reference role never sees candidate code; the
candidate role never sees reference outputs. Any exception becomes a reply
with `ok: false`; the parent kills the process after it.

Not guaranteed: anything once candidate code runs in this process. It can
read this process's memory and fds; the parent treats every reply from the
candidate role as untrusted data.

Test-only: `CUDA_AGENT_TEST_HIJACK` (set in the parent's environment, passed
to the children by `channel.children.child_env`) makes this harness act, in the
candidate role, as a harness that candidate code had rewritten: it lets the
red-team corpus test the parent's defences on their own where the static
rules would stop the real hijack first (`_hijack`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import stat
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from cuda_agent.eval.channel import messages as P
from cuda_agent.eval.channel.tensorfile import TensorFileError, load_tensors, save_tensors
from cuda_agent.eval.child import hashed
from cuda_agent.eval.child.burst import (
    cmd_burst,
    cmd_digests,
    cmd_prepare,
    cmd_warm,
    compiled_or_model,
    warm_digest_path,
)
from cuda_agent.eval.child.guards import OpLog, new_threads, thread_ids
from cuda_agent.eval.child.state import (
    State,
    describe,
    flatten,
    grow_inputs,
    hijack,
    import_file,
    make_inputs,
    poison,
    seed_all,
    sync,
)
from cuda_agent.eval.judge.result import CheckRecord
from cuda_agent.eval.shared.compare import compare_outputs
from cuda_agent.eval.shared.events import derive_seed, make_clock, time_calls


def _serve_prebuilt(prebuilt: dict[str, str]) -> None:
    """`load_inline` returns the module the parent built (`build/single_file.py`) for a call of that name and
    builds any other as before; set before the solution is imported, so its own import sees it."""
    import torch.utils.cpp_extension as ext

    real = ext.load_inline

    def load_inline(name: str, *args: Any, **kwargs: Any) -> Any:
        so = prebuilt.get(name)
        return import_file(name, Path(so)) if so is not None else real(name, *args, **kwargs)

    ext.load_inline = load_inline


def cmd_setup(st: State, req: P.Setup) -> dict[str, Any]:
    if req.precision == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
    st.guard = req.guard and st.role == "candidate"
    st.peer_io = os.path.realpath(req.peer_io) if req.peer_io and st.role == "reference" else None
    if req.cwd:
        # a child started ahead of its evaluation (eval.channel.children) moves into the staged dir now:
        # the candidate sees the same working dir and sibling imports as a child started there
        os.chdir(req.cwd)
        sys.path.insert(0, req.cwd)
    if req.device == "cpu":
        st.device = torch.device("cpu")
    else:
        torch.cuda.set_device(st.device)
    st.task = import_file("model", Path(req.task_path))
    seed_all(req.init_seed)
    ref = st.task.Model(*st.task.get_init_inputs()).to(st.device)
    if st.role == "reference":
        st.model = ref
    else:
        sol = req.solution
        if sol is None:
            raise ValueError("the candidate's setup names no solution")
        if sol.so_path:
            import_file("cuda_extension", Path(sol.so_path))
        if sol.inline:
            _serve_prebuilt(sol.inline)
        mod = import_file("model_new", Path(sol.path))
        if not hasattr(mod, "ModelNew"):
            raise AttributeError(f"{Path(sol.path).name} defines no class ModelNew")
        seed_all(req.init_seed)
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
    reply: dict[str, Any] = {"notes": st.notes}
    if st.role == "candidate":
        hj = hijack()
        if "spoof_gpu" in hj:  # a rewritten harness claiming another GPU (the parent reads its own)
            reply["gpu"] = hj["spoof_gpu"]
        if hj.get("remount"):
            _hijack_remount(hj["remount"])
        if hj.get("lock_hold"):
            _hijack_lock_hold(hj["lock_hold"])
    return reply


_HELD: list[int] = []  # the lock_hold hijack's descriptors: open until this process dies


def _hijack_lock_hold(lock_dir: str) -> None:
    """A rewritten harness holding the evaluator's GPU locks shared for as long as it lives, so
    its parent's timing (and every other evaluation's on the GPU) waits. Silent, as a real one
    would be: the defence is that the sandbox shows it an empty folder there."""
    import fcntl

    try:
        names = os.listdir(lock_dir)
    except OSError:
        return
    for name in names:
        if name.endswith(".lock"):
            try:
                fd = os.open(os.path.join(lock_dir, name), os.O_RDONLY)
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                _HELD.append(fd)
            except OSError:
                continue


def _hijack_remount(target: str) -> None:
    """A rewritten harness trying to make the file system writable and plant a file outside its dirs."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(None, b"/", None, 32 | 4096, None) != 0:  # MS_REMOUNT | MS_BIND, read-write
        raise PermissionError(f"hijack: remount of / refused (errno {ctypes.get_errno()})")
    with open(target, "w") as f:
        f.write("planted by a candidate\n")


def _guarded_call(st: State, fn: Any, inputs: list[Any]) -> Any:
    """One forward under the op log, with a thread census around it."""
    before = thread_ids()
    log = OpLog()
    with torch.no_grad(), log:
        out = fn(*inputs)
    sync(st)
    for name, n in log.ops.items():
        st.ops[name] = st.ops.get(name, 0) + n
    st.threads += new_threads(before)
    return out


def _run_one(st: State, fn: Any, inputs: list[Any]) -> tuple[list[Any], bool]:
    snapshot = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    poison(st)
    if st.guard:
        outs = flatten(_guarded_call(st, fn, inputs))
    else:
        with torch.no_grad():
            outs = flatten(fn(*inputs))
    sync(st)
    mutated = any(isinstance(a, torch.Tensor) and not torch.equal(a, b) for a, b in zip(inputs, snapshot, strict=True))
    return outs, mutated


def _save(st: State, outs: list[Any], inputs: list[Any], path: str) -> list[dict[str, Any]]:
    meta = [describe(t, inputs) for t in outs]
    tensors = [t for t in outs if isinstance(t, torch.Tensor)]
    st.out_nbytes = sum(t.numel() * t.element_size() for t in tensors)
    if len(tensors) == len(outs):
        save_tensors(path, tensors, st.staging)
    return meta


def cmd_run(st: State, req: P.Run) -> dict[str, Any]:
    results = []
    split = {"inputs": 0.0, "call": 0.0, "save": 0.0}  # where the phase's seconds go (issue 2's turnaround)
    fake_path = hijack().get("reply_path") if st.role == "candidate" else None
    for i, seed in enumerate(req.seeds):
        t0 = time.perf_counter()
        inputs = make_inputs(st, seed)
        if req.grow_seed is not None:
            inputs = grow_inputs(inputs, make_inputs(st, req.grow_seed))
        t1 = time.perf_counter()
        outs, mutated = _run_one(st, st.model, inputs)
        t2 = time.perf_counter()
        if req.keep:  # reference role: keep on the device, compared later in this process
            st.kept[f"{req.tag}#{i}"] = outs
            rec: dict[str, Any] = {"meta": [describe(t, inputs) for t in outs]}
        else:
            if req.out_dir is None:
                raise ValueError("run: neither keep nor out_dir")
            rec = {"meta": _save(st, outs, inputs, P.output_path(req.out_dir, req.tag, i))}
            if fake_path:  # a rewritten harness naming another file for the trusted reference to read and remove
                rec["file"] = fake_path
        split["inputs"] += t1 - t0
        split["call"] += t2 - t1
        split["save"] += time.perf_counter() - t2
        rec["inputs_mutated"] = mutated
        rec["in_nbytes"] = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
        results.append(rec)
    reply: dict[str, Any] = {"outputs": results, "t": split}
    if st.guard and not hijack().get("drop_guard"):
        reply["guard"] = st.guard_report()
    return reply


def cmd_compare(st: State, req: P.Compare) -> dict[str, Any]:
    """Reference role only: compare a candidate's output file with kept outputs. The file must lie in
    the candidate's io dir named at setup (the parent computes every path itself, so anything else
    is a harness bug); a link or a non-regular file there is the candidate's unreadable output, and
    is removed (the link itself, never its target). Each kept output is compared once and then
    dropped: a task with large outputs otherwise holds every correctness set's on the device until
    the evaluation ends, beside the baselines' and the clock's buffers (H100, 2026-12-06: a task of
    2 GiB tensors ran its reference out of memory at 48.8 GiB on an 80 GB card)."""
    if st.role != "reference":
        raise PermissionError("compare runs in the reference process only")
    if st.peer_io is None or os.path.realpath(os.path.dirname(req.file)) != st.peer_io:
        raise PermissionError(f"compare: {req.file} is not in the candidate's io dir")
    if req.ref not in st.kept:
        raise KeyError(f"compare: no kept reference output '{req.ref}' (each is compared once)")
    ref = [t for t in st.kept.pop(req.ref) if isinstance(t, torch.Tensor)]
    t0 = time.perf_counter()
    try:
        if os.path.lexists(req.file) and not stat.S_ISREG(os.lstat(req.file).st_mode):
            raise TensorFileError("the output file is a link or not a regular file")
        out = load_tensors(req.file, req.max_bytes, st.staging, st.device) if os.path.exists(req.file) else []
    except (TensorFileError, OSError) as e:
        return {
            "check": asdict(CheckRecord(label=req.label, passed=False, message=f"outputs could not be read back: {e}"))
        }
    finally:
        try:
            if os.path.lexists(req.file):
                os.unlink(req.file)
        except OSError:
            pass
    t1 = time.perf_counter()
    rec = compare_outputs(req.label, ref, out, req.meta, atol=req.atol, rtol=req.rtol, device=st.device.type)
    return {"check": asdict(rec), "t": {"load": t1 - t0, "compare": time.perf_counter() - t1}}


def _hijack_stats(stats: dict[str, Any]) -> dict[str, Any]:
    """A rewritten harness reporting faster times than it measured (test-only switch)."""
    f = float(hijack().get("fake_time", "1"))
    if f == 1:
        return stats
    return {
        k: (v * f if k in ("median_ms", "mean_ms", "min_ms", "probe_ms", "enqueue_ms") and v is not None else v)
        for k, v in stats.items()
    }


def cmd_time(st: State, req: P.Time) -> dict[str, Any]:
    t_in = time.perf_counter()
    input_sets = [make_inputs(st, s) for s in req.seeds]
    fn = compiled_or_model(st, req.variant or ("compiled" if req.compiled else "model"))
    base = req.fresh_seed
    fresh = (lambda g: make_inputs(st, derive_seed(base, g))) if base is not None else None
    kept: dict[int, Any] = {}
    before = thread_ids() if st.guard else set()
    t0 = time.perf_counter()
    stats, last = time_calls(
        fn,
        input_sets,
        clock="cuda" if st.device.type == "cuda" else "host",
        n_warmup=req.n_warmup,
        n_timed=req.n_timed,
        max_cv=req.max_cv,
        max_rounds=req.max_rounds,
        before_call=lambda: poison(st),
        fresh_inputs=fresh,
        checked=req.checked if req.out_dir else [],
        kept=kept,
        sync_before_end=req.sync_before_end,
        spread=req.spread,
    )
    reply: dict[str, Any] = {"stats": _hijack_stats(stats) if st.role == "candidate" else stats, "outputs": []}
    # where the request's seconds went (the whole request holds the GPU alone in the parent)
    t1 = time.perf_counter()
    split = reply["t"] = {"inputs": t0 - t_in, "calls": t1 - t0}
    if st.guard:
        st.threads += new_threads(before)
        # one untimed call on a fresh timing input, under the op log
        extra = make_inputs(st, derive_seed(base, -1)) if base is not None else input_sets[0]
        poison(st)
        _guarded_call(st, fn, extra)
        if not hijack().get("drop_guard"):
            reply["guard"] = st.guard_report()
    t2 = time.perf_counter()
    split["guard"] = t2 - t1
    if req.out_dir:
        if fresh is not None:
            for g, out in sorted(kept.items()):
                meta = _save(st, flatten(out), [], P.timed_path(req.out_dir, g))
                reply["outputs"].append({"meta": meta, "call": g})
        else:
            for i, (out, inputs) in enumerate(zip(last, input_sets, strict=True)):
                meta = _save(st, flatten(out), inputs, P.timed_path(req.out_dir, i))
                reply["outputs"].append({"meta": meta, "call": i})
    split["save"] = time.perf_counter() - t2
    return reply


def cmd_controls(st: State, req: P.Controls) -> dict[str, Any]:
    """Reference role only: would trivial outputs pass correctness on this task? (lint-task)"""
    if st.role != "reference":
        raise PermissionError("controls run in the reference process only")
    from cuda_agent.eval.shared.negative_controls import run_controls

    return {
        "controls": run_controls(
            lambda s: make_inputs(st, s),
            st.model,
            req.seeds,
            req.fixed_seed,
            atol=req.atol,
            rtol=req.rtol,
            device=st.device.type,
        )
    }


def cmd_bandwidth(st: State, req: P.Bandwidth) -> dict[str, Any]:
    """Bytes per second of a large device copy (read + write), best of a few."""
    src = torch.empty(req.nbytes // 4, dtype=torch.float32, device=st.device)
    dst = torch.empty_like(src)
    clock = make_clock("cuda" if st.device.type == "cuda" else "host")
    best = min(clock.measure(dst.copy_, [src])[1] for _ in range(req.repeats)) / 1e3
    return {"bytes_per_s": 2 * src.numel() * 4 / best if best > 0 else None}


HANDLERS: dict[str, Any] = {
    "setup": cmd_setup,
    "run": cmd_run,
    "time": cmd_time,
    "compare": cmd_compare,
    "controls": cmd_controls,
    "bandwidth": cmd_bandwidth,
    "burst": cmd_burst,
    "digests": cmd_digests,
    "warm": cmd_warm,
    "prepare": cmd_prepare,
}


def _is_cuda_error(e: BaseException) -> bool:
    return "CUDA" in type(e).__name__ or "CUDA error" in str(e) or "cuda" in type(e).__module__.lower()


def _warm_cuda(role: str, light_loop: bool = False) -> None:
    try:  # a failure here shows up again at setup
        torch.cuda.init()
        torch.empty(1, device="cuda")
        warm_digest_path(torch.device("cuda", 0))
        # NVRTC's compile (~0.1 s) here, not inside a burst's prepare (a failure: there, with its reason)
        if light_loop:
            hashed.warm(torch.device("cuda", 0))
        if role == "reference":
            # the compare's kernels (float64 casts, isfinite, reductions), lazily loaded on first use:
            # the reference's first compare took 0.08-0.09 s on the H200, later ones 0.011 s
            # (2026-12-04, diag_matmul; part of it is the staging buffer's pinning, which stays)
            x = torch.linspace(-1, 1, 4096, device="cuda")
            meta = [{"tensor": True, "plain": True, "device": "cuda:0"}]
            compare_outputs("warm-up", [x], [x.clone()], meta, atol=1e-5, rtol=1e-5, device="cuda")
    except Exception:  # noqa: BLE001
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", choices=("candidate", "reference"), required=True)
    ap.add_argument("--fd-in", type=int, required=True)
    ap.add_argument("--fd-out", type=int, required=True)
    ap.add_argument("--warm-cuda", action="store_true", help="start CUDA before the first command")
    ap.add_argument(
        "--warm-oplog", action="store_true", help="pay the op log's first-use cost before the first command"
    )
    ap.add_argument(
        "--warm-light-loop",
        action="store_true",
        help="with CUDA's start, compile the clock's lighter loop (child.hashed)",
    )
    ap.add_argument(
        "--warm-cuda-on-go",
        action="store_true",
        help="say 'imported' once started, then start CUDA when the first command is warm_cuda",
    )
    a = ap.parse_args(argv)
    if a.warm_cuda:
        _warm_cuda(a.role, a.warm_light_loop)  # overlaps the parent's build
    if a.warm_oplog:
        # The first dispatch mode entered in a process costs about a second of lazy
        # imports: pay it now, while the parent builds, not inside the correctness runs.
        with torch.no_grad(), OpLog():
            torch.empty(1)
    st = State(a.role)
    rin = os.fdopen(a.fd_in, "rb")
    first: list[bytes] = []
    if a.warm_cuda_on_go:
        # A spare (eval.channel.children): CUDA starts only when the parent says so, under its shared hold of the
        # GPU's lock, so that a context's creation never runs next to another evaluation's timing.
        os.write(a.fd_out, b'{"ok": true, "stage": "imported"}\n')
        line = rin.readline()
        if not line:
            return 0  # the parent closed the pipe: a discarded spare
        if json.loads(line).get("cmd") == "warm_cuda":
            _warm_cuda(a.role, a.warm_light_loop)
            os.write(a.fd_out, b'{"ok": true, "stage": "cuda"}\n')
        else:
            first = [line]  # not the go: an ordinary command (or the exit), handled below
    for line in itertools.chain(first, rin):
        msg = json.loads(line)
        if msg.get("cmd") == "exit":
            break
        try:
            req = P.request_from_wire(msg)
            if getattr(req, "mode", None) != "loop" and req.cmd != "digests":
                st.loop_outs = None  # the loop burst's kept outputs live only through its bursts
            reply = HANDLERS[req.cmd](st, req)
            reply["ok"] = True
        except BaseException as e:  # noqa: BLE001 - everything the candidate raises is data
            tb = "".join(traceback.format_exception(e))
            reply = {
                "ok": False,
                "error": f"{type(e).__name__}: {e}"[:2000],
                "traceback": tb[-4000:],
                "cuda_error": _is_cuda_error(e),
            }
        os.write(a.fd_out, (json.dumps(reply) + "\n").encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
