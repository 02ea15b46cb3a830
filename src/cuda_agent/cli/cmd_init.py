"""`cuda-agent init TASK.py -o DIR`: lay out a CUDA-Agent workspace for a task.

`cuda-agent init --from DIR -o NEW` imports a workspace in the public CUDA-Agent
release's layout (model.py, model_new.py, kernels/, binding.cpp, binding_registry.h,
utils/): its model.py becomes the task and its model_new.py and kernels/ the agent's
files (its own binding files and utils/ are replaced by ours).

A new DIR is built completely or not at all. On an existing workspace, `--force`
refreshes the protected files (model.py, binding files, SKILL.md, tools/) and keeps
the agent's model_new.py and kernels/; `--solution DIR` or `--reset` replace those
as a unit (the old ones are kept in DIR/.cuda-agent/replaced-<time>/ and named).
It prints the task's precision and tolerances, and where the precision came from
(declared, or inferred from the task's tensors: `Task.describe_precision`).
"""

from __future__ import annotations

import argparse

HELP = "create a workspace for a KernelBench-format task (model.py, model_new.py, kernels/, tools/, SKILL.md)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", nargs="?", help="a KernelBench-format task file (or --from DIR)")
    p.add_argument(
        "--from",
        dest="from_dir",
        metavar="DIR",
        help="import a workspace in the public CUDA-Agent release's layout (its model.py is the task)",
    )
    p.add_argument("-o", "--output", required=True, help="the workspace directory to create")
    p.add_argument(
        "--solution", help="use an existing solution (a folder with model_new.py and kernels/) as the agent's files"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="refresh the protected files of an existing workspace; model_new.py and kernels/ are kept",
    )
    p.add_argument(
        "--reset",
        action="store_true",
        help="with --force: also replace model_new.py and kernels/ with the template (the old ones are kept aside)",
    )


def run(args: argparse.Namespace) -> int:
    from cuda_agent.cli.main import UsageError
    from cuda_agent.task.taskfile import Task
    from cuda_agent.task.workspace import make_workspace

    if args.reset and args.solution:
        raise UsageError("--reset and --solution both replace the agent's files; give one")
    if args.from_dir:
        from pathlib import Path

        from cuda_agent.task.workspace import is_release_layout

        src = Path(args.from_dir)
        if args.task or args.solution:
            raise UsageError("--from DIR takes the task and the agent's files from DIR; give no TASK or --solution")
        if not is_release_layout(src):
            raise UsageError(
                f"{src} is not a workspace in the CUDA-Agent release's layout (it needs model.py, "
                "model_new.py, binding.cpp, binding_registry.h and kernels/, and no .cuda-agent/)"
            )
        args.task, args.solution = str(src / "model.py"), str(src)
    if not args.task:
        raise UsageError("give a task file (or --from DIR)")
    task = Task.from_file(args.task)
    r = make_workspace(task, args.output, force=args.force, solution=args.solution, reset=args.reset)
    d = r.path
    what = {
        "template": "model_new.py is the template",
        "solution": f"agent files from {args.solution}",
        "kept": "your model_new.py and kernels/ kept",
    }[r.agent_files]
    print(f"workspace for task '{task.name}' ({task.hash}) {'at' if r.created else 'refreshed at'} {d}: {what}")
    print(task.describe_precision())
    if r.replaced_to is not None:
        print(f"the previous model_new.py and kernels/ are in {r.replaced_to}")
    print(f"next: edit {d}/model_new.py and {d}/kernels/, then run {d}/tools/compile, tools/verify, tools/profile")
    return 0
