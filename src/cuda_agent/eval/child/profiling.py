"""The expert profile's child program: runs in the sandbox, under ncu or alone; never scored.

`python -m cuda_agent.eval.child.profiling MODE --out FILE [...]` writes one JSON object to FILE:
- `ceilings`: the GPU's roofs, measured (no candidate code is loaded): a 1 GiB device copy
  (bytes read + written per second, best of 10) and a GEMM per dtype (fp32 with TF32 off at
  4096^3, bf16 and fp16 at 8192^3; 2 n^3 FLOPs per call, best of 5), CUDA events around each.
- `run`: loads the task's Model and the candidate (`--so` cuda_extension, `--model-new`) as the
  evaluator's candidate child does (same init seed, Model's weights copied), draws one input set,
  makes 3 untimed warm-up calls, then brackets `--calls` calls with cudaProfilerStart/Stop so that
  ncu (started with `--profile-from-start off`) profiles those calls' kernels only.
- `kernels`: the same load, then `--calls` calls under torch.profiler (CUDA activity, which needs no
  counter permission): each kernel's name, launches and mean device time. The no-counter path.

Contract: imports only the standard library and torch (and the evaluator's child_state helpers)
before the candidate is loaded; any exception becomes {"ok": false, "error": ...} in FILE and exit
status 1. What it writes is untrusted (candidate code ran in this process): the parent reads it as
data, bounded and typed (`profile/expert.py`), and it never reaches a reward.

Not guaranteed: the inputs are one set from a fixed public seed (the profile is a diagnostic for the
agent, not a measurement the reward trusts); a candidate that behaves differently when profiled is
only fooling itself.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

SEED = 1234
MAX_KERNELS = 200


def _best_ms(fn: Any, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        best = min(best, a.elapsed_time(b))
    return best


def ceilings() -> dict[str, Any]:
    torch.backends.cuda.matmul.allow_tf32 = False
    n = 1 << 28  # 2^28 fp32 = 1 GiB
    src = torch.empty(n, device="cuda", dtype=torch.float32).uniform_()
    dst = torch.empty_like(src)
    dst.copy_(src)
    copy_ms = _best_ms(lambda d=dst, s=src: d.copy_(s), 10)
    del src, dst
    gemm: dict[str, float] = {}
    for name, dtype, size in (
        ("fp32", torch.float32, 4096),
        ("bf16", torch.bfloat16, 8192),
        ("fp16", torch.float16, 8192),
    ):
        a = torch.randn(size, size, device="cuda", dtype=dtype)
        b = torch.randn(size, size, device="cuda", dtype=dtype)
        torch.mm(a, b)
        ms = _best_ms(lambda a=a, b=b: torch.mm(a, b), 5)
        gemm[name] = 2 * size**3 / (ms * 1e-3)
        del a, b
    torch.cuda.empty_cache()
    return {
        "copy_bytes_per_s": 2 * n * 4 / (copy_ms * 1e-3),
        "gemm_flops_per_s": gemm,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "how": "1 GiB fp32 copy best of 10; GEMM fp32 (TF32 off) 4096^3, bf16/fp16 8192^3, best of 5",
    }


def _load(a: argparse.Namespace) -> tuple[Any, list[Any]]:
    from cuda_agent.eval.child.state import State, import_file, make_inputs, seed_all

    if a.precision == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    st = State("candidate")
    torch.cuda.set_device(st.device)
    st.task = import_file("model", Path(a.task))
    seed_all(SEED)
    ref = st.task.Model(*st.task.get_init_inputs()).to(st.device)
    if a.so:
        import_file("cuda_extension", Path(a.so))
    mod = import_file("model_new", Path(a.model_new))
    seed_all(SEED)
    model = mod.ModelNew(*st.task.get_init_inputs()).to(st.device)
    if set(ref.state_dict()) == set(model.state_dict()):
        model.load_state_dict(ref.state_dict())
    del ref
    inputs = make_inputs(st, SEED + 1)
    with torch.no_grad():
        for _ in range(3):
            model(*inputs)
    torch.cuda.synchronize()
    return model, inputs


def run(a: argparse.Namespace) -> dict[str, Any]:
    model, inputs = _load(a)
    rt = torch.cuda.cudart()
    with torch.no_grad():
        rt.cudaProfilerStart()
        for _ in range(a.calls):
            model(*inputs)
        torch.cuda.synchronize()
        rt.cudaProfilerStop()
    return {"calls": a.calls}


def kernels(a: argparse.Namespace) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile

    model, inputs = _load(a)
    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(a.calls):
            model(*inputs)
        torch.cuda.synchronize()
        times = []
        for _ in range(5):
            b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            b.record()
            out = model(*inputs)
            e.record()
            e.synchronize()
            times.append(b.elapsed_time(e))
    outs = out if isinstance(out, list | tuple) else [out]
    moved = sum(t.numel() * t.element_size() for t in [*inputs, *outs] if isinstance(t, torch.Tensor))
    return {"calls": a.calls, "kernels": kernel_rows(prof.events()), "call_ms": sorted(times)[2], "bytes_moved": moved}


def kernel_rows(events: Any) -> list[dict[str, Any]]:
    """Device kernels of a torch.profiler trace: name, launches, mean device time (us), in first-launch order."""
    rows: dict[str, dict[str, Any]] = {}
    for e in events:
        kind = str(getattr(e, "device_type", ""))
        if "CUDA" not in kind or getattr(e, "is_user_annotation", False):
            continue
        us = float(getattr(e, "device_time", None) or getattr(e, "cuda_time", 0.0) or 0.0)
        r = rows.setdefault(e.name, {"name": e.name, "launches": 0, "total_us": 0.0})
        r["launches"] += 1
        r["total_us"] += us
    out = [
        {"name": r["name"][:400], "launches": r["launches"], "mean_us": r["total_us"] / r["launches"]}
        for r in rows.values()
        if r["launches"]
    ]
    return out[:MAX_KERNELS]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("ceilings", "run", "kernels"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--task")
    ap.add_argument("--model-new")
    ap.add_argument("--so", default="")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--calls", type=int, default=1)
    a = ap.parse_args(argv)
    try:
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device visible to the profile child")
        reply = {"ceilings": ceilings, "run": run, "kernels": kernels}[a.mode]
        out = reply() if a.mode == "ceilings" else reply(a)  # type: ignore[operator]
        out["ok"] = True
        code = 0
    except BaseException as e:  # noqa: BLE001 - a failure is data for the parent
        out = {"ok": False, "error": f"{type(e).__name__}: {e}"[:1000], "traceback": traceback.format_exc()[-2000:]}
        code = 1
    Path(a.out).write_text(json.dumps(out))
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    raise SystemExit(main())
