"""Probe: can a CUDA-graph burst, replayed with a secret seed, give the parent a device-bound clock?

Run on a GPU machine: `PYTHONPATH=src python benchmarks/clock_probe.py [--out FILE]`. A spawned child
captures, per size and mode (eager, torch.compile, the loop with no model), one graph of k calls
(the task's draws, the call, a digest), and the parent clocks each replay request on its own
clock. Prints per-call figures against CUDA-event device times, the nets (burst less loop), the
spread across looks, and whether the graph's draws match an eager replay of the same seed.
Standard library and torch only. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import time

import torch

SIZES = [1 << 20, 1 << 23, 1 << 26]
LOOKS = 5
TARGET_MS = 15.0


def _fn(mode: str, n: int):
    def eager(x):
        return torch.relu(x) * 1.5

    if mode == "eager":
        return eager
    if mode == "compiled":
        return torch.compile(eager)
    if mode == "legacy":  # launches on the legacy default stream: cannot be captured

        def legacy(x):
            with torch.cuda.stream(torch.cuda.default_stream()):
                return eager(x)

        return legacy
    out = torch.randn(n, device="cuda")
    return lambda x: out


def _child(conn) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    graphs: dict = {}
    while True:
        msg = conn.recv()
        op = msg["op"]
        if op == "stop":
            return
        if op == "prepare":
            n, mode, k = msg["n"], msg["mode"], msg["k"]
            fn = _fn(mode, n)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    fn(torch.randn(n, device="cuda"))
            torch.cuda.current_stream().wait_stream(s)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            dig = torch.full((k, 2), float("nan"), device="cuda")
            t0 = time.perf_counter()
            try:
                with torch.cuda.graph(g, capture_error_mode="thread_local"):
                    w = torch.randn(2, n, device="cuda")
                    for i in range(k):
                        x = torch.randn(n, device="cuda")
                        torch.mv(w, fn(x), out=dig[i])
            except Exception as e:  # noqa: BLE001
                from cuda_agent.eval.child.burst import reset_generators

                reset_generators()
                torch.cuda.synchronize()
                graphs[(n, mode)] = (None, None, fn, k)
                conn.send({"ok": False, "why": repr(e)[:300]})
                continue
            torch.cuda.synchronize()
            graphs[(n, mode)] = (g, dig, fn, k)
            conn.send({"ok": True, "capture_s": time.perf_counter() - t0})
        elif op == "burst":
            g, dig, _, k = graphs[(msg["n"], msg["mode"])]
            torch.cuda.manual_seed(msg["salt"])
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            g.replay()
            e1.record()
            vals = dig.double().tolist()  # one sync
            conn.send({"digests": vals, "event_ms": e0.elapsed_time(e1)})
        elif op == "hostloop":  # today's style: draws and digests from Python, one sync
            n, mode, k = msg["n"], msg["mode"], msg["k"]
            fn = graphs[(n, mode)][2]
            torch.cuda.manual_seed(msg["salt"])
            w = torch.randn(2, n, device="cuda")
            dd = torch.empty((k, 2), device="cuda")
            for i in range(k):
                torch.mv(w, fn(torch.randn(n, device="cuda")), out=dd[i])
            conn.send({"digests": dd.double().tolist()})
        elif op == "check":  # eager replay of the same seed: the graph's draws must match
            n, mode, k = msg["n"], msg["mode"], msg["k"]
            fn = graphs[(n, mode)][2]
            torch.cuda.manual_seed(msg["salt"])
            w = torch.randn(2, n, device="cuda")
            rows = []
            for _ in range(k):
                rows.append(torch.mv(w, fn(torch.randn(n, device="cuda"))).double().tolist())
            conn.send({"digests": rows})
        elif op == "events":
            n, mode = msg["n"], msg["mode"]
            fn = graphs[(n, mode)][2]
            from cuda_agent.eval.shared.events import time_calls

            sets = [[torch.randn(n, device="cuda")] for _ in range(2)]
            stats, _ = time_calls(fn, sets, n_warmup=5, n_timed=50, max_cv=0.05, max_rounds=3, spread="p10p90")
            conn.send({"median_ms": stats["median_ms"], "spread": stats["spread"]})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_child, args=(child,), daemon=True)
    p.start()
    rows = []

    def ask(**m):
        parent.send(m)
        if not parent.poll(120):
            raise SystemExit(f"no reply to {m.get('op')} in 120 s")
        return parent.recv()

    r = ask(op="prepare", n=1 << 20, mode="legacy", k=4)
    print("legacy-stream capture:", r, flush=True)
    if not r.get("ok"):
        t0 = time.perf_counter()
        ask(op="hostloop", n=1 << 20, mode="legacy", k=4, salt=3)
        print(f"  host loop after the failed capture ran ({time.perf_counter() - t0:.3f} s)", flush=True)
    for n in [int(s) for s in args.sizes.split(",")]:
        row: dict = {"n": n}
        for mode in ("eager", "compiled", "loop"):
            est = max(0.004, 8 * n / 3.5e12 * 1e3 * (3 if mode != "loop" else 2))  # rough ms per call
            k = max(4, min(400, int(TARGET_MS / est)))
            r = ask(op="prepare", n=n, mode=mode, k=k)
            if not r.get("ok"):
                row[mode] = {"error": r.get("why")}
                print(n, mode, "capture failed:", r.get("why"), flush=True)
                continue
            walls, events = [], []
            for _ in range(LOOKS):
                salt = int.from_bytes(__import__("os").urandom(7), "little")
                t0 = time.perf_counter()
                rep = ask(op="burst", n=n, mode=mode, salt=salt)
                walls.append((time.perf_counter() - t0) * 1e3)
                events.append(rep["event_ms"])
            info = {
                "k": k,
                "capture_s": round(r["capture_s"], 4),
                "wall_ms": [round(w, 4) for w in walls],
                "event_ms": [round(e, 4) for e in events],
            }
            if mode != "loop":
                chk = ask(op="check", n=n, mode=mode, k=min(k, 6), salt=salt)
                got = rep["digests"][: len(chk["digests"])]
                rel = max(
                    abs(a - b) / (abs(b) + 1e-6)
                    for ra, rb in zip(got, chk["digests"], strict=False)
                    for a, b in zip(ra, rb, strict=False)
                )
                info["graph_vs_eager_rel"] = rel
                ev = ask(op="events", n=n, mode=mode)
                info["events_median_ms"] = ev["median_ms"]
                hl = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    ask(op="hostloop", n=n, mode=mode, k=k, salt=1)
                    hl.append((time.perf_counter() - t0) * 1e3)
                info["hostloop_wall_ms"] = [round(h, 4) for h in hl]
            row[mode] = info
        rows.append(row)
        print(json.dumps(row), flush=True)
    ask(op="stop")
    print(
        "\nsize      mode      k   per-call wall(min)  spread   event/graph  net(ms)  events(ms)  hostloop/call  draws-match"
    )
    for row in rows:
        lp = row.get("loop", {})
        loop_pc = min(lp["wall_ms"]) / lp["k"] if "wall_ms" in lp else float("nan")
        for mode in ("eager", "compiled"):
            i = row.get(mode, {})
            if "wall_ms" not in i:
                print(f"{row['n']:>10} {mode:9} error {i.get('error')}")
                continue
            w = sorted(i["wall_ms"])
            pc = w[0] / i["k"]
            spread = (w[1] - w[0]) / w[0]
            net = pc - loop_pc
            print(
                f"{row['n']:>10} {mode:9} {i['k']:>3}  {pc:.5f}  {spread:7.2%}  {statistics.median(i['event_ms']) / w[0]:.3f}  "
                f"{net:.5f}  {i['events_median_ms']:.5f}  {min(i['hostloop_wall_ms']) / i['k']:.5f}  {i['graph_vs_eager_rel']:.2e}"
            )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
