#!/usr/bin/env python3
"""Issue 29's GPU run, the parts scripts/gpu_issue29.sh calls: `prepare` makes the tasks, the dataset, a
policy that answers with a correct kernel and the verl config; `summary` reads the trainer's log and
rollout dumps back into seconds per step and where they went.

The policy is the tiny windowed model of `cuda_agent.rl.tiny`, taught (tests/rl_helpers.teach) to answer
every task with one turn of four tool calls: write model_new.py, write a kernel computing relu(x) * 2,
write its binding, verify. On the GPU the kernel is CUDA (kernels/relu2.cu, a grid-stride loop) and the
evaluator's GPU lane scores it: the two relu(x) * 2 tasks earn a milestone reward, the two relu(x) * 3
tasks -1 (wrong output). With `--device cpu` (the dry run) the kernel is a C++ loop on the host and the
evaluator's CPU lane scores it, as in tests/test_rl_train_cpu.py.

Contract:
- `prepare --work W --device cuda|cpu` writes W/tasks/, W/train.parquet, W/model/ (taught),
  W/ppo.yaml and W/ppo.agent_loops.yaml (one turn, workdirs kept under W/work), exit 0; prints the
  teaching time and the config's path. A failure is one line, exit 2.
- `summary --work W [--json FILE]` prints a table per step (wall seconds; the rollout phase, in which
  generation and the evaluations overlap, with the summed per-trajectory generation and evaluation
  seconds; the update phases; the scores by task) and writes the same as JSON. It reads W/train.log,
  W/rollouts/N.jsonl and the kept candidates' result.json under W/work; missing pieces are reported as
  missing, not raised.
Not guaranteed: anything about learning (two steps of a taught tiny model); the GPU lane's speedups
(relu(x) * 2 is launch-bound at these sizes).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from rl_helpers import BINDING as CPU_BINDING  # noqa: E402
from rl_helpers import MODEL_NEW as CPU_MODEL_NEW  # noqa: E402
from rl_helpers import SCALE_TASK, hermes, teach  # noqa: E402

# input rows per task: large enough that the GPU does some work, small enough for the CPU lane
ROWS = {"cuda": (2048, 4096), "cpu": (64, 96)}
GPU_MODEL_NEW = (
    "import cuda_extension\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x):\n        return cuda_extension.relu2(x.contiguous())\n"
)
GPU_KERNEL = """#include <cuda_runtime.h>

__global__ void relu2_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = x[i];
    y[i] = v > 0.f ? 2.f * v : 0.f;
  }
}

extern "C" void relu2_launch(const float* x, float* y, long long n, cudaStream_t stream) {
  const int threads = 256;
  long long blocks = (n + threads - 1) / threads;
  if (blocks > 4096) blocks = 4096;
  if (blocks < 1) blocks = 1;
  relu2_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, y, n);
}
"""
GPU_BINDING = """#include "binding_registry.h"

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

extern "C" void relu2_launch(const float* x, float* y, long long n, cudaStream_t stream);

static torch::Tensor relu2(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "relu2: contiguous float32 on the GPU");
  auto y = torch::empty_like(x);
  relu2_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), c10::cuda::getCurrentCUDAStream());
  return y;
}

static void bind(pybind11::module_& m) { m.def("relu2", &relu2); }
REGISTER_BINDING(relu2, bind)
"""


def files(device: str) -> dict[str, str]:
    """The taught candidate's files: a C++ relu(x) * 2 on the CPU lane, a CUDA kernel with its binding on a GPU."""
    if device == "cpu":
        return {"model_new.py": CPU_MODEL_NEW, "kernels/relu2_binding.cpp": CPU_BINDING}
    return {"model_new.py": GPU_MODEL_NEW, "kernels/relu2.cu": GPU_KERNEL, "kernels/relu2_binding.cpp": GPU_BINDING}


