"""Issue 32 item 3 on a GPU: stored solutions against every baseline (eager, torch.compile default,
max-autotune-no-cudagraphs, eager replayed from a CUDA graph) and against the best of them.

Usage (a GPU machine, from the repo root):
  PYTHONPATH=src python benchmarks/baselines_all.py examples --out DIR
  PYTHONPATH=src python benchmarks/baselines_all.py kb --kernelbench .kb --out DIR [--levels 1,2]

`examples` benches the bundled examples' solutions; `kb` benches the throughput mix's honest solutions
(benchmarks/kb_mix, one per KernelBench task of MIX.json) over the KernelBench files carried in `.kb`
(benchmarks/kb_mix_carry.py), through a solutions folder laid out as `bench` looks them up
(DIR/level<L>/<stem>/, links to the mix's folders). Both run `cuda-agent bench ... --baselines all`
(resumable: a run cut at its limit keeps every finished task in DIR/run/results.sqlite), then
`cuda-agent report` (report.md and report.html in DIR/run, with the best-baseline columns), then print
one row per task: status, reward, the time that counts, the speedup against each baseline, the best
baseline and the speedup against it. The same rows go to DIR/baselines.json.

Not guaranteed: the extra baselines are event times in the reference's child, not the evaluator's
clock (docs/profile.md), and the reward stays the paper's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIX = ROOT / "benchmarks" / "kb_mix" / "MIX.json"
ORDER = ("eager", "compile", "max-autotune", "cuda-graph")


def kb_solutions(kb: Path, dest: Path, levels: set[int]) -> int:
    """DIR/level<L>/<stem> -> the mix's honest solution, for each MIX.json task whose file is in kb."""
    n = 0
    for t in json.loads(MIX.read_text())["tasks"]:
        if t["level"] not in levels or "solution" not in t["candidates"]:
            continue
        if not (kb / "KernelBench" / f"level{t['level']}" / t["file"]).is_file():
            print(f"note: {t['file']} is not in {kb}: skipped", flush=True)
            continue
        link = dest / f"level{t['level']}" / Path(t["file"]).stem
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(MIX.parent / t["dir"] / "solution", target_is_directory=True)
        n += 1
    return n


def rows(run: Path) -> list[dict]:
    """One row per scored task from the bench's store (its best attempt: stored solutions have one)."""
    sys.path.insert(0, str(ROOT / "src"))
    from cuda_agent.bench.store import ResultStore
    from cuda_agent.eval.timing import baseline_set

    out = []
    for r in ResultStore.open_existing(run).rows():
        res = json.loads(r.get("result_json") or "{}")
        sp = baseline_set.speedups(res)
        b = baseline_set.best(res)
        out.append(
            {
                "task": r.get("task_id"),
                "status": res.get("status"),
                "reward": res.get("reward"),
                "time_ms": res.get("time_ms"),
                "speedups": {k: round(sp[k], 3) for k in ORDER if k in sp},
                "best": b[0] if b else None,
                "vs_best": round(sp[b[0]], 3) if b and b[0] in sp else None,
            }
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", choices=("examples", "kb"))
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    ap.add_argument("--kernelbench", type=Path, default=ROOT / ".kb", help="KernelBench files (kb_mix_carry.py)")
    ap.add_argument("--levels", default="1,2")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    run = args.out / "run"
    if args.suite == "examples":
        suite, sols, extra = "examples", ROOT / "examples", []
    else:
        if not (args.kernelbench / "KernelBench").is_dir():
            print(
                f"error: no KernelBench files in {args.kernelbench} (run benchmarks/kb_mix_carry.py)", file=sys.stderr
            )
            return 2
        sols = args.out / "solutions"
        levels = {int(x) for x in args.levels.split(",")}
        print(f"{kb_solutions(args.kernelbench, sols, levels)} stored solutions of the mix", flush=True)
        suite, extra = str(args.kernelbench / "KernelBench"), ["--levels", args.levels]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    bench = [sys.executable, "-m", "cuda_agent", "bench", suite, "--solutions", str(sols), "-o", str(run)]
    rc = subprocess.call([*bench, *extra, "--baselines", "all", "-q"], env=env)
    print(f"bench exit {rc}", flush=True)
    if (run / "results.sqlite").is_file():
        subprocess.call([sys.executable, "-m", "cuda_agent", "report", str(run)], env=env)
        got = rows(run)
        (args.out / "baselines.json").write_text(json.dumps(got, indent=1))
        print("\ntask | status | reward | time_ms | " + " | ".join(f"vs {k}" for k in ORDER) + " | best | vs best")
        for g in got:
            t = f"{g['time_ms']:.4g}" if isinstance(g["time_ms"], int | float) else "-"
            sp = " | ".join(f"{g['speedups'][k]:.3f}" if k in g["speedups"] else "-" for k in ORDER)
            print(
                f"{g['task']} | {g['status']} | {g['reward']} | {t} | {sp} | {g['best'] or '-'} | {g['vs_best'] or '-'}"
            )
    return rc


if __name__ == "__main__":
    sys.exit(main())
