"""Probe: is the evaluator's clock's spread between evaluations a property of where a burst's buffers sit?

Run on a GPU machine: `PYTHONPATH=src python benchmarks/clock_placement.py [--out FILE] [--procs 6]`.
Why: on the H200 (2026-12-06, docs/throughput.md "Call 10") one honest kernel's clock net at ~20 us fell
into two clusters (~10 and ~12.3 us) across evaluations, neighbouring runs uncorrelated, while one
evaluation's looks agreed to about 1 %. If the per-call time of a burst is fixed per allocation of its
buffers (their placement against L2 and the memory channels) the spread between allocations *within* one
process matches the spread between processes, and the cure is to burst over several allocations; if it is
fixed per process (or drifts in time) it does not.

What it does: `--procs` fresh processes one after another; in each, `--allocs` allocations (a spacer tensor
of random size first, so each allocation lands elsewhere); per allocation and variant, one CUDA graph of k
calls of the `burst.py` shape (draw the input, y = relu(x) * 1.5, digest y into a device buffer) and one of
the loop (the same draws and digests of a stored output), each replayed `LOOKS` times and timed by the host
around replay + synchronize. Variants: the dense digest (2 x n float32 weights, one GEMV), the rank-one
digest (reads only the output), the dense digest with L2 flushed before each call, and the lighter loop
of `eval/child/hashed.py` (its counter-based draws with the dense digest, and with its sign digest:
`EvalConfig.clock_draws="fast"`, `clock_digest="hash"`); the SM clock (NVML)
is sampled during each look, for the other suspect, the GPU's clock state. Prints, per variant,
the net per call (burst less loop) per allocation and its spread within allocations, between allocations
of one process, and between processes. Standard library and torch only (and `burst.rank1_width`). A
measurement, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import random
import statistics
import time

N = 1 << 23  # relu_scale's ~20 us size on an H200 (32 MB in, 32 MB out)
K = 64  # calls per graph: with the dense loop's ~0.1 ms a call, ~7 ms a replay
REPLAYS = 2
LOOKS = 5
# digest[+fast: the counter-based draws of eval/child/hashed.py][+flush]; "hash": its sign digest
VARIANTS = ("dense", "rank1", "dense+flush", "dense+fast", "hash+fast")


def _sm_mhz(torch) -> int | None:
    """The SM clock now (NVML through torch), or None where NVML is not there: a second suspect for
    a per-evaluation factor is the GPU's clock state, not where the buffers sit."""
    try:
        return int(torch.cuda.clock_rate())
    except Exception:  # noqa: BLE001 - a diagnostic: no NVML, no figure
        return None


def _one(torch, n: int, variant: str, l2: int) -> dict:
    """One variant at one allocation: the model's and the loop's per-call burst times, the net, and the
    call alone under events."""
    from cuda_agent.eval.child import hashed
    from cuda_agent.eval.child.burst import rank1_width

    dev = torch.device("cuda")
    digest, flush, fast = variant.split("+")[0], "+flush" in variant, "+fast" in variant
    if (fast or digest == "hash") and (why := hashed.available(dev)) is not None:
        raise RuntimeError(why)
    hashed.warm(dev)
    key = torch.tensor([20261207, 12345], dtype=torch.int32, device=dev)  # the sign digest's (fixed here)
    fl = torch.empty(2 * l2, dtype=torch.uint8, device=dev) if flush else None
    width = rank1_width(n)
    rows = n // width
    w = torch.randn(2, n, device=dev) if digest == "dense" else torch.randn(width, 2, device=dev)
    v = torch.randn(rows, 2, device=dev)
    stored = torch.randn(n, device=dev)
    dig = torch.zeros(K, 2, device=dev)

    def draw() -> torch.Tensor:
        if fast:
            return hashed.fill(torch.empty(n, device=dev), hashed.fresh_key(dev), "normal", 0.0, 1.0)
        return torch.randn(n, device=dev)

    def digest_of(y: torch.Tensor, out: torch.Tensor) -> None:
        if digest == "dense":
            torch.mv(w, y, out=out)
        elif digest == "hash":
            hashed.digest_into(y, key, out)
        else:
            torch.sum(torch.mm(y[: rows * width].view(rows, width), w).mul_(v), dim=0, out=out)

    def body(model: bool) -> None:
        for i in range(K):
            x = draw()
            if fl is not None:
                fl.zero_()
            y = torch.relu(x) * 1.5 if model else stored
            digest_of(y, dig[i])

    times = {}
    mhz: list[int | None] = []
    for side, model in (("model", True), ("loop", False)):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            body(model)  # warm: allocator and kernels
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            body(model)
        torch.cuda.synchronize()
        looks = []
        for _ in range(LOOKS):
            t0 = time.perf_counter()
            for _ in range(REPLAYS):
                g.replay()
            mhz.append(_sm_mhz(torch))  # while the replays run: a power state would show here
            torch.cuda.synchronize()
            looks.append((time.perf_counter() - t0) * 1e3 / (K * REPLAYS))
        times[side] = looks
    # the loop's parts and the call alone, as events see them (back to back, L2 not flushed): which part
    # of the loop costs what (its traffic alone would be ~1/3 of the measured loop on the H200)
    x = torch.randn(n, device=dev)

    def each(fn) -> float:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        fn()
        torch.cuda.synchronize()
        e0.record()
        for _ in range(20):
            fn()
        e1.record()
        torch.cuda.synchronize()
        return e0.elapsed_time(e1) / 20

    parts = {
        "call_event_ms": each(lambda: torch.relu(x) * 1.5),
        "draw_event_ms": each(draw),
        "digest_event_ms": each(lambda: digest_of(stored, dig[0])),
        "flush_event_ms": each(fl.zero_) if fl is not None else None,
    }
    return {
        "variant": variant,
        "model_ms": times["model"],
        "loop_ms": times["loop"],
        "net_ms": min(times["model"]) - min(times["loop"]),
        **parts,
        "sm_mhz": mhz,
    }


