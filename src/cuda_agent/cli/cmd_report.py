"""`cuda-agent report RUN_DIR`: the paper's metrics table for a bench run.

Prints the table (per level or source, then overall: pass, faster than eager,
faster than compile, geomean vs eager, geomean vs compile) and writes
RUN_DIR/report.md and RUN_DIR/report.html (plots embedded when matplotlib is
installed). Exit 0; 2 with one line on stderr when RUN_DIR holds no run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "print the metrics table of a bench run and write RUN_DIR/report.md and report.html"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a directory written by `cuda-agent bench -o RUN_DIR`")
    p.add_argument("--no-files", action="store_true", help="print the table only")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from cuda_agent.bench.report import build_report, notes, rich_table, write_report

    if not Path(args.run_dir).is_dir():
        raise FileNotFoundError(f"run directory not found: {args.run_dir}")
    rep = build_report(args.run_dir)
    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print(rich_table(rep))
    for n in notes(rep):
        console.print(f"[yellow]note:[/] {n}", highlight=False)
    if not args.no_files:
        md, page = write_report(rep)
        console.print(f"wrote {md} and {page}", highlight=False)
    return 0
