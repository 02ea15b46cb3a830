"""`cuda-agent report RUN_DIR`: the paper's metrics table for a bench run, and the report files.

Prints the table (per level or source, then overall: pass, faster than eager, faster than
compile, geomean vs eager, geomean vs compile) and notes (not scored, unfinished, errors),
and writes report.md, report.html and report/<task>.html (`cuda_agent.bench.report_files`) into
RUN_DIR, or into --out DIR. Reads the run without writing to it, so a read-only run dir
works with --no-files or --out. Exit 0; 2 with one line on stderr when RUN_DIR holds no run,
its database is damaged, or the report cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cuda_agent.cli.main import FS_ERRNOS, UsageError

HELP = "print the metrics table of a bench run and write report.md, report.html and per-task pages"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a directory written by `cuda-agent bench -o RUN_DIR`")
    p.add_argument("--no-files", action="store_true", help="print the table only")
    p.add_argument("--out", metavar="DIR", help="write the report files here instead of RUN_DIR")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from cuda_agent.bench.report import build_report, notes
    from cuda_agent.bench.report_files import write_report
    from cuda_agent.bench.report_text import rich_table

    if not Path(args.run_dir).is_dir():
        raise FileNotFoundError(f"run directory not found: {args.run_dir}")
    rep = build_report(args.run_dir)
    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print(rich_table(rep))
    for n in notes(rep):
        console.print(f"[yellow]note:[/] {n}", highlight=False)
    if not args.no_files:
        try:
            md, page = write_report(rep, args.out)
        except OSError as e:
            if e.errno not in FS_ERRNOS:
                raise
            raise UsageError(
                f"cannot write the report into {args.out or args.run_dir} ({e.strerror}): pass --out DIR "
                "to write it elsewhere, or --no-files"
            ) from None
        console.print(
            f"wrote {md}, {page} and {page.parent / 'report'}/ (browse: cuda-agent view {args.run_dir})",
            highlight=False,
        )
    return 0