def _child(n: int, allocs: int, seed: int, conn) -> None:
    import torch

    rng = random.Random(seed)
    out: list[dict] = []
    try:
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        for a in range(allocs):
            spacer = torch.empty(rng.randrange(1, 64) << 20, dtype=torch.uint8, device="cuda")  # moves what follows
            for variant in VARIANTS:
                out.append({"alloc": a, **_one(torch, n, variant, l2)})
                torch.cuda.empty_cache()
            del spacer
    except Exception as e:  # noqa: BLE001 - a measurement: say what failed, keep what was measured
        conn.send({"error": repr(e)[:500], "rows": out})
        return
    conn.send({"rows": out})


def _spread(xs: list[float]) -> float:
    return (max(xs) - min(xs)) / statistics.median(xs) if len(xs) > 1 and statistics.median(xs) else math.nan


def summary(rows: list[dict]) -> list[str]:
    """Per variant: the median net (us), a look's wobble as a share of the net, the nets' spread between
    allocations of one process (median over processes) and between processes' medians, and every net."""
    lines = ["variant       net us (median)  within allocation  between allocations (one process)  between processes"]
    for variant in VARIANTS:
        mine = [r for r in rows if r["variant"] == variant]
        nets = [r["net_ms"] * 1e3 for r in mine]
        if not nets:
            continue
        # a look's wobble in the burst, as a share of the net (what it moves the net by)
        within = statistics.median((max(r["model_ms"]) - min(r["model_ms"])) / r["net_ms"] for r in mine)
        per_proc: dict[int, list[float]] = {}
        for r in mine:
            per_proc.setdefault(r["proc"], []).append(r["net_ms"] * 1e3)
        many = [_spread(v) for v in per_proc.values() if len(v) > 1]
        between_alloc = statistics.median(many) if many else math.nan
        between_proc = _spread([statistics.median(v) for v in per_proc.values()])
        lines.append(
            f"{variant:12}  {statistics.median(nets):15.2f}  {within:17.2%}  {between_alloc:34.2%}  {between_proc:17.2%}"
            f"   nets {' '.join(f'{x:.1f}' for x in nets)}"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--procs", type=int, default=6)
    ap.add_argument("--allocs", type=int, default=3)
    ap.add_argument("--n", type=int, default=N)
    a = ap.parse_args()
    ctx = mp.get_context("spawn")
    rows: list[dict] = []
    for p in range(a.procs):
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_child, args=(a.n, a.allocs, 1000 + p, child), daemon=True)
        t0 = time.monotonic()
        proc.start()
        while not parent.poll(1.0):
            if not proc.is_alive() or time.monotonic() - t0 > 240:
                proc.kill()
                raise SystemExit(f"process {p} gave no figures (exit code {proc.exitcode})")
        reply = parent.recv()
        proc.join(10)
        got = reply["rows"]
        if "error" in reply:
            print(f"proc {p} failed: {reply['error']}", flush=True)
        for r in got:
            r["proc"] = p
            print(
                f"proc {p} alloc {r['alloc']} {r['variant']:12} net {r['net_ms'] * 1e3:7.2f} us  "
                f"model {min(r['model_ms']) * 1e3:7.2f}  loop {min(r['loop_ms']) * 1e3:7.2f}  "
                f"looks' spread {_spread(r['model_ms']):.2%}  events us: call {r['call_event_ms'] * 1e3:.2f} "
                f"draw {r['draw_event_ms'] * 1e3:.2f} digest {r['digest_event_ms'] * 1e3:.2f}"
                + (f" flush {r['flush_event_ms'] * 1e3:.2f}" if r.get("flush_event_ms") else "")
                + "  "
                f"SM MHz {sorted({m for m in r['sm_mhz'] if m is not None}) or '-'}",
                flush=True,
            )
        rows += got
        print(f"proc {p}: {time.monotonic() - t0:.1f} s", flush=True)
    print()
    print("\n".join(summary(rows)))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
