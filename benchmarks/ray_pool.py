"""Issue 29 item 5 on a GPU: `cuda-agent bench --ray` against the local pool over the throughput mix, in one
call: evaluations per GPU-hour of each, and whether any result differs but in time.

Usage (a GPU machine, from the repo root; carry .kb from benchmarks/kb_mix_carry.py and .carry-rl from
scripts/device-wheels.sh --rl, whose repacked Ray wheel is installed first, by the runner's install_wheels):
  PYTHONPATH=src python benchmarks/ray_pool.py --kernelbench .kb --wheels .carry-rl --out DIR

1. The mix's baselines, once (`cuda-agent baselines`), into a cache both benches then start from (a copy
   each), so neither pays them and neither finds the other's results or builds.
2. `cuda-agent bench` over the mix's honest solutions with the local pool, then the same with `--ray`
   (one node: Ray's own GPU resource), each with its wall seconds. Local runs first: the machine is the
   same, the order is said in the output.
3. Per task, status, reward and correctness of both; every difference is printed. The exit is 1 if a status or a
   correctness differs, or a task is missing from one: those the pool must never change. A reward that differs
   where status and correctness agree is a difference in time (the reward is the time's milestone): it is
   printed with both sides' times that count, and its size is the evaluator's clock's run-to-run spread
   (issue 28), not the pool's. Evaluations per GPU-hour = evaluations / wall seconds x 3600 (one GPU).

Not guaranteed: equal times (they are not compared: only what they decide), or that a cut step's figures
mean anything (a step past its limit is said so and its throughput is not given).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.baselines_all import kb_solutions  # noqa: E402
from benchmarks.runner import install_wheels  # noqa: E402

KEYS = ("status", "reward", "correct", "time_ms")


def outcomes(run: Path) -> dict[str, tuple]:
    """task id -> (status, reward, correct, time_ms) of its last evaluation in a bench's store."""
    sys.path.insert(0, str(ROOT / "src"))
    from cuda_agent.bench.store import ResultStore

    return {r["task_id"]: tuple(r[k] for k in KEYS) for r in ResultStore.open_existing(run).rows()}


def differences(a: dict[str, tuple], b: dict[str, tuple]) -> tuple[list[str], list[str]]:
    """(outcomes that differ: status or correctness, or a task only one run has; rewards that differ with
    the time alone), one line each."""
    hard, timed = [], []
    for t in sorted(set(a) | set(b)):
        x, y = a.get(t), b.get(t)
        if x is None or y is None or (x[0], x[2]) != (y[0], y[2]):
            hard.append(f"{t}: local {x[:3] if x else 'missing'} vs ray {y[:3] if y else 'missing'}")
        elif x[1] != y[1]:
            tx, ty = x[3], y[3]
            apart = f", {abs(tx - ty) / min(tx, ty) * 100:.1f} % apart" if tx and ty else ""
            timed.append(f"{t}: reward local {x[1]} vs ray {y[1]}, time that counts {tx} vs {ty} ms{apart}")
    return hard, timed


def _run(argv: list[str], env: dict[str, str], limit: float, log: Path) -> tuple[int | None, float]:
    """(exit code or None when cut at its limit, wall seconds), output into log."""
    t0 = time.monotonic()
    with log.open("w") as f:
        try:
            rc: int | None = subprocess.run(argv, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=limit).returncode
        except subprocess.TimeoutExpired:
            rc = None
    return rc, time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernelbench", type=Path, default=ROOT / ".kb")
    ap.add_argument("--wheels", type=Path, default=ROOT / ".carry-rl")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    ap.add_argument("--baselines-s", type=float, default=180)
    ap.add_argument("--bench-s", type=float, default=170, help="each bench's limit")
    args = ap.parse_args()
    if not (args.kernelbench / "KernelBench").is_dir():
        print(f"error: no KernelBench files in {args.kernelbench} (run benchmarks/kb_mix_carry.py)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"ray-pool-{os.getpid()}"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1", "RAY_DEDUP_LOGS": "0"}
    if site := install_wheels(args.wheels, work / "site"):
        env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
    probe = subprocess.run(
        [sys.executable, "-c", "import ray; print(ray.__version__)"], env=env, capture_output=True, text=True
    )
    why = (probe.stderr.strip().splitlines() or ["?"])[-1]
    print(f"ray {probe.stdout.strip()}" if probe.returncode == 0 else f"ray is NOT importable: {why}", flush=True)
    suite, sols = str(args.kernelbench / "KernelBench"), args.out / "solutions"
    print(f"{kb_solutions(args.kernelbench, sols, {1, 2})} stored solutions of the mix", flush=True)
    cli = [sys.executable, "-m", "cuda_agent"]

    base = work / "cache-baselines"
    rc, secs = _run(
        [*cli, "baselines", suite, "--levels", "1,2"],
        {**env, "CUDA_AGENT_CACHE": str(base)},
        args.baselines_s,
        args.out / "baselines.log",
    )
    print(f"baselines: exit {rc}, {secs:.0f} s", flush=True)
    runs: dict[str, tuple[int | None, float, Path]] = {}
    for mode in ("local", "ray"):  # local first, then Ray: the same machine, one after the other
        cache = work / f"cache-{mode}"
        if base.is_dir():
            shutil.copytree(base, cache, dirs_exist_ok=True)
        run = args.out / mode
        argv = [*cli, "bench", suite, "--levels", "1,2", "--solutions", str(sols), "-o", str(run), "-q"]
        if mode == "ray":
            argv.append("--ray")
        rc, secs = _run(argv, {**env, "CUDA_AGENT_CACHE": str(cache)}, args.bench_s, args.out / f"{mode}.log")
        runs[mode] = (rc, secs, run)
        print(f"bench {mode}: exit {'cut at its limit' if rc is None else rc}, {secs:.0f} s", flush=True)
    got = {m: outcomes(r) if (r / "results.sqlite").is_file() else {} for m, (_, _, r) in runs.items()}
    print("\npool   evaluations  wall s  per GPU-hour  exit")
    for m, (rc, secs, _) in runs.items():
        n = len(got[m])
        rate = f"{n / secs * 3600:.0f}" if rc is not None and n and secs > 0 else "-"
        print(f"{m:6} {n:>11}  {secs:>6.0f}  {rate:>12}  {'cut' if rc is None else rc}")
    hard, timed = differences(got["local"], got["ray"])
    print(f"outcomes that differ (status, correct, or missing): {len(hard)}")
    for d in hard:
        print("  " + d)
    print(f"rewards that differ with the time alone (the clock's spread, not the pool's): {len(timed)}")
    for d in timed:
        print("  " + d)
    return 1 if hard or any(rc != 0 for rc, _, _ in runs.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
