"""`cuda-agent bench SUITE (--solutions DIR | --model NAME) -o RUN_DIR`: score a suite.

Evaluates stored solutions (layouts: see `cuda_agent.bench.runner`) or runs
the agent per task, through the evaluation pool: one worker per visible GPU
plus a CPU compile farm, or Ray tasks with --ray / RAY_ADDRESS. Every result
is committed to RUN_DIR/results.sqlite as it lands; a rerun with the same -o
skips finished tasks. Without a visible GPU it says so first: candidates are
compiled and checked, marked not scored, and scored by a rerun on a GPU
machine. Ends with the metrics table (`cuda-agent report`) and writes the
report files. Exit 0 when the bench ran (whatever the candidates did), 1 when
some tasks hit a harness error (rerun to retry them), 2 with one line for bad
input, 130 on Ctrl-C with the finished results kept.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from cuda_agent.cli.argtypes import BASELINES_HELP, CLOCK_HELP, at_least, baseline_names, clock_names, positive_int
from cuda_agent.cli.cmd_tasks import parse_levels
from cuda_agent.cli.main import UsageError

HELP = "evaluate stored solutions or run the agent over a suite; resumable; ends with the metrics table"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "suite", help='"examples", a KernelBench checkout, an Ops-6K .parquet/.jsonl, or a folder of task files'
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--solutions",
        metavar="DIR",
        help="stored solutions: DIR/<task_id>/ (workspace) or DIR/<task_id>.py "
        "or KernelBench's level_<L>_problem_<P>_*.py",
    )
    src.add_argument("--model", help="run the agent with this model (endpoint: --base-url / OPENAI_BASE_URL)")
    p.add_argument(
        "-o", "--output", metavar="RUN_DIR", required=True, help="run directory (results.sqlite, episodes/, reports)"
    )
    p.add_argument("--levels", help="KernelBench levels, e.g. 1,2 (default 1,2,3)")
    p.add_argument("--gpus", type=positive_int, default=None, help="GPU workers (default: one per visible GPU)")
    p.add_argument("--ray", action="store_true", help="run evaluations as Ray tasks (also when RAY_ADDRESS is set)")
    p.add_argument(
        "--per-gpu",
        type=positive_int,
        default=None,
        help="evaluations sharing each GPU (their timings take turns; default 3 on a GPU, 1 on the CPU lane)",
    )
    p.add_argument(
        "--compile-workers",
        type=positive_int,
        default=None,
        help="CPU compile farm processes (default: half the CPUs, at most 8)",
    )
    p.add_argument("--timed-calls", type=at_least(3), default=None, help="timed calls per round (default 50)")
    p.add_argument("--baselines", type=baseline_names, default=None, help=BASELINES_HELP)
    p.add_argument("--clock", type=clock_names, default=None, metavar="NAMES", help=CLOCK_HELP)
    p.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint for --model (env OPENAI_BASE_URL)")
    p.add_argument("--api-key", default=None, help="API key for --model (env OPENAI_API_KEY)")
    p.add_argument(
        "--max-turns",
        type=positive_int,
        default=200,
        help="agent turns per task (default 200, the paper's evaluation limit)",
    )
    p.add_argument("--parallel", type=positive_int, default=4, help="agent episodes at once (default 4)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # "cpu": the test lane, times are meaningless


def _agent_spec(args: argparse.Namespace):
    from cuda_agent.agent.loop import AgentConfig
    from cuda_agent.bench.runner import AgentSpec
    from cuda_agent.llm.client import ChatClient, ClientConfig

    base_url = args.base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = args.api_key or os.environ.get("OPENAI_API_KEY") or None
    if not base_url and not api_key:
        raise UsageError(
            "no endpoint: pass --base-url for a local server, or --api-key / OPENAI_API_KEY for a hosted API"
        )
    return AgentSpec(
        lambda: ChatClient(ClientConfig(model=args.model, base_url=base_url, api_key=api_key)),
        args.model,
        AgentConfig(max_turns=args.max_turns),
        args.parallel,
    )


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from cuda_agent.bench.report import build_report, notes
    from cuda_agent.bench.report_files import write_report
    from cuda_agent.bench.report_text import rich_table
    from cuda_agent.bench.runner import run_bench
    from cuda_agent.bench.store import ResultStore
    from cuda_agent.eval.config import EvalConfig
    from cuda_agent.pool.local import DEFAULT_PER_GPU, HarnessError, make_pool, visible_gpus
    from cuda_agent.task.suites import load_suite

    suite = load_suite(args.suite, parse_levels(args.levels))
    if args.solutions and not Path(args.solutions).is_dir():
        raise UsageError(f"solutions directory not found: {args.solutions}")
    if args.device not in ("cuda", "cpu"):
        raise UsageError("--device must be cuda or cpu")
    cfg = EvalConfig(device=args.device, compile_baseline=args.device == "cuda")
    if args.baselines:
        cfg.baselines = args.baselines
    if args.clock:
        cfg = dataclasses.replace(cfg, **args.clock)
    if args.timed_calls is not None:
        cfg.n_timed = args.timed_calls
    agent = _agent_spec(args) if args.model else None
    ResultStore(args.output)  # a read-only -o or a damaged results.sqlite: one line now, before any work
    if args.per_gpu is not None and (args.ray or os.environ.get("RAY_ADDRESS")):
        raise UsageError("--per-gpu is for the local pool; the Ray backend leases one GPU per evaluation")
    try:
        pool = make_pool(
            ray=args.ray,
            slots=args.gpus,
            device=args.device,
            compile_workers=args.compile_workers,
            per_gpu=args.per_gpu or (DEFAULT_PER_GPU if args.device == "cuda" else 1),
        )
    except (HarnessError, ValueError) as e:
        raise UsageError(str(e)) from None
    console = Console(width=None if sys.stdout.isatty() else 160)
    for n in suite.notes:
        console.print(f"[yellow]note:[/] {n}")
    on_ray = bool(args.ray or os.environ.get("RAY_ADDRESS"))
    lack = (
        (pool.missing_gpu() if hasattr(pool, "missing_gpu") else None)
        if on_ray
        else (None if visible_gpus() else "no CUDA GPU is visible here")
    )
    if args.device == "cuda" and lack:
        # the Ray pool then runs as the local one does without a GPU (pool.ray_pool): no_gpu, not a wait
        console.print(
            f"[yellow]note:[/] {lack}: each candidate is compiled and checked but not scored (status no_gpu); "
            "those tasks stay unfinished, and rerunning this command with the same -o "
            f"{'with GPUs in the cluster' if on_ray else 'on a GPU machine'} scores them",
            highlight=False,
        )
    bar = Progress(
        TextColumn("[bold]bench[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=console,
        disable=args.quiet,
    )
    try:
        with bar:
            tid = bar.add_task("", total=None)

            def progress(task_id: str, done: int, total: int) -> None:
                bar.update(tid, completed=done, total=total, description=task_id)

            try:
                summary = run_bench(
                    suite, args.output, solutions=args.solutions, agent=agent, pool=pool, config=cfg, progress=progress
                )
            except ValueError as e:
                pool.close(cancel=True)
                raise UsageError(str(e)) from None
            except BaseException:
                pool.close(cancel=True)
                raise
            pool.close()
    except KeyboardInterrupt:
        print(
            f"cuda-agent bench: interrupted; {_kept(args.output)} result(s) are kept in {args.output}/results.sqlite; "
            "rerun the same command to finish the rest",
            file=sys.stderr,
        )
        return 130
    console.print(
        f"{summary.finished} task(s) finished this run, {summary.skipped} already done, "
        f"{len(summary.missing)} without a solution, {len(summary.not_scored)} not scored, "
        f"{len(summary.errors)} harness error(s); {summary.wall_s:.1f} s",
        highlight=False,
    )
    for task_id, msg in summary.errors[:5]:
        console.print(f"[red]error:[/] {task_id}: {msg}", highlight=False)
    rep = build_report(args.output)
    console.print(rich_table(rep))
    for n in notes(rep):
        console.print(f"[yellow]note:[/] {n}", highlight=False)
    write_report(rep)
    return 1 if summary.errors else 0


def _kept(run_dir: str) -> int | str:
    from cuda_agent.bench.store import ResultStore, StoreError

    try:
        return len(ResultStore.open_existing(run_dir).rows())
    except (FileNotFoundError, StoreError):
        return 0
