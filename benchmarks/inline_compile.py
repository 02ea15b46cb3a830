"""Issue 13's single-file build benchmark: our parent-side cached build against in-process load_inline.

For one KernelBench-style solution (default: examples/diag_matmul/solution_inline.py) it times
1. our evaluation cold (an empty cache), 2. the unchanged file again with --fresh (targets: under
1 s in compile), 3. `--edits` edits of the CUDA string only (a different launch width each time;
target: the full result in <= 10 s, median), and, in the same call, 4. KernelBench's way: the
file imported in a fresh process with an empty extension dir (cold) and again with that dir kept
(unchanged). It prints one table last.

Usage (GPU machine, repository root): PYTHONPATH=src python3 benchmarks/inline_compile.py [--edits 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ours(task: Path, sol: Path, cache: Path) -> tuple[float, dict]:
    env = {**os.environ, "CUDA_AGENT_CACHE": str(cache), "PYTHONPATH": str(ROOT / "src")}
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "cuda_agent", "eval", "--task", str(task), "--solution", str(sol), "--json", "--fresh"],
        capture_output=True,
        text=True,
        env=env,
    )
    wall = time.monotonic() - t0
    import json

    try:
        return wall, json.loads(p.stdout)
    except ValueError:
        return wall, {"status": f"no JSON: {p.stderr[-300:]}"}


def kernelbench_import(sol: Path, ext_dir: Path) -> float:
    """Import the solution in a fresh process the way KernelBench does (load_inline in-process)."""
    code = (
        "import importlib.util,sys,time\n"
        "t=time.monotonic()\n"
        f"spec=importlib.util.spec_from_file_location('sol', {str(sol)!r})\n"
        "m=importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "print(time.monotonic()-t)\n"
    )
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(ext_dir)}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    return float(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default=str(ROOT / "examples/diag_matmul/task.py"))
    ap.add_argument("--solution", default=str(ROOT / "examples/diag_matmul/solution_inline.py"))
    ap.add_argument("--edits", type=int, default=3)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="inline-bench-"))
    cache = work / "cache"
    sol = work / "solution.py"
    text = Path(a.solution).read_text()
    sol.write_text(text)
    rows = []
    wall, r = ours(Path(a.task), sol, cache)
    rows.append(("ours cold", wall, r))
    wall, r = ours(Path(a.task), sol, cache)
    rows.append(("ours unchanged", wall, r))
    edits = []
    marker = "const int threads = 256;"
    for i in range(a.edits):
        # an edit of the CUDA string only: another launch width where the file has one, else a comment in it
        width = (128, 512, 64, 1024)[i % 4]
        edited = (
            text.replace(marker, f"const int threads = {width};")
            if marker in text
            else text.replace('r"""\n', f'r"""\n// edit {i}\n', 1)
        )
        sol.write_text(edited)
        wall, r = ours(Path(a.task), sol, cache)
        rows.append((f"ours edit {i}", wall, r))
        edits.append(wall)
    kb_dir = work / "kb_ext"
    kb_cold = kernelbench_import(Path(a.solution), kb_dir)
    kb_warm = kernelbench_import(Path(a.solution), kb_dir)
    print(f"{'run':16} {'status':10} {'rw':>3} {'compile s':>9} {'load s':>7} {'wall s':>7}")
    for name, wall, r in rows:
        ph = r.get("phases_s") or {}
        print(
            f"{name:16} {str(r.get('status'))[:10]:10} {str(r.get('reward')):>3} {ph.get('compile', float('nan')):9.2f} "
            f"{ph.get('load', float('nan')):7.2f} {wall:7.1f}"
        )
    print(f"{'kernelbench cold':16} {'':10} {'':>3} {kb_cold:9.2f} {'':>7} {'':>7}")
    print(f"{'kernelbench kept':16} {'':10} {'':>3} {kb_warm:9.2f} {'':>7} {'':>7}")
    notes = {str((r.get("defences") or {}).get("inline_build")) for _, _, r in rows}
    print("build: " + "; ".join(sorted(notes)))  # the split build (eval/inline_split) or one unit, and why
    if edits:
        print(
            f"edited CUDA source -> full result: median {statistics.median(edits):.1f} s over {len(edits)} edits (target <= 10 s)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
