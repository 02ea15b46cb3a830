"""`cuda-agent init TASK.py -o DIR`: lay out a CUDA-Agent workspace for a task."""

from __future__ import annotations

import argparse

HELP = "create a workspace for a KernelBench-format task (model.py, model_new.py, kernels/, tools/, SKILL.md)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", help="a KernelBench-format task file")
    p.add_argument("-o", "--output", required=True, help="the workspace directory to create")
    p.add_argument("--solution", help="copy an existing solution (a folder with model_new.py and kernels/) into it")
    p.add_argument("--force", action="store_true", help="overwrite protected files in an existing directory")


def run(args: argparse.Namespace) -> int:
    from cuda_agent.task.taskfile import Task
    from cuda_agent.task.workspace import copy_solution, init_workspace

    task = Task.from_file(args.task)
    d = init_workspace(task, args.output, force=args.force)
    if args.solution:
        copy_solution(args.solution, d)
    print(f"workspace for task '{task.name}' ({task.hash}) at {d}")
    print(f"next: edit {d}/model_new.py and {d}/kernels/, then run {d}/tools/compile, tools/verify, tools/profile")
    return 0
