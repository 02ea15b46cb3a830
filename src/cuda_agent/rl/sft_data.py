"""The SFT dataset class for verl's `sft_trainer` (`data.custom_cls`): RFT rows
whose messages and tools are JSON text (rl.rft says why).

Contract: `JsonChatSFTDataset(parquet_files, tokenizer, config, processor=None,
max_samples=-1)` is the constructor verl's `create_sft_dataset` calls. Item i is
row i tokenised exactly as an RL rollout tokenises it (rl.replay with the chat
template): `input_ids`, `position_ids`, `loss_mask` (1 on assistant turns through
their end-of-turn token, 0 on the prompt, observations and template framing), and
with `pad_mode: right` also `attention_mask`, padded to `max_length`.
Over-long rows follow `truncation` ("error" raises, "left"/"right" cut).
Not guaranteed: multimodal rows (none exist here).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from cuda_agent.rl.replay import replay_stream
from cuda_agent.rl.tokens import TemplateTokens


def _get(config: Any, key: str, default: Any) -> Any:
    return config.get(key, default) if config is not None else default


class JsonChatSFTDataset(Dataset):
    def __init__(
        self,
        parquet_files: str | list[str],
        tokenizer: Any,
        config: Any = None,
        processor: Any = None,
        max_samples: int = -1,
    ):
        import pyarrow.parquet as pq

        files = [parquet_files] if isinstance(parquet_files, str | Path) else list(parquet_files)
        self.messages_key = _get(config, "messages_key", "messages")
        self.tools_key = _get(config, "tools_key", "tools")
        self.pad_mode = _get(config, "pad_mode", "no_padding")
        self.max_length = int(_get(config, "max_length", 131072))
        self.truncation = _get(config, "truncation", "error")
        self.tokens = TemplateTokens(tokenizer, dict(_get(config, "apply_chat_template_kwargs", {}) or {}))
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.rows: list[tuple[str, str]] = []
        for f in files:
            t = pq.read_table(str(f), columns=[self.messages_key, self.tools_key])
            self.rows += list(
                zip(t.column(self.messages_key).to_pylist(), t.column(self.tools_key).to_pylist(), strict=True)
            )
        if max_samples > 0:
            self.rows = self.rows[:max_samples]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        messages, tools = (json.loads(x) if isinstance(x, str) else x for x in self.rows[i])
        s = replay_stream(self.tokens, messages, tools or [])
        ids = s.ids
        loss = [0] * len(s.prompt_ids) + s.mask
        if len(ids) > self.max_length:
            if self.truncation == "error":
                raise ValueError(f"row {i}: {len(ids)} tokens, data.max_length is {self.max_length}")
            keep = slice(-self.max_length, None) if self.truncation == "left" else slice(0, self.max_length)
            ids, loss = ids[keep], loss[keep]
        n = len(ids)
        out = {"input_ids": torch.tensor(ids), "loss_mask": torch.tensor(loss), "position_ids": torch.arange(n)}
        if self.pad_mode == "right":
            pad = self.max_length - n
            out = {
                "input_ids": torch.tensor(ids + [self.pad_id] * pad),
                "loss_mask": torch.tensor(loss + [0] * pad),
                "position_ids": torch.cat([torch.arange(n), torch.zeros(pad, dtype=torch.long)]),
                "attention_mask": torch.tensor([1] * n + [0] * pad),
            }
        return out
