"""Turn a chain of op templates into a KernelBench task, and trace its shapes on the meta device.

Contract:
- A `Step` is an `OpSpec` plus the output width `o` the composer chose. Templates
  (`OpSpec.init`, `OpSpec.call`) are Python expressions with placeholders:
  `{x}` the running tensor, `{m}` the step's module attribute, `{p}` its learned
  operand, `{c}` the input's dim 1 (channels), `{f}` its last dim (features),
  `{o}` the chosen output width.
- `trace(steps, shape)` evaluates the chain on the meta device (no data, no
  compute) and returns the input shape of every step plus the final one, or a
  `TraceError` naming the step that failed. Results are memoised per step.
- `render(steps, shapes)` writes one self-contained task: `Model` with every
  module and parameter created in `__init__`, a sequential `forward`, a module
  level `batch_size` (the dimension the filter's re-shaping scales), and
  `get_inputs` / `get_init_inputs`.
Not guaranteed: that a traced chain runs on a real device (meta kernels can be
more permissive than real ones); the filter runs it for real.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import lru_cache

from cuda_agent.synth.records import OpSpec

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
MAX_ELEMENTS = 1 << 28  # a step whose output exceeds this (1 GiB of fp32) is not a composition we keep
INT_HIGH = 16  # index inputs are drawn from [0, INT_HIGH)


class TraceError(ValueError):
    pass


@dataclass(frozen=True)
class Step:
    spec: OpSpec
    o: int

    def fill(self, template: str, shape: tuple[int, ...], *, x: str, m: str, p: str) -> str:
        c = shape[1] if len(shape) >= 2 else shape[-1]
        return template.format(x=x, m=m, p=p, c=c, f=shape[-1], o=self.o)


def param_shape(kind: str, shape: tuple[int, ...], o: int) -> tuple[int, ...]:
    if kind == "like":
        return tuple(shape[1:]) if len(shape) > 1 else tuple(shape)
    if kind == "row":
        return (shape[-1],)
    if kind == "matrix":
        return (shape[-1], o)
    raise ValueError(f"unknown param kind {kind!r}")


def _spec_key(s: OpSpec) -> tuple:
    return (s.op, s.init, s.call, s.param, tuple(s.imports), s.in_dtype)


_SPECS: dict[tuple, OpSpec] = {}


@lru_cache(maxsize=1 << 16)
def _trace_step(key: tuple, o: int, shape: tuple[int, ...], dtype: str) -> tuple[int, ...] | str:
    with warnings.catch_warnings():
        return _trace_step_quiet(_SPECS[key], o, shape, dtype)


def _trace_step_quiet(spec: OpSpec, o: int, shape: tuple[int, ...], dtype: str) -> tuple[int, ...] | str:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    step = Step(spec, o)
    ns: dict[str, object] = {"torch": torch, "nn": nn, "F": F}
    try:
        warnings.simplefilter("ignore")  # deprecation and broadcasting notes of crawled ops, on every trace
        for line in spec.imports:
            exec(line, ns)  # noqa: S102 - import lines of crawled blocks
        with torch.device("meta"):
            if spec.init:
                ns["m"] = eval(step.fill(spec.init, shape, x="x", m="m", p="p"), ns)  # noqa: S307 - our templates
            if spec.param:
                ns["p"] = torch.empty(param_shape(spec.param, shape, o))
            ns["x"] = torch.empty(shape, dtype=torch.long if dtype == "long" else torch.float32)
            with torch.no_grad():
                out = eval(step.fill(spec.call, shape, x="x", m="m", p="p"), ns)  # noqa: S307
    except Exception as e:  # noqa: BLE001 - any failure of the op at this shape is an answer
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
    if not isinstance(out, torch.Tensor):
        return f"returns {type(out).__name__}, not a tensor"
    if not out.is_floating_point():
        return f"returns {out.dtype}, not a floating tensor"
    if out.numel() == 0:
        return "returns an empty tensor"
    if out.numel() > MAX_ELEMENTS:
        return f"output of {out.numel()} elements exceeds {MAX_ELEMENTS}"
    return tuple(out.shape)


def trace(steps: list[Step], shape: tuple[int, ...], in_dtype: str = "float") -> list[tuple[int, ...]]:
    shapes = [tuple(shape)]
    dtype = in_dtype
    for i, st in enumerate(steps):
        key = _spec_key(st.spec)
        _SPECS.setdefault(key, st.spec)
        got = _trace_step(key, st.o, shapes[-1], dtype)
        if isinstance(got, str):
            raise TraceError(f"step {i} ({st.spec.op}) at shape {list(shapes[-1])}: {got}")
        shapes.append(got)
        dtype = "float"
    return shapes


def _dims(shape: tuple[int, ...]) -> str:
    return ", ".join(["batch_size", *map(str, shape[1:])])


def render(steps: list[Step], shapes: list[tuple[int, ...]], in_dtype: str = "float", doc: str = "") -> str:
    """The task source for a traced chain (`shapes` from `trace`)."""
    imports = sorted({line for st in steps for line in st.spec.imports})
    init, fwd = [], []
    for i, (st, shape) in enumerate(zip(steps, shapes, strict=False)):
        m, p = f"self.m{i}", f"self.p{i}"
        if st.spec.init:
            init.append(f"        {m} = {st.fill(st.spec.init, shape, x='x', m=m, p=p)}")
        if st.spec.param:
            ps = param_shape(st.spec.param, shape, st.o)
            scale = 1.0 / math.sqrt(shape[-1]) if st.spec.param == "matrix" else 1.0
            init.append(f"        {p} = nn.Parameter(torch.randn({', '.join(map(str, ps))}) * {scale:.4g})")
        fwd.append(f"        x = {st.fill(st.spec.call, shape, x='x', m=m, p=p)}")
    first = shapes[0]
    draw = f"torch.randint(0, {INT_HIGH}, ({_dims(first)},))" if in_dtype == "long" else f"torch.randn({_dims(first)})"
    lines = [
        *([f'"""{doc}"""', ""] if doc else []),
        HEADER.rstrip("\n"),
        *imports,
        "",
        f"batch_size = {first[0]}",
        "",
        "",
        "class Model(nn.Module):",
        "    def __init__(self):",
        "        super().__init__()",
        *init,
        "",
        "    def forward(self, x):",
        *fwd,
        "        return x",
        "",
        "",
        "def get_inputs():",
        f"    return [{draw}]",
        "",
        "",
        "def get_init_inputs():",
        "    return []",
        "",
    ]
    return "\n".join(lines)
