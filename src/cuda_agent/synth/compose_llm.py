"""The LLM composer: ask a model to stack sampled operators into one computational layer.

Contract: `LLMComposer(planner, client).compose(i)` takes attempt i's plan from
the shared `compose.Planner` (so the sampled ops are known to chain and the mix
is the planner's), sends one chat request with our prompt (`PROMPT`: the ops in
order, the starting input shape, the KernelBench format, one fenced Python
block as the answer) and validates the reply:
- exactly the code of the first ```python block (or the whole reply when it is
  bare code that parses);
- a task per the task loader (`Model` with `forward`, `get_inputs`,
  `get_init_inputs`), with a module-level `batch_size` or literal first dim
  the filter can re-shape;
- every sampled op's name (its last dotted part) appears in the code.
A reply that fails any of these is a rejection (a string with the reason), as
is an endpoint error (`llm.client.LLMError`). The client is any
OpenAI-compatible endpoint (`llm.client.ChatClient`).
Not guaranteed: that the model used the ops as asked beyond their names, or
that the code runs (the filter decides).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from cuda_agent.synth.compose import Planner, candidate_id
from cuda_agent.synth.records import Candidate
from cuda_agent.synth.reshape import batch_site
from cuda_agent.task.taskfile import Task, TaskError

PROMPT = """You write benchmark tasks for GPU kernel engineers.

Stack these PyTorch operators, in this order, into ONE computational layer: a class `Model(nn.Module)`
whose `forward` applies them one after the other to a single input tensor.
Operators: {ops}
Input: one float32 tensor of shape {shape}.

Rules:
- Create every module and learned parameter in `__init__`; `forward` only computes.
- Shapes must line up from one operator to the next; pick constructor sizes to make them fit.
- Keep the sizes as module-level integers, the batch size as `batch_size = {batch}`.
- Define `get_inputs()` returning a list with the input (`torch.randn(batch_size, ...)`) and
  `get_init_inputs()` returning the constructor arguments of Model (an empty list when there are none).
- No randomness in forward (no dropout), no in-place ops on the input, no printing.

Answer with one ```python code block holding the whole file and nothing else."""

_BLOCK = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.S)


def extract_code(reply: str) -> str | None:
    m = _BLOCK.search(reply)
    if m:
        return m.group(1).strip() + "\n"
    text = reply.strip()
    try:
        ast.parse(text)
    except SyntaxError:
        return None
    return text + "\n" if "class Model" in text else None


def validate(code: str | None, ops: list[str]) -> str | None:
    """None when the code is an acceptable candidate, else the reason it is not."""
    if code is None:
        return "malformed reply: no python code block"
    try:
        Task.from_source(code, name="llm")
    except TaskError as e:
        return f"malformed reply: {e}"
    if batch_site(code) is None:
        return "malformed reply: get_inputs has no batch-like first dimension to re-shape"
    missing = [op for op in ops if op.rsplit(".", 1)[-1] not in code]
    if missing:
        return f"reply does not use the sampled op(s) {', '.join(missing)}"
    return None


class LLMComposer:
    def __init__(self, planner: Planner, client: Any, model: str):
        self.planner, self.client = planner, client
        self.name = f"llm:{model}"

    def compose(self, attempt: int) -> Candidate | str:
        from cuda_agent.llm.client import LLMError

        plan = self.planner.plan(attempt)
        if isinstance(plan, str):
            return plan
        ops = [s.spec.op for s in plan.steps]
        shape = list(plan.shapes[0])
        prompt = PROMPT.format(ops=", ".join(ops), shape=shape, batch=shape[0])
        try:
            reply = self.client.complete([{"role": "user", "content": prompt}], [])
        except LLMError as e:
            return f"endpoint error ({e.kind}): {e}"
        code = extract_code(reply.content or "")
        why = validate(code, ops)
        if why is not None:
            return why
        assert code is not None
        return Candidate(candidate_id(attempt), code, ops, plan.data_source, [s.id for s in plan.seeds], self.name)
