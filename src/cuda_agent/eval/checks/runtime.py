"""The runtime guards' verdict, in the trusted parent: the ATen op allow-list and the findings.

Contract: `runtime_findings(report, where)` turns a candidate child's guard report
(`{"ops": {name: count}, "new_threads": [...]}`, made by `child/guards.py`) into REJECT
findings `runtime-aten-op` and `runtime-thread`; `disallowed(ops)` is the allow-list decision.
`ALLOWED_OPS` is the whole allow-list: allocation (the same set the static rule admits), views and
reshapes that create no values, and same-dtype copies; a copy that changes the dtype is logged by
the child as `<op>(dtype change)` and is not allowed. The report is the candidate's process's word:
a missing or malformed report gives no finding, which is why the timed outputs are checked
independently (see `child/guards.py` for what the guards can and cannot see).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cuda_agent.eval.judge.result import Finding, Severity

ALLOCATION = frozenset(
    {
        "aten::empty",
        "aten::empty_like",
        "aten::empty_strided",
        "aten::zeros",
        "aten::zeros_like",
        "aten::new_empty",
        "aten::new_empty_strided",
        "aten::new_zeros",
        "aten::zero_",
    }
)
VIEWS = frozenset(
    {
        "aten::view",
        "aten::_unsafe_view",
        "aten::reshape",
        "aten::as_strided",
        "aten::expand",
        "aten::t",
        "aten::transpose",
        "aten::permute",
        "aten::squeeze",
        "aten::unsqueeze",
        "aten::slice",
        "aten::select",
        "aten::narrow",
        "aten::unflatten",
        "aten::split",
        "aten::split_with_sizes",
        "aten::chunk",
        "aten::unbind",
        "aten::alias",
        "aten::detach",
        "aten::view_as",
        "aten::flatten",
        "aten::expand_as",
    }
)
COPIES = frozenset({"aten::clone", "aten::copy_", "aten::_to_copy", "aten::contiguous"})
ALLOWED_OPS = ALLOCATION | VIEWS | COPIES


def disallowed(ops: Iterable[str]) -> list[str]:
    return sorted({op for op in ops if op not in ALLOWED_OPS})


def runtime_findings(report: dict[str, Any] | None, where: str) -> list[Finding]:
    """Findings from a child's guard report: {"ops": {name: count}, "new_threads": [...]}."""
    if not isinstance(report, dict):
        return []
    out: list[Finding] = []
    ops = report.get("ops") if isinstance(report.get("ops"), dict) else {}
    bad = disallowed(str(k) for k in ops)
    if bad:
        shown = ", ".join(f"{op} x{ops[op]}" for op in bad[:8])
        out.append(
            Finding(
                "runtime-aten-op",
                f"{where}: the candidate's forward executed ATen compute ops ({shown}); "
                "only allocation, views and copies are allowed, the work must be in your kernels",
                Severity.REJECT,
                "model_new.py",
            )
        )
    threads = report.get("new_threads") or []
    if threads:
        out.append(
            Finding(
                "runtime-thread",
                f"{where}: the candidate started thread(s) that outlived the call: {', '.join(map(str, threads[:5]))}",
                Severity.REJECT,
                "model_new.py",
            )
        )
    return out
