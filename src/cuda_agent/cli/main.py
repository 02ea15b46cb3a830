"""The `cuda-agent` command: a verb per subcommand module.

Contract: each subcommand lives in `cuda_agent.cli.cmd_<verb>` and exposes
`HELP: str`, `add_arguments(parser)` and `run(args) -> int`. Modules are
imported lazily, so `cuda-agent --help` stays fast and a verb's heavy imports
(torch, openai) load only when it runs. Exit codes: 0 when the command did its
job (an evaluation that ran is 0 whatever the candidate did), 1 when it found
problems it was asked to find (e.g. `check`), 2 for bad usage or input, with
a one-line reason on stderr and no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType

from cuda_agent import __version__
from cuda_agent.task.taskfile import TaskError

# verb -> module; order is the order shown in --help
VERBS: dict[str, str] = {
    "init": "cuda_agent.cli.cmd_init",
    "eval": "cuda_agent.cli.cmd_eval",
    "check": "cuda_agent.cli.cmd_check",
    "lint-task": "cuda_agent.cli.cmd_lint_task",
    "optimize": "cuda_agent.cli.cmd_optimize",
    "show": "cuda_agent.cli.cmd_show",
    "tasks": "cuda_agent.cli.cmd_tasks",
    "bench": "cuda_agent.cli.cmd_bench",
    "report": "cuda_agent.cli.cmd_report",
    "synth": "cuda_agent.cli.cmd_synth",
    "rl": "cuda_agent.cli.cmd_rl",
}


class UsageError(Exception):
    """Bad usage or input: printed as one line, exit code 2."""


def _load(verb: str) -> ModuleType | None:
    try:
        return importlib.import_module(VERBS[verb])
    except ModuleNotFoundError as e:
        if e.name == VERBS[verb]:
            return None  # verb not built yet
        raise


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cuda-agent", description="Make PyTorch programs faster with CUDA kernels written by an LLM agent.")
    parser.add_argument("--version", action="version", version=f"cuda-agent {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb in VERBS:
        if only is not None and verb != only:
            # keep --help listing cheap: name the verb without importing it
            sub.add_parser(verb, add_help=False)
            continue
        mod = _load(verb)
        if mod is None:
            continue
        p = sub.add_parser(verb, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    verb = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(verb if verb in VERBS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2 if argv else 0
    try:
        return int(args._run(args))
    except (UsageError, TaskError, FileNotFoundError, FileExistsError, NotADirectoryError) as e:
        print(f"cuda-agent {args.verb}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cuda-agent: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
