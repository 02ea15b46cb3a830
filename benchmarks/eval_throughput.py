"""Evaluations per GPU-hour for a fixed mix, serial and on the local pool, and where the seconds go.

The mix: the bundled examples (honest solutions, expected correct) and the KernelBench mix of
benchmarks/kb_mix/MIX.json (level 1-2 tasks, found in `--kernelbench DIR` by level and problem
number; an honest solution per task, expected correct, and a broken one for some, expected
incorrect). Candidates are interleaved so that any prefix of the sequence is a fair sample of it.
Every evaluation is of a fresh candidate: a copy of its solution with a random token appended as
a comment (`--salt both`, the default: model_new.py and every .cu file, so the result cache never
hits and nvcc recompiles the kernel while the torch binding object is a build-cache hit, as when
an agent edits its kernel; `--salt model`: model_new.py only, no nvcc at all).

Steps, all against one `--deadline-s` counted from the start (the script stops submitting work
when its share is used, and writes every result to $OUT/eval_throughput.json as it lands):
0. `--precompute-baselines`: `cuda-agent baselines` over the mix's KernelBench tasks and the
   examples (resumable, into the evaluator's cache), with a time limit of its own.
1. warm-up (not measured): one compile-phase job per candidate on the pool's CPU compile farm,
   so the torch binding objects are built; and the static checks timed once per candidate.
2. serial: candidates one after another in this process (`run_job`, `EvalConfig(spare_children=True)`,
   one GPU), until its share of the remaining time (`--serial-share`) is used.
3. pool: `LocalPool` (one GPU slot per visible GPU, the CPU compile farm building ahead), with at
   most `--window` jobs in flight (default: slots + 2, so one runs while the next two build), until
   the deadline less the time the jobs still in flight need to drain.
Evaluations per GPU-hour = evaluations / (wall hours x GPUs). The phase split sums each result's
`phases_s` (top-level keys; child start-up on the critical path is `children`, the wait for the
evaluation's pair of children (a spare still starting, or a new pair's spawn), plus
`reference.setup`, the part of `reference` spent waiting for the reference child to start and
build the task's model after the build) against the mode's GPU-seconds: a GPU slot's busy time is measured per job (from
the moment the pool's slot takes it until its result), "idle" is the rest, and "other" is busy
time no phase accounts for (staging, static checks, child spawn, cleanup). The CPU side: the
compile phase of the serial evaluations (nvcc on the critical path) and the static checks.
Also counted: evaluations whose baselines came from the cache, and outcomes that differ from
the expected ones (a wrong solution in the mix, or an evaluator that changed its verdict).

Not guaranteed: that a mode evaluates exactly the same candidates as the other (each stops at
its deadline; the table gives the counts); that figures from a machine other than one H200 mean
the same. Without cached baselines the first evaluation of each task pays 25-38 s for them:
run with `--precompute-baselines` (or `--only-baselines` in an earlier call, carrying the cache)
first, and look at the "baselines from the cache" line.

Longer than the 250-line guide: the mix, the two modes, the accounting and the report belong to
one run and are read together.

Exit 0, or 1 when an outcome differed from the expected one.

Usage (GPU machine; CUDA_AGENT_CACHE defaults to ./.bench-cache so baselines survive between calls):
  PYTHONPATH=src python3 benchmarks/eval_throughput.py --kernelbench .kb [--deadline-s 540]
      [--precompute-baselines | --only-baselines] [--serial-share 0.5] [--window N] [--salt both|model]
      [--only SUBSTRING ...] [--phase profile|compile] [--export-cache]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.eval.channel import children as warm  # noqa: E402
from cuda_agent.eval.checks.gate import workspace_findings  # noqa: E402
from cuda_agent.eval.config import EvalConfig  # noqa: E402
from cuda_agent.eval.judge.result import EvalResult  # noqa: E402
from cuda_agent.pool.local import EvalJob, LocalPool, run_job, visible_gpus  # noqa: E402
from cuda_agent.task import Task  # noqa: E402
from cuda_agent.task.suites import example_dirs  # noqa: E402
from cuda_agent.task.workspace import copy_solution, init_workspace, stage  # noqa: E402

MIX = ROOT / "benchmarks" / "kb_mix" / "MIX.json"
RESERVE_S = 20.0  # left at the end for the report
MEASURE_S = 300.0  # what --precompute-baselines leaves for the measurement, unless --baselines-budget-s says


@dataclass
class Candidate:
    label: str  # "L2-76/broken", "examples/gelu_chain"
    task: Task
    solution: Path
    expect: str  # "correct" | "incorrect"


@dataclass
class Row:
    mode: str
    label: str
    expect: str
    status: str
    correct: bool
    reward: int | None
    busy_s: float  # seconds the evaluation held its GPU (serial: its wall time)
    phases_s: dict[str, float]
    cache: dict[str, bool]
    gpu_wait_s: float
    message: str
    time_ms: float | None = None  # the candidate's median time (the timing spread between modes)
    gpu_held_s: float = 0.0  # seconds it held the GPU alone (timed sections)
    as_expected: bool = field(init=False)

    def __post_init__(self) -> None:
        good = self.status == "ok" and self.correct
        if self.expect == "compiled":  # --phase compile: nothing was checked beyond the build
            self.as_expected = self.status == "ok"
        else:
            self.as_expected = good if self.expect == "correct" else self.status == "incorrect"


def find_task_file(kb: Path, level: int, problem: int) -> Path:
    """KernelBench's file for (level, problem) in a checkout (KernelBench/levelN/ or levelN/)."""
    for base in (kb / "KernelBench" / f"level{level}", kb / f"level{level}"):
        hits = sorted(base.glob(f"{problem}_*.py")) if base.is_dir() else []
        if hits:
            return hits[0]
    raise FileNotFoundError(f"no level{level}/{problem}_*.py under {kb} (run benchmarks/kb_mix_carry.py first)")


