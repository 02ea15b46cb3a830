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
each with `_Kernel`'s own launch and with torch's wrapper around the same loaded kernels; then one call of
a relu_scale-like loop (a patched torch.randn, the call, the sign digest into a row) as the reference's
re-run does it, with the loop's own launcher. The digests of both launchers must agree exactly (the same
kernels on the same numbers). Medians of 5 repeats, in us. A measurement: it asserts only that agreement.
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

    if not torch.cuda.is_available():
        raise SystemExit("light_launch: needs a CUDA GPU (none is visible to torch here)")
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

    n, blocks = small.numel(), hashed._blocks(small.numel())
    partial = hashed._partial(dev)
    draw_k, digest_k, reduce_k = (hashed._kernels[k].torch_kernel for k in ("ca_draw", "ca_digest", "ca_reduce"))

    def torch_draw() -> None:  # the same launch through torch's wrapper
        draw_k(grid=(hashed._blocks((n + 1) // 2), 1, 1), block=(256, 1, 1), args=[small, key, 0, 0, n, 0, 0.0, 1.0])

    def torch_digest(x: torch.Tensor = small, into: torch.Tensor = row) -> None:
        b = hashed._blocks(x.numel())
        digest_k(grid=(b, 1, 1), block=(256, 1, 1), args=[x, 0, x.numel(), 0, key, partial])
        reduce_k(grid=(1, 1, 1), block=(64, 1, 1), args=[partial, b, into, 0])

    rows = {
        "own": {"draw_us": _timed(torch, draw, a.calls), "digest_us": _timed(torch, digest, a.calls)},
        "torch": {"draw_us": _timed(torch, torch_draw, a.calls), "digest_us": _timed(torch, torch_digest, a.calls)},
    }
    loop_us = _timed(torch, loop_call, a.calls // 4)
    torch.manual_seed(7)
    x = torch.randn(1 << 20, device=dev)
    mine, theirs = torch.empty(2, device=dev), torch.empty(2, device=dev)
    hashed.digest_into(x, key, mine)
    torch_digest(x, theirs)
    digests = {"own": mine.tolist(), "torch": theirs.tolist()}
    if digests["own"] != digests["torch"]:
        raise SystemExit(f"the launchers' digests differ: {digests}")
    print("launcher  draw us  digest us  (host time per launch; the digest is two; the GPU never waits)")
    for launcher, r in rows.items():
        print(f"{launcher:8}  {r['draw_us']:7.1f}  {r['digest_us']:9.1f}")
    print(f"one loop call (patched randn, relu * 1.5, sign digest), own launcher: {loop_us:.1f} us on the host")
    print(f"digests agree: {digests['own']} (blocks {blocks} at n {n})")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(
                {"rows": rows, "loop_call_us": loop_us, "digests": digests, "gpu": torch.cuda.get_device_name(dev)},
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
