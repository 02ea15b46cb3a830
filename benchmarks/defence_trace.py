"""Where the defences' seconds go in one evaluation: every request to the two children, timed.

Issue 16 asks that the defences add at most 20 % to an evaluation; `scripts/gpu_check.py --overhead`
measures the total (H200, 2026-12-04: 1.75 s with, 1.25 s without, +40 %) and the phases. A phase
mixes requests, and the parent's own work between replies is in no phase at all. This runs the same
setting (examples/diag_matmul's solution, build and baselines cached, spare children, an idle gap
before each evaluation as an agent's turn would leave) with the defences on and off, and records
each request sent to each child and how long the parent then waited for its reply. It prints, per
mode, the waits summed by (child, command, phase), the parent's time outside any wait, and the
timeline of the median evaluation.

Nothing here is a defence or a pass/fail result: it only reads clocks around the evaluator's calls.

Usage (GPU machine, repository root):
  PYTHONPATH=src python3 benchmarks/defence_trace.py [--n 3] [--gap 3] [--timeline] [--profile]
      [--modes on,off,on-cv,off-cv]   (-late: the spare starts after each evaluation)
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from cuda_agent.eval.api import evaluate_workspace
from cuda_agent.eval.channel import children as warm
from cuda_agent.eval.channel import exchange
from cuda_agent.eval.channel import processes as procs
from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.gpu import detect
from cuda_agent.eval.timing import timed
from cuda_agent.task import Task
from cuda_agent.task.workspace import copy_solution, init_workspace

ROOT = Path(__file__).resolve().parents[1]
OFF = dict(
    runtime_guards=False,
    fresh_timing_inputs=False,
    side_stream_guard=False,
    sandbox="off",
    shape_probe=False,
    trusted_clock=False,
)  # as scripts/gpu_check.py --overhead


class Trace:
    """Events of one evaluation: (t, child role, command, phase, seconds waited for the reply)."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str, str, str, float]] = []
        self.phase = "?"
        self.t0 = 0.0
        self.bursts: list[tuple[int, float]] = []

    def install(self) -> None:
        real_receive, real_phase, real_bursts = procs.Child.receive, exchange.announce, timed._looks
        tr = self

        def receive(child: procs.Child, timeout: float, cmd: str):  # type: ignore[no-untyped-def]
            t = time.monotonic()
            reply = real_receive(child, timeout, cmd)
            tr.events.append((t - tr.t0, child.role, cmd, tr.phase, time.monotonic() - t))
            return reply

        def phase(name: str) -> None:
            tr.phase = name
            real_phase(name)

        def bursts(child, res, cfg, kind, k, replays, mode):  # type: ignore[no-untyped-def]
            rec = real_bursts(child, res, cfg, kind, k, replays, mode)
            tr.bursts += [(k * replays, s) for s in rec.seconds]
            return rec

        procs.Child.receive = receive  # type: ignore[method-assign]
        exchange.announce = phase
        timed._looks = bursts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3, help="evaluations counted per mode (after one uncounted)")
    ap.add_argument("--gap", type=float, default=3.0, help="idle seconds before each evaluation")
    ap.add_argument("--example", default="diag_matmul")
    ap.add_argument(
        "--modes",
        default="on,off",
        help="comma-separated: on, off, with -late (the spare starts after the evaluation), "
        "-p10p90 or -cv (EvalConfig.round_spread; default: EvalConfig's) appended",
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="cProfile each mode's last evaluation: where the parent's own time goes (waits left out), "
        "and who called time.sleep (gpu_lock's polls)",
    )
    ap.add_argument("--timeline", action="store_true", help="print the median evaluation's requests in order")
    a = ap.parse_args()
    gpu = detect()
    if gpu is None:
        print("defence_trace: no CUDA device", file=sys.stderr)
        return 2
    ex = ROOT / "examples" / a.example
    tr = Trace()
    tr.install()
    profiled: dict[str, cProfile.Profile] = {}
    runs: dict[str, list[tuple[float, list[tuple[float, str, str, str, float]], list[tuple[int, float]]]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        real_prepare = warm.prepare
        for mode in a.modes.split(","):
            kw: dict[str, object] = dict(OFF) if mode.startswith("off") else {}
            for how in ("p10p90", "cv"):  # what bounds the timing rounds (EvalConfig.round_spread)
                if mode.endswith(f"-{how}") or f"-{how}-" in mode:
                    kw["round_spread"] = how
            # "-late": the next evaluation's spare starts after this one ends, not while it runs (does a
            # spare's start-up next to the timed calls cost timing rounds?)
            late = mode.endswith("-late")
            for k in range(a.n + 1):
                if k:
                    time.sleep(a.gap)
                ws = init_workspace(Task.from_file(ex / "task.py"), Path(tmp) / f"{mode}{k}", force=True)
                copy_solution(ex / "solution", ws)
                cfg = EvalConfig(reuse_results=False, spare_children=True, **kw)
                tr.events, tr.bursts, tr.t0 = [], [], time.monotonic()
                warm.prepare = (lambda *_: None) if late else real_prepare  # type: ignore[assignment]
                prof = cProfile.Profile() if a.profile and k == a.n else None
                if prof is not None:
                    prof.enable()
                r = evaluate_workspace(ws, config=cfg)
                wall = time.monotonic() - tr.t0
                if prof is not None:
                    prof.disable()
                    profiled[mode] = prof
                warm.prepare = real_prepare
                if late:
                    real_prepare(cfg, r.precision or "fp32", gpu.key)  # gated as the pipeline's own
                t = r.timing
                split = " ".join(f"{p[7:]} {v:.3f}" for p, v in sorted(r.phases_s.items()) if p.startswith("timing."))
                print(
                    f"{mode} #{k}: {r.status.value} reward {r.reward} {wall:.3f} s held {r.gpu_held_s:.3f} s; timing "
                    f"{t.median_ms if t else 0:.4g} ms cv {t.cv if t else 0:.3f} rounds {t.rounds if t else '-'}; {split}",
                    flush=True,
                )
                if k:
                    runs.setdefault(mode, []).append((wall, list(tr.events), list(tr.bursts)))
            warm.discard()
    sums: dict[str, dict[tuple[str, str, str], float]] = {}
    for mode, rs in runs.items():
        per: dict[tuple[str, str, str], list[float]] = defaultdict(list)
        for wall, ev, _ in rs:
            tot: dict[tuple[str, str, str], float] = defaultdict(float)
            for _, role, cmd, ph, w in ev:
                tot[(role, cmd, ph)] += w
            tot[("parent", "-", "outside waits")] = wall - sum(w for *_, w in ev)
            for key, v in tot.items():
                per[key].append(v)
        sums[mode] = {key: statistics.median(v + [0.0] * (len(rs) - len(v))) for key, v in per.items()}
    on, off = sums.get("on", {}), sums.get("off", {})  # the first two modes given, whatever their names
    if len(sums) >= 2:
        on, off = (sums[m] for m in list(sums)[:2])
    print("\nmedian seconds waited per (child, command, phase), with / without the defences, largest difference first")
    for key in sorted(set(on) | set(off), key=lambda x: off.get(x, 0.0) - on.get(x, 0.0)):
        print(f"  {key[0]:9} {key[1]:9} {key[2]:18} {on.get(key, 0.0):7.3f} {off.get(key, 0.0):7.3f}")
    for mode, rs in runs.items():
        walls = [w for w, *_ in rs]
        print(f"{mode}: wall median {statistics.median(walls):.3f} s ({', '.join(f'{w:.3f}' for w in walls)})")
        bs = [b for *_, bl in rs for b in bl]
        if bs:
            print(
                f"  candidate bursts: k {sorted({k for k, _ in bs})}, seconds " + ", ".join(f"{s:.4f}" for _, s in bs)
            )
    for mode, prof in profiled.items():
        # the parent's own seconds: functions by their own time, the waits for replies (select) left out
        st = pstats.Stats(prof)
        rows = sorted(
            (
                (v[2], f"{Path(f).name}:{ln}({fn})")
                for (f, ln, fn), v in st.stats.items()  # type: ignore[attr-defined]
                if fn not in ("select", "<built-in method select.select>")
            ),
            reverse=True,
        )
        print(f"\nparent's own time in {mode}'s last evaluation (seconds, top 12 by own time, waits left out):")
        for sec, where in rows[:12]:
            print(f"  {sec:7.4f} {where}")
        # sleeping is waiting too: say for what (gpu_lock._take polls a lock another holder keeps)
        for (_, _, fn), v in st.stats.items():  # type: ignore[attr-defined]
            if "sleep" in fn and v[2] > 0.005:
                # up the heaviest caller, four levels (2026-12-04: subprocess's Popen._wait, whose
                # timed wait polls with sleeps: the caller above it is the process being waited for)
                chain, callers = [], v[4]
                for _ in range(4):
                    if not callers:
                        break
                    (f, ln, cfn), c = max(callers.items(), key=lambda kv: kv[1][3])
                    chain.append(f"{Path(f).name}:{ln}({cfn}) {c[3]:.4f}")
                    callers = st.stats.get((f, ln, cfn), (0, 0, 0, 0, {}))[4]  # type: ignore[attr-defined]
                print(f"  {fn} {v[2]:.4f} s, called from: " + " <- ".join(chain))
    if a.timeline:
        for mode, rs in runs.items():
            w, ev, _ = sorted(rs, key=lambda x: x[0])[len(rs) // 2]
            print(f"\ntimeline, {mode} (median evaluation, {w:.3f} s): start of wait, child, command, phase, wait")
            for t, role, cmd, ph, d in ev:
                print(f"  {t:7.3f} {role:9} {cmd:9} {ph:18} {d:7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