def load_mix(kb: Path | None, only: list[str] | None) -> list[Candidate]:
    """The candidates in a fixed interleaved order: the honest ones (examples and KernelBench) in a
    fixed shuffle, with a broken one after every few, so that any prefix is a fair sample."""
    honest: list[Candidate] = []
    broken: list[Candidate] = []
    for ex in example_dirs(ROOT / "examples"):
        if (ex / "solution" / "model_new.py").is_file():
            honest.append(Candidate(f"examples/{ex.name}", Task.from_file(ex / "task.py"), ex / "solution", "correct"))
    if kb is not None:
        for t in json.loads(MIX.read_text())["tasks"]:
            f = find_task_file(kb, t["level"], t["problem"])
            if f.name != t["file"]:
                print(f"note: L{t['level']}-{t['problem']} is {f.name} in {kb}, {t['file']} in MIX.json", flush=True)
            task = Task.from_file(f)
            for variant, expect in t["candidates"].items():
                c = Candidate(f"L{t['level']}-{t['problem']}/{variant}", task, MIX.parent / t["dir"] / variant, expect)
                (honest if expect == "correct" else broken).append(c)
    rng = random.Random(16)
    rng.shuffle(honest)
    rng.shuffle(broken)
    out: list[Candidate] = []
    step = max(1, len(honest) // max(1, len(broken)))
    for i, c in enumerate(honest):
        out.append(c)
        if i % step == step - 1 and broken:
            out.append(broken.pop())
    out += broken
    if only:
        out = [c for c in out if any(s in c.label for s in only)]
    return out


def fresh_copy(c: Candidate, dest: Path, salt: str) -> Path:
    """A workspace holding the candidate's solution with a new hash (see the module docstring)."""
    ws = init_workspace(c.task, dest, force=True)
    copy_solution(c.solution, ws)
    token = secrets.token_hex(8)
    (ws / "model_new.py").write_text((ws / "model_new.py").read_text() + f"\n# fresh candidate {token}\n")
    if salt == "both":
        for cu in (ws / "kernels").glob("*.cu"):
            cu.write_text(cu.read_text() + f"\n// fresh candidate {token}\n")
    return ws


class Recorder:
    """Rows as they land, rewritten to $OUT/eval_throughput.json after each one."""

    def __init__(self, out: Path, meta: dict):
        self.path, self.meta, self.rows, self.extra = out / "eval_throughput.json", meta, [], {}
        self.lock = threading.Lock()

    def add(self, row: Row) -> None:
        with self.lock:
            self.rows.append(row)
            self.flush()
        mark = "" if row.as_expected else f"  UNEXPECTED (expected {row.expect})"
        print(
            f"[{row.mode} {sum(r.mode == row.mode for r in self.rows)}] {row.label}: {row.status} reward {row.reward} "
            f"{row.busy_s:.1f} s{mark}  {row.message[:100]}",
            flush=True,
        )

    def flush(self) -> None:
        data = {**self.meta, **self.extra, "rows": [r.__dict__ for r in self.rows]}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.path)


