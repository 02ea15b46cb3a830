"""The filter's child process: runs one synthesized task and reports what it does.

Started by `device_job` through `eval.channel.processes.Child` (`python -m
cuda_agent.synth.check_child --fd-in A --fd-out B`); one JSON command per
line in, one JSON reply per line out (`--warm-cuda`: start CUDA before the
first). Commands:
- `ready`: an empty reply, once start-up is done.
- `load` {source, device, init_seed, precision, seed}: import the task from
  a file, build `Model` under the seed, run it once; reply with output shapes,
  or `ok: false` with the error (also for non-tensor, non-float, NaN/Inf or
  empty outputs). A later `load` replaces the task (re-shaping).
- `checks` {seeds, fixed_seed, atol, rtol}: stochasticity (random ATen ops in
  `eval.child.guards.OpLog`; two calls on one input under different RNG
  states, compared at 1e-5) and anti-hack (`eval.shared.negative_controls.run_controls`
  with the task's tolerances, the same controls as `lint-task`).
- `time` {compiled, max_calls, budget_s}: median time per call, warm-up
  first; the event clock with an L2 flush on the GPU (`eval.shared.events.make_clock`),
  the host clock on the CPU.
- `compile_check` {seeds, atol, rtol}: `torch.compile` (default mode), its
  outputs against eager on each seed with the task's tolerances.
GPU sections take the evaluator's per-GPU lock (`eval.timing.gpu_lock` in `lock_dir`):
shared for runs, exclusive for timing, so filter jobs (and evaluations using the
same lock dir) never run on a GPU while another times there; its gate lets a
timing in ahead of shared takers that come later.
Imports only the standard library, torch and child-safe `cuda_agent.eval` modules.

Runs in the evaluator's sandbox (`FilterSettings.sandbox`, default "auto"):
composed code may come from an LLM, so it may write only its own io and tmp
dirs and the lock dir, and reaches no network. Not guaranteed: that its
replies are honest (code that runs here could forge a verdict: the filter
screens for mistakes, not for an adversary; a synthesized task is the
reference side of every later evaluation, so review what you train on); a
compile's first call (which builds the kernels) takes no lock.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import statistics
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from cuda_agent.eval.child.guards import OpLog
from cuda_agent.eval.gpu import detect as detect_gpu
from cuda_agent.eval.shared.compare import compare_outputs
from cuda_agent.eval.shared.events import make_clock
from cuda_agent.eval.shared.negative_controls import run_controls
from cuda_agent.eval.timing import gpu_lock as eval_gpu_lock
from cuda_agent.synth.probe import RANDOM_OP_WORDS  # one list for the probe and the filter: they must agree


class State:
    def __init__(self) -> None:
        self.mod: Any = None
        self.model: Any = None
        self.compiled: Any = None
        self.device = torch.device("cpu")
        self.lock_dir = ""  # "" = no lock (one job alone)
        self.lock_key = "cpu"  # eval.gpu.GPU.key of the device: the GPU's UUID
        self.n = 0
        self.lock_wait = 0.0  # seconds spent waiting for the GPU lock in the current command


# a job's request has its own time budget (the parent kills the child past it): no wait of our own
LOCK_WAIT_S = 24 * 3600.0


@contextmanager
def gpu_lock(st: State, exclusive: bool):
    """The evaluator's per-GPU lock (eval.timing.gpu_lock: shared for runs, exclusive for timing, a gate so a
    timing is not starved by runs taken in turns), so filter jobs and evaluations that share a lock
    dir and a GPU exclude each other's timing too."""
    if not st.lock_dir:
        yield
        return
    take = eval_gpu_lock.exclusive if exclusive else eval_gpu_lock.untimed
    with take(st.lock_key, LOCK_WAIT_S, directory=st.lock_dir) as held:
        st.lock_wait += held.waited_s
        yield


