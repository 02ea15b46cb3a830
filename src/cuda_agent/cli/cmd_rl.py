"""`cuda-agent rl ...`: the training stages as commands (needs the `rl` extra for config and train).

Subcommands:
- `rl prompts SUITE -o train.parquet [--mode agent|single-turn]`: verl's RL dataset from a suite;
- `rl rft RUN_DIR... -o sft.parquet`: the rejection filter into SFT rows, with a count per reason;
- `rl vp RUN_DIR... -o vp.parquet`: the same trajectories as value-pretraining rows (replayed);
- `rl config --stage S -o FILE --model DIR --train PARQUET [KEY=VALUE...]`: a complete verl config,
  validated with verl's loader;
- `rl train --stage S --config FILE [--ray-address ADDR] [--dry-run]`: start the stage.
Contract: exit 0 when the command did its job, 2 with one line for bad input (including a config
that verl refuses, or verl missing for config/train); `train` returns the trainer's exit code.
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
from collections import Counter
from pathlib import Path

from cuda_agent.cli.main import UsageError

HELP = "training stages: datasets (prompts, rft, vp), verl configs (config) and launch (train)"
STAGES = ("warmup", "sft", "vp", "ppo")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="rl_cmd", metavar="STEP", required=True)
    s = sub.add_parser("prompts", help="verl RL dataset (parquet) from a suite")
    s.add_argument("suite", help="Ops-6K parquet/jsonl, KernelBench checkout, a folder of tasks, or 'examples'")
    s.add_argument("-o", "--output", required=True, metavar="PARQUET")
    s.add_argument(
        "--mode",
        choices=("agent", "single-turn"),
        default="agent",
        help="agent: multi-turn rows for the cuda_agent loop (default); single-turn: the warm-up",
    )
    s.add_argument("--limit", type=int, default=None, help="first N tasks only")
    for name, what in (("rft", "SFT rows (rejection fine-tuning)"), ("vp", "value-pretraining rows")):
        s = sub.add_parser(name, help=f"filter agent trajectories into {what}")
        s.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories (searched for trajectory.jsonl)")
        s.add_argument("-o", "--output", required=True, metavar="PARQUET")
    s = sub.add_parser("config", help="write a complete verl config for a stage, validated by verl")
    s.add_argument("--stage", choices=STAGES, required=True)
    s.add_argument("-o", "--output", required=True, metavar="YAML")
    s.add_argument("--model", required=True, help="local Hugging Face model folder (config.json + tokenizer)")
    s.add_argument("--train", required=True, metavar="PARQUET", help="training data (from rl prompts / rft / vp)")
    s.add_argument("--val", default=None, metavar="PARQUET")
    s.add_argument("--nnodes", type=int, default=1)
    s.add_argument(
        "--gpus-per-node",
        type=int,
        default=None,
        help="training GPUs per node, not the evaluation GPUs (default 8; --device cpu: training processes, 1)",
    )
    s.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default="cuda",
        help="cpu: the whole loop on one machine without GPUs (transformers rollout, gloo, the evaluator's "
        "CPU lane); for debugging and CI",
    )
    s.add_argument(
        "--rollout",
        choices=("vllm", "sglang", "hf"),
        default=None,
        help="rollout engine (default: vllm; with --device cpu: hf, transformers generation)",
    )
    s.add_argument("--rollout-tp", type=int, default=2, help="tensor parallel size of the vLLM rollout")
    s.add_argument("--steps", type=int, default=None, help="training steps (default: the stage's)")
    s.add_argument("--batch", type=int, default=None, help="trajectories per step = mini-batch (default 1024)")
    s.add_argument("set", nargs="*", metavar="KEY=VALUE", help="further verl overrides, e.g. trainer.save_freq=10")
    s = sub.add_parser("train", help="launch a stage with verl")
    s.add_argument("--stage", choices=STAGES, required=True)
    s.add_argument("--config", required=True, metavar="YAML", help="written by `rl config`")
    s.add_argument("--ray-address", default=None, help="join this Ray cluster (PPO stages)")
    s.add_argument("--nnodes", type=int, default=1, help="SFT: nodes")
    s.add_argument(
        "--gpus-per-node",
        type=int,
        default=None,
        help="SFT: processes per node (default: the config's trainer.n_gpus_per_node)",
    )
    s.add_argument("--node-rank", type=int, default=0, help="SFT: this node's rank")
    s.add_argument("--master-addr", default=None, help="SFT: node 0's address")
    s.add_argument("--dry-run", action="store_true", help="print the command and environment, do not run")


def run(args: argparse.Namespace) -> int:
    return {"prompts": _prompts, "rft": _rows, "vp": _rows, "config": _config, "train": _train}[args.rl_cmd](args)


def _prompts(args: argparse.Namespace) -> int:
    from cuda_agent.rl.prompts import prompt_rows, write_parquet
    from cuda_agent.task.suites import load_suite

    suite = load_suite(args.suite)
    rows = prompt_rows(suite, "single_turn" if args.mode == "single-turn" else "agent", args.limit)
    if not rows:
        raise UsageError(f"{args.suite}: no tasks")
    out = write_parquet(rows, args.output)
    skipped = f", {len(suite.invalid)} invalid entries skipped" if suite.invalid else ""
    print(f"{len(rows)} {args.mode} rows -> {out}{skipped}")
    return 0


def _rows(args: argparse.Namespace) -> int:
    from cuda_agent.rl.prompts import write_parquet
    from cuda_agent.rl.rft import filter_runs, sft_row, vp_row

    kept, verdicts = filter_runs(args.runs)
    if not verdicts:
        raise UsageError("no trajectory.jsonl under " + " ".join(args.runs))
    reasons = Counter(r.split(":")[0] for v in verdicts for r in v.reasons)
    rows = (
        [sft_row(t, p) for p, t in kept] if args.rl_cmd == "rft" else [vp_row(t, p, i) for i, (p, t) in enumerate(kept)]
    )
    print(f"{len(verdicts)} trajectories, {len(kept)} kept")
    for why, n in reasons.most_common():
        print(f"  rejected: {why}: {n}")
    if not rows:
        raise UsageError("no trajectory passed the filter; nothing written")
    print(f"-> {write_parquet(rows, args.output)}")
    return 0


def _need_verl() -> None:
    # only rl imports the framework; here it is enough to know it is installed
    if importlib.util.find_spec("verl") is None:
        raise UsageError("this step needs verl: pip install -e '.[rl]'")


def _config(args: argparse.Namespace) -> int:
    _need_verl()
    from cuda_agent.rl.config import Cluster, ConfigError, write
    from cuda_agent.rl.inputs import dataset_problem, model_problem

    # datasets are checked here only when they exist (a config may be written first); `rl train` requires them
    problem = model_problem(args.model) or next(
        (dataset_problem(d) for d in (args.train, args.val) if d and Path(d).exists() and dataset_problem(d)), None
    )
    if problem:
        raise UsageError(f"--model {problem}" if problem.startswith(args.model) else problem)
    bad = [s for s in args.set if "=" not in s]
    if bad:
        raise UsageError(f"overrides are KEY=VALUE, got {bad[0]!r}")
    try:
        out = write(
            args.stage,
            args.output,
            model=str(Path(args.model).resolve()),
            train=str(Path(args.train).resolve()),
            val=str(Path(args.val).resolve()) if args.val else None,
            cluster=Cluster(args.nnodes, args.gpus_per_node or (1 if args.device == "cpu" else 8), args.rollout_tp),
            steps=args.steps,
            batch=args.batch,
            extra=args.set,
            device=args.device,
            rollout=args.rollout,
        )
    except ConfigError as e:
        raise UsageError(str(e)) from None
    print(f"{args.stage} config validated by verl -> {out}")
    return 0


def _per_node(config: str) -> int:
    import yaml

    try:
        n = ((yaml.safe_load(Path(config).read_text()) or {}).get("trainer") or {}).get("n_gpus_per_node")
    except (OSError, yaml.YAMLError):
        n = None
    return n if isinstance(n, int) and n > 0 else 8


def _check_inputs(args: argparse.Namespace) -> None:
    """The config's model and data, and the Ray address, before verl starts (it would say it in a traceback)."""
    import yaml

    from cuda_agent.rl.inputs import dataset_problem, model_problem, ray_problem

    try:
        cfg = yaml.safe_load(Path(args.config).read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise UsageError(f"{args.config}: not a readable config ({type(e).__name__})") from None
    if args.stage == "sft":
        models, data = [(cfg.get("model") or {}).get("path")], (cfg.get("data") or {}).get("train_files")
    else:
        arr = cfg.get("actor_rollout_ref") or {}
        models = [(arr.get("model") or {}).get("path"), ((cfg.get("critic") or {}).get("model") or {}).get("path")]
        data = (cfg.get("data") or {}).get("train_files")
    problems = [model_problem(m) for m in dict.fromkeys(m for m in models if isinstance(m, str) and "${" not in m)]
    if isinstance(data, str) and "${" not in data:
        problems.append(dataset_problem(data))
    if args.ray_address:
        problems.append(ray_problem(args.ray_address))
    problem = next((p for p in problems if p), None)
    if problem:
        raise UsageError(problem)


def _train(args: argparse.Namespace) -> int:
    from cuda_agent.rl.launch import command, environment
    from cuda_agent.rl.launch import run as launch

    if not Path(args.config).is_file():
        raise UsageError(f"{args.config}: no such config (write it with `cuda-agent rl config`)")
    if not args.dry_run:
        _check_inputs(args)
    try:
        argv = command(
            args.stage,
            args.config,
            nnodes=args.nnodes,
            gpus_per_node=args.gpus_per_node or _per_node(args.config),
            node_rank=args.node_rank,
            master_addr=args.master_addr,
            ray_address=args.ray_address,
        )
    except ValueError as e:
        raise UsageError(str(e)) from None
    env = environment(args.ray_address, args.config)
    if args.dry_run:
        print(" ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), shlex.join(argv)]))
        return 0
    _need_verl()
    return launch(argv, env)