def row_of(mode: str, c: Candidate, r: EvalResult | None, busy: float, err: str = "", phase: str = "profile") -> Row:
    expect = "compiled" if phase == "compile" else c.expect
    if r is None:
        return Row(mode, c.label, expect, "harness_error", False, None, busy, {}, {}, 0.0, err[:300])
    return Row(
        mode,
        c.label,
        expect,
        r.status.value,
        r.correct,
        r.reward,
        busy,
        dict(r.phases_s),
        dict(r.cache),
        r.gpu_wait_s,
        r.message[:300],
        r.time_ms,
        r.gpu_held_s,
    )


def precompute_baselines(kb: Path | None, limit_s: float) -> dict:
    """`cuda-agent baselines` over the mix's tasks (KernelBench levels 1-2 of --kernelbench, the examples),
    each run in its own process group so that a time limit stops its pool workers too."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    suites = ([[str(kb), "--levels", "1,2"]] if kb is not None else []) + [["examples"]]
    t0, summary = time.monotonic(), []
    for args in suites:
        left = limit_s - (time.monotonic() - t0)
        if left < 10:
            summary.append(f"{args[0]}: not started (no time left)")
            continue
        cmd = [sys.executable, "-m", "cuda_agent", "baselines", *args]
        print("$ " + " ".join(cmd), flush=True)
        p = subprocess.Popen(
            cmd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            text, _ = p.communicate(timeout=left)
            lines = text.strip().splitlines()
            print("\n".join(lines[-40:]), flush=True)
            summary.append(f"{args[0]}: {lines[-1] if lines else 'no output'} (exit {p.returncode})")
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            text, _ = p.communicate()
            print("\n".join(text.strip().splitlines()[-40:]), flush=True)
            summary.append(f"{args[0]}: stopped after {left:.0f} s (resumable: the finished tasks are cached)")
            print(summary[-1], flush=True)
    return {"seconds": round(time.monotonic() - t0, 1), "summary": summary}


def export_cache(out: Path) -> None:
    """The evaluator's eval.sqlite (baselines; results of fresh candidates are never hit again) to $OUT,
    so that a later call on a fresh machine can carry it back into CUDA_AGENT_CACHE."""
    db = Path(os.environ["CUDA_AGENT_CACHE"]) / "eval.sqlite"
    if db.is_file() and db.stat().st_size < 16 << 20:
        shutil.copy(db, out / "eval.sqlite")
        print(f"exported {db} ({db.stat().st_size} bytes) to {out / 'eval.sqlite'}", flush=True)
    else:
        print(f"not exported: {db} is missing or over 16 MiB", flush=True)


def warm_up(cands: list[Candidate], work: Path, pool: LocalPool, phase_only: bool, until: float) -> dict:
    """Build every candidate once on the compile farm (binding objects into the build cache) and
    time the static checks (staging + rules, as the evaluator runs them before a build)."""
    static_s = []
    for i, c in enumerate(cands):
        ws = fresh_copy(c, work / f"static-{i}", "both")
        t0 = time.monotonic()
        staged = stage(ws, work / f"static-{i}-staged", c.task)
        findings = workspace_findings(staged)
        static_s.append(time.monotonic() - t0)
        if any(f.severity.value == "reject" for f in findings):
            print(f"warning: {c.label} is rejected by the static checks: {[f.rule for f in findings]}", flush=True)
    t0 = time.monotonic()
    built = []
    if not phase_only:
        futs = [
            pool.submit(
                EvalJob(
                    task=c.task,
                    workdir=fresh_copy(c, work / f"warm-{i}", "both"),
                    phase="compile",
                    config=EvalConfig(),
                    label=c.label,
                )
            )
            for i, c in enumerate(cands)
        ]
        for c, f in zip(cands, futs, strict=True):
            left = until - time.monotonic()
            try:
                r = f.result(timeout=max(1.0, left))
                built.append((c.label, r.status.value, r.phases_s.get("compile")))
                if r.status.value != "ok":
                    print(f"warm-up {c.label}: {r.status.value} {r.message[:200]}\n{r.log[-1500:]}", flush=True)
            except Exception as e:  # noqa: BLE001 - a timeout or a harness error: reported, the run goes on
                built.append((c.label, f"error: {type(e).__name__}", None))
    return {"static_checks_s": static_s, "build_s": round(time.monotonic() - t0, 1), "built": built}


def run_serial(cands: list[Candidate], work: Path, rec: Recorder, salt: str, phase: str, stop_at: float) -> float:
    cfg = EvalConfig(spare_children=True)
    t0 = time.monotonic()
    k = 0
    while time.monotonic() < stop_at:
        c = cands[k % len(cands)]
        ws = fresh_copy(c, work / f"serial-{k}", salt)
        t1 = time.monotonic()
        try:
            r, err = run_job(EvalJob(task=c.task, workdir=ws, phase=phase, config=cfg, label=c.label)), ""
        except Exception as e:  # noqa: BLE001 - a harness failure is a row, not the end of the benchmark
            r, err = None, f"{type(e).__name__}: {e}"
        rec.add(row_of("serial", c, r, time.monotonic() - t1, err, phase))
        shutil.rmtree(ws, ignore_errors=True)
        k += 1
    wall = time.monotonic() - t0
    warm.discard()  # the serial mode's spare pair must not sit on the GPU during the pool's run
    return wall


def run_pool(
    cands: list[Candidate],
    work: Path,
    rec: Recorder,
    salt: str,
    phase: str,
    stop_at: float,
    pool: LocalPool,
    window: int,
) -> float:
    """Jobs submitted while fewer than `window` are in flight, until stop_at; then the rest drain.
    A job's busy time runs from when a GPU slot takes it (its future turns running) to its result."""
    started: dict[int, float] = {}
    lock, done_evt = threading.Lock(), threading.Event()
    inflight: dict[int, tuple[Candidate, Future, Path]] = {}

    def watch() -> None:  # the pool marks a future running when a GPU slot takes it; poll for that
        while not done_evt.is_set():
            now = time.monotonic()
            with lock:
                for k, (_, f, _) in inflight.items():
                    if k not in started and f.running():
                        started[k] = now
            time.sleep(0.005)

    def finished(k: int) -> Callable[[Future], None]:
        def cb(f: Future) -> None:
            end = time.monotonic()
            with lock:
                c, _, ws = inflight.pop(k)
                began = started.get(k, end)  # never on a GPU slot (gated by its compile): no GPU time
            try:
                r, err = f.result(), ""
            except Exception as e:  # noqa: BLE001
                r, err = None, f"{type(e).__name__}: {e}"
            rec.add(row_of("pool", c, r, end - began, err, phase))
            shutil.rmtree(ws, ignore_errors=True)

        return cb

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    t0, k = time.monotonic(), 0
    while time.monotonic() < stop_at:
        with lock:
            busy = len(inflight)
        if busy >= window:
            time.sleep(0.02)
            continue
        c = cands[k % len(cands)]
        ws = fresh_copy(c, work / f"pool-{k}", salt)
        fut = pool.submit(EvalJob(task=c.task, workdir=ws, phase=phase, config=EvalConfig(), label=c.label))
        with lock:
            inflight[k] = (c, fut, ws)
        fut.add_done_callback(finished(k))
        k += 1
    while True:
        with lock:
            if not inflight:
                break
        time.sleep(0.05)
    wall = time.monotonic() - t0
    done_evt.set()
    return wall


