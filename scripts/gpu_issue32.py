"""Issue 32 on a GPU: the expert profile on two examples, and what it adds per call.

Run from the repository root: `bash scripts/gpu_issue32.sh` (sets PYTHONPATH=src). For each of
gelu_chain (memory-bound elementwise) and linear_bias_relu (a cuBLASLt GEMM, its bias+ReLU epilogue
fused: one kernel under ncu): a workspace from the bundled solution, one evaluation (`eval --json`,
which builds and warms the caches), one more with `--baselines all` (item 2: speedups against eager,
torch.compile, max-autotune-no-cudagraphs and a CUDA-graph replay, and vs the best; every example and the
KernelBench mix: `python3 -m benchmarks baselines-examples baselines-kb`), then the expert profile three
times: the first measures the GPU's ceilings (once
per GPU model; the cache is cleared first), the next two are what an agent pays per call. Writes
each profile's text, its phases and ncu's raw output under $OUT/issue32/ (the H100 run's first captures
are tests/fixtures/ncu/h100_*.csv), and prints a table last.
Without a GPU every profile says counters are not available (no CUDA GPU) and shows the compiler's
report; the table still prints.

`--each` (the measurement `expert-profile-each`): every bundled example with a solution instead, one
evaluation then two profiles each and no `--baselines all` run, for the profile's seconds per call on
every example (the issue's target: at most 20 s on each).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = (("gelu_chain", "memory-bound"), ("linear_bias_relu", "GEMM"))


def each_example() -> tuple[tuple[str, str], ...]:
    """Every bundled example that has a solution (the profile's own verdict says which bound each is)."""
    return tuple((d.name, "example") for d in sorted((ROOT / "examples").iterdir()) if (d / "solution").is_dir())


def main() -> int:
    each = "--each" in sys.argv[1:]
    examples = each_example() if each else EXAMPLES
    from cuda_agent.eval.profile.ncu import find_ncu
    from cuda_agent.task.taskfile import Task
    from cuda_agent.task.workspace import cache_root, copy_solution, init_workspace

    out = Path(os.environ.get("OUT", "./out")) / "issue32"
    out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("ISSUE32_WORK") or f"/tmp/issue32-{os.getpid()}")
    tool = find_ncu()
    print(f"ncu: {tool or 'not found'}", flush=True)
    if tool:
        v = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=60)
        print(
            (v.stdout + v.stderr).strip().splitlines()[-1]
            if (v.stdout + v.stderr).strip()
            else "ncu --version: nothing"
        )
    shutil.rmtree(cache_root() / "profile", ignore_errors=True)  # the first profile measures the ceilings
    rows, speed_rows = [], []
    for name, kind in examples:
        ex = ROOT / "examples" / name
        ws = init_workspace(Task.from_file(ex / "task.py"), work / name, force=True)
        copy_solution(ex / "solution", ws)
        t0 = time.monotonic()
        ev = subprocess.run(
            [sys.executable, "-m", "cuda_agent", "eval", str(ws), "--json"], capture_output=True, text=True, timeout=900
        )
        eval_s = time.monotonic() - t0
        lines = [ln for ln in ev.stdout.splitlines() if ln.startswith("{")]
        res = json.loads(lines[-1]) if lines else {"status": f"no JSON (exit {ev.returncode}): {ev.stderr[-300:]}"}
        (out / f"{name}.eval.json").write_text(json.dumps(res, indent=1))
        if each:
            for run in (1, 2):
                rows.append(_profile(ws, out, name, kind, run, res, eval_s))
            continue
        # item 2: the same candidate against every baseline (max-autotune's autotuning: minutes on a cold cache)
        t1 = time.monotonic()
        evb = subprocess.run(
            [sys.executable, "-m", "cuda_agent", "eval", str(ws), "--json", "--fresh", "--baselines", "all"],
            capture_output=True,
            text=True,
            timeout=1200,
        )
        lines_b = [ln for ln in evb.stdout.splitlines() if ln.startswith("{")]
        resb = (
            json.loads(lines_b[-1]) if lines_b else {"status": f"no JSON (exit {evb.returncode}): {evb.stderr[-300:]}"}
        )
        (out / f"{name}.eval_all_baselines.json").write_text(json.dumps(resb, indent=1))
        from cuda_agent.eval.timing import baseline_set

        best = baseline_set.best(resb)
        speed_rows.append(
            (
                name,
                resb.get("status"),
                resb.get("reward"),
                resb.get("time_ms"),
                {k: round(v, 3) for k, v in baseline_set.speedups(resb).items()},
                best[0] if best else None,
                baseline_set.speedup_vs_best(resb),
                round(time.monotonic() - t1, 1),
                [f["rule"] for f in resb.get("findings") or [] if f.get("rule", "").startswith("baseline-")],
            )
        )
        for run in (1, 2, 3):
            rows.append(_profile(ws, out, name, kind, run, res, eval_s))
    print(
        "\nexample | kind | profile run | eval status | eval time_ms | eval wall s | profile s | counters | kernels "
        "| lines | top verdict"
    )
    for r in rows:
        print(" | ".join(str(x) for x in r))
    if speed_rows:
        print(
            "\nexample | status | reward | time_ms | speedup per baseline | best baseline | vs best | eval wall s | "
            "baseline failures"
        )
    for r in speed_rows:
        print(" | ".join(str(x) for x in r))
    (out / "table.json").write_text(json.dumps({"profile": rows, "baselines": speed_rows}, indent=1))
    return 0


def _profile(ws: Path, out: Path, name: str, kind: str, run: int, res: dict, eval_s: float) -> tuple:
    """One expert profile of the workspace: its text, phases and ncu's raw output under `out`; the table's row."""
    from cuda_agent.eval.profile.expert import ProfileSettings, profile_workspace

    p = profile_workspace(ws, settings=ProfileSettings(timeout_s=300))
    text = p.text()
    (out / f"{name}.profile{run}.txt").write_text(text + "\n")
    (out / f"{name}.profile{run}.phases.json").write_text(json.dumps(p.phases_s))
    if p.raw_ncu:
        (out / f"{name}.ncu_raw{run}.csv").write_text(p.raw_ncu)
    print(f"\n=== {name} ({kind}), profile {run}: {p.seconds:.1f} s, phases {p.phases_s}\n{text}", flush=True)
    top = p.kernels[0].verdict if p.kernels and p.kernels[0].verdict else p.call_verdict
    return (
        name,
        kind,
        run,
        res.get("status"),
        res.get("time_ms"),
        round(eval_s, 1),
        round(p.seconds, 1),
        "ncu" if p.counters.startswith("ncu") else p.counters[:60],
        len(p.kernels),
        len(text.splitlines()),
        (top or "-")[:70],
    )


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main())
