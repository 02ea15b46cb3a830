"""Crawl seed operators from the installed torch (and transformers) into seeds.jsonl.

Contract:
- `torch_ops()` lists what the crawl tries: every `torch.nn` module class (not
  containers, not lazy variants), every public `torch.nn.functional` function
  and every public lower-case function of the `torch` namespace, minus names
  that change global state or do I/O (`_NOT_OPS`). Each comes with calling
  conventions to try (one input; a `dim` argument; a learned second operand of
  the input's shape or a matrix) and candidate input ranks (from the module
  name's 1d/2d/3d suffix, else 2-5). Module constructors get their required
  arguments filled by parameter name (`ARG_FILL`); a name not in the table makes
  the seed `fails` with the reason.
- `crawl(path, ...)` probes each op (`probe.probe`, first working convention
  wins) and appends a `Seed` per op to `path` as it goes, labelled seeds
  included. Resumable: ops already in the file are skipped; the op being probed
  is named in `<path>.inflight` first, so an op that crashes the process is
  recorded as `crashed` on the next run instead of crashing it again.
Not guaranteed: that every seed is a sensible kernel task (a seed that runs may
still be constant, e.g. `torch.zeros_like`: the filter's anti-hack stage drops
compositions like that); the set depends on the installed torch version.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent.synth import records
from cuda_agent.synth.probe import probe
from cuda_agent.synth.records import OpSpec, Seed

# required constructor arguments, filled by name ({c}: channels, {f}: features, {o}: output width)
ARG_FILL: dict[str, str] = {
    "in_features": "{f}",
    "in1_features": "{f}",
    "in2_features": "{f}",
    "out_features": "{o}",
    "in_channels": "{c}",
    "out_channels": "{o}",
    "kernel_size": "3",
    "num_features": "{c}",
    "num_channels": "{c}",
    "num_groups": "4",
    "normalized_shape": "{f}",
    "embed_dim": "{f}",
    "num_heads": "4",
    "d_model": "{f}",
    "nhead": "4",
    "input_size": "{f}",
    "hidden_size": "{o}",
    "dim": "1",
    "output_size": "4",
    "scale_factor": "2",
    "upscale_factor": "2",
    "downscale_factor": "2",
    "lambd": "0.5",
    "threshold": "0.5",
    "value": "0.0",
    "padding": "1",
    "num_embeddings": "16",
    "embedding_dim": "{o}",
    "size": "4",
}
_CONTAINERS = {
    "Module",
    "Sequential",
    "ModuleList",
    "ModuleDict",
    "ParameterList",
    "ParameterDict",
    "Container",
    "Identity",
}
# names of the torch namespace that are not tensor ops, or change global state, or do I/O
_NOT_OPS_PREFIX = (
    "set_",
    "get_",
    "is_",
    "use_",
    "enable_",
    "disable_",
    "are_",
    "has_",
    "can_",
    "manual_seed",
    "seed",
    "initial_seed",
    "save",
    "load",
    "compile",
    "export",
    "from_",
    "promote_",
    "result_type",
    "autocast",
    "cond",
    "vmap",
    "sym_",
    "typename",
    "unify_",
    "empty",
    "tensor",
    "as_tensor",
    "asarray",
    "frombuffer",
    "zeros",
    "ones",
    "full",
    "arange",
    "range",
    "linspace",
    "logspace",
    "eye",
    "randint",
    "randn",
    "rand",
    "randperm",
    "lobpcg",
    "pca_lowrank",
    "svd_lowrank",
    "fork",
    "wait",
    "no_grad",
    "enable_grad",
    "inference_mode",
    "print",
    "wrap",
    "chunk_",
    "split_",
)
_NOT_OPS = {
    "autograd",
    "broadcast_shapes",
    "align_tensors",
    "block_diag",
    "cartesian_prod",
    "meshgrid",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "einsum",
    "tensordot",
    "chain_matmul",
    "cdist",
    "stft",
    "istft",
    "compiled_with_cxx11_abi",
    "classproperty",
    "annotate",
    "lu_unpack",
    "norm_except_dim",
    "quantize_per_tensor",
    "quantize_per_channel",
    "dequantize",
    "check",
    "clear_autocast_cache",
    "ldexp",
}

RANKS_ANY = [2, 3, 4, 5]


@dataclass
class Target:
    id: str
    kind: str  # module | functional | tensor
    specs: list[OpSpec]
    ranks: list[int] = field(default_factory=lambda: list(RANKS_ANY))
    shape: tuple[int, ...] | None = None  # a probe shape of its own (transformers blocks), else PROBE_SHAPES
    error: str = ""  # set when no spec could be built (e.g. an argument the table cannot fill)


def _ranks_for(name: str) -> list[int]:
    for suffix, rs in (("1d", [3, 2]), ("2d", [4, 3]), ("3d", [5, 4])):
        if name.lower().endswith(suffix):
            return rs
    return list(RANKS_ANY)


def _module_target(name: str, cls: type) -> Target:
    op = f"nn.{name}"
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        params = []
    args = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not p.empty:
            continue
        if p.name not in ARG_FILL:
            return Target(op, "module", [], error=f"cannot fill required argument {p.name!r} of {op}")
        args.append(f"{p.name}={ARG_FILL[p.name]}")
    init = f"nn.{name}({', '.join(args)})"
    specs = [
        OpSpec(op, init=init, call="{m}({x})"),
        OpSpec(op, init=init, call="{m}({x}, {p})", param="like"),
        OpSpec(op, init=init, call="{m}({x}, {x})"),
        OpSpec(op, init=init, call="{m}({x}, {x}, {x})"),
    ]
    return Target(op, "module", specs, _ranks_for(name))


def _function_target(prefix: str, name: str) -> Target:
    fn = f"{prefix}.{name}"
    # matrix before like: torch.matmul should multiply by a weight, not reduce by a vector
    specs = [
        OpSpec(fn, call=fn + "({x})"),
        OpSpec(fn, call=fn + "({x}, dim=-1)"),
        OpSpec(fn, call=fn + "({x}, {p})", param="matrix"),
        OpSpec(fn, call=fn + "({x}, {p})", param="like"),
    ]
    return Target(fn, "functional" if prefix == "F" else "tensor", specs, _ranks_for(name))


def _is_op_name(name: str) -> bool:
    return not name.startswith("_") and name.islower() and name not in _NOT_OPS and not name.startswith(_NOT_OPS_PREFIX)


def torch_ops() -> Iterator[Target]:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    for name in sorted(dir(nn)):
        obj = getattr(nn, name)
        if (
            isinstance(obj, type)
            and issubclass(obj, nn.Module)
            and name not in _CONTAINERS
            and not name.startswith(("Lazy", "_"))
        ):
            yield _module_target(name, obj)
    for prefix, ns in (("F", F), ("torch", torch)):
        for name in sorted(dir(ns)):
            obj = getattr(ns, name, None)
            if _is_op_name(name) and isinstance(obj, (types.BuiltinFunctionType, types.FunctionType)):
                yield _function_target(prefix, name)


def probe_target(t: Target, source: str = "torch") -> Seed:
    if t.error:
        return Seed(t.id, OpSpec(t.id), source, t.kind, labels=["fails"], error=t.error)
    last = None
    for spec in t.specs:
        got = probe(spec, t.ranks, shape=t.shape)
        if "fails" not in got.labels:
            last = got
            break
        last = last or got
    assert last is not None
    anchor = bool(last.spec.init and ("{o}" in last.spec.init)) or last.spec.param == "matrix"
    return Seed(
        t.id,
        last.spec,
        source,
        t.kind,
        last.ranks,
        last.in_shape,
        last.out_shape,
        last.labels,
        last.error,
        last.code,
        anchor,
    )


def crawl(
    path: Path,
    targets: list[tuple[Target, str]],
    *,
    on_seed: Callable[[Seed], None] | None = None,
    limit: int | None = None,
) -> list[Seed]:
    """Probe every (target, source) not yet in `path`; append each seed; return all seeds in the file."""
    path = Path(path)
    inflight = Path(str(path) + ".inflight")
    done = {s.id for s in records.read(path, Seed)}
    if inflight.exists():
        crashed = inflight.read_text().strip()
        if crashed and crashed not in done:
            kind = next((t.kind for t, _ in targets if t.id == crashed), "tensor")
            records.append(
                path,
                Seed(
                    crashed,
                    OpSpec(crashed),
                    "torch",
                    kind,
                    labels=["crashed"],
                    error="the process died while probing this op",
                ),
            )
            done.add(crashed)
    n = 0
    for t, source in targets:
        if t.id in done:
            continue
        if limit is not None and n >= limit:
            break
        inflight.write_text(t.id)
        seed = probe_target(t, source)
        records.append(path, seed)
        done.add(t.id)
        n += 1
        if on_seed is not None:
            on_seed(seed)
    inflight.unlink(missing_ok=True)
    return records.read(path, Seed)
