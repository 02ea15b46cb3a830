"""Negative controls for a task: trivial "solutions" that must fail its correctness check.

Contract: `run_controls(make_inputs, model, seeds, fixed_seed, atol=, rtol=)` runs
inside the trusted reference child (it only executes the task's own Model). For
each of the correctness seeds it computes the reference outputs, builds each
control's outputs and checks them with the evaluator's `compare_outputs` and
the task's tolerances. Controls:
- `zeros`: zero tensors of the reference outputs' shapes and dtypes;
- `constant`: every element set to the mean of the outputs for another seed
  (the best input-independent constant a cheater could guess);
- `pass_through`: a copy of the first input, when there is one output of the
  same shape and dtype (otherwise not applicable);
- `other_seed`: the reference outputs for a different input set;
- `precomputed`: the reference outputs for one fixed input set (what a model
  that computes its answer in `__init__` returns).
Returns `{name: {...}}` with, per control: `applicable`; `passes` (the
evaluator's whole check, the relative-L2 bound included, accepts it on every
seed: a hole in the evaluator for this task); `passes_elementwise` (the paper's
rule alone, atol + rtol * |ref| per element, accepts it on every seed: what
KernelBench-style harnesses would accept); `margin` (the largest, over seeds,
of the factor by which it misses the elementwise bound, `tol_ratio`; below 1
it passes that seed); `near_miss` (fails, but by less than `NEAR_MISS_FACTOR`);
`seeds_passed` / `seeds`; and a `message`. A task is weak when any control
passes either rule or nearly passes the elementwise one (`is_weak`).
Imports only torch and `cuda_agent.eval` modules that obey the child rule.

Why a factor of 2: a control that misses the bound by less than 2x on its worst
element fails by chance, not by construction: another draw of inputs (the
evaluator's seeds are fresh every time) lets it through, as row softmax over
16K-wide rows showed (zeros missed by 1.06-1.11x, and passed outright in some
runs). A sound task makes every control miss by orders of magnitude.

Not guaranteed: that a task no control passes is strong; these are the cheap
hacks only (a lookup over a few outputs, or low-precision tricks, are not tried).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from cuda_agent.eval.shared.compare import compare_outputs

CONTROLS = ("zeros", "constant", "pass_through", "other_seed", "precomputed")
NEAR_MISS_FACTOR = 2.0


def is_weak(control: dict[str, Any]) -> bool:
    """The control passes the evaluator, passes the paper's elementwise rule, or nearly passes it."""
    return bool(control.get("passes") or control.get("passes_elementwise") or control.get("near_miss"))


def _outputs(model: Any, inputs: list[Any]) -> list[torch.Tensor]:
    with torch.no_grad():
        out = model(*inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [t for t in outs if isinstance(t, torch.Tensor)]


def _meta(ts: list[torch.Tensor]) -> list[dict[str, Any]]:
    return [{"tensor": True, "plain": True, "device": str(t.device), "aliases_input": False} for t in ts]


def _constant_like(ref: list[torch.Tensor], calib: list[torch.Tensor]) -> list[torch.Tensor]:
    out = []
    for r, c in zip(ref, calib, strict=True):
        value = c.double().mean().item() if c.is_floating_point() and c.numel() else 0
        out.append(torch.full_like(r, value))
    return out


def run_controls(
    make_inputs: Callable[[int], list[Any]],
    model: Any,
    seeds: list[int],
    fixed_seed: int,
    *,
    atol: float,
    rtol: float,
    device: str,
) -> dict[str, dict[str, Any]]:
    fixed = _outputs(model, make_inputs(fixed_seed))
    refs, firsts = [], []
    for s in seeds:
        inputs = make_inputs(s)
        refs.append(_outputs(model, inputs))
        firsts.append(inputs[0] if inputs and isinstance(inputs[0], torch.Tensor) else None)
    report: dict[str, dict[str, Any]] = {}
    for name in CONTROLS:
        report[name] = _run_control(name, refs, firsts, fixed, atol=atol, rtol=rtol, device=device)
    return report


def _run_control(
    name: str,
    refs: list[list[torch.Tensor]],
    firsts: list[Any],
    fixed: list[torch.Tensor],
    *,
    atol: float,
    rtol: float,
    device: str,
) -> dict[str, Any]:
    """Every seed is compared (no early exit), so the margin is the worst over the seeds."""
    recs = []
    for i, ref in enumerate(refs):
        other = refs[(i + 1) % len(refs)] if len(refs) > 1 else fixed
        if name == "zeros":
            cand = [torch.zeros_like(r) for r in ref]
        elif name == "constant":
            cand = _constant_like(ref, other)
        elif name == "pass_through":
            x = firsts[i]
            if len(ref) != 1 or x is None or x.shape != ref[0].shape or x.dtype != ref[0].dtype:
                return {
                    "applicable": False,
                    "passes": False,
                    "passes_elementwise": False,
                    "near_miss": False,
                    "margin": None,
                    "seeds_passed": 0,
                    "seeds": len(refs),
                    "message": "not applicable: no single output with the first input's shape and dtype",
                }
            cand = [x.clone()]
        elif name == "other_seed":
            cand = other
        else:
            cand = fixed
        recs.append(compare_outputs(f"{name}#{i}", ref, cand, _meta(cand), atol=atol, rtol=rtol, device=device))
    passes = all(r.passed for r in recs)
    # a structural failure (e.g. an integer output that differs) has no elementwise ratio: not near
    margins = [r.tol_ratio if r.tol_ratio is not None else float("inf") for r in recs]
    margin = max(margins) if margins else None
    elementwise = all(r.mismatch_frac == 0 and r.tol_ratio is not None for r in recs)
    near = not elementwise and margin is not None and margin < NEAR_MISS_FACTOR
    worst = max(recs, key=lambda r: (r.tol_ratio or 0.0, r.rel_l2_worst or 0.0))
    rel = f"relative L2 {worst.rel_l2_worst:.3g}" if worst.rel_l2_worst is not None else "relative L2 n/a"
    if passes:
        message = f"passes every check (max abs error {worst.max_abs_err:.3g}, {rel})"
    elif elementwise:
        message = (
            f"passes the elementwise rule (worst element at {margin:.2g}x its tolerance); only the relative-L2 "
            f"check rejects it ({rel})"
        )
    elif near:
        message = (
            f"near miss: misses the elementwise bound by only {margin:.3g}x on its worst element "
            f"({_failed_detail(recs, ratio=False)}); {rel}"
        )
    else:
        message = _failed_detail(recs)
    return {
        "applicable": True,
        "passes": passes,
        "passes_elementwise": elementwise,
        "near_miss": near,
        "margin": None if margin is None or margin == float("inf") else margin,
        "seeds_passed": sum(r.passed for r in recs),
        "seeds": len(recs),
        "message": message,
    }


def _failed_detail(recs: list[Any], *, ratio: bool = True) -> str:
    failed = [r for r in recs if not r.passed]
    r = max(failed, key=lambda r: r.tol_ratio or 0.0) if failed else recs[0]
    by = f", {r.tol_ratio:.3g}x its tolerance on the worst element" if ratio and r.tol_ratio is not None else ""
    return f"fails {len(failed)} of {len(recs)} input sets{by}; worst: {r.message}"
