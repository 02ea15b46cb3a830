"""RL smoke on one GPU without verl: the environment core with the real evaluator,
driven through the rollout code path of the verl agent loop (rl.rollout, the
token stream, the shared tool-call parser, the evaluation pool) by a scripted
server, then the reward carried into a gradient.

Stages:
1. Two trajectories on examples/diag_matmul, rolled out concurrently: "good" writes the
   bundled solution (expected reward 3), "wrong" writes the same files with the
   faulty kernel of tests/fixtures/faulty/wrong (expected -1). Each: read, write the
   files, profile, finish. Checked: the reward; every sampled id in the response
   with mask 1 and nothing else; the stream ends on a sampled token; the
   evaluator's observation reached the stream (mask 0).
2. Gradient, plain torch: GRPO advantages of the two rewards (+1, -1), the loss over
   sampled tokens only (mean per trajectory, then over trajectories), one Adam step
   of a tiny randomly initialised model (rl.tiny); checked: a non-zero gradient and
   the good trajectory's log-likelihood rising relative to the wrong one's.
3. TRL's GRPOTrainer, one optimiser step, when `trl` imports (wheels unpacked from
   .whl/ if present): the same two trajectories through `rollout_func` with
   `env_mask` (observations masked) and the environment's reward as its reward
   function. This is GRPO, not the paper's PPO: a smoke that the evaluator's reward
   reaches a real trainer's gradient, nothing more.
Prints a short table last; exit 1 when a check fails.

`--cpu` runs the same on the CPU lane (tests/fixtures/cpu_lane; rewards of a correct
candidate are then 1-3, times mean nothing), for CI-less checking of the script.

Usage (repository root): PYTHONPATH=src python3 scripts/rl_gpu_smoke.py [--cpu] [--skip-trl] [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.env.core import EnvConfig, Environment  # noqa: E402
from cuda_agent.eval.config import EvalConfig, cpu_lane  # noqa: E402
from cuda_agent.pool.local import LocalPool  # noqa: E402
from cuda_agent.rl.rollout import Rollout, RolloutConfig, roll_out  # noqa: E402
from cuda_agent.rl.scoring import pool_evaluator  # noqa: E402
from cuda_agent.rl.tiny import save_tiny_model  # noqa: E402
from cuda_agent.rl.tokens import TemplateTokens  # noqa: E402
from cuda_agent.task.taskfile import Task  # noqa: E402

ROWS: list[tuple[str, str]] = []
FAILED: list[str] = []


def check(ok: bool, what: str) -> bool:
    if not ok:
        FAILED.append(what)
        print(f"FAIL: {what}", flush=True)
    return ok


def candidates(cpu: bool) -> tuple[Task, dict[str, dict[str, str]], dict[str, int | None]]:
    """The task, the files of each trajectory, and the reward each must get (None: any positive)."""
    if cpu:
        lane = ROOT / "tests" / "fixtures" / "cpu_lane"
        good = {
            "model_new.py": (lane / "model_new.py").read_text(),
            "kernels/cpu_lane_binding.cpp": (lane / "kernels" / "cpu_lane_binding.cpp").read_text(),
        }
        wrong = dict(
            good, **{"model_new.py": good["model_new.py"].replace("cuda_extension.good(", "cuda_extension.wrong(")}
        )
        return Task.from_file(lane / "task.py"), {"good": good, "wrong": wrong}, {"good": None, "wrong": -1}
    ex = ROOT / "examples" / "diag_matmul"
    sol = ex / "solution"
    good = {str(p.relative_to(sol)): p.read_text() for p in sorted(sol.rglob("*")) if p.is_file()}
    # same binding (its slow torch-header build is shared), the faulty kernel that scales rows by 1.1
    faulty = ROOT / "tests" / "fixtures" / "faulty" / "wrong" / "kernels" / "diag_scale.cu"
    wrong = dict(good, **{"kernels/diag_scale.cu": faulty.read_text()})
    return Task.from_file(ex / "task.py"), {"good": good, "wrong": wrong}, {"good": 3, "wrong": -1}


def call(name: str, args: dict[str, Any] | None = None) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args or {}}) + "</tool_call>"


def script_for(files: dict[str, str]) -> list[str]:
    writes = "".join(call("write", {"path": p, "content": t}) for p, t in files.items())
    return [
        "I read the placeholder first.\n" + call("read", {"path": "model_new.py"}),
        "Writing the kernel, its binding and ModelNew.\n" + writes,
        call("profile"),
        "Done.\n" + call("finish", {"summary": "row scaling instead of a GEMM"}),
    ]


class Server:
    """Stands in for verl's server manager: token ids of the scripted replies, end-of-turn appended."""

    def __init__(self, tok: Any, replies: list[str]):
        self.tok, self.replies, self.sampled = tok, list(replies), []
        self.eot = tok.convert_tokens_to_ids("<|im_end|>")

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]) -> Any:
        ids = self.tok.encode(self.replies.pop(0), add_special_tokens=False) + [self.eot]
        ids = ids[: sampling_params["max_tokens"]]
        self.sampled.append(ids)
        return SimpleNamespace(token_ids=ids, log_probs=None)