def answer(device: str) -> str:
    """The taught turn: read model_new.py (the write tool refuses to overwrite a file not read), the
    kernel's files, then verify (the episode's end profiles the kept candidate)."""
    return "\n".join(
        [
            hermes("read", {"path": "model_new.py"}),
            *(hermes("write", {"path": p, "content": c}) for p, c in files(device).items()),
            hermes("verify"),
        ]
    )


def tasks(device: str) -> dict[str, tuple[int, int]]:
    return {f"relu_x{k}_{n}": (k, n) for k in (2, 3) for n in ROWS[device]}


def task_source(k: int, n: int, device: str) -> str:
    """relu(x) * k over n rows: 257 columns on the CPU lane, 4097 on a GPU (enough work to time)."""
    src = SCALE_TASK.format(k=k, n=n)
    return src.replace(", 257)", ", 4097)") if device == "cuda" else src


def _main(argv: list[str]) -> int:
    from cuda_agent.cli.main import main

    return main(argv)


def prepare(work: Path, device: str) -> int:
    import yaml
    from transformers import AutoTokenizer

    from cuda_agent.env.toolbox import tool_schemas
    from cuda_agent.rl.prompts import messages_for
    from cuda_agent.rl.tiny import save_tiny_model
    from cuda_agent.rl.tokens import TemplateTokens
    from cuda_agent.task.taskfile import Task

    (work / "tasks").mkdir(parents=True, exist_ok=True)
    for name, (k, n) in tasks(device).items():
        (work / "tasks" / f"{name}.py").write_text(task_source(k, n, device))
    if _main(["rl", "prompts", str(work / "tasks"), "-o", str(work / "train.parquet")]) != 0:
        return 2
    model = save_tiny_model(work / "model", window=64)
    tt = TemplateTokens(AutoTokenizer.from_pretrained(model))
    contexts = [
        tt.render(
            messages_for(Task.from_source(p.read_text(), p.stem), "agent"), tool_schemas(), generation_prompt=True
        )[-130:]
        for p in sorted((work / "tasks").glob("*.py"))
    ]
    text = answer(device)
    t0 = time.monotonic()
    steps = teach(model, contexts, text, device=device)
    n_tokens = len(AutoTokenizer.from_pretrained(model).encode(text, add_special_tokens=False))
    print(
        f"taught the answer ({n_tokens} tokens) in {steps} steps, {time.monotonic() - t0:.1f} s on {device}", flush=True
    )
    out = work / "ppo.yaml"
    flags = ["--device", "cpu"] if device == "cpu" else ["--rollout", "hf"]
    extra = (
        []
        if device == "cpu"
        else [
            # the GPU image has no flash_attn: SDPA and no remove-padding (rl.verl_plugins loads the critic alike);
            # no torch.compile, whose compile time would dwarf two steps of a tiny model
            "actor_rollout_ref.model.use_remove_padding=false",
            "critic.model.use_remove_padding=false",
            "++actor_rollout_ref.model.override_config.attn_implementation=sdpa",
            "++critic.model.override_config.attn_implementation=sdpa",
            "actor_rollout_ref.actor.use_torch_compile=false",
            "actor_rollout_ref.actor.fsdp_config.use_torch_compile=false",
            "actor_rollout_ref.ref.fsdp_config.use_torch_compile=false",
            "critic.fsdp.use_torch_compile=false",
            # the evaluation pool's GPU is the training GPU (docs/training.md section 2, shrunk to one GPU): one
            # eval_gpu unit, leased as GPU 0 (CUDA_AGENT_EVAL_GPUS, set by the shell script)
            "+ray_kwargs.ray_init.resources={eval_gpu:1}",
        ]
    )
    argv = [
        "rl",
        "config",
        "--stage",
        "ppo",
        *flags,
        "--model",
        str(model),
        "--train",
        str(work / "train.parquet"),
        "--gpus-per-node",
        "1",
        "--batch",
        "4",
        "--steps",
        "2",
        "-o",
        str(out),
        f"trainer.default_local_dir={work / 'ckpt'}",
        f"trainer.rollout_data_dir={work / 'rollouts'}",
        "data.max_response_length=2048",
        "actor_rollout_ref.rollout.max_model_len=10240",
        "actor_rollout_ref.rollout.temperature=0.3",
        *extra,
    ]
    if _main(argv) != 0:
        return 2
    loops = out.with_name("ppo.agent_loops.yaml")
    entries = yaml.safe_load(loops.read_text())
    entries[0].update(
        max_turns=1,
        max_tokens_per_turn=int(n_tokens * 1.5) + 64,
        workdir_root=str(work / "work"),
        keep_workdirs=True,
        log_rollouts=True,
    )
    loops.write_text(yaml.safe_dump(entries))
    print(f"config -> {out}")
    return 0