def seed_all(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def make_inputs(st: State, seed: int) -> list[Any]:
    seed_all(seed)
    with st.device:
        xs = st.mod.get_inputs()
    return [x.to(st.device) if isinstance(x, torch.Tensor) else x for x in xs]


def tensors(out: Any) -> list[torch.Tensor]:
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    bad = [type(o).__name__ for o in outs if not isinstance(o, torch.Tensor)]
    if bad or not outs:
        raise TypeError(f"outputs must be tensors, got {bad or 'nothing'}")
    return outs


def call(st: State, fn: Any, seed: int, rng: int | None = None) -> list[torch.Tensor]:
    inputs = make_inputs(st, seed)
    if rng is not None:
        torch.manual_seed(rng)  # a state that differs from the one that drew the inputs
    with torch.no_grad():
        out = tensors(fn(*inputs))
    if st.device.type == "cuda":
        torch.cuda.synchronize()
    return out


def _meta(outs: list[torch.Tensor]) -> list[dict[str, Any]]:
    return [{"tensor": True, "plain": True, "device": str(t.device), "aliases_input": False} for t in outs]


def cmd_load(st: State, msg: dict[str, Any]) -> dict[str, Any]:
    if msg.get("precision", "fp32") == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    st.device = torch.device(msg["device"]) if msg["device"] == "cpu" else torch.device("cuda", 0)
    if st.device.type == "cuda":
        torch.cuda.set_device(st.device)
        gpu = detect_gpu()
        st.lock_key = gpu.key if gpu is not None else "index-0"
    st.lock_dir = msg.get("lock_dir") or ""
    st.n += 1
    path = Path(msg["workdir"]) / f"task_{st.n}.py"
    path.write_text(msg["source"])
    spec = importlib.util.spec_from_file_location(f"synth_task_{st.n}", path)
    assert spec is not None and spec.loader is not None
    st.mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(st.mod)
    with gpu_lock(st, False):
        seed_all(msg["init_seed"])
        st.model = st.mod.Model(*st.mod.get_init_inputs()).to(st.device)
        outs = call(st, st.model, msg["seed"])
    for t in outs:
        if not t.is_floating_point():
            raise TypeError(f"output dtype {t.dtype} is not floating point")
        if t.numel() == 0:
            raise ValueError("empty output")
        if not bool(torch.isfinite(t).all()):
            raise ValueError("output holds NaN or Inf")
    inputs = make_inputs(st, msg["seed"])
    nbytes = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
    return {"out_shapes": [list(t.shape) for t in outs], "in_bytes": nbytes}


def cmd_checks(st: State, msg: dict[str, Any]) -> dict[str, Any]:
    seeds = msg["seeds"]
    with gpu_lock(st, False):
        log = OpLog()
        inputs = make_inputs(st, seeds[0])
        with torch.no_grad(), log:
            st.model(*inputs)
        randoms = sorted(op for op in log.ops if any(w in op for w in RANDOM_OP_WORDS))
        a, b = call(st, st.model, seeds[0], rng=11), call(st, st.model, seeds[0], rng=12)
        rec = compare_outputs("rerun", a, b, _meta(b), atol=1e-5, rtol=1e-5, device=st.device.type)
        controls = run_controls(
            lambda s: make_inputs(st, s),
            st.model,
            seeds,
            msg["fixed_seed"],
            atol=msg["atol"],
            rtol=msg["rtol"],
            device=st.device.type,
        )
    return {"random_ops": randoms, "rerun_equal": rec.passed, "rerun_message": rec.message, "controls": controls}


def cmd_time(st: State, msg: dict[str, Any]) -> dict[str, Any]:
    fn = st.compiled if msg.get("compiled") else st.model
    clock = make_clock("cuda" if st.device.type == "cuda" else "host")
    inputs = make_inputs(st, msg["seed"])
    times: list[float] = []
    with gpu_lock(st, True), torch.no_grad():
        for _ in range(2):  # warm-up: allocator, cuDNN/cuBLAS heuristics, clocks
            fn(*inputs)
        t_end = time.perf_counter() + msg["budget_s"]
        while len(times) < msg["max_calls"] and (len(times) < 3 or time.perf_counter() < t_end):
            _, ms, _, _ = clock.measure(fn, inputs, held=False)
            times.append(ms)
    return {
        "ms": statistics.median(times),
        "calls": len(times),
        "cv": statistics.pstdev(times) / statistics.mean(times)
        if len(times) > 1 and statistics.mean(times) > 0
        else 0.0,
    }


def cmd_compile_check(st: State, msg: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    st.compiled = torch.compile(st.model)
    checks = []
    for i, seed in enumerate(msg["seeds"]):
        if i == 0:
            got = call(st, st.compiled, seed)  # builds the kernels: CPU-bound, no lock
            compile_s = time.perf_counter() - t0
        with gpu_lock(st, False):
            if i > 0:
                got = call(st, st.compiled, seed)
            ref = call(st, st.model, seed)
        rec = compare_outputs(
            f"compile#{i}", ref, got, _meta(got), atol=msg["atol"], rtol=msg["rtol"], device=st.device.type
        )
        checks.append(
            {
                "passed": rec.passed,
                "message": rec.message,
                "max_abs_err": None if not math.isfinite(rec.max_abs_err or 0.0) else rec.max_abs_err,
            }
        )
    return {"checks": checks, "compile_s": compile_s}


def warm_up(compile_too: bool) -> None:
    """Start-up a job would otherwise pay on its critical path, done while this child waits as a spare:
    the CUDA context, cuBLAS and cuDNN handles (their libraries load on first use), and, with
    `compile_too`, dynamo/inductor/Triton's first compile (imports, Triton's launcher build in this
    child's private cache; about 6 s of a 10 s compile stage on the H200). Runs no task code; a
    failure here is left to the job's own first use, which reports it."""
    t = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        WARM_S[name] = round(time.perf_counter() - t, 3)
        t = time.perf_counter()

    try:
        x = torch.randn(8, 8, device="cuda")
        lap("cuda")
        torch.nn.functional.conv2d(x.view(1, 1, 8, 8), torch.ones(1, 1, 3, 3, device="cuda"))
        (x @ x).sum().item()
        lap("cudnn_cublas")
        if compile_too:
            torch.compile(lambda t: torch.nn.functional.gelu(t) * 2 + t.sum(-1, keepdim=True))(x)
            torch.cuda.synchronize()
            torch.compiler.reset()  # no compiled state from the warm-up survives into the job
            lap("compile")
    except Exception as e:  # noqa: BLE001
        print(f"warm-up: {type(e).__name__}: {e}", file=sys.stderr, flush=True)


# seconds of this child's start-up, by part ("process": interpreter start to main, torch's import
# included), reported by `ready` so a filter run shows what its spare children spend
WARM_S: dict[str, float] = {}


def _since_process_start() -> float | None:
    try:
        stat = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return round(uptime - int(stat[19]) / os.sysconf("SC_CLK_TCK"), 3)
    except (OSError, ValueError, IndexError):
        return None


def cmd_ready(st: State, msg: dict[str, Any]) -> dict[str, Any]:
    return {"warm_s": WARM_S}


HANDLERS = {
    "ready": cmd_ready,
    "load": cmd_load,
    "checks": cmd_checks,
    "time": cmd_time,
    "compile_check": cmd_compile_check,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", default="synth")
    ap.add_argument("--fd-in", type=int, required=True)
    ap.add_argument("--fd-out", type=int, required=True)
    ap.add_argument("--warm-cuda", action="store_true")
    ap.add_argument("--warm-compile", action="store_true")
    a = ap.parse_args(argv)
    if (started := _since_process_start()) is not None:
        WARM_S["process"] = started
    st = State()
    if a.warm_cuda and torch.cuda.is_available():
        warm_up(a.warm_compile)
    for line in os.fdopen(a.fd_in, "rb"):
        msg = json.loads(line)
        if msg.get("cmd") == "exit":
            break
        st.lock_wait = 0.0
        try:
            reply = HANDLERS[msg["cmd"]](st, msg)
            reply["ok"] = True
            reply["lock_wait_s"] = st.lock_wait
        except BaseException as e:  # noqa: BLE001 - whatever the task raises is a finding
            reply = {
                "ok": False,
                "error": f"{type(e).__name__}: {e}"[:1500],
                "traceback": "".join(traceback.format_exception(e))[-3000:],
            }
        os.write(a.fd_out, (json.dumps(reply, default=str) + "\n").encode())
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
