"""What fresh timing inputs cost the timed section: one task's reference timed four ways in one process.

Issue 16's defence split (scripts/gpu_check.py --overhead) put most of the defences' cost in the
timed calls themselves (`timing.calls` 0.60 s with the defences, 0.36 s without, on diag_matmul).
Of the defences only fresh timing inputs (a new input set drawn before each timed call,
`shared.events.time_calls`) add work per call, so this times `time_calls` on the task's own model with
  none      the two fixed input sets rotated (the defences off);
  draw      a fresh set per call, drawn without reseeding (what the draw alone costs);
  old_seed  a fresh set per call under `torch.manual_seed` (the evaluator before this benchmark);
  seed_all  a fresh set per call under `child.state.seed_all` (the evaluator now).
It prints, per way, the wall seconds of the whole `time_calls`, the calls timed and the wall per
call. Nothing here is a defence or a result: the candidate is the task's reference.

Usage (GPU machine, repository root):
  PYTHONPATH=src python3 benchmarks/fresh_inputs_cost.py [--task examples/diag_matmul/task.py] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import torch

from cuda_agent.eval.child.state import import_file, seed_all
from cuda_agent.eval.shared.events import derive_seed, time_calls

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", type=Path, default=ROOT / "examples" / "diag_matmul" / "task.py")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("fresh_inputs_cost: no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.init()
    task = import_file("fresh_cost_task", a.task)
    seed_all(1)
    with dev:
        model = task.Model(*task.get_init_inputs()).to(dev).eval()

    def draw(seed_fn):  # type: ignore[no-untyped-def]
        def make(g: int) -> list[object]:
            if seed_fn is not None:
                seed_fn(derive_seed(12345, g))
            with dev:
                xs = task.get_inputs()
            return [x.to(dev) if isinstance(x, torch.Tensor) else x for x in xs]

        return make

    def old_seed(s: int) -> None:
        random.seed(s)
        torch.manual_seed(s)

    fixed = [draw(seed_all)(-1), draw(seed_all)(-2)]
    ways = {"none": None, "draw": draw(None), "old_seed": draw(old_seed), "seed_all": draw(seed_all)}
    walls: dict[str, list[float]] = {w: [] for w in ways}
    calls: dict[str, int] = {}
    for _ in range(a.repeat):
        for w, fresh in ways.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            stats, _ = time_calls(model, fixed, n_warmup=5, n_timed=50, max_cv=0.05, max_rounds=1, fresh_inputs=fresh)
            walls[w].append(time.perf_counter() - t0)
            calls[w] = stats["n"]
    print(f"{'way':10} {'wall s':>8} {'calls':>6} {'us/call':>8}   (median of {a.repeat}; {a.task.parent.name})")
    for w in ways:
        m = statistics.median(walls[w])
        print(f"{w:10} {m:8.3f} {calls[w]:6d} {1e6 * m / max(calls[w], 1):8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
