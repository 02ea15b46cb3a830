"""The `cuda-agent` command: a verb per subcommand module.

Contract: each subcommand lives in `cuda_agent.cli.cmd_<verb>` and exposes
`HELP: str`, `add_arguments(parser)` and `run(args) -> int`. Modules are
imported lazily, so `cuda-agent --help` stays fast and a verb's heavy imports
(torch, openai) load only when it runs. Exit codes: 0 when the command did its
job (an evaluation that ran is 0 whatever the candidate did), 1 when it found
problems it was asked to find (e.g. `check`), 2 for bad usage or input, with
a one-line reason on stderr and no traceback, 130 on Ctrl-C. Bad input
includes what the file system refuses (a read-only or full -o, an unwritable
cache: `cache_root` names CUDA_AGENT_CACHE) and a damaged results database; an
unknown option is reported with the verb's own usage.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import sys
from types import ModuleType

from cuda_agent import __version__
from cuda_agent.task.taskfile import TaskError
from cuda_agent.task.workspace import CacheDirError

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
    "view": "cuda_agent.cli.cmd_view",
    "baselines": "cuda_agent.cli.cmd_baselines",
}
# what the file system refuses: the user's to fix (another -o, permissions, space)
FS_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT}


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
    parser = argparse.ArgumentParser(
        prog="cuda-agent", description="Make PyTorch programs faster with CUDA kernels written by an LLM agent."
    )
    parser.add_argument("--version", action="version", version=f"cuda-agent {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs: dict[str, argparse.ArgumentParser] = {}
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
        verbs[verb] = p
    parser.set_defaults(_verbs=verbs)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    verb = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(verb if verb in VERBS else None)
    args, extra = parser.parse_known_args(argv)
    if extra:  # reported by the verb's parser, so the usage shown is the verb's
        (args._verbs.get(args.verb) or parser).error(f"unrecognized arguments: {' '.join(extra)}")
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
    except Exception as e:
        if (line := _user_error(e)) is None:
            raise
        print(f"cuda-agent {args.verb}: {line}", file=sys.stderr)
        return 2


def _user_error(e: Exception) -> str | None:
    """One line for an error that is the user's to fix, or None for a bug (which raises)."""
    store = sys.modules.get("cuda_agent.bench.store")  # not imported: it cannot be its error
    if store is not None and isinstance(e, store.StoreError):
        return str(e)
    if isinstance(e, CacheDirError):
        return e.strerror
    if isinstance(e, OSError) and e.errno in FS_ERRNOS:
        where = f" {e.filename}" if e.filename else ""
        return f"cannot write{where}: {e.strerror}; choose a writable place (another -o) or fix its permissions"
    return None


if __name__ == "__main__":
    raise SystemExit(main())
