"""Probe one op on the CPU at small shapes: does it run, with which input ranks, and is it usable?

Contract: `probe(spec, ranks)` renders the op as a one-step task (`codegen`),
executes that task in this process at the small shapes of `PROBE_SHAPES`
and returns a `Probe`: the ranks it ran with, the first working input and
output shapes, the task code, and labels for what makes a seed unusable for
composition (see `records.LABELS`):
- `fails`: no rank ran (the last error is kept);
- `integer_inputs`: it ran only on an int64 index input;
- `stochastic`: the ATen op log (`eval.child.guards.OpLog`) shows a random
  op, or two calls on the same input under different RNG states differ;
- `in_place`: the call changed its input;
- `input_independent`: a second input draw gives the same output (zeros_like);
- `non_float_output`: the output is not a floating tensor;
- `no_meta`: it runs for real but not on the meta device, so the composer
  cannot trace shapes through it.
A call is bounded by `timeout_s` (SIGALRM; main thread only).
Not guaranteed: safety against crashing ops: a segfault kills the process
(the crawl marks the op in flight first, so a rerun labels it `crashed`).
Only crawl our own templates over the installed torch here: the code runs
unsandboxed in this process.
"""

from __future__ import annotations

import signal
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from cuda_agent.synth.codegen import Step, TraceError, render, trace
from cuda_agent.synth.records import OpSpec

PROBE_SHAPES: dict[int, tuple[int, ...]] = {
    1: (64,),
    2: (4, 16),
    3: (4, 16, 12),
    4: (4, 16, 12, 12),
    5: (2, 16, 6, 6, 6),
}
PROBE_WIDTH = 16  # `o` in probes: widths stay those of the input
RANDOM_OP_WORDS = (
    "rand",
    "bernoulli",
    "dropout",
    "normal",
    "uniform",
    "multinomial",
    "exponential",
    "geometric",
    "cauchy",
    "log_normal",
    "poisson",
    "rrelu",
)


@dataclass
class Probe:
    spec: OpSpec
    ranks: list[int] = field(default_factory=list)
    in_shape: list[int] = field(default_factory=list)
    out_shape: list[int] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    error: str = ""
    code: str = ""


class _Timeout(Exception):
    pass


@contextmanager
def _deadline(seconds: float):
    def fire(*_: Any) -> None:
        raise _Timeout(f"no answer within {seconds:g} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def run_task_code(code: str, rng_seed: int = 0, timeout_s: float = 10.0) -> dict[str, Any]:
    """Execute a task's code here: build Model, draw inputs, call it twice under different RNG
    states and once under the op log. Returns a dict of what happened (raises on failure)."""
    import torch

    from cuda_agent.eval.child.guards import OpLog

    ns: dict[str, Any] = {"__name__": "synth_probe"}
    with _deadline(timeout_s):
        exec(compile(code, "<seed>", "exec"), ns)  # noqa: S102 - our own templates over the installed torch
        torch.manual_seed(rng_seed)
        model = ns["Model"](*ns["get_init_inputs"]())
        inputs = ns["get_inputs"]()
        before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        log = OpLog()
        with torch.no_grad():
            torch.manual_seed(1)
            with log:
                out = model(*inputs)
            mutated = any(
                isinstance(a, torch.Tensor) and not torch.equal(a, b) for a, b in zip(inputs, before, strict=True)
            )
            again_in = [b.clone() if isinstance(b, torch.Tensor) else b for b in before]
            torch.manual_seed(2)
            again = model(*again_in)
            torch.manual_seed(rng_seed + 7919)
            other = model(*ns["get_inputs"]())
    return {"out": out, "again": again, "other": other, "ops": dict(log.ops), "mutated": mutated}


def _differs(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape != b.shape or not torch.equal(a.nan_to_num(), b.nan_to_num())
    return False


def _attempt(spec: OpSpec, shape: tuple[int, ...], dtype: str, timeout_s: float) -> tuple[str, dict[str, Any]]:
    code = render([Step(spec, PROBE_WIDTH)], [shape], in_dtype=dtype, doc=f"Seed: {spec.op}")
    return code, run_task_code(code, timeout_s=timeout_s)


def probe(spec: OpSpec, ranks: list[int], timeout_s: float = 10.0, shape: tuple[int, ...] | None = None) -> Probe:
    """`shape`: one probe shape of the op's own (its rank is the only one tried) instead of PROBE_SHAPES."""
    shapes = {len(shape): tuple(shape)} if shape else {r: PROBE_SHAPES[r] for r in ranks}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecations of crawled ops are not our news
        return _probe(spec, shapes, timeout_s)


def _probe(spec: OpSpec, shapes: dict[int, tuple[int, ...]], timeout_s: float) -> Probe:
    import torch

    res = Probe(spec)
    found: tuple[str, dict[str, Any], int] | None = None
    for dtype in ("float", "long") if spec.in_dtype == "float" else ("long",):
        for r, shape in shapes.items():
            try:
                code, got = _attempt(replace(spec, in_dtype=dtype), shape, dtype, timeout_s)
            except Exception as e:  # noqa: BLE001 - a failing op is a finding, not a crawl error
                res.error = res.error or _one_line(e)
                continue
            out = got["out"]
            if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor) and "[0]" not in spec.call:
                # a module returning (output, state) such as an RNN: the seed takes the first element
                return _probe(replace(spec, call=f"{spec.call}[0]"), shapes, timeout_s)
            if type(out) is not torch.Tensor or out.layout != torch.strided or out.is_quantized:
                res.error = f"returns {type(out).__name__} ({getattr(out, 'layout', '')}), not a dense tensor"
                continue
            if found is None:
                found = (code, got, r)
            res.ranks.append(r)
        if found is not None:
            if dtype == "long":
                res.labels.append("integer_inputs")
            res.spec = replace(spec, in_dtype=dtype)
            break
    if found is None:
        res.labels.append("fails")
        return res
    code, got, r = found
    out = got["out"]
    res.code, res.error = code, ""
    res.in_shape, res.out_shape = list(shapes[r]), list(out.shape)
    if any(w in op for op in got["ops"] for w in RANDOM_OP_WORDS) or _differs(out, got["again"]):
        res.labels.append("stochastic")
    elif not _differs(out, got["other"]):
        res.labels.append("input_independent")
    if got["mutated"]:
        res.labels.append("in_place")
    if not out.is_floating_point():
        res.labels.append("non_float_output")
    try:
        trace([Step(res.spec, PROBE_WIDTH)], shapes[r], res.spec.in_dtype)
    except TraceError as e:
        if not res.labels:
            res.labels.append("no_meta")
            res.error = str(e)
    return res