class TimedEvaluator:
    def __init__(self, inner: Any, spans: list[tuple[float, float]]):
        self.inner, self.spans = inner, spans

    def __call__(self, ws: Path, phase: str) -> Any:
        t0 = time.monotonic()
        try:
            return self.inner(ws, phase)
        finally:
            self.spans.append((t0, time.monotonic()))


def busy(spans: list[tuple[float, float]]) -> float:
    """Wall seconds during which at least one evaluation ran."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


async def rollouts(
    tok: Any, task: Task, files: dict[str, dict[str, str]], cfg: EvalConfig, pool: LocalPool, out: Path, spans: list
) -> dict[str, tuple[Rollout, Server]]:
    async def one(name: str) -> tuple[Rollout, Server]:
        env = Environment(
            EnvConfig(max_turns=10, bash_timeout_s=60), evaluator=TimedEvaluator(pool_evaluator(pool, task, cfg), spans)
        )
        server = Server(tok, script_for(files[name]))
        rc = RolloutConfig(
            max_turns=10, prompt_length=16384, response_length=49152, max_tokens_per_turn=16384, episode_timeout_s=900
        )
        try:
            r = await roll_out(
                env,
                task,
                out / name,
                server,
                TemplateTokens(tok),
                lambda ids: tok.decode(ids, skip_special_tokens=True),
                rc,
                {"temperature": 1.0},
            )
        finally:
            env.close()
        return r, server

    done = await asyncio.gather(*(one(n) for n in files))
    return dict(zip(files, done, strict=True))


def check_trajectory(name: str, r: Rollout, server: Server, want: int | None, tok: Any) -> None:
    model = [t for t, m in zip(r.response_ids, r.response_mask, strict=True) if m]
    masks_ok = check(model == [t for ids in server.sampled for t in ids], f"{name}: sampled ids == mask-1 tokens")
    masks_ok &= check(r.response_mask[-1] == 1, f"{name}: ends on a sampled token")
    context = tok.decode([t for t, m in zip(r.response_ids, r.response_mask, strict=True) if not m])
    masks_ok &= check("reward:" in context, f"{name}: the evaluator's observation is in the stream, masked")
    good = r.reward > 0 if want is None else r.reward == want
    check(good, f"{name}: reward {r.reward}, expected {'> 0' if want is None else want}")
    ROWS.append(
        (
            f"trajectory {name}",
            f"reward {r.reward:g} (expected {'>0' if want is None else want}), "
            f"{r.reason}, {int(r.metrics['turns'])} turns, {int(r.metrics['model_tokens'])} sampled / "
            f"{len(r.response_ids)} response tokens, masks {'ok' if masks_ok else 'WRONG'}",
        )
    )


def seq_logp(model: Any, r: Rollout, device: str) -> Any:
    import torch

    ids = torch.tensor([r.prompt_ids + r.response_ids], device=device)
    logits = model(ids).logits[0, len(r.prompt_ids) - 1 : -1].float()
    lp = torch.log_softmax(logits, -1).gather(-1, ids[0, len(r.prompt_ids) :, None])[:, 0]
    mask = torch.tensor(r.response_mask, device=device, dtype=lp.dtype)
    return (lp * mask).sum() / mask.sum(), lp


def gradient_stage(model_dir: Path, trajs: list[Rollout], device: str) -> dict[str, list[float]]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(device)
    rewards = torch.tensor([r.reward for r in trajs])
    adv = (rewards - rewards.mean()) / (rewards.std(unbiased=False) + 1e-6)
    t0 = time.monotonic()
    means, per_token = zip(*(seq_logp(model, r, device) for r in trajs), strict=True)
    loss = -(adv.to(device) * torch.stack(means)).mean()
    loss.backward()
    gnorm = torch.sqrt(sum((p.grad.float() ** 2).sum() for p in model.parameters() if p.grad is not None)).item()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    opt.step()
    with torch.no_grad():
        after = [seq_logp(model, r, device)[0].item() for r in trajs]
    dt = time.monotonic() - t0
    before = [m.item() for m in means]
    gap = (after[0] - after[1]) - (before[0] - before[1])
    check(gnorm > 0, "gradient: non-zero")
    check(gap > 0, "gradient: the good trajectory gains log-likelihood on the wrong one")
    ROWS.append(
        (
            "gradient (torch GRPO)",
            f"advantages {[round(a, 2) for a in adv.tolist()]}, |grad| {gnorm:.3g}, "
            f"gap of mean log-prob good-wrong {gap:+.2e} after one Adam step, {dt:.2f} s",
        )
    )
    return {"logprobs": [lp.detach().float().cpu().tolist() for lp in per_token], "update_s": [dt]}


def unpack_wheels(wheels: Path) -> str | None:
    """Unpack carried wheels into .whl/site and append it to sys.path (installed packages win)."""
    found = sorted(wheels.glob("*.whl"))
    if not found:
        return None
    site = wheels / "site"
    for w in found:
        marker = site / f".{w.name}.done"
        if not marker.exists():
            with zipfile.ZipFile(w) as z:
                z.extractall(site)
            marker.touch()
    sys.path.append(str(site))
    return f"{len(found)} wheels from {wheels}"


def trl_stage(
    model_dir: Path, trajs: list[Rollout], logprobs: list[list[float]], device: str, out: Path
) -> float | None:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    try:
        import torch
        from datasets import Dataset
        from transformers import AutoTokenizer
        from trl import GRPOConfig, GRPOTrainer
    except Exception as e:  # noqa: BLE001 - any import problem means the stage cannot run here; say which
        ROWS.append(("TRL GRPO step", f"skipped: {type(e).__name__}: {e}"[:160]))
        return None
    import trl

    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.padding_side = "left"

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        # the slice holds each prompt once per generation: completion i is stored trajectory i mod 2, so every
        # group of num_generations=2 is (good, wrong)
        pick = [trajs[i % len(trajs)] for i in range(len(prompts))]
        lps = [logprobs[i % len(trajs)] for i in range(len(prompts))]
        return {
            "prompt_ids": [r.prompt_ids for r in pick],
            "completion_ids": [r.response_ids for r in pick],
            "logprobs": [
                [lp if m else 0.0 for lp, m in zip(lp_, r.response_mask, strict=True)]
                for lp_, r in zip(lps, pick, strict=True)
            ],
            "env_mask": [r.response_mask for r in pick],
            "env_reward": [r.reward for r in pick],
        }

    def env_reward(
        prompts: Any = None, completions: Any = None, env_reward: list[float] | None = None, **_: Any
    ) -> list[float]:
        return list(env_reward or [])

    args = GRPOConfig(
        output_dir=str(out / "trl"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_steps=1,
        learning_rate=1e-4,
        beta=0.0,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        max_completion_length=max(len(r.response_ids) for r in trajs) + 8,
        use_cpu=device == "cpu",
        bf16=False,
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=[env_reward],
        args=args,
        processing_class=tok,
        train_dataset=Dataset.from_list([{"prompt": "diag_matmul"}] * 2),
        rollout_func=rollout_func,
    )
    before = [p.detach().clone() for p in trainer.model.parameters()]
    t0 = time.monotonic()
    trainer.train()
    dt = time.monotonic() - t0
    moved = sum((p.detach() - b).abs().sum().item() for p, b in zip(trainer.model.parameters(), before, strict=True))
    logs = next((h for h in trainer.state.log_history if "loss" in h), {})
    reward_key = next((k for k in logs if k.startswith("rewards/") and k.endswith("/mean")), "reward")
    check(moved > 0, "TRL: the optimiser step changed the weights")
    ROWS.append(
        (
            "TRL GRPO step",
            f"trl {trl.__version__}: loss {logs.get('loss', float('nan')):.4g}, mean reward "
            f"{logs.get(reward_key, float('nan')):.3g}, |Δw|_1 {moved:.3g}, {dt:.2f} s (torch {torch.__version__})",
        )
    )
    return dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu", action="store_true", help="CPU lane instead of the GPU (times mean nothing)")
    ap.add_argument("--skip-trl", action="store_true")
    ap.add_argument("--out", default=os.environ.get("OUT") or None, help="output folder (default: a temp dir)")
    ap.add_argument("--wheels", default=str(ROOT / ".whl"), help="folder of carried wheels (trl and its deps)")
    a = ap.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="rl-smoke-"))
    out.mkdir(parents=True, exist_ok=True)
    import torch

    device = "cpu" if a.cpu else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("no CUDA GPU here; use --cpu", file=sys.stderr)
        return 2
    t_all = time.monotonic()
    model_dir = save_tiny_model(out / "tiny-model")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    task, files, want = candidates(a.cpu)
    cfg = cpu_lane(load_timeout=60, correctness_timeout=20, timing_timeout=60) if a.cpu else EvalConfig()
    spans: list[tuple[float, float]] = []
    with LocalPool(1, device=device, compile_workers=2) as pool:
        t0 = time.monotonic()
        got = asyncio.run(rollouts(tok, task, files, cfg, pool, out, spans))
        roll_s = time.monotonic() - t0
    for name, (r, server) in got.items():
        check_trajectory(name, r, server, want[name], tok)
        (out / f"{name}.json").write_text(
            json.dumps(
                {"reward": r.reward, "reason": r.reason, "metrics": r.metrics, "messages": r.messages},
                indent=1,
                default=str,
            )
        )
    trajs = [got["good"][0], got["wrong"][0]]
    ev = busy(spans)
    ROWS.append(("evaluations", f"{len(spans)} calls through the pool, busy {ev:.1f} s of the {roll_s:.1f} s rollout"))
    g = gradient_stage(model_dir, trajs, device)
    trl_s = None
    if a.skip_trl:
        ROWS.append(("TRL GRPO step", "skipped (--skip-trl)"))
    else:
        how = unpack_wheels(Path(a.wheels))
        trl_s = trl_stage(model_dir, trajs, g["logprobs"], device, out)
        if how and trl_s is not None:
            ROWS[-1] = (ROWS[-1][0], ROWS[-1][1] + f"; {how}")
    update = trl_s if trl_s is not None else g["update_s"][0]
    step = roll_s + update
    ROWS.append(
        (
            "step time",
            f"rollout {roll_s:.1f} s + update {update:.2f} s = {step:.1f} s; evaluation share "
            f"{100 * ev / step:.0f} % ({'TRL' if trl_s is not None else 'torch'} update)",
        )
    )
    ROWS.append(
        (
            "total",
            f"{time.monotonic() - t_all:.1f} s on {torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}"
            f"; results in {out}",
        )
    )
    width = max(len(k) for k, _ in ROWS)
    print("\n" + "\n".join(f"{k:<{width}}  {v}" for k, v in ROWS))
    print("RESULT: " + ("all checks passed" if not FAILED else f"{len(FAILED)} failed: " + "; ".join(FAILED)))
    return 1 if FAILED else 0


if __name__ == "__main__":
    raise SystemExit(main())
