"""The leak that remains (issue 28 item 4), on a GPU: per kernel size, the smallest lie that still
gains a milestone. For relu(x) * 1.5 at sizes whose honest kernel takes about 5 us, 20 us, 100 us
and 1 ms, it evaluates the honest workspace solution twice and its forgers (the test switch
`fake_time=F`: the harness in the candidate's process reporting F x its event times) at factors
just under 1, and prints per size: the honest claim's and the clock's speedup over torch.compile,
the tolerance the verdict applied (the bound on any lie's gain), and which factors gained a
milestone over the honest twin. Since the clock decides whatever the claim (trusted_time.judge),
a "gain" here can only be the clock's own run-to-run noise beyond the tolerance it is charged: the
two honest runs' clock ratios show that noise per size. Usage:
PYTHONPATH=src python benchmarks/clock_leak.py [--out F] [--clock OPT-INS]
PYTHONPATH=src python benchmarks/clock_leak.py --pairs 8 --sizes "~20 us" --factor 0.9 [--out F]

`--pairs N`: per size, N honest evaluations and N forger evaluations at `--factor`, alternating (so a
drift of the machine over the run falls on both alike), then the forgers' mean time that counts
against the honest mean, with the difference's standard error: the lie's effect told from the
clock's noise at sizes where one evaluation each cannot (H100, 2026-12-06: at ~20 us the clock's
spread was 3.9 %, above its 3 % charge). Before it, a table of where the candidate's net spreads, from
each result's `trusted_looks`: within one evaluation (its second-fastest look against its fastest) and
between evaluations (the fastest's standard deviation), each as a share of the burst per call and of the net.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import forgery_redteam as fr  # noqa: E402

from cuda_agent.eval.config import CLOCK_OPT_INS, clock_opt_ins  # noqa: E402

SIZES = {"~5 us": 1 << 20, "~20 us": 1 << 23, "~100 us": 1 << 25, "~1 ms": 1 << 29}
FACTORS = (0.99, 0.97, 0.95, 0.9)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--clock", default="", help=f"opt-ins of the evaluator's clock: {', '.join(CLOCK_OPT_INS)}")
    ap.add_argument("--pairs", type=int, default=0, help="honest/forger pairs per size, alternating (module docstring)")
    ap.add_argument("--factor", type=float, default=0.9, help="the forger's factor with --pairs")
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES), metavar="SIZE")
    args = ap.parse_args()
    if args.pairs < 0 or not 0 < args.factor < 1:
        ap.error("--pairs must be >= 0 and --factor between 0 and 1")
    try:
        clock_opt_ins(args.clock)
    except ValueError as e:
        ap.error(str(e))
    os.environ["FORGERY_CLOCK"] = args.clock
    src = (fr.FORGERY / "tasks" / "relu_scale.py").read_text()
    rows = []
    with tempfile.TemporaryDirectory(prefix="clock-leak-") as tmp:
        for label in args.sizes:
            n = SIZES[label]
            task_file = Path(tmp) / f"relu_scale_{n}.py"
            task_file.write_text(src.replace("N = 1 << 24", f"N = {n}"))
            order = [None, args.factor] * args.pairs if args.pairs else [None, None, *FACTORS]
            for factor in order:
                with tempfile.TemporaryDirectory(dir=tmp) as work:
                    r = fr._evaluate("relu_scale", factor, "switch" if factor else "honest", work, str(task_file))
                r["size"] = label
                rows.append(r)
                print(json.dumps(r), flush=True)
                if args.out:
                    Path(args.out).write_text(json.dumps(rows, indent=1))
    if args.pairs:
        _looks_table(rows, args.sizes)
        return _pairs_table(rows, args.sizes, args.factor)
    print("\nsize      honest claim/compile  clock/compile  tol    rewards honest  factors that gained")
    for label in args.sizes:
        rs = [r for r in rows if r["size"] == label]
        hon = [r for r in rs if r["factor"] is None]
        if not hon or hon[0]["time_ms"] is None:
            print(f"{label:9} {hon[0]['status'] if hon else '-'}")
            continue
        h = hon[0]
        claim = h["compile_ms"] / h["reported_ms"] if h.get("reported_ms") else float("nan")
        # every honest run's clock speedup over torch.compile: their spread is the clock's noise at this size
        clock = (
            ",".join(
                f"{r['trusted_compile_ms'] / r['trusted_ms']:.3f}"
                for r in hon
                if r.get("trusted_ms") and r.get("trusted_compile_ms")
            )
            or "-"
        )
        tol = max((r["trusted_tol"] or 0) for r in rs)
        base = min(r["reward"] for r in hon)
        gained = [r["factor"] for r in rs if r["factor"] is not None and (r["reward"] or -1) > base]
        print(f"{label:9} {claim:20.3f}  {clock:13}  {tol:5.1%}  {','.join(str(r['reward']) for r in hon):15} {gained}")
    return 0


def _looks_table(rows: list[dict], sizes: list[str]) -> None:
    """Where the candidate's net spreads (honest and forger alike: one kernel): each evaluation's fastest
    burst per call against its second-fastest (the noise one evaluation's looks show; more looks narrow it)
    and across evaluations (the standard deviation of the fastest: a per-process offset no look within the
    process shows), each in % of the burst per call and in % of the net (the burst per call less the loop)."""
    print("\nsize      runs  burst/call us  net us  within: burst %  net %   between: burst %  net %")
    for label in sizes:
        best, within, nets = [], [], []
        for r in rows:
            c = (r.get("trusted_looks") or {}).get("candidate")
            if r["size"] != label or not c or not c["ms"] or r.get("trusted_ms") is None:
                continue
            ms = sorted(c["ms"])
            best.append(ms[0] / c["calls"])
            within.append((ms[1] - ms[0]) / ms[0] if len(ms) > 1 else float("nan"))
            nets.append(r["trusted_ms"])
        if len(best) < 2:
            print(f"{label:9} fewer than two evaluations with the clock's looks")
            continue
        mean_b, net = statistics.fmean(best), statistics.fmean(nets)
        w, b = statistics.median(within), statistics.stdev(best) / mean_b
        print(
            f"{label:9} {len(best):4}  {mean_b * 1e3:13.2f}  {net * 1e3:6.2f}  {w:15.2%}  {w * mean_b / net:5.1%}"
            f"  {b:16.2%}  {b * mean_b / net:5.1%}"
        )


def _pairs_table(rows: list[dict], sizes: list[str], factor: float) -> int:
    """Per size: each side's mean time that counts and rewards, the forgers' difference in units of its
    standard error (|z| under 2: the lie's effect is not told from the clock's noise), and the gain bound:
    the most the lie lowers the mean time that counts, at two standard errors (0 where even that leaves
    the forgers slower)."""
    print(
        f"\nsize      n  honest mean us  forger x{factor} mean us  difference  std err  z      gain bound"
        "  rewards honest / forger"
    )
    for label in sizes:
        side = {
            h: [r for r in rows if r["size"] == label and (r["factor"] is None) == (h == "honest")]
            for h in ("honest", "forger")
        }
        t = {h: [r["time_ms"] * 1e3 for r in rs if r["time_ms"] is not None] for h, rs in side.items()}
        if min(len(v) for v in t.values()) < 2:
            print(f"{label:9} fewer than two ok evaluations a side")
            continue
        mh, mf, se, z = fr.mean_difference(t["honest"], t["forger"])
        diff = mf / mh - 1
        rew = " / ".join(",".join(str(r["reward"]) for r in side[h]) for h in ("honest", "forger"))
        # issue 28 item 4: the most the lie may lower the mean time that counts, at two standard errors
        bound = max(0.0, -diff + 2 * se / mh)
        print(
            f"{label:9} {len(t['honest']):2} {mh:14.3f}  {mf:20.3f}  {diff:+9.1%}  {se / mh:7.1%}  {z:+5.1f}"
            f"  {bound:10.1%}  {rew}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
