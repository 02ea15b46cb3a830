"""The synthesis filter on one GPU in one call: crawl, compose N deterministic candidates, filter them.

    PYTHONPATH=src python benchmarks/synth_gpu.py [-n 200] [--deadline-s 330] [--jobs-per-gpu 8]

Crawls torch seeds on this machine (transformers blocks too when installed
here: a task that imports transformers needs it wherever it is evaluated),
composes N candidates (paper mix, planner seed 0), decontaminates against the
bundled KernelBench-style set (or `--against`), then runs every device stage
(runs, deterministic, anti_hack, timing 1-100 ms with re-shaping, eager vs
torch.compile) as pool call jobs, `--jobs-per-gpu` of them sharing each GPU
(timing takes an exclusive per-GPU lock). Prints the yield table, the wall
time of the device part and candidates per GPU-hour (candidates finished by
the device part / its wall time / GPUs). The device part stops at
`--deadline-s` so the whole call stays under 8 minutes; unfinished candidates
are then named, not counted. Writes everything under --work (default $OUT or a temp dir). `--candidates FILE` filters
a candidates.jsonl composed earlier (on the same torch) and skips crawl and compose.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _per_key(reports: list[dict], field: str) -> dict[str, list[float]]:
    """The values of each key of the reports' `field` dicts, gathered across the reports."""
    out: dict[str, list[float]] = {}
    for d in reports:
        for k, v in (d.get(field) or {}).items():
            out.setdefault(k, []).append(float(v))
    return out


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs from /proc/stat, or None where there is none."""
    try:
        f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    idle = f[3] + (f[4] if len(f) > 4 else 0)
    return sum(f) - idle, sum(f)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--deadline-s", type=float, default=330.0, help="stop the device part after this long")
    ap.add_argument("--jobs-per-gpu", type=int, default=8)
    ap.add_argument("--against", help="reference suite for decontamination (default: the bundled set)")
    ap.add_argument("--work", type=Path)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: a dry run of this script")
    ap.add_argument(
        "--candidates",
        type=Path,
        help="filter these composed candidates (a candidates.jsonl composed on "
        "the same torch) instead of crawling and composing here: the whole call goes to the filter",
    )
    a = ap.parse_args()
    t_start = time.monotonic()
    from synth_cpu import bundled_refs

    from cuda_agent.pool.local import LocalPool, visible_gpus
    from cuda_agent.synth import records
    from cuda_agent.synth.compose import DeterministicComposer, Planner, run_compose
    from cuda_agent.synth.crawl import crawl, torch_ops
    from cuda_agent.synth.crawl_hf import hf_targets
    from cuda_agent.synth.device_job import FilterSettings
    from cuda_agent.synth.filter import STAGES, FilterConfig, run_filter, work_dir
    from cuda_agent.synth.records import Seed

    work = a.work or Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="synth-gpu-"))
    work.mkdir(parents=True, exist_ok=True)
    if a.candidates:
        import shutil

        shutil.copyfile(a.candidates, work / "candidates.jsonl")
        print(f"candidates: {a.candidates} (crawl and compose skipped)", flush=True)
    else:
        t = time.monotonic()
        seeds = crawl(
            work / "seeds.jsonl", [(x, "torch") for x in torch_ops()] + [(x, "transformers") for x in hf_targets()]
        )
        print(
            f"crawl: {time.monotonic() - t:.1f} s, {sum(s.runs for s in seeds)} seeds run, "
            f"{sum(s.composable for s in seeds)} composable",
            flush=True,
        )
        t = time.monotonic()
        run_compose(
            DeterministicComposer(Planner(records.read(work / "seeds.jsonl", Seed), seed=0)),
            a.n,
            work / "candidates.jsonl",
        )
        print(f"compose {a.n}: {time.monotonic() - t:.1f} s", flush=True)
    if a.against:
        from cuda_agent.task.suites import load_suite

        refs = [(i.task_id, i.task.source) for i in load_suite(a.against)]
    else:
        refs = bundled_refs()
    gpus = visible_gpus() if a.device == "cuda" else []
    if a.device == "cuda" and not gpus:
        print("no GPU visible", file=sys.stderr)
        return 2
    settings = FilterSettings(
        device=a.device,
        gpu_fraction=1.0 / a.jobs_per_gpu,
        lock_dir=str(work),
        load_timeout=90,
        checks_timeout=90,
        time_timeout=60,
        compile_timeout=180,
    )
    cfg = FilterConfig(settings, refs, deadline_s=a.deadline_s)
    last = [0.0]

    def progress(counts, done, total):
        if time.monotonic() - last[0] > 15 or done == total:
            last[0] = time.monotonic()
            print(f"  {done}/{total} " + " ".join(f"{s} {p}/{e}" for s, (e, p) in counts.items() if e), flush=True)

    pool = LocalPool(device=a.device, call_workers=None if gpus else a.jobs_per_gpu)
    try:
        import pyarrow  # noqa: F401

        out = work / "tasks.parquet"
    except ImportError:
        out = work / "tasks.jsonl"  # no pyarrow on this machine: the same rows as JSON lines
    cpu0 = _cpu_times()
    summary = run_filter(work / "candidates.jsonl", out, cfg, pool, progress)
    cpu1 = _cpu_times()
    print(
        f"\nyield per stage ({a.n} candidates, {max(1, len(gpus))} {'GPU' if gpus else 'CPU lane'}, "
        f"{a.jobs_per_gpu} jobs per GPU)"
    )
    print(f"{'stage':<14}{'entered':>9}{'passed':>9}{'yield':>8}")
    for s in STAGES:
        e, p = summary.counts[s]
        print(f"{s:<14}{e:>9}{p:>9}{(f'{100 * p / e:.1f}%' if e else '-'):>8}")
    per_hour = summary.evaluated_now / max(summary.device_s, 1e-9) * 3600 / max(1, len(gpus))
    print(
        f"\ndevice part: {summary.device_s:.1f} s for {summary.evaluated_now} candidates"
        f"{' (deadline reached: the rest were cancelled)' if summary.timed_out else ''}"
    )
    print(
        f"candidates filtered per GPU-hour: {per_hour:.0f}; kept {summary.kept} "
        f"({summary.kept / max(summary.device_s, 1e-9) * 3600 / max(1, len(gpus)):.0f} kept tasks per GPU-hour)"
    )
    reshaped = [json.loads(line) for line in (work_dir(out) / "device.jsonl").read_text().splitlines()]
    n_resh = sum(1 for d in reshaped if d.get("reshapes"))
    print(f"re-shaped: {n_resh} of {len(reshaped)}; harness errors: {len(summary.harness_errors)}")
    # where a job's wall time went (lock waits included), summed over the finished candidates
    spent, warm = _per_key(reshaped, "stage_s"), _per_key(reshaped, "warm_s")
    if warm:  # what a child spends starting (a spare's, off the critical path unless a job waits for it)
        print(
            "child start-up, median seconds: " + ", ".join(f"{k} {sorted(v)[len(v) // 2]:.1f}" for k, v in warm.items())
        )
    waits = spent.pop("lock_wait", [])
    if spent:
        tot = sum(sum(v) for v in spent.values()) or 1.0
        print(
            "job seconds per stage (sum / median / share): "
            + "; ".join(
                f"{k} {sum(v):.0f}/{sorted(v)[len(v) // 2]:.1f}/{100 * sum(v) / tot:.0f}%"
                for k, v in sorted(spent.items(), key=lambda kv: -sum(kv[1]))
            )
            + f"; of all that, waiting for the GPU lock {sum(waits):.0f} ({100 * sum(waits) / tot:.0f}%)"
        )
    for cid, msg in summary.harness_errors[:3]:
        print(f"  {cid}: {msg}")
    if cpu0 and cpu1:  # is the CPU (torch.compile's builds) or the GPU what limits the filter?
        busy, total = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
        print(f"CPU busy during the filter: {100 * busy / max(total, 1):.0f}% of {os.cpu_count()} cores")
    print(f"total wall {time.monotonic() - t_start:.1f} s; files under {work}", flush=True)
    # Jobs cancelled at the deadline may still run in the workers: end them (ours) instead of waiting.
    for p in multiprocessing.active_children():
        p.kill()
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
