"""`cuda-agent synth crawl|compose|filter|stats`: the task synthesis pipeline (cuda_agent.synth).

Each action reads and writes files and is resumable: run it again after a kill
and it continues. Exit 0 when the action ran (rejections are data, printed as
counts); 2 with one line for bad usage or input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cuda_agent.cli.main import UsageError

HELP = "synthesize tasks: crawl seed ops, compose candidates, filter them, show statistics"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    c = sub.add_parser("crawl", help="seed operators from torch (and transformers) -> seeds.jsonl")
    c.add_argument("-o", "--out", required=True, type=Path)
    c.add_argument("--no-transformers", action="store_true", help="torch only, even when transformers is installed")
    c.add_argument("--limit", type=int, help="probe at most N new ops (tests, quick looks)")
    m = sub.add_parser("compose", help="compose seeds into candidate tasks -> candidates.jsonl")
    m.add_argument("--seeds", required=True, type=Path)
    m.add_argument("-n", type=int, required=True, help="candidates wanted in the output file")
    m.add_argument("-o", "--out", required=True, type=Path)
    m.add_argument("--composer", choices=("deterministic", "llm"), default="deterministic")
    m.add_argument("--seed", type=int, default=0, help="the planner's random seed")
    m.add_argument("--mix", help="op-count mix, e.g. 1:3.4,2:83.8,3:7.6,4:2.8,5:1.2,transformers:1.2 (the default)")
    m.add_argument("--model", help="LLM composer: model name")
    m.add_argument("--base-url", help="LLM composer: OpenAI-compatible endpoint (or OPENAI_BASE_URL)")
    m.add_argument("--parallel", type=int, default=4, help="LLM composer: requests at once")
    f = sub.add_parser("filter", help="filter candidates -> tasks.parquet (+ .jsonl, rejections)")
    f.add_argument("candidates", type=Path)
    f.add_argument("-o", "--out", required=True, type=Path)
    f.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    f.add_argument("--ray", action="store_true", help="run the device jobs as Ray tasks (or set RAY_ADDRESS)")
    f.add_argument("--against", help="reference suite for decontamination: a KernelBench checkout or any suite")
    f.add_argument(
        "--threshold",
        type=float,
        default=0.9,
        help="where a task has no op graph: drop normalised AST similarity above this (default 0.9)",
    )
    f.add_argument("--trace-workers", type=int, default=2, help="decontamination: tracing processes at once")
    f.add_argument("--window-ms", type=float, nargs=2, default=(1.0, 100.0), metavar=("LO", "HI"))
    f.add_argument("--max-reshapes", type=int, default=4)
    f.add_argument("--no-compile", action="store_true", help="skip the eager vs torch.compile stage")
    f.add_argument("--jobs-per-gpu", type=int, default=8, help="filter jobs sharing one GPU (CPU: workers)")
    f.add_argument("--limit", type=int, help="only the first N candidates")
    f.add_argument(
        "--sandbox",
        choices=("auto", "off"),
        default="auto",
        help="run each candidate's code in the evaluator's sandbox (default auto: where it works)",
    )
    s = sub.add_parser("stats", help="op-count mix, op frequency, time and similarity histograms")
    s.add_argument("tasks", type=Path)
    s.add_argument("-o", "--out", type=Path, help="output folder (default: <tasks>.stats)")


def run(args: argparse.Namespace) -> int:
    return {"crawl": _crawl, "compose": _compose, "filter": _filter, "stats": _stats}[args.action](args)


def _crawl(args: argparse.Namespace) -> int:
    from collections import Counter

    from rich.console import Console

    from cuda_agent.synth.crawl import crawl, torch_ops
    from cuda_agent.synth.crawl_hf import hf_targets

    console = Console(stderr=True)
    targets = [(t, "torch") for t in torch_ops()]
    if not args.no_transformers:
        targets += [(t, "transformers") for t in hf_targets()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with console.status("crawling") as status:
        seeds = crawl(
            args.out,
            targets,
            limit=args.limit,
            on_seed=lambda s: status.update(f"crawling: {s.id} {' '.join(s.labels)}"),
        )
    for source in ("torch", "transformers"):
        mine = [s for s in seeds if s.source == source]
        labels = Counter(label for s in mine for label in s.labels)
        print(
            f"{source}: {len(mine)} probed, {sum(s.runs for s in mine)} run on the CPU, "
            f"{sum(not s.labels for s in mine)} clean; labels: "
            + (", ".join(f"{k} {v}" for k, v in labels.most_common()) or "none")
        )
    print(f"seeds: {args.out}")
    return 0


def _compose(args: argparse.Namespace) -> int:
    from cuda_agent.synth import records
    from cuda_agent.synth.compose import DeterministicComposer, Planner, parse_mix, run_compose
    from cuda_agent.synth.records import Seed

    if not args.seeds.is_file():
        raise UsageError(f"no seeds file {args.seeds} (run `cuda-agent synth crawl -o {args.seeds}` first)")
    try:
        planner = Planner(records.read(args.seeds, Seed), parse_mix(args.mix) if args.mix else None, args.seed)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.composer == "llm":
        if not args.model:
            raise UsageError("--composer llm needs --model (and --base-url or OPENAI_BASE_URL)")
        from cuda_agent.llm.client import ChatClient, ClientConfig, LLMError
        from cuda_agent.synth.compose_llm import LLMComposer

        try:
            client = ChatClient(ClientConfig(model=args.model, base_url=args.base_url, tool_mode="native"))
        except LLMError as e:
            raise UsageError(str(e)) from None
        composer = LLMComposer(planner, client, args.model)
        parallel = args.parallel
    else:
        composer, parallel = DeterministicComposer(planner), 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    ok, bad = run_compose(composer, args.n, args.out, parallel=parallel)
    print(f"{ok} candidates in {args.out}; {bad} rejected attempts in {args.out}.rejects.jsonl")
    return 0


def _filter(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from cuda_agent.pool.local import make_pool
    from cuda_agent.synth.device_job import FilterSettings
    from cuda_agent.synth.filter import STAGES, FilterConfig, run_filter
    from cuda_agent.task.suites import load_suite

    if not args.candidates.is_file():
        raise UsageError(f"no candidates file {args.candidates}")
    if args.device == "cuda" and not args.ray:
        import torch

        if not torch.cuda.is_available():
            raise UsageError("no CUDA GPU here: use --device cpu (the pipeline runs, its times are CPU times)")
    refs = None
    if args.against:
        suite = load_suite(args.against)
        refs = [(i.task_id, i.task.source) for i in suite]
    settings = FilterSettings(
        device=args.device,
        window_ms=tuple(args.window_ms),
        max_reshapes=args.max_reshapes,
        compile=not args.no_compile,
        gpu_fraction=1.0 / max(1, args.jobs_per_gpu),
        sandbox=args.sandbox,
    )
    cfg = FilterConfig(settings, refs, args.threshold, trace_workers=max(1, args.trace_workers), limit=args.limit)
    console = Console(stderr=True)
    pool = make_pool(
        ray=args.ray, device=args.device, call_workers=None if args.device == "cuda" else args.jobs_per_gpu
    )
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as bar:
        tid = bar.add_task("device stages", total=None)

        def progress(counts: dict[str, list[int]], done: int, total: int) -> None:
            text = " ".join(f"{s} {p}/{e}" for s, (e, p) in counts.items() if e)
            bar.update(tid, completed=done, total=total, description=text)

        try:
            summary = run_filter(args.candidates, args.out, cfg, pool, progress)
        finally:
            pool.close()
    print(f"{'stage':<14}{'entered':>9}{'passed':>9}{'yield':>8}")
    for s in STAGES:
        e, p = summary.counts[s]
        print(f"{s:<14}{e:>9}{p:>9}{(f'{100 * p / e:.1f}%' if e else '-'):>8}")
    if summary.decontam:
        print("decontam: " + ", ".join(f"{v} {k}" for k, v in summary.decontam.items()))
    print(
        f"kept {summary.kept} of {summary.candidates}; device part {summary.device_s:.1f} s for "
        f"{summary.evaluated_now} candidates"
    )
    for cid, msg in summary.harness_errors[:5]:
        print(f"harness error (will be retried on the next run): {cid}: {msg}")
    print("wrote " + ", ".join(map(str, summary.outputs)))
    return 0


def _stats(args: argparse.Namespace) -> int:
    from cuda_agent.synth import records, stats
    from cuda_agent.synth.dataset import read_tasks

    if not args.tasks.is_file():
        raise UsageError(f"no tasks file {args.tasks}")
    rej = stats.rejections_path(args.tasks)
    s = stats.compute(read_tasks(args.tasks), records.read_dicts(rej) if rej is not None else None)
    paths = stats.write(s, args.out or Path(str(args.tasks) + ".stats"))
    print(stats.markdown(s))
    print("wrote " + ", ".join(map(str, paths)))
    return 0
