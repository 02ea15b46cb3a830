"""Shared pieces of the RL tests: a scripted server manager that returns token ids
like verl's LLM server client, a scripted evaluation pool, and the tiny task."""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

from cuda_agent.eval.judge.result import EvalResult, Status

TASK = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2

def get_inputs():
    return [torch.randn(1024)]

def get_init_inputs():
    return []
"""


def hermes(name: str, args: dict[str, Any] | None = None) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args or {}}) + "</tool_call>"


def timed(reward: int, speedup: float = 1.5) -> EvalResult:
    return EvalResult(
        Status.OK,
        reward,
        True,
        message="timed",
        time_ms=1.0,
        eager_ms=2.0,
        compile_ms=speedup,
        speedup_vs_eager=2.0,
        speedup_vs_compile=speedup,
    )


class ScriptedServer:
    """Answers each generate call with the next scripted text, as token ids ending in the
    end-of-turn token, with made-up log-probs; records every prompt it was sent."""

    def __init__(self, tokenizer: Any, replies: list[str], eot: int | None = None):
        self.tok, self.replies = tokenizer, list(replies)
        self.eot = eot if eot is not None else tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.prompts: list[list[int]] = []
        self.sampled: list[list[int]] = []

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> Any:
        self.prompts.append(list(prompt_ids))
        text = self.replies.pop(0) if self.replies else "nothing more to say"
        ids = (self.tok.encode(text, add_special_tokens=False) + [self.eot])[: sampling_params["max_tokens"]]
        self.sampled.append(ids)
        return SimpleNamespace(token_ids=ids, log_probs=[-0.25] * len(ids), stop_reason="completed")


class ScriptedPool:
    """An evaluation pool whose futures resolve (after `delay_s`) to scripted results per phase."""

    def __init__(self, results: dict[str, list[EvalResult]] | None = None, delay_s: float = 0.0):
        self.results = results or {}
        self.delay_s = delay_s
        self.jobs: list[Any] = []

    def submit(self, job: Any) -> Future:
        self.jobs.append(job)
        f: Future = Future()
        queue = self.results.get(job.phase) or [EvalResult(Status.OK, None, True, message=f"{job.phase} passed")]
        r = queue.pop(0) if len(queue) > 1 else queue[0]
        timer = threading.Timer(self.delay_s, f.set_result, args=(r,))
        timer.daemon = True
        timer.start()
        return f

    def close(self, cancel: bool = False) -> None:
        pass


def teach(
    model_dir: Any,
    contexts: list[list[int]],
    answer: str,
    *,
    lr: float = 1e-2,
    max_steps: int = 400,
    target_loss: float = 0.01,
    device: str = "cpu",
) -> int:
    """Train the tiny model saved in `model_dir` (in place) to answer `answer` (then its end-of-turn token)
    after each context: plain teacher forcing with Adam, stopped once the answer's mean token loss is under
    `target_loss`. Returns the steps taken. Give a windowed model (rl.tiny: `window`) the last tokens of
    each prompt only: what it learns there holds at the prompt's full length. `device` "cuda" teaches on the
    GPU (scripts/gpu_issue29.py); the saved weights are the same either way, in float32."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa").to(device)
    ids = tok.encode(answer, add_special_tokens=False) + [tok.convert_tokens_to_ids("<|im_end|>")]
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    torch.manual_seed(0)
    for step in range(max_steps):
        ctx = contexts[step % len(contexts)]
        x = torch.tensor([ctx + ids], device=device)
        labels = x.clone()
        labels[0, : len(ctx)] = -100
        loss = model(x, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if loss.item() < target_loss:
            break
    else:
        raise AssertionError(f"the tiny model did not learn the answer in {max_steps} steps (loss {loss.item():.3f})")
    model.to("cpu").save_pretrained(model_dir)
    return step + 1


# The CPU training tests' tasks and their taught answer: relu(x) * k over an (n, 257) input; the answer's C++
# kernel computes relu(x) * 2, so it is right for k = 2 (a milestone reward) and wrong for k = 3 (-1).
SCALE_TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * {k}.0


def get_inputs():
    return [torch.randn({n}, 257)]


def get_init_inputs():
    return []
"""
MODEL_NEW = (
    "import cuda_extension\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x):\n        return cuda_extension.relu2(x)\n"
)
BINDING = (
    '#include "binding_registry.h"\n\nstatic torch::Tensor relu2(torch::Tensor x) {\n'
    "  auto y = torch::empty_like(x);\n  const float* a = x.data_ptr<float>();\n  float* b = y.data_ptr<float>();\n"
    "  for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] > 0.f ? 2.f * a[i] : 0.f;\n  return y;\n}\n\n"
    'static void bind(pybind11::module_& m) { m.def("relu2", &relu2); }\nREGISTER_BINDING(relu2, bind)\n'
)


ANSWER = "\n".join(
    [
        hermes("read", {"path": "model_new.py"}),
        hermes("write", {"path": "model_new.py", "content": MODEL_NEW}),
        hermes("write", {"path": "kernels/relu2_binding.cpp", "content": BINDING}),
        hermes("verify", {}),
    ]
)


def weights_of(folder: Any) -> dict:
    """A saved Hugging Face model's tensors by name, without the `model.` prefix (the actor's and the
    critic's checkpoints name the shared backbone alike that way)."""
    from pathlib import Path

    from safetensors.torch import load_file

    return {k.removeprefix("model."): v for k, v in load_file(str(Path(folder) / "model.safetensors")).items()}


def changed(before: dict, after: dict) -> list[str]:
    """Names of the tensors two checkpoints share (same shape) whose values differ; asserts they share
    enough for the answer to mean something."""
    shared = [k for k in before if k in after and before[k].shape == after[k].shape]
    assert len(shared) > 10, sorted(after)[:5]
    return [k for k in shared if not (before[k] == after[k]).all()]


def rl_train(stage: str, cfg: Any, cache: Any, log_name: str, timeout_s: int = 1200) -> str:
    """`cuda-agent rl train --stage STAGE --config CFG` in a subprocess of this checkout (as a user runs it),
    its log kept next to the config; asserts exit 0 and returns the log."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    cfg = Path(cfg)
    # RAY_ADDRESS=local: a Ray of its own, even where someone's `ray start` cluster runs on this machine.
    # Ray's memory monitor off: on a shared CI machine it killed this run's workers for memory that other
    # jobs used (2026-12-05, twice), and verl's trainer then waited for them forever
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"),
        "CUDA_AGENT_CACHE": str(cache),
        "RAY_ADDRESS": "local",
        "RAY_memory_monitor_refresh_ms": "0",
    }
    p = subprocess.run(
        [sys.executable, "-m", "cuda_agent.cli.main", "rl", "train", "--stage", stage, "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        cwd=cfg.parent,
    )  # Hydra's outputs/
    log = p.stdout + p.stderr
    cfg.with_name(log_name).write_text(log)  # kept for a look when something fails
    assert p.returncode == 0, log[-4000:]
    return log
