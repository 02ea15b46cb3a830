"""Seed blocks from the optional `transformers` package: activations, norms, MLPs, attention.

Contract: `hf_targets()` returns crawl `Target`s (kind "block", probed at one
(batch, seq, hidden) shape) or an empty list when transformers is not
installed. Activations come from `transformers.activations.ACT2FN`; norms,
MLPs and attention blocks from the modeling modules of the families in
`FAMILIES`, each built from a small config of that family. Attention is
called with its hidden states alone, or with rotary position embeddings made
by the family's own rotary module when it has one. The seeds' code imports
transformers, so a task made from one needs transformers where it is
evaluated; blocks are used standalone (never composed), as in the paper.
Not guaranteed: every family in the list exists in every transformers
version; a missing class is skipped, a block that does not run is labelled.
"""

from __future__ import annotations

import importlib
import inspect

from cuda_agent.synth.crawl import Target
from cuda_agent.synth.records import OpSpec

BLOCK_SHAPE = (2, 8, 64)  # (batch, sequence, hidden) of the probe

# family module -> (class prefix, config keyword template). {f}: hidden, {o}: intermediate width.
_LLAMA_LIKE = "hidden_size={f}, intermediate_size={o}, num_attention_heads=4, num_key_value_heads=4"
FAMILIES: dict[str, tuple[str, str]] = {
    "llama": ("Llama", _LLAMA_LIKE),
    "mistral": ("Mistral", _LLAMA_LIKE),
    "qwen2": ("Qwen2", _LLAMA_LIKE),
    "qwen3": ("Qwen3", _LLAMA_LIKE + ", head_dim={f} // 4"),
    "gemma": ("Gemma", _LLAMA_LIKE + ", head_dim={f} // 4"),
    "gemma2": ("Gemma2", _LLAMA_LIKE + ", head_dim={f} // 4"),
    "phi3": ("Phi3", _LLAMA_LIKE),
    "olmo": ("Olmo", _LLAMA_LIKE),
    "starcoder2": ("Starcoder2", _LLAMA_LIKE),
    "gpt_neox": ("GPTNeoX", "hidden_size={f}, intermediate_size={o}, num_attention_heads=4"),
    "phi": ("Phi", "hidden_size={f}, intermediate_size={o}, num_attention_heads=4"),
    # dropout off: a block in training mode would otherwise be stochastic
    "gpt2": ("GPT2", "n_embd={f}, n_inner={o}, n_head=4, resid_pdrop=0.0, attn_pdrop=0.0, embd_pdrop=0.0"),
    "bert": (
        "Bert",
        "hidden_size={f}, intermediate_size={o}, num_attention_heads=4, hidden_dropout_prob=0.0, "
        "attention_probs_dropout_prob=0.0",
    ),
}
_KINDS = ("RMSNorm", "LayerNorm", "MLP", "Attention", "SelfAttention")
_ARG_FILL = {"hidden_size": "{f}", "dim": "{f}", "intermediate_size": "{o}", "layer_idx": "0", "eps": "1e-6"}


def _available() -> bool:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def _activation_targets() -> list[Target]:
    from transformers.activations import ACT2CLS

    out = []
    for key in sorted(ACT2CLS):
        imp = ["from transformers.activations import ACT2FN"]
        spec = OpSpec(f"transformers.act.{key}", init=f'ACT2FN["{key}"]', imports=imp)
        out.append(Target(spec.op, "block", [spec], [3], BLOCK_SHAPE))
    return out


def _block_target(family: str, prefix: str, cfg_kw: str, kind: str, cls: type) -> Target:
    mod = f"transformers.models.{family}.modeling_{family}"
    imports = [f"from {mod} import {cls.__name__}", f"from transformers import {prefix}Config"]
    config = f"{prefix}Config({cfg_kw})"
    args = []
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        # a wrapped constructor hides its signature: blocks of these families take (config, layer_idx)
        params = [inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY)]
        if kind.endswith("Attention"):
            params.append(inspect.Parameter("layer_idx", inspect.Parameter.KEYWORD_ONLY))
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not p.empty:
            continue
        fill = config if p.name == "config" else _ARG_FILL.get(p.name)
        if fill is None:
            return Target(f"transformers.{cls.__name__}", "block", [], error=f"cannot fill argument {p.name!r}")
        args.append(f"{p.name}={fill}")
    init = f"{cls.__name__}({', '.join(args)})"
    op = f"transformers.{cls.__name__}"
    specs = [OpSpec(op, init=init, call="{m}({x})", imports=imports)]
    rope = getattr(importlib.import_module(mod), f"{prefix}RotaryEmbedding", None)
    if kind.endswith("Attention") and rope is not None:
        both = f"nn.ModuleDict(dict(attn={init}, rope={rope.__name__}(config={config})))"
        pos = "torch.arange({x}.shape[1], device={x}.device).unsqueeze(0)"
        call = '{m}["attn"]({x}, position_embeddings={m}["rope"]({x}, ' + pos + "), attention_mask=None)"
        specs.insert(0, OpSpec(op, init=both, call=call, imports=[*imports, f"from {mod} import {rope.__name__}"]))
    return Target(op, "block", specs, [3], BLOCK_SHAPE)


def hf_targets() -> list[Target]:
    if not _available():
        return []
    out = _activation_targets()
    for family, (prefix, cfg_kw) in FAMILIES.items():
        try:
            mod = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
        except ImportError:
            continue
        for kind in _KINDS:
            cls = getattr(mod, prefix + kind, None)
            if isinstance(cls, type):
                out.append(_block_target(family, prefix, cfg_kw, kind, cls))
    return out