def _steps(
    log: str,
) -> tuple[dict[int, dict[str, float]], dict[int, list[dict[str, Any]]], dict[int, dict[str, float]]]:
    """From the trainer's log: verl's console line per step ("step:N - key:value - ..."), the agent loop's
    `cuda_agent rollout:` lines (each belongs to the next step line), and the hf rollout's busy time
    (its load of weight version N reports step N's generation)."""
    steps: dict[int, dict[str, float]] = {}
    rollouts: dict[int, list[dict[str, Any]]] = {}
    busy: dict[int, dict[str, float]] = {}
    pending: list[dict[str, Any]] = []
    for line in log.splitlines():
        if m := re.search(r"cuda_agent rollout: (\{.*\})", line):
            try:
                pending.append(json.loads(m.group(1)))
            except json.JSONDecodeError:
                pass
        elif m := re.search(
            r"weight version (\d+); since the last load (\d+) requests, (\d+) tokens, ([0-9.]+) s", line
        ):
            busy[int(m.group(1))] = {
                "requests": int(m.group(2)),
                "tokens": int(m.group(3)),
                "seconds": float(m.group(4)),
            }
        elif m := re.search(r"step:(\d+) - (.*)", line):
            vals: dict[str, float] = {}
            for part in m.group(2).split(" - "):
                key, _, raw = part.partition(":")
                num = re.search(r"-?\d+(\.\d+)?(e[-+]?\d+)?", raw)
                if num:
                    vals[key.strip()] = float(num.group(0))
            steps[int(m.group(1))] = vals
            rollouts[int(m.group(1))], pending = pending, []
    return steps, rollouts, busy


UPDATE = ("old_log_prob", "ref", "values", "adv", "update_critic", "update_actor", "update_weights")


