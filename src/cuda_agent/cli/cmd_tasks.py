"""`cuda-agent tasks list SUITE`: what a suite holds, counted per level or source.

SUITE is "examples", a KernelBench checkout (or one level folder), an
Ops-6K .parquet/.jsonl/.json file or a folder of task files (see
`cuda_agent.task.suites`). Exit 0 after printing the table; 2 with one line
on stderr for a suite that cannot be read.
"""

from __future__ import annotations

import argparse

from cuda_agent.cli.main import UsageError

HELP = "list a suite's tasks: counts per level (KernelBench) or source (Ops-6K)"


def parse_levels(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        levels = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise UsageError(f"--levels takes numbers separated by commas, e.g. 1,2,3 (got {text!r})") from None
    if not levels or any(lv < 1 for lv in levels):
        raise UsageError(f"--levels takes positive level numbers (got {text!r})")
    return levels


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("list",), help="what to do (list: counts per level or source)")
    p.add_argument(
        "suite",
        help='"examples", a KernelBench checkout or level folder, an Ops-6K .parquet/.jsonl, or a folder of task files',
    )
    p.add_argument("--levels", help="KernelBench levels, e.g. 1,2 (default 1,2,3)")
    p.add_argument("--ids", action="store_true", help="also print every task id")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from cuda_agent.task.suites import load_suite

    suite = load_suite(args.suite, parse_levels(args.levels))
    console = Console()
    t = Table(title=f"{suite.kind} suite: {suite.name}", title_justify="left")
    t.add_column("level" if suite.kind == "kernelbench" else "source")
    t.add_column("tasks", justify="right")
    t.add_column("invalid", justify="right")
    counts = suite.counts()
    for group, (ok, bad) in counts.items():
        t.add_row(group, str(ok), str(bad) if bad else "")
    t.add_row("total", str(len(suite)), str(len(suite.invalid)) if suite.invalid else "", style="bold")
    console.print(t)
    for note in suite.notes:
        console.print(f"[yellow]note:[/] {note}")
    for tid, _, why in suite.invalid[:10]:
        console.print(f"[red]invalid:[/] {tid}: {why}", highlight=False)
    if len(suite.invalid) > 10:
        console.print(f"[red]invalid:[/] ... and {len(suite.invalid) - 10} more")
    if args.ids:
        for item in suite:
            console.print(f"{item.task_id}\t{item.group}", highlight=False)
    return 0
