"""Stored trajectories as token streams, for value pretraining.

Value pretraining trains the critic on the RFT trajectories with the actor
frozen. verl has no offline critic trainer, so its PPO trainer is run with
`trainer.critic_warmup` covering every step and an agent loop that, instead of
generating, returns a stored trajectory (rl.verl_loop.ReplayAgentLoop); this
module turns the stored messages into that trajectory's ids, mask and reward.

Contract: `replay_stream(tokens, messages, tools)` renders the system and task
messages as the prompt, every assistant message as mask-1 ids (its rendered
turn up to and including the end-of-turn token) and everything else as mask-0
context (`TemplateTokens.add_context`), and ends on a model token. Tool-call
arguments stored as JSON text are decoded into objects first, as Hugging Face
chat templates expect (`openai_to_template`).
Not guaranteed: the ids are a re-tokenisation of the stored text, not the ids
the model sampled when the trajectory was collected (those were never stored
by a chat API); for the critic's targets this is immaterial, and the actor is
frozen in this stage.
"""

from __future__ import annotations

import json
from typing import Any

from cuda_agent.rl.tokens import Stream, TemplateTokens


def openai_to_template(message: dict[str, Any]) -> dict[str, Any]:
    """A message in OpenAI wire form as chat templates want it: tool-call arguments as objects."""
    m = {k: v for k, v in message.items() if k in ("role", "content", "tool_calls", "tool_call_id", "name")}
    m["content"] = m.get("content") or ""
    calls = []
    for c in message.get("tool_calls") or []:
        fn = dict(c["function"])
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                fn["arguments"] = json.loads(args or "{}")
            except json.JSONDecodeError:
                fn["arguments"] = {"_unparsed": args}  # keep the text; a template cannot iterate a string
        calls.append({"id": c.get("id", ""), "type": "function", "function": fn})
    if calls:
        m["tool_calls"] = calls
    else:
        m.pop("tool_calls", None)
    return m


def assistant_ids(tokens: TemplateTokens, message: dict[str, Any]) -> list[int]:
    """The ids of one assistant turn after a generation prompt, through its end-of-turn token."""
    base = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    head = tokens.render(base, generation_prompt=True)
    full = tokens.render(base + [message])
    if full[: len(head)] != head:
        raise ValueError("the chat template renders an assistant turn differently from its generation prompt")
    ids = full[len(head) :]
    eot, _ = tokens.turn_end()
    return ids[: ids.index(eot) + 1] if eot in ids else ids


def replay_stream(tokens: TemplateTokens, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Stream:
    msgs = [openai_to_template(m) for m in messages]
    first = next((i for i, m in enumerate(msgs) if m["role"] == "assistant"), len(msgs))
    stream = Stream(tokens.render(msgs[:first], tools, generation_prompt=True))
    i = first
    while i < len(msgs):
        if msgs[i]["role"] == "assistant":
            stream.add(assistant_ids(tokens, msgs[i]), 1)
            i += 1
            continue
        j = i
        while j < len(msgs) and msgs[j]["role"] != "assistant":
            j += 1
        if j == len(msgs):
            break  # trailing context after the last model turn carries nothing to learn
        stream.add(tokens.context_after(stream, msgs[i:j]), 0)
        i = j
    stream.end_on_model_token()
    return stream
