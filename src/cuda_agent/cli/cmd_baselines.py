"""`cuda-agent baselines SUITE`: time every task's eager and torch.compile baselines ahead of a run.

Spread over the local pool's GPUs (`--per-gpu` tasks share each GPU: their torch.compile builds
overlap, their timings take turns through eval.timing.gpu_lock) or Ray (`--ray`); stored in the
evaluator's own cache under the keys a later evaluation with the same settings looks up, so a
bench or an RL run no longer pays 25-38 s per task on its critical path (issue 16). Resumable:
a task already cached costs one lookup. Prints one line per task as it finishes and a summary.
Exit 0 when every task has its baselines, 1 when some task failed, 2 for bad input.
"""

from __future__ import annotations

import argparse
import os

from cuda_agent.cli.argtypes import BASELINES_HELP, baseline_names, positive_int
from cuda_agent.cli.main import UsageError

HELP = "time a suite's eager and torch.compile baselines ahead of a bench or RL run (cached, resumable)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "suite",
        help='"examples", a KernelBench checkout or level folder, an Ops-6K .parquet/.jsonl, or a folder of task files',
    )
    p.add_argument("--levels", help="KernelBench levels, e.g. 1,2 (default 1,2,3)")
    p.add_argument(
        "--device", choices=("cuda", "cpu"), default="cuda", help="cpu: the CPU lane (tests; times mean nothing)"
    )
    p.add_argument("--ray", action="store_true", help="run the tasks as Ray tasks (also when RAY_ADDRESS is set)")
    p.add_argument(
        "--per-gpu",
        type=positive_int,
        default=4,
        help="tasks at once per GPU (default 4): torch.compile's build runs beside the others', the timing alone",
    )
    p.add_argument("--limit", type=int, default=0, help="only the first N tasks")
    p.add_argument("--baselines", type=baseline_names, default=None, help=BASELINES_HELP)


def run(args: argparse.Namespace) -> int:
    from concurrent.futures import as_completed

    from cuda_agent.cli.cmd_tasks import parse_levels
    from cuda_agent.eval.config import EvalConfig
    from cuda_agent.eval.timing.baselines import BaselinesJob
    from cuda_agent.pool.local import make_pool, visible_gpus
    from cuda_agent.task.suites import load_suite

    if args.device == "cuda" and not (args.ray or os.environ.get("RAY_ADDRESS")) and not visible_gpus():
        raise UsageError(
            "no CUDA GPU is visible here: baselines are GPU timings (--device cpu runs the CPU lane, "
            "whose times mean nothing)"
        )
    suite = load_suite(args.suite, parse_levels(args.levels))
    items = suite.items[: args.limit] if args.limit > 0 else suite.items
    cfg = EvalConfig(device=args.device)
    if args.baselines:
        cfg.baselines = args.baselines
    failed = cached = 0
    with make_pool(ray=args.ray, device=args.device) as pool:
        share = 1.0 / args.per_gpu
        futs = {pool.submit_call(BaselinesJob(it.task, cfg, label=it.task_id, gpu_fraction=share)): it for it in items}
        for i, fut in enumerate(as_completed(futs), 1):
            it = futs[fut]
            try:
                rec = fut.result()
            except Exception as e:  # noqa: BLE001 - a worker that died: one line, the run goes on
                failed += 1
                print(
                    f"[{i}/{len(items)}] {it.task_id}: the pool could not run it ({type(e).__name__}: {e})", flush=True
                )
                continue
            cached += rec.cached
            if rec.error:
                failed += 1
                print(f"[{i}/{len(items)}] {it.task_id}: FAILED {rec.error[:200]}", flush=True)
                continue
            comp = f"{rec.compile_ms:.4g}" if rec.compile_ms is not None else "-"
            extra = "".join(f", {name} {ms:.4g} ms" for name, ms in rec.extra_ms.items())
            print(
                f"[{i}/{len(items)}] {it.task_id}: eager {rec.eager_ms:.4g} ms, compile {comp} ms{extra}"
                f"{' (cached)' if rec.cached else f' ({rec.seconds:.1f} s)'}",
                flush=True,
            )
    print(f"{len(items) - failed}/{len(items)} tasks have baselines ({cached} were cached); {failed} failed")
    return 1 if failed else 0
