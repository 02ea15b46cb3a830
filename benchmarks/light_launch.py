"""Probe: the host's cost of the lighter loop's launches, torch's kernel wrapper against `hashed._Kernel`.

Run on a GPU machine: `PYTHONPATH=src python benchmarks/light_launch.py [--calls 2000] [--out FILE]`.
Why: a burst's loop launches two or three of the lighter loop's kernels a call (a draw per input, a sign
digest and its sum per output), from Python, in each graph's capture and in the reference's eager re-run
of a burst's sequence (`burst_check`). On the H100 at fbd4f67 (2026-12-07) those two phases took 0.154 s and
0.144 s an evaluation (0.034 s and 0.058 s under torch's draws and the dense digest), and torch's wrapper
opens the driver library and builds its arguments on every launch. This prints what one launch and one
call of the loop cost the host with each launcher.

What it does: with tiny tensors (so the GPU never holds the host back), `--calls` launches of each kernel
timed by the host from the first launch to the last, no synchronize in between, then one synchronize;
the same for one call of a relu_scale-like loop (a patched torch.randn, the call, the sign digest into a
row), as the reference's re-run does it; each with `_Kernel`'s own launch and with torch's (the same
kernel objects, `func` cleared so that they fall back to it). The digests of both launchers must agree
exactly (the same kernels on the same numbers). Medians of 5 repeats, in us. A measurement: it asserts
only that agreement.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def _timed(torch, fn, calls: int) -> float:
    fn()
    torch.cuda.synchronize()
    reps = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        reps.append((time.perf_counter() - t0) * 1e6 / calls)
        torch.cuda.synchronize()
    return statistics.median(reps)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    import torch

    from cuda_agent.eval.child import hashed

    dev = torch.device("cuda", torch.cuda.current_device())
    if (why := hashed.available(dev)) is not None:
        raise SystemExit(why)
    hashed.warm(dev)
    key = hashed.fresh_key(dev)
    small = torch.empty(1024, device=dev)
    row = torch.empty(2, device=dev)

    def draw() -> None:
        hashed.fill(small, key, "normal", 0.0, 1.0)

    def digest() -> None:
        hashed.digest_into(small, key, row)

    def loop_call() -> None:
        with dev, hashed.patched(dev):
            x = torch.randn(1024)
        hashed.digest_into(torch.relu(x) * 1.5, key, row)

    rows: dict[str, dict[str, float]] = {}
    digests: dict[str, list[float]] = {}
    saved = {name: k.func for name, k in hashed._kernels.items()}
    for launcher in ("own", "torch"):
        for name, k in hashed._kernels.items():
            k.func = saved[name] if launcher == "own" else None
        rows[launcher] = {
            "draw_us": _timed(torch, draw, a.calls),
            "digest_us": _timed(torch, digest, a.calls),
            "loop_call_us": _timed(torch, loop_call, a.calls // 4),
        }
        torch.manual_seed(7)
        x = torch.randn(1 << 20, device=dev)
        out = torch.empty(2, device=dev)
        hashed.digest_into(x, key, out)
        digests[launcher] = out.tolist()
    for name, k in hashed._kernels.items():
        k.func = saved[name]
    if digests["own"] != digests["torch"]:
        raise SystemExit(f"the launchers' digests differ: {digests}")
    print("launcher  draw us  digest us  loop call us  (host time per launch or call; the GPU never waits)")
    for launcher, r in rows.items():
        print(f"{launcher:8}  {r['draw_us']:7.1f}  {r['digest_us']:9.1f}  {r['loop_call_us']:12.1f}")
    print(f"digests agree: {digests['own']}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"rows": rows, "digests": digests, "gpu": torch.cuda.get_device_name(dev)}, f, indent=1)


if __name__ == "__main__":
    main()
