"""Design sweep for the rmsnorm_wide example: device time of each kernel
variant in benchmarks/kernels/rmsnorm_variants.cu against torch.compile and
eager, with the evaluator's own timing protocol (L2 flush, hold, events).

Usage (GPU machine; build the library first, nvcc from CUDA 12+):
  nvcc -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC \
      -o .sweep/rmsnorm_variants.so benchmarks/kernels/rmsnorm_variants.cu
  PYTHONPATH=src python benchmarks/rmsnorm_variants.py --lib .sweep/rmsnorm_variants.so

Prints one line per variant (ms, GB/s counting one read and one write of x,
ratio to torch.compile) and a short table last. Every variant's output is
checked against eager first; a wrong variant is reported and not timed.
Not a test: figures move with clocks and the machine.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import statistics
from pathlib import Path

import torch

from cuda_agent.eval.shared.events import time_calls

ROOT = Path(__file__).resolve().parents[1]
LD = {0: "ldg", 1: "ldcs", 2: "nc.L2:256B"}
ST = {0: "st", 1: "stcs"}


def load_task():
    spec = importlib.util.spec_from_file_location("rms_task", ROOT / "benchmarks/rmsnorm_wide/task.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def timed(fn, args) -> float:
    stats, _ = time_calls(fn, [args], n_warmup=5, n_timed=30, max_cv=0.05, max_rounds=3)
    return float(stats["median_ms"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--rows", type=int, nargs="+", default=[8192])
    ap.add_argument("--passes", type=int, default=2)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    lib = ctypes.CDLL(a.lib)
    lib.variant_run.argtypes = [
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_longlong,
        ctypes.c_int,
        ctypes.c_float,
        ctypes.c_void_p,
        ctypes.c_int,
    ]
    n_var = lib.variant_count()
    desc = []
    for i in range(n_var):
        t, ld, st, p = (ctypes.c_int() for _ in range(4))
        lib.variant_desc(i, ctypes.byref(t), ctypes.byref(ld), ctypes.byref(st), ctypes.byref(p))
        desc.append(f"T={t.value:<4d} {LD[ld.value]:<10s} {ST[st.value]:<4s} {'persist' if p.value else 'per-row'}")
    task = load_task()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = task.Model(*task.get_init_inputs()).to(dev).eval()
    compiled = torch.compile(model)
    eps = float(task.EPS)
    rows_all: dict[int, dict[str, list[float]]] = {}
    for rows in a.rows:
        x = torch.randn(rows, task.HIDDEN, device=dev)
        y = torch.empty_like(x)
        with torch.no_grad():
            ref = model(x)
            compiled(x)
        w = model.weight.detach().contiguous()
        nbytes = 2 * x.numel() * 4

        def run(i: int, x=x, y=y, w=w, rows=rows):
            rc = lib.variant_run(
                i,
                x.data_ptr(),
                w.data_ptr(),
                y.data_ptr(),
                rows,
                task.HIDDEN,
                eps,
                torch.cuda.current_stream().cuda_stream,
                0,
            )
            if rc:
                raise RuntimeError(f"variant {i}: launch rc {rc}")
            return y

        ok = []
        for i in range(n_var):
            y.zero_()
            run(i)
            torch.cuda.synchronize()
            good = torch.allclose(y, ref, atol=1e-4, rtol=1e-4)
            ok.append(good)
            if not good:
                print(f"rows {rows} variant {i} {desc[i]}: WRONG (max err {(y - ref).abs().max().item():.3g})")
        res: dict[str, list[float]] = {}
        with torch.no_grad():
            for p in range(a.passes):
                order = list(range(n_var)) if p % 2 == 0 else list(reversed(range(n_var)))
                res.setdefault("compile", []).append(timed(compiled, (x,)))
                res.setdefault("eager", []).append(timed(model, (x,)))
                res.setdefault("copy", []).append(timed(lambda x=x, y=y: y.copy_(x), ()))
                for i in order:
                    if ok[i]:
                        res.setdefault(desc[i], []).append(timed(lambda i=i: run(i), ()))
        rows_all[rows] = res
        comp = statistics.median(res["compile"])
        print(f"\nrows {rows} x {task.HIDDEN} fp32 ({nbytes / 1e6:.0f} MB moved); per pass ms, then median")
        for k, v in sorted(res.items(), key=lambda kv: statistics.median(kv[1])):
            m = statistics.median(v)
            print(
                f"  {k:<32s} {' '.join(f'{t:.4f}' for t in v)}  -> {m:.4f} ms  {nbytes / m / 1e6:7.0f} GB/s"
                f"  {comp / m:5.3f}x compile"
            )
    print(f"\n{'rows':>6s} {'compile ms':>10s} {'best variant':<34s} {'ms':>7s} {'x compile':>9s} {'eager ms':>8s}")
    for rows, res in rows_all.items():
        comp = statistics.median(res["compile"])
        best = min((k for k in res if k not in ("compile", "eager", "copy")), key=lambda k: statistics.median(res[k]))
        bm = statistics.median(res[best])
        print(
            f"{rows:>6d} {comp:>10.4f} {best:<34s} {bm:>7.4f} {comp / bm:>9.3f} {statistics.median(res['eager']):>8.4f}"
        )


if __name__ == "__main__":
    main()
