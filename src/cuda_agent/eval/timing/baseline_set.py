"""The set of baselines a candidate is compared with, and its speedup against the best of them (issue 32).

Why: torch.compile's default mode is a weak bar for small ops (launch overhead, no autotuning);
PyTorch's own benchmark suites use `max-autotune-no-cudagraphs`, and kernel projects report speedups
against the best of eager and torch.compile. A speedup that only beats the default mode is worth less
than one against the strongest baseline a user could get without writing a kernel.

Contract:
- `NAMES`: "eager" (eager PyTorch), "compile" (torch.compile, default mode: the paper's and the
  reward's), "max-autotune" (torch.compile mode="max-autotune-no-cudagraphs"), "cuda-graph" (eager
  replayed from a CUDA graph). `parse("eager,compile,max-autotune")` checks a user's list (eager and
  compile are always in it: the reward needs them) and raises ValueError with the accepted names.
- The child's timing mode of each extra baseline is `CHILD_MODE[name]` (`child.burst.compiled_or_model`).
- `times(result)`: every baseline time the result carries (eager_ms, compile_ms, then
  `EvalResult.baselines_ms`); `speedups(result)`: baseline time / candidate time per name;
  `best(result)`: the fastest baseline (name, ms); `speedup_vs_best(result)`. Pure functions of
  the result (a dict from JSON or an EvalResult).
- The reward stays the paper's (eager and torch.compile default, on the trusted clock): the extra
  baselines are reported beside it, never in it (a reward against the best needs them on the
  evaluator's clock first).

Not guaranteed: the extra baselines are timed by the events (the same `time_calls` method and input
sets as eager and torch.compile), not by the evaluator's trusted clock; "cuda-graph" copies each call's
fresh inputs into the graph's static buffers inside the timed call (a user replaying a graph must do
the same unless their inputs already live there), which costs a memory-bound op up to its own traffic.
"""

from __future__ import annotations

from typing import Any

NAMES = {
    "eager": "eager PyTorch",
    "compile": "torch.compile (default mode; the paper's and the reward's)",
    "max-autotune": "torch.compile(mode='max-autotune-no-cudagraphs')",
    "cuda-graph": "eager replayed from a CUDA graph",
}
DEFAULT = ("eager", "compile")
ALL = tuple(NAMES)
CHILD_MODE = {"max-autotune": "max-autotune", "cuda-graph": "cuda-graph"}
SHORT = {"eager": "eager", "compile": "torch.compile", "max-autotune": "max-autotune", "cuda-graph": "CUDA graph"}


def parse(text: str | None) -> tuple[str, ...]:
    if not text:
        return DEFAULT
    words = [w.strip() for w in text.replace(" ", ",").split(",") if w.strip()]
    if words == ["all"]:
        return ALL
    bad = [w for w in words if w not in NAMES]
    if bad:
        raise ValueError(f"unknown baseline(s) {', '.join(bad)}; choose from {', '.join(NAMES)} (or all)")
    return tuple(dict.fromkeys([*DEFAULT, *words]))  # eager and compile always: the reward needs them


def extras(names: tuple[str, ...] | list[str]) -> list[str]:
    return [n for n in names if n in CHILD_MODE]


def _get(r: Any, key: str) -> Any:
    return r.get(key) if isinstance(r, dict) else getattr(r, key, None)


def times(r: Any) -> dict[str, float]:
    out = {}
    for name, key in (("eager", "eager_ms"), ("compile", "compile_ms")):
        v = _get(r, key)
        if isinstance(v, int | float) and v > 0:
            out[name] = float(v)
    for name, v in (_get(r, "baselines_ms") or {}).items():
        if name in NAMES and isinstance(v, int | float) and v > 0:
            out.setdefault(name, float(v))
    return out


def speedups(r: Any) -> dict[str, float]:
    t = _get(r, "time_ms")
    if not (isinstance(t, int | float) and t > 0) or not _get(r, "correct"):
        return {}
    return {name: base / t for name, base in times(r).items()}


def best(r: Any) -> tuple[str, float] | None:
    got = times(r)
    return min(got.items(), key=lambda kv: kv[1]) if got else None


def speedup_vs_best(r: Any) -> float | None:
    s = speedups(r)
    b = best(r)
    return s.get(b[0]) if b and s else None


def lines(r: Any) -> list[str]:
    """The render's lines for the extra baselines and the best (empty with the default set)."""
    extra = {k: v for k, v in times(r).items() if k not in DEFAULT}
    if not extra:
        return []
    s = speedups(r)
    out = [
        f"{SHORT[k] + ':':<15}{v:.4g} ms    speedup " + (f"{s[k]:.3g}x" if k in s else "-") for k, v in extra.items()
    ]
    if (b := best(r)) is not None:
        vs = speedup_vs_best(r)
        out.append(
            f"vs best baseline ({SHORT[b[0]]}, {b[1]:.4g} ms): "
            + (f"{vs:.3g}x" if vs is not None else "-")
            + "  (event times; the reward stays the paper's: eager and torch.compile)"
        )
    return out