# issue 16's categories over the top-level phase keys; a key not listed here counts as "other"
GROUPS = (
    ("compile (the build, on the GPU's path)", ("compile",)),
    ("reference (its runs; start-up below)", ("reference",)),
    ("candidate (load, verify, shape probe)", ("load", "verify", "shape_probe")),
    ("timing (timed calls, trusted clock)", ("timing", "trusted_clock")),
    ("baselines (cache misses)", ("baseline_eager", "baseline_compile_build", "baseline_compile")),
    ("compare (outputs; burst digests)", ("compare", "burst_check")),
)


def phase_split(rows: list[Row], gpu_seconds: float) -> tuple[list[tuple[str, float]], dict[str, float]]:
    """The GPU-seconds by category (child start-up taken out of "reference"; "other": busy time no
    phase accounts for; "idle": no evaluation on the GPU), and the sums of every phases_s key."""
    rows = [r for r in rows if r.busy_s > 0]  # a pool job settled by its compile on the farm never held a GPU
    keys: dict[str, float] = {}
    for r in rows:
        for k, v in r.phases_s.items():
            keys[k] = keys.get(k, 0.0) + v
    top = {k: v for k, v in keys.items() if "." not in k}
    # child start-up on the critical path: waiting for the pair ("children": a spare still starting
    # CUDA under the GPU's lock, or a new pair's spawn) and the reference's set-up reply
    setup = keys.get("reference.setup", 0.0)
    pair_wait = top.get("children", 0.0)
    out, used = [], {"children"}
    for name, members in GROUPS:
        sec = sum(top.get(m, 0.0) for m in members) - (setup if "reference" in members else 0.0)
        out.append((name, sec))
        used.update(members)
    out.insert(2, ("child start-up (children, reference.setup)", setup + pair_wait))
    busy = sum(r.busy_s for r in rows)
    unlisted = sum(v for k, v in top.items() if k not in used)
    out.append(("other (staging, checks, spawn, cleanup)", max(0.0, busy - sum(top.values())) + unlisted))
    out.append(("idle (no evaluation on the GPU)", max(0.0, gpu_seconds - busy)))
    return out, {k: round(v, 3) for k, v in sorted(keys.items(), key=lambda kv: -kv[1])}


