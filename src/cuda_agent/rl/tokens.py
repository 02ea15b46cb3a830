"""The token stream of one trajectory, and how messages become tokens.

A trajectory is one growing token stream: the prompt (system prompt, task
message, tool schemas rendered by the model's chat template), then the response:
sampled ids exactly as the server returned them (mask 1) and everything the
environment says back (observations, nudges, chat-template framing; mask 0).

Contract:
- `Stream` keeps ids, the response mask and the sampled log-probs aligned; the
  prompt is whatever precedes the response. `end_on_model_token()` drops trailing
  mask-0 tokens, because the trainer puts the reward on the last response token
  and GAE ignores a reward that lands on a masked token.
- `Tokens` is what a rollout needs from a tokenizer: the initial prompt ids, and
  appending model ids or new context messages to a stream. `TemplateTokens`
  implements it with the Hugging Face chat template alone (no verl): the ids of
  new context messages are the difference between two renderings of a small
  synthetic conversation, so earlier turns are never re-tokenised; when the
  model's turn did not end with the template's end-of-turn token (cut at a length
  limit) that token is inserted, masked. The verl loop uses verl's own builders
  instead (rl.verl_loop).
Not guaranteed: `TemplateTokens` assumes a template that renders each message
independently of later ones (ChatML-style: Qwen, Hermes); a template that
rewrites earlier turns (e.g. dropping old reasoning) is handled by verl's
model-specific builders, not here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class Stream:
    ids: list[int]  # prompt + response
    mask: list[int] = field(default_factory=list)  # one per response token: 1 sampled, 0 context
    logprobs: list[float] | None = None  # one per response token when the server returns them

    @property
    def prompt_ids(self) -> list[int]:
        return self.ids[: len(self.ids) - len(self.mask)]

    @property
    def response_ids(self) -> list[int]:
        return self.ids[len(self.ids) - len(self.mask) :]

    def add(self, ids: list[int], mask: int, logprobs: list[float] | None = None) -> None:
        if not ids:
            return
        if logprobs is not None and len(logprobs) != len(ids):
            raise ValueError(f"{len(logprobs)} log-probs for {len(ids)} tokens")
        if logprobs is not None and self.logprobs is None:
            self.logprobs = [0.0] * len(self.mask)  # context so far carries no log-probs
        self.ids += ids
        self.mask += [mask] * len(ids)
        if self.logprobs is not None:
            self.logprobs += list(logprobs) if logprobs is not None else [0.0] * len(ids)

    def cut_response(self, n: int) -> None:
        """Keep the first n response tokens."""
        drop = len(self.mask) - n
        if drop > 0:
            del self.ids[-drop:], self.mask[-drop:]
            if self.logprobs is not None:
                del self.logprobs[-drop:]

    def end_on_model_token(self) -> None:
        n = len(self.mask)
        while n and self.mask[n - 1] == 0:
            n -= 1
        self.cut_response(n)

    def snapshot(self) -> tuple[list[int], list[int], list[float] | None]:
        # copies, not lengths: a token builder may also edit the junction (drop or insert framing)
        return list(self.ids), list(self.mask), None if self.logprobs is None else list(self.logprobs)

    def restore(self, snap: tuple[list[int], list[int], list[float] | None]) -> None:
        self.ids, self.mask, self.logprobs = list(snap[0]), list(snap[1]), None if snap[2] is None else list(snap[2])


class Tokens(Protocol):
    async def initial(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]: ...

    async def add_model(self, stream: Stream, ids: list[int], logprobs: list[float] | None) -> None: ...

    async def add_context(
        self, stream: Stream, before: list[dict[str, Any]], after: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> None: ...


def as_ids(out: Any) -> list[int]:
    """apply_chat_template's result as a flat id list (it returns a list or a BatchEncoding)."""
    if hasattr(out, "keys") and "input_ids" in out.keys():
        out = out["input_ids"]
    if hasattr(out, "tolist"):
        out = out.tolist()
    if out and isinstance(out[0], list):
        out = out[0]
    return [int(i) for i in out]


_MARK = "\u2063cuda-agent-turn-end\u2063"  # text no real turn contains, to find what follows a turn


class TemplateTokens:
    def __init__(self, tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None):
        self.tokenizer = tokenizer
        self.kwargs = dict(chat_template_kwargs or {})
        self._turn_end: tuple[int, list[int]] | None = None

    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, generation_prompt: bool = False
    ) -> list[int]:
        return as_ids(
            self.tokenizer.apply_chat_template(
                messages, tools=tools or None, tokenize=True, add_generation_prompt=generation_prompt, **self.kwargs
            )
        )

    def turn_end(self) -> tuple[int, list[int]]:
        """(end-of-turn id, the framing ids the template puts after it), read off a rendered turn."""
        if self._turn_end is None:
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": "u"}, {"role": "assistant", "content": _MARK}],
                tokenize=False,
                **self.kwargs,
            )
            tail = self.tokenizer.encode(text.split(_MARK, 1)[1], add_special_tokens=False)
            if not tail:
                raise ValueError("the chat template puts no end-of-turn token after an assistant turn")
            self._turn_end = (tail[0], tail[1:])
        return self._turn_end

    async def initial(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        return self.render(messages, tools, generation_prompt=True)

    async def add_model(self, stream: Stream, ids: list[int], logprobs: list[float] | None) -> None:
        stream.add(list(ids), 1, logprobs)

    def context_ids(self, new: list[dict[str, Any]]) -> list[int]:
        """The ids of `new` messages plus the next generation prompt, rendered after a synthetic turn."""
        tool_names = [m.get("name") or "tool" for m in new if m["role"] == "tool"]
        last = (
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": {}}}
                    for i, n in enumerate(tool_names)
                ],
            }
            if new and new[0]["role"] == "tool"
            else {"role": "assistant", "content": "a"}
        )
        prefix = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, last]
        head = self.render(prefix)
        full = self.render(prefix + new, generation_prompt=True)
        if full[: len(head)] != head:
            raise ValueError(
                "the chat template renders earlier turns differently once later ones are added; "
                "use verl's model-specific token builder"
            )
        return full[len(head) :]

    def context_after(self, stream: Stream, new: list[dict[str, Any]]) -> list[int]:
        """Framing that closes the model's turn (its end-of-turn token when it was cut), then `new`."""
        eot, framing = self.turn_end()
        boundary = ([] if stream.ids and stream.ids[-1] == eot else [eot]) + framing
        return boundary + self.context_ids(new)

    async def add_context(
        self, stream: Stream, before: list[dict[str, Any]], after: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> None:
        stream.add(self.context_after(stream, after[len(before) :]), 0)
