"""Shared pieces of the RL tests: a scripted server manager that returns token ids
like verl's LLM server client, a scripted evaluation pool, and the tiny task."""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

from cuda_agent.eval.result import EvalResult, Status

TASK = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2

def get_inputs():
    return [torch.randn(1024)]

def get_init_inputs():
    return []
'''


def hermes(name: str, args: dict[str, Any] | None = None) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args or {}}) + "</tool_call>"


def timed(reward: int, speedup: float = 1.5) -> EvalResult:
    return EvalResult(Status.OK, reward, True, message="timed", time_ms=1.0, eager_ms=2.0, compile_ms=speedup,
                      speedup_vs_eager=2.0, speedup_vs_compile=speedup)


class ScriptedServer:
    """Answers each generate call with the next scripted text, as token ids ending in the
    end-of-turn token, with made-up log-probs; records every prompt it was sent."""

    def __init__(self, tokenizer: Any, replies: list[str], eot: int | None = None):
        self.tok, self.replies = tokenizer, list(replies)
        self.eot = eot if eot is not None else tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.prompts: list[list[int]] = []
        self.sampled: list[list[int]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any) -> Any:
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


def teach(model_dir: Any, contexts: list[list[int]], answer: str, *, lr: float = 1e-2, max_steps: int = 400,
          target_loss: float = 0.01) -> int:
    """Train the tiny model saved in `model_dir` (in place) to answer `answer` (then its end-of-turn token)
    after each context: plain teacher forcing with Adam, stopped once the answer's mean token loss is under
    `target_loss`. Returns the steps taken. Give a windowed model (rl.tiny: `window`) the last tokens of
    each prompt only: what it learns there holds at the prompt's full length."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa")
    ids = tok.encode(answer, add_special_tokens=False) + [tok.convert_tokens_to_ids("<|im_end|>")]
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    torch.manual_seed(0)
    for step in range(max_steps):
        ctx = contexts[step % len(contexts)]
        x = torch.tensor([ctx + ids])
        labels = x.clone()
        labels[0, :len(ctx)] = -100
        loss = model(x, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if loss.item() < target_loss:
            break
    else:
        raise AssertionError(f"the tiny model did not learn the answer in {max_steps} steps (loss {loss.item():.3f})")
    model.save_pretrained(model_dir)
    return step + 1