def spread(rows: list[Row]) -> tuple[int, float, float, str] | None:
    """Honest candidates timed in both modes: how far the pool's median time is from the serial one's
    (the pool's evaluations share a GPU; their timings must not feel it). (n, max %, median %, worst)."""
    times: dict[str, dict[str, list[float]]] = {}
    for r in rows:
        if r.expect == "correct" and r.time_ms:
            times.setdefault(r.label, {}).setdefault(r.mode, []).append(r.time_ms)
    diffs = []
    for label, by in times.items():
        if "serial" in by and "pool" in by:
            a, b = statistics.median(by["serial"]), statistics.median(by["pool"])
            diffs.append((100 * abs(b - a) / a, label))
    if not diffs:
        return None
    diffs.sort()
    return len(diffs), diffs[-1][0], statistics.median(d for d, _ in diffs), diffs[-1][1]


def baseline_misses(rows: list[Row]) -> dict[str, int]:
    """Evaluations per mode that timed their baselines themselves (a cache miss). Issue 16 compares
    modes on fresh candidates with cached baselines: a miss costs its mode 10-40 s of GPU time, so a
    run with misses says little about the pool against serial."""
    out: dict[str, int] = {}
    for r in rows:
        if "baselines" in r.cache and not r.cache["baselines"]:
            out[r.mode] = out.get(r.mode, 0) + 1
    return out


