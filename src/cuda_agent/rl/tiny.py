"""A tiny, randomly initialised chat model made on the spot: no downloads.

For CI and smoke runs only: verl's config loader needs `model.path` to be a local
folder with a config.json and a tokenizer, the rollout tests need a real chat
template, and the GPU smoke needs something small to take one optimiser step on.

Contract: `tiny_tokenizer()` is a byte-level BPE fitted on the environment's own
prompt text (so every string round-trips through encode/decode) with ChatML
framing: `<|im_start|>`, `<|im_end|>` (end of turn, also EOS) and `<|endoftext|>`
(padding) are special; `<tool_call>` and friends are plain added tokens, so they
survive `decode(skip_special_tokens=True)`. Its chat template renders tools in
the system turn, assistant tool calls as Hermes `<tool_call>` JSON and
consecutive tool results as one user turn of `<tool_response>` blocks, each
message independently of later ones. `save_tiny_model(dir)` writes a Qwen2-type
model with random weights plus that tokenizer; with `window` every layer attends
only to the last `window` tokens (Qwen2 sliding-window attention), so what it
learns on a short context holds at any prompt length (a test can teach it a
fixed answer in seconds instead of training on 3,000-token prompts).
Not guaranteed: anything about what the model says; untaught, it is noise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]

# Written for this project (ChatML framing, Hermes-style tool calls). Every piece of output is an
# expression with whitespace control, because Hugging Face renders with trim_blocks/lstrip_blocks.
CHAT_TEMPLATE = r"""
{%- set sys = messages[0].content if messages and messages[0].role == 'system' else '' -%}
{%- if sys or tools -%}
  {{- '<|im_start|>system\n' + sys -}}
  {%- if tools -%}
    {{- '\n\n# Tools\nCall a tool with <tool_call>{"name": NAME, "arguments": {...}}</tool_call>.\n<tools>' -}}
    {%- for t in tools -%}{{- '\n' + (t | tojson) -}}{%- endfor -%}
    {{- '\n</tools>' -}}
  {%- endif -%}
  {{- '<|im_end|>\n' -}}
{%- endif -%}
{%- for m in messages -%}
  {%- if m.role == 'system' and loop.first -%}
  {%- elif m.role == 'tool' -%}
    {%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
    {{- '\n<tool_response>\n' + m.content + '\n</tool_response>' -}}
    {%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
  {%- else -%}
    {{- '<|im_start|>' + m.role + '\n' + (m.content or '') -}}
    {%- for c in (m.tool_calls or []) -%}
      {{- '\n<tool_call>{"name": "' + c.function.name + '", "arguments": ' + (c.function.arguments | tojson) + '}</tool_call>' -}}
    {%- endfor -%}
    {{- '<|im_end|>\n' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}
""".strip()


def _corpus() -> list[str]:
    import json

    from cuda_agent.env.prompt import NUDGE_CUT_OFF, NUDGE_NO_TOOL, system_prompt
    from cuda_agent.env.toolbox import tool_schemas
    from cuda_agent.task.workspace import template_text

    code = (
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return torch.relu(x) * 2\n__global__ void k(const float* x, float* y, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = x[i];\n}\n"
    )
    return [
        system_prompt(),
        template_text("SKILL.md"),
        json.dumps(tool_schemas()),
        NUDGE_NO_TOOL,
        NUDGE_CUT_OFF,
        code,
    ] * 4


def tiny_tokenizer(vocab_size: int = 2048) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL[1:],
    )
    fast.add_tokens(ADDED)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def save_tiny_model(
    dest: str | Path, *, hidden: int = 64, layers: int = 2, seed: int = 0, window: int | None = None
) -> Path:
    """A Qwen2-type causal LM with random weights and the tiny tokenizer, saved to `dest`."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    out = Path(dest)
    tok = tiny_tokenizer()
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
        **({"use_sliding_window": True, "sliding_window": window, "max_window_layers": 0} if window else {}),
    )
    torch.manual_seed(seed)
    Qwen2ForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out
