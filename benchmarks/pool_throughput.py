"""Throughput of the evaluation pool on a GPU box: evaluations per GPU-hour.

Workload: for each bundled example, K fresh candidates (the example's
solution with a distinct comment in each .cu file, so every candidate has a
new hash: no result-cache hit, nvcc recompiles the kernel, the torch binding
objects are build-cache hits as in an agent session). Baselines are timed
once first (warm-up, as in a session), then:
- serial: the jobs one after another in this process (one GPU);
- pool: the same number of new candidates submitted at once to LocalPool
  (one worker per visible GPU + CPU compile farm running ahead; its GPU
  slots keep spare children warming for their next job, eval.channel.children, which
  the serial mode, like a one-shot `cuda-agent eval`, does not);
- cache hit: the pool's candidates submitted again (result cache), and one
  direct run_job of a cached candidate.
Evaluations per GPU-hour = jobs / (wall hours x GPUs used). Prints the
figures, then a table last; writes JSON to $OUT/pool_throughput.json.

Usage: PYTHONPATH=src python3 benchmarks/pool_throughput.py [--variants 4] [--gpus N] [--compile-workers 8] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("CUDA_AGENT_CACHE", tempfile.mkdtemp(prefix="pool-throughput-cache-"))

from cuda_agent.eval.config import EvalConfig  # noqa: E402
from cuda_agent.pool.local import EvalJob, LocalPool, run_job, visible_gpus  # noqa: E402
from cuda_agent.task import Task  # noqa: E402


def variant(ex: Path, dest: Path, salt: str) -> Path:
    """The example's solution with a comment that changes every .cu file's hash."""
    shutil.copytree(ex / "solution", dest)
    for cu in (dest / "kernels").glob("*.cu"):
        cu.write_text(cu.read_text() + f"\n// candidate {salt}\n")
    return dest


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", type=int, default=4, help="fresh candidates per example and mode")
    ap.add_argument("--gpus", type=int, default=None, help="pool GPU workers (default: all visible)")
    ap.add_argument("--compile-workers", type=int, default=None)
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    out = Path(os.environ.get("OUT") or ROOT / "out")
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="pool-throughput-"))
    examples = sorted(p for p in (ROOT / "examples").iterdir() if (p / "solution" / "model_new.py").is_file())
    if a.only:
        examples = [p for p in examples if p.name in a.only]
    tasks = {ex.name: Task.from_file(ex / "task.py") for ex in examples}
    cfg = EvalConfig()
    n_gpus = a.gpus or max(1, len(visible_gpus()))
    print(
        f"examples: {len(examples)}, variants: {a.variants}, pool GPUs: {n_gpus}, cache: {os.environ['CUDA_AGENT_CACHE']}",
        flush=True,
    )

    def jobs(tag: str) -> list[EvalJob]:
        return [
            EvalJob(
                task=tasks[ex.name],
                workdir=variant(ex, work / f"{tag}-{ex.name}-{k}", f"{tag}{k}"),
                config=cfg,
                label=f"{ex.name}#{k}",
            )
            for k in range(a.variants)
            for ex in examples
        ]

    # warm-up: binding objects and baselines cached, as they are after the first turn of a session
    t0 = time.monotonic()
    for j in jobs("warm")[: len(examples)]:
        r = run_job(j)
        print(f"warm-up {j.label}: {r.status.value} reward {r.reward} ({r.message[:80]})", flush=True)
    warm_s = time.monotonic() - t0

    serial_jobs = jobs("serial")
    t0 = time.monotonic()
    serial = [run_job(j) for j in serial_jobs]
    serial_s = time.monotonic() - t0
    print(f"serial: {len(serial)} evaluations in {serial_s:.1f} s", flush=True)

    pool_jobs = jobs("pool")
    with LocalPool(n_gpus, compile_workers=a.compile_workers) as pool:
        t0 = time.monotonic()
        futs = [pool.submit(j) for j in pool_jobs]
        pooled = [f.result() for f in futs]
        pool_s = time.monotonic() - t0
        print(f"pool: {len(pooled)} evaluations in {pool_s:.1f} s on {pool.n_slots} GPU worker(s)", flush=True)
        t0 = time.monotonic()
        again = [f.result() for f in [pool.submit(j) for j in pool_jobs]]
        hit_pool_s = time.monotonic() - t0
    lat = []
    for j in pool_jobs[: min(5, len(pool_jobs))]:
        t0 = time.monotonic()
        run_job(j)
        lat.append(time.monotonic() - t0)
    hits = sum(bool(r.cache.get("result")) for r in again)
    ok = lambda rs: sum(r.status.value == "ok" for r in rs)  # noqa: E731
    per_hour = lambda n, s, g: n / (s / 3600 * g) if s > 0 else float("nan")  # noqa: E731
    rows = [
        ("serial, fresh candidates", len(serial), ok(serial), serial_s, 1, per_hour(len(serial), serial_s, 1)),
        ("pool, fresh candidates", len(pooled), ok(pooled), pool_s, n_gpus, per_hour(len(pooled), pool_s, n_gpus)),
        ("pool, result-cache hits", len(again), hits, hit_pool_s, n_gpus, per_hour(len(again), hit_pool_s, n_gpus)),
    ]
    data = {
        "examples": [e.name for e in examples],
        "variants": a.variants,
        "gpus": n_gpus,
        "warmup_s": warm_s,
        "rows": [
            dict(zip(("mode", "jobs", "ok_or_hits", "wall_s", "gpus", "evals_per_gpu_hour"), r, strict=True))
            for r in rows
        ],
        "cache_hit_direct_s": {"median": statistics.median(lat), "max": max(lat)},
        "statuses": {"serial": [r.status.value for r in serial], "pool": [r.status.value for r in pooled]},
    }
    (out / "pool_throughput.json").write_text(json.dumps(data, indent=1))
    print(f"\ncache hit, direct run_job: median {statistics.median(lat) * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms")
    print(
        f"pool speed-up over serial (wall): {serial_s / pool_s:.2f}x with {n_gpus} GPU(s); "
        f"per GPU: {rows[1][5] / rows[0][5]:.2f}x\n"
    )
    print(f"{'mode':<28} {'jobs':>5} {'ok/hits':>8} {'wall s':>8} {'GPUs':>5} {'evals/GPU-hour':>15}")
    for mode, n, good, s, g, rate in rows:
        print(f"{mode:<28} {n:>5} {good:>8} {s:>8.1f} {g:>5} {rate:>15.0f}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