def report(rec: Recorder, walls: dict[str, float], gpus: dict[str, int], extra: dict, per_gpu: int = 1) -> int:
    """Print the split, the CPU side and the table (last); returns the number of unexpected outcomes."""
    per_hour = {}
    print("\n" + "=" * 100)
    for mode in ("serial", "pool"):
        rows = [r for r in rec.rows if r.mode == mode]
        if not rows or not walls.get(mode):
            continue
        gpu_s = walls[mode] * gpus[mode]
        per_hour[mode] = len(rows) / (gpu_s / 3600)
        # with several slots per GPU the split is of slot-seconds (each slot's wall time), not GPU-seconds
        k = per_gpu if mode == "pool" else 1
        unit = "GPU-seconds" if k == 1 else f"slot-seconds ({k} slots per GPU)"
        print(
            f"\n{mode}: {len(rows)} evaluations in {walls[mode]:.1f} s on {gpus[mode]} GPU(s); where the {unit} went:"
        )
        split, keys = phase_split(rows, gpu_s * k)
        for name, sec in split:
            print(f"  {name:42} {sec:9.1f} s {100 * sec / (gpu_s * k):6.1f} %  {sec / len(rows):7.2f} s/eval")
        held = sum(r.gpu_held_s for r in rows) / len(rows)
        ceiling = f", a ceiling of {3600 / held:.0f} evaluations per GPU-hour however many share it" if held > 0 else ""
        lock_sh = sum(r.phases_s.get("lock.shared", 0.0) for r in rows)
        lock_ex = sum(r.phases_s.get("lock.exclusive", 0.0) for r in rows)
        print(
            f"  of which waiting for the GPU's lock: {sum(r.gpu_wait_s for r in rows):.1f} s (requests waiting for "
            f"others' timings {lock_sh:.1f} s, timings waiting for the GPU {lock_ex:.1f} s); the GPU held alone "
            f"(timed sections): {held:.2f} s per evaluation{ceiling}"
        )
        print("  phases_s sums: " + ", ".join(f"{k} {v:.1f}" for k, v in keys.items()))
        rec.extra.setdefault("split", {})[mode] = {"gpu_seconds": gpu_s, "groups": dict(split), "phases_s": keys}
        hits = [r.cache.get("baselines") for r in rows if "baselines" in r.cache]
        print(
            f"  baselines from the cache: {sum(bool(h) for h in hits)} of {len(hits)} evaluations that timed baselines"
        )
    serial = [r for r in rec.rows if r.mode == "serial"]
    comp = [r.phases_s["compile"] for r in serial if "compile" in r.phases_s]
    st = extra.get("warmup", {}).get("static_checks_s") or []
    print(
        "\nCPU side (per candidate): "
        + (
            f"compile {sum(comp) / len(comp):.2f} s mean, {max(comp):.2f} s max "
            f"(serial mode, binding cached, nvcc on the salted .cu)"
            if comp
            else "compile -"
        )
        + (f"; static checks {1000 * sum(st) / len(st):.0f} ms mean, {1000 * max(st):.0f} ms max" if st else "")
    )
    print(
        f"\n{'mode':8} {'evals':>6} {'honest':>7} {'broken':>7} {'as expected':>12} {'wall s':>8} {'GPUs':>5} {'evals/GPU-hour':>15}"
    )
    for mode in ("serial", "pool"):
        rows = [r for r in rec.rows if r.mode == mode]
        if not rows or mode not in per_hour:
            continue
        print(
            f"{mode:8} {len(rows):>6} {sum(r.expect == 'correct' for r in rows):>7} {sum(r.expect == 'incorrect' for r in rows):>7} "
            f"{sum(r.as_expected for r in rows):>12} {walls[mode]:>8.1f} {gpus[mode]:>5} {per_hour[mode]:>15.0f}"
        )
    if len(per_hour) == 2:
        misses = baseline_misses(rec.rows)
        rec.extra["baseline_misses"] = misses
        print(
            f"pool ({per_gpu} per GPU) / serial, per GPU: {per_hour['pool'] / per_hour['serial']:.2f}x "
            "(target >= 2x on one H200)"
            + (
                f"; NOT COMPARABLE: baselines timed in {misses.get('serial', 0)} serial and {misses.get('pool', 0)} "
                "pool evaluations (cache misses); precompute them (--only-baselines) and run again"
                if misses
                else ""
            )
        )
    if (sp := spread(rec.rows)) is not None:
        rec.extra["spread"] = {"n": sp[0], "max_pct": sp[1], "median_pct": sp[2], "worst": sp[3]}
        print(
            f"timing, pool vs serial (median time of the same honest candidate): max {sp[1]:.2f} % ({sp[3]}), "
            f"median {sp[2]:.2f} % over {sp[0]} candidates"
        )
    bad = [r for r in rec.rows if not r.as_expected]
    if bad:
        print(
            "unexpected outcomes: " + "; ".join(f"{r.mode} {r.label}: {r.status} ({r.message[:80]})" for r in bad[:12])
        )
    rec.extra["evals_per_gpu_hour"] = per_hour
    rec.flush()
    return len(bad)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--kernelbench", type=Path, help="KernelBench checkout holding the mix's tasks (e.g. .kb from kb_mix_carry.py)"
    )
    ap.add_argument("--deadline-s", type=float, default=540.0, help="stop submitting work this long after the start")
    ap.add_argument(
        "--serial-share", type=float, default=0.5, help="share of the time after warm-up for the serial mode"
    )
    ap.add_argument("--window", type=int, default=0, help="pool jobs in flight (default: GPU slots + 2)")
    ap.add_argument("--salt", choices=("both", "model"), default="both")
    ap.add_argument(
        "--phase", choices=("profile", "compile"), default="profile", help="compile: CPU only (a smoke test)"
    )
    ap.add_argument("--only", nargs="*", help="keep candidates whose label contains one of these")
    ap.add_argument("--precompute-baselines", action="store_true", help="run `cuda-agent baselines` over the mix first")
    ap.add_argument("--only-baselines", action="store_true", help="precompute baselines, export the cache, stop")
    ap.add_argument(
        "--baselines-budget-s",
        type=float,
        default=0.0,
        help=f"time limit of the baselines step (default: the deadline, less {MEASURE_S:.0f} s unless --only-baselines)",
    )
    ap.add_argument("--per-gpu", type=int, default=3, help="pool evaluations sharing each GPU (timings take turns)")
    ap.add_argument("--export-cache", action="store_true", help="copy the evaluator's eval.sqlite (baselines) to $OUT")
    a = ap.parse_args()
    # a cache inside the checkout (ignored): baselines survive between calls on a machine kept warm,
    # and its eval.sqlite can be carried to a fresh one (--export-cache)
    os.environ.setdefault("CUDA_AGENT_CACHE", str(ROOT / ".bench-cache"))
    t_start = time.monotonic()
    deadline = t_start + a.deadline_s - RESERVE_S
    out = Path(os.environ.get("OUT") or ROOT / "out")
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="eval-throughput-"))
    cands = load_mix(a.kernelbench, a.only)
    gpus = visible_gpus() if a.phase == "profile" else []
    n_gpu = max(1, len(gpus))
    print(
        f"mix: {len(cands)} candidates ({sum(c.expect == 'incorrect' for c in cands)} broken); GPUs visible: {len(gpus)}; "
        f"cache: {os.environ['CUDA_AGENT_CACHE']}; deadline {a.deadline_s:.0f} s",
        flush=True,
    )
    rec = Recorder(
        out,
        {
            "mix": [c.label for c in cands],
            "salt": a.salt,
            "phase": a.phase,
            "deadline_s": a.deadline_s,
            "gpus": gpus,
            "cache": os.environ["CUDA_AGENT_CACHE"],
            "per_gpu": a.per_gpu,
        },
    )
    if a.precompute_baselines or a.only_baselines:
        left = deadline - time.monotonic()
        # when measuring too, the baselines leave MEASURE_S for warm-up, serial and pool (resumable: a
        # later call finishes them)
        limit = a.baselines_budget_s or (left if a.only_baselines else max(0.0, left - MEASURE_S))
        rec.extra["baselines"] = precompute_baselines(a.kernelbench, limit)
        rec.flush()
    if a.only_baselines:
        export_cache(out)
        return 0
    walls: dict[str, float] = {}
    with LocalPool(len(gpus) or 1, device="cuda" if gpus else "cpu", per_gpu=a.per_gpu) as pool:
        t0 = time.monotonic()
        rec.extra["warmup"] = warm_up(cands, work, pool, a.phase == "compile", deadline)
        rec.extra["warmup"]["seconds"] = round(time.monotonic() - t0, 1)
        rec.flush()
        print(f"warm-up: {rec.extra['warmup']['seconds']} s", flush=True)
        left = deadline - time.monotonic()
        walls["serial"] = run_serial(cands, work, rec, a.salt, a.phase, time.monotonic() + a.serial_share * left)
        window = a.window or pool.n_slots + 2
        # the jobs still in flight when submitting stops run one after another per GPU slot: stop early
        # enough for them to drain by the deadline (estimated from the serial evaluations' mean time)
        served = [r.busy_s for r in rec.rows if r.mode == "serial"]
        # (per physical GPU, not per slot: slots sharing a GPU take turns timing, so assume no overlap)
        drain = window * (sum(served) / len(served) if served else 0.0) / n_gpu
        walls["pool"] = run_pool(cands, work, rec, a.salt, a.phase, deadline - drain, pool, window)
        rec.extra["pool_stats"] = dict(pool.stats)
    rec.extra["walls_s"] = walls
    unexpected = report(rec, walls, {"serial": 1, "pool": n_gpu}, rec.extra, a.per_gpu)
    shutil.rmtree(work, ignore_errors=True)
    if a.export_cache:
        export_cache(out)
    print(f"total {time.monotonic() - t_start:.0f} s; results in {rec.path}")
    return 1 if unexpected else 0


if __name__ == "__main__":
    raise SystemExit(main())
