"""Compare candidate outputs with reference outputs, in the trusted parent.

Contract: `compare_outputs` checks the structure (count, tensor-ness, plain
dense tensors, dtype, shape, not aliasing an input) from the child's
metadata, then the values: every element within atol + rtol * |ref| (the
paper's rule), no NaN or infinity where the reference has a finite value
(NaN never passes), and, beyond the paper's rule, every floating output's
relative L2 error ||out - ref|| / ||ref|| at most `REL_L2_MAX` (see below).
It also reports the max absolute error, the relative L2 error, the fraction
of mismatched elements and how close the worst element came to its bound
(`tol_ratio`). Pure function of its arguments.

Why the relative check (not in the paper): when every reference value is
below atol (a softmax over 16K-wide rows, the mean of a wide random row),
the elementwise rule accepts all-zeros, a constant or another input's
output. The L2 norm of the error against the L2 norm of the output does not
depend on the output's scale: zeros score exactly 1.0, the best constant
sqrt(var / E[ref^2]) (0.79 for a softmax of randn rows), another input's
output about sqrt(2) times that. Honest fp32 kernels (other summation
orders, fast-math intrinsics, TF32 off) score 1e-7 to 1e-4, bf16 ones about
1e-2, so the bound 0.1 is two orders of magnitude from both sides. It is
skipped for an output whose reference is zero or entirely subnormal
(RMS below the dtype's smallest normal number), where flush-to-zero alone
would make an honest kernel's error relative 1.0.

Complex outputs are compared as their real and imaginary parts (`torch.view_as_real`), each under
the same rule. The values are compared in slices of `CHUNK` elements, in float64: a whole 2 GiB fp32
output took about five 4 GiB float64 temporaries at once, and ran the reference out of memory on an
80 GB GPU (H100, 2026-12-06).

Not guaranteed: the metadata comes from the untrusted child; the values are
checked here on CPU copies, so they are what the child wrote to the file.
"""

from __future__ import annotations

from typing import Any

import torch

from cuda_agent.eval.judge.result import CheckRecord

REL_L2_MAX = 0.1
CHUNK = 1 << 25  # elements per slice of the float64 comparison (256 MiB per temporary)


def compare_outputs(
    label: str,
    ref: list[torch.Tensor],
    out: list[torch.Tensor],
    meta: list[dict[str, Any]],
    *,
    atol: float,
    rtol: float,
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
    tol_ratio = 0.0
    rel_worst: tuple[float, int] | None = None  # (relative L2 error, output index) of the worst output
    for i, (r, o) in enumerate(zip(ref, out, strict=True)):
        if o.dtype != r.dtype:
            return fail(f"output {i} has dtype {o.dtype}, expected {r.dtype}")
        if tuple(o.shape) != tuple(r.shape):
            return fail(f"output {i} has shape {tuple(o.shape)}, expected {tuple(r.shape)}")
        if not r.is_floating_point() and not r.is_complex():
            if not torch.equal(o, r):
                return fail(f"output {i} ({r.dtype}) differs from the reference")
            continue
        if r.is_complex():  # both parts, each under the rule (a cast to float64 would drop the imaginary one)
            r, o = torch.view_as_real(r), torch.view_as_real(o)
        acc = _Sums()
        rf, of = r.reshape(-1), o.reshape(-1)
        for a in range(0, rf.numel(), CHUNK):
            acc.add(rf[a : a + CHUNK].to(torch.float64), of[a : a + CHUNK].to(torch.float64), atol, rtol)
        if acc.ref_nonfinite:
            return fail(f"the reference output {i} contains NaN or infinity; the task is not usable as is")
        if acc.out_nonfinite:
            return fail(f"output {i} contains {acc.out_nonfinite} NaN/inf value(s) (unwritten or overflowed elements?)")
        bad_total += acc.bad
        n_total += rf.numel()
        max_abs, tol_ratio = max(max_abs, acc.max_abs), max(tol_ratio, acc.tol_ratio)
        sq_err, sq_ref = acc.sq_err, acc.sq_ref
        num += sq_err
        den += sq_ref
        if rf.numel() and (sq_ref / rf.numel()) ** 0.5 >= _smallest_normal(r.dtype):
            rel = (sq_err / sq_ref) ** 0.5
            if rel_worst is None or rel > rel_worst[0]:
                rel_worst = (rel, i)
    rel_l2 = (num**0.5) / (den**0.5) if den > 0 else (0.0 if num == 0 else float("inf"))
    frac = bad_total / n_total if n_total else 0.0
    rel_bad = rel_worst is not None and rel_worst[0] > REL_L2_MAX
    rec = CheckRecord(
        label=label,
        passed=bad_total == 0 and not rel_bad,
        max_abs_err=max_abs,
        rel_l2_err=rel_l2,
        mismatch_frac=frac,
        tol_ratio=tol_ratio,
        rel_l2_worst=rel_worst[0] if rel_worst else None,
    )
    if bad_total:
        rec.message = (
            f"{bad_total} of {n_total} elements outside atol={atol:g}, rtol={rtol:g} (max abs error {max_abs:.3g})"
        )
    elif rel_bad:
        assert rel_worst is not None
        rec.message = (
            f"output {rel_worst[1]} has relative L2 error {rel_worst[0]:.3g} > {REL_L2_MAX:g}: every element is "
            f"within atol={atol:g}, rtol={rtol:g} (the outputs are smaller than the tolerance), but the values "
            "are wrong as a whole (zeros score 1.0)"
        )
    return rec


class _Sums:
    """One output's statistics, accumulated over its float64 slices (finiteness on the float64 copies:
    `torch.isfinite` has no kernel for some dtypes, float8_e4m3fn among them)."""

    def __init__(self) -> None:
        self.bad = self.ref_nonfinite = self.out_nonfinite = 0
        self.max_abs = self.tol_ratio = self.sq_err = self.sq_ref = 0.0

    def add(self, rr: torch.Tensor, oo: torch.Tensor, atol: float, rtol: float) -> None:
        self.ref_nonfinite += int((~torch.isfinite(rr)).sum())
        self.out_nonfinite += int((~torch.isfinite(oo)).sum())
        if not rr.numel() or self.ref_nonfinite or self.out_nonfinite:
            return  # the verdict is a failure already; the figures would be NaN
        diff = (oo - rr).abs()
        bound = rr.abs().mul_(rtol).add_(atol)
        self.bad += int((diff > bound).sum())
        self.max_abs = max(self.max_abs, float(diff.max()))
        self.tol_ratio = max(self.tol_ratio, float((diff / bound).max()))
        self.sq_err += float((diff * diff).sum())
        self.sq_ref += float((rr * rr).sum())


def _smallest_normal(dtype: torch.dtype) -> float:
    return float(torch.finfo(dtype).tiny) if dtype.is_floating_point else 0.0
