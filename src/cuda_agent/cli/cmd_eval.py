"""`cuda-agent eval`: evaluate a workspace, or a KernelBench single-file solution.

Exit 0 whenever the evaluation ran, whatever the candidate did (the verdict is
in the output); 2 for bad usage or input. On a terminal a transient line on
stderr shows the phase running (compile, reference, verify, timing, baselines);
with --json or when piped nothing but the result is printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from cuda_agent.cli.argtypes import BASELINES_HELP, CLOCK_HELP, at_least, baseline_names, clock_names
from cuda_agent.cli.main import UsageError
from cuda_agent.cli.phase_display import enabled_for, showing_phases

HELP = "evaluate a workspace (or --task T.py --solution S.py): compile, correctness, timing, reward"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("workdir", nargs="?", help="a workspace made by `cuda-agent init`")
    p.add_argument("--task", help="the pristine task file (default: the one recorded at init)")
    p.add_argument("--solution", help="a KernelBench single-file solution (ModelNew with load_inline); needs --task")
    p.add_argument(
        "--phase",
        choices=("compile", "verify", "profile"),
        default="profile",
        help="stop after compiling, after checking correctness, or time and score (default)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--no-cache", action="store_true", help="rebuild, re-time baselines, do not reuse results")
    p.add_argument("--fresh", action="store_true", help="evaluate again even if this exact candidate was scored before")
    p.add_argument("--timed-calls", type=at_least(3), default=None, help="timed calls per round (default 50)")
    p.add_argument("--baselines", type=baseline_names, default=None, help=BASELINES_HELP)
    p.add_argument("--clock", type=clock_names, default=None, metavar="NAMES", help=CLOCK_HELP)
    p.add_argument(
        "--expert",
        action="store_true",
        help="after a profile, add the expert profile: per kernel duration, DRAM and SM throughput against "
        "the GPU's measured ceilings, occupancy, registers, spills, shared memory, top stalls (ncu where "
        "counters are readable; never part of the reward; docs/profile.md)",
    )
    p.add_argument(
        "--expert-timeout", type=at_least(10), default=120, help="seconds the expert profile may take (default 120)"
    )
    p.add_argument(
        "--sanitize",
        action="store_true",
        help="also run one call under compute-sanitizer memcheck and racecheck (slow; needs the tool)",
    )


def run(args: argparse.Namespace) -> int:
    from cuda_agent.eval.api import evaluate_single_file, evaluate_workspace, render_text
    from cuda_agent.eval.config import EvalConfig
    from cuda_agent.task.taskfile import Task

    cfg = EvalConfig(
        use_cache=not args.no_cache, reuse_results=not (args.no_cache or args.fresh), sanitize=args.sanitize
    )
    if args.timed_calls is not None:
        cfg.n_timed = args.timed_calls
    if args.baselines:
        cfg.baselines = args.baselines
    if args.clock:
        cfg = dataclasses.replace(cfg, **args.clock)
    task = Task.from_file(args.task) if args.task else None
    _start_children_early(cfg, task, args.phase, single_file=bool(args.solution))
    if args.solution:
        if task is None:
            raise UsageError("--solution needs --task (the reference task file)")
        if args.workdir:
            raise UsageError("give either a workspace or --solution, not both")
        with showing_phases("eval", enabled_for(args.json)):
            result = evaluate_single_file(task, Path(args.solution), phase=args.phase, config=cfg)
    else:
        if not args.workdir:
            raise UsageError("give a workspace directory, or --task T.py --solution S.py")
        w = Path(args.workdir)
        if not w.is_dir():
            raise UsageError(f"workspace not found: {w}")
        with showing_phases("eval", enabled_for(args.json)):
            result = evaluate_workspace(w, task=task, phase=args.phase, config=cfg)
    # a candidate that failed has nothing worth profiling; without a GPU the compiler's report still helps
    wanted = args.expert and args.phase == "profile" and (result.correct or result.status.value == "no_gpu")
    expert = _expert(args, task) if wanted else None
    if args.json:
        if expert is None:
            print(result.to_json())
        else:
            import json

            print(json.dumps({**json.loads(result.to_json()), "expert_profile": expert}))
    else:
        print(render_text(result))
        if expert is not None:
            print("\n" + expert)
        if result.status.value == "no_gpu":
            print("note: no CUDA GPU is visible here; timing and correctness need one", file=sys.stderr)
    return 0


def _expert(args: argparse.Namespace, task) -> str | None:  # noqa: ANN001 - Task
    """The expert profile's text, after the evaluation (it never changes the result or its reward)."""
    if args.solution:
        return "expert profile: not available for a single-file (load_inline) solution yet; use a workspace"
    from cuda_agent.eval.profile.expert import ProfileSettings, expert_text

    with showing_phases("expert profile", enabled_for(args.json)):
        return expert_text(
            Path(args.workdir), task=task, settings=ProfileSettings(timeout_s=float(args.expert_timeout))
        )


def _start_children_early(cfg, task, phase: str, *, single_file: bool) -> None:  # noqa: ANN001 - EvalConfig, Task
    """Start the evaluation's two children now, before this process imports torch and starts CUDA.

    A one-shot `cuda-agent eval` otherwise starts them only once it has done both (about 2-3 s on an
    H200), and their own start-up (torch, CUDA, the op log's first use: 3-4 s) then sits on the critical
    path of every evaluation whose build is cached or quick (an edited single file: ~10 s in all).
    Started here they are the evaluation's pair (`channel.children.pair_for` takes a spare of an equal spec); where
    no GPU turns out to be usable they are killed at exit, unused. Only where the evaluation would start
    children anyway: a GPU device node exists and the phase needs them.
    """
    if task is None or (phase == "compile" and not single_file) or cfg.device != "cuda" or not _gpu_node():
        return
    from cuda_agent.eval.channel import children as warm

    warm.prepare(cfg, task.precision)


def _gpu_node() -> bool:
    return Path("/dev/nvidiactl").exists()  # cheap: no torch, no CUDA context
