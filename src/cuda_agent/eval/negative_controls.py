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
Returns `{name: {"applicable", "passes", "message"}}`; a control passes only if
it passes on every seed. Imports only torch and `cuda_agent.eval` modules that
obey the child rule.

Not guaranteed: that a task no control passes is strong; these are the cheap
hacks only (a lookup over a few outputs, or low-precision tricks, are not tried).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from cuda_agent.eval.compare import compare_outputs

CONTROLS = ("zeros", "constant", "pass_through", "other_seed", "precomputed")


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


def run_controls(make_inputs: Callable[[int], list[Any]], model: Any, seeds: list[int], fixed_seed: int, *,
                 atol: float, rtol: float, device: str) -> dict[str, dict[str, Any]]:
    fixed = _outputs(model, make_inputs(fixed_seed))
    refs, firsts = [], []
    for s in seeds:
        inputs = make_inputs(s)
        refs.append(_outputs(model, inputs))
        firsts.append(inputs[0] if inputs and isinstance(inputs[0], torch.Tensor) else None)
    report: dict[str, dict[str, Any]] = {}
    for name in CONTROLS:
        passes, message, applicable = True, "", True
        for i, ref in enumerate(refs):
            other = refs[(i + 1) % len(refs)] if len(refs) > 1 else fixed
            if name == "zeros":
                cand = [torch.zeros_like(r) for r in ref]
            elif name == "constant":
                cand = _constant_like(ref, other)
            elif name == "pass_through":
                x = firsts[i]
                if len(ref) != 1 or x is None or x.shape != ref[0].shape or x.dtype != ref[0].dtype:
                    applicable, passes = False, False
                    message = "not applicable: no single output with the first input's shape and dtype"
                    break
                cand = [x.clone()]
            elif name == "other_seed":
                cand = other
            else:
                cand = fixed
            rec = compare_outputs(f"{name}#{i}", ref, cand, _meta(cand), atol=atol, rtol=rtol, device=device)
            if not rec.passed:
                passes, message = False, rec.message
                break
            message = f"passes (max abs error {rec.max_abs_err:.3g}, relative L2 {rec.rel_l2_err:.3g})"
        report[name] = {"applicable": applicable, "passes": passes, "message": message}
    return report