def summary(work: Path, json_out: Path | None) -> int:
    log_path = work / "train.log"
    log = log_path.read_text(errors="replace") if log_path.exists() else ""
    steps, rollouts, busy = _steps(log)
    where = re.search(r"hf rollout 0: generating on (\S+)", log)
    report: dict[str, Any] = {"generation_device": where.group(1) if where else "unknown", "steps": []}
    for n, m in sorted(steps.items()):
        scores = {}
        dump = work / "rollouts" / f"{n}.jsonl"
        for line in dump.read_text().splitlines() if dump.exists() else []:
            r = json.loads(line)
            task = re.search(r"torch\.relu\(x\) \* (\d)\.0.*?torch\.randn\((\d+),", r.get("input", ""), re.DOTALL)
            scores.setdefault(f"relu_x{task.group(1)}_{task.group(2)}" if task else "?", []).append(r.get("score"))
        t = {k.removeprefix("timing_s/"): v for k, v in m.items() if k.startswith("timing_s/")}
        rows = rollouts.get(n, [])
        entry = {
            "step": n,
            "wall_s": t.get("step"),
            "rollout_phase_s": t.get("gen"),
            "generation_busy_s": (busy.get(n) or {}).get("seconds"),
            "generated_tokens": (busy.get(n) or {}).get("tokens"),
            "evaluation_s_summed": round(sum(r.get("env_s", 0.0) for r in rows), 2) if rows else None,
            "update_s": round(sum(t.get(k, 0.0) for k in UPDATE), 2),
            "update_parts_s": {k: round(t[k], 2) for k in UPDATE if k in t},
            "score_mean": m.get("critic/score/mean"),
            "scores_by_task": scores,
            "trajectories": rows,
        }
        report["steps"].append(entry)
    kept = []
    for res in sorted((work / "work").glob("*/best/result.json")):
        r = json.loads(res.read_text())
        kept.append(
            {
                "run": res.parent.parent.name,
                "reward": r.get("reward"),
                "status": r.get("status"),
                "time_ms": r.get("time_ms"),
                "eager_ms": r.get("eager_ms"),
                "compile_ms": r.get("compile_ms"),
                "phases_s": r.get("phases_s"),
            }
        )
    report["kept_candidates"] = kept
    # what the last turn's tools answered (rl.verl_loop writes episode.json in each kept workdir): the verify
    # message of every trajectory, so a reward of -1 says why
    episodes = []
    for ep in sorted((work / "work").glob("*/episode.json")):
        e = json.loads(ep.read_text())
        last = (e.get("final_observation") or [{}])[-1]  # the turn's last tool: verify, in the taught answer
        said = str(last.get("content", ""))
        episodes.append({"run": ep.parent.name, "reward": e.get("reward"), "reason": e.get("reason"), "said": said})
    report["episodes"] = episodes
    report["checkpoints"] = sorted(p.name for p in (work / "ckpt").glob("global_step_*"))
    print(f"generation on: {report['generation_device']}; checkpoints: {', '.join(report['checkpoints']) or 'none'}")
    print(f"{'step':>4} {'wall s':>8} {'rollout s':>9} {'generating s':>12} {'evaluating s (sum)':>18} {'update s':>8}")
    fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
    for e in report["steps"]:
        print(
            f"{e['step']:>4} {fmt(e['wall_s']):>8} {fmt(e['rollout_phase_s']):>9} {fmt(e['generation_busy_s']):>12} "
            f"{fmt(e['evaluation_s_summed']):>18} {fmt(e['update_s']):>8}"
        )
        print(
            f"     scores by task: {json.dumps(e['scores_by_task'])}; update parts: {json.dumps(e['update_parts_s'])}"
        )
        for r in e["trajectories"]:
            print(
                f"     {r.get('task')}: reward {r.get('reward')}, {r.get('reason')}, generate {r.get('generate_s')} s "
                f"(with queueing), environment {r.get('env_s')} s, verify {r.get('verify_calls')}, "
                f"profile {r.get('profile_calls')}"
            )
    for k in kept:
        print(
            f"kept {k['run']}: reward {k['reward']} ({k['status']}), {k['time_ms']} ms vs eager {k['eager_ms']} ms, "
            f"compile {k['compile_ms']} ms; phases {json.dumps(k['phases_s'])}"
        )
    for e in episodes:
        said = " ".join(e["said"].split())
        print(f"episode {e['run']}: reward {e['reward']} ({e['reason']}); its last tool said: {said[:400] or '-'}")
    print(
        "rollout s: verl's rollout phase (generation and evaluations overlap in it); generating s: the hf server's "
        "busy time in that step; evaluating s: the trajectories' environment time summed (tools and the final "
        "profile; they run concurrently)"
    )
    if not steps:
        print("no step finished (see train.log in the tar)")
    if json_out:
        json_out.write_text(json.dumps(report, indent=1))
    return 0 if steps else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    s = sub.add_parser("summary")
    s.add_argument("--work", type=Path, required=True)
    s.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if args.cmd == "prepare":
        return prepare(args.work.resolve(), args.device)
    return summary(args.work.resolve(), args.json)


if __name__ == "__main__":
    sys.exit(main())
