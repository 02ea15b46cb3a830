"""Compare candidate outputs with reference outputs, in the trusted parent.

Contract: `compare_outputs` checks the structure (count, tensor-ness, plain
dense tensors, dtype, shape, not aliasing an input) from the child's
metadata, then the values: every element within atol + rtol * |ref|, and no
NaN or infinity where the reference has a finite value (NaN never passes).
It also reports the max absolute error, the relative L2 error and the
fraction of mismatched elements. Pure function of its arguments.

Not guaranteed: the metadata comes from the untrusted child; the values are
checked here on CPU copies, so they are what the child wrote to the file.
"""

from __future__ import annotations

from typing import Any

import torch

from cuda_agent.eval.result import CheckRecord


def compare_outputs(
    label: str, ref: list[torch.Tensor], out: list[torch.Tensor], meta: list[dict[str, Any]], *, atol: float, rtol: float,
    device: str = "cuda",
) -> CheckRecord:
    def fail(msg: str, **kw: Any) -> CheckRecord:
        return CheckRecord(label=label, passed=False, message=msg, **kw)

    if len(meta) != len(ref):
        return fail(f"expected {len(ref)} output tensor(s), got {len(meta)}")
    for i, m in enumerate(meta):
        if not m.get("tensor"):
            return fail(f"output {i} is a {m.get('type', 'non-tensor')}, expected a tensor")
        if not m.get("plain", False):
            return fail(f"output {i} is a tensor subclass, expected a plain torch.Tensor")
        if m.get("aliases_input"):
            return fail(f"output {i} shares storage with an input; outputs must be freshly allocated")
        if not str(m.get("device", "")).startswith(device):
            return fail(f"output {i} is on {m.get('device')}, expected a {device} tensor")
    if len(out) != len(ref):
        return fail("outputs could not be read back")
    max_abs = 0.0
    num = den = 0.0
    bad_total = n_total = 0
    for i, (r, o) in enumerate(zip(ref, out, strict=True)):
        if o.dtype != r.dtype:
            return fail(f"output {i} has dtype {o.dtype}, expected {r.dtype}")
        if tuple(o.shape) != tuple(r.shape):
            return fail(f"output {i} has shape {tuple(o.shape)}, expected {tuple(r.shape)}")
        if not r.is_floating_point() and not r.is_complex():
            if not torch.equal(o, r):
                return fail(f"output {i} ({r.dtype}) differs from the reference")
            continue
        rr = r.to(torch.float64) if r.dtype != torch.float64 else r
        oo = o.to(torch.float64) if o.dtype != torch.float64 else o
        if not torch.isfinite(rr).all():
            return fail(f"the reference output {i} contains NaN or infinity; the task is not usable as is")
        if not torch.isfinite(oo).all():
            n_bad = int((~torch.isfinite(oo)).sum())
            return fail(f"output {i} contains {n_bad} NaN/inf value(s) (unwritten or overflowed elements?)")
        diff = (oo - rr).abs()
        bad = diff > (atol + rtol * rr.abs())
        bad_total += int(bad.sum())
        n_total += diff.numel()
        if diff.numel():
            max_abs = max(max_abs, float(diff.max()))
        num += float((diff * diff).sum())
        den += float((rr * rr).sum())
    rel_l2 = (num**0.5) / (den**0.5) if den > 0 else (0.0 if num == 0 else float("inf"))
    frac = bad_total / n_total if n_total else 0.0
    rec = CheckRecord(label=label, passed=bad_total == 0, max_abs_err=max_abs, rel_l2_err=rel_l2, mismatch_frac=frac)
    if bad_total:
        rec.message = f"{bad_total} of {n_total} elements outside atol={atol:g}, rtol={rtol:g} (max abs error {max_abs:.3g})"
    return rec
