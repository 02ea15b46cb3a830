"""Argument types for the CLI's numeric options: bad values are refused by argparse itself.

Contract: each function takes the option's text and returns the value, or raises
`argparse.ArgumentTypeError` with a sentence that names the allowed range; argparse then prints
the verb's usage and "argument --x: <sentence>" and exits 2. So `--bash-timeout -1`,
`--temperature -3` or `--compile-workers 0` never reach the code that would misuse them (or
fail with a message naming an internal parameter).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _number(text: str, kind: type) -> float:
    try:
        v = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected {'an integer' if kind is int else 'a number'}, got {text!r}"
        ) from None
    if isinstance(v, float) and not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return v


def at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        v = int(_number(text, int))
        if v < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {v}")
        return v

    parse.__name__ = f"integer >= {low}"  # argparse names the type in some messages
    return parse


positive_int = at_least(1)


def positive_float(text: str) -> float:
    v = float(_number(text, float))
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return v


def temperature(text: str) -> float:
    """The OpenAI API's range: 0 to 2."""
    v = float(_number(text, float))
    if not 0 <= v <= 2:
        raise argparse.ArgumentTypeError(f"must be between 0 and 2, got {text}")
    return v


def port_number(text: str) -> int:
    v = int(_number(text, int))
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number (0-65535; 0: any free port), got {v}")
    return v


def baseline_names(text: str) -> tuple[str, ...]:
    """`--baselines eager,compile,max-autotune,cuda-graph` (or `all`): eval.timing.baseline_set's names."""
    from cuda_agent.eval.timing.baseline_set import parse

    try:
        return parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def clock_names(text: str) -> dict[str, bool | str]:
    """`--clock dense,torch` (or flush, fresh, cold, rank1, hash, fast): EvalConfig's clock fields
    (eval.config.clock_opt_ins); a name it does not know is refused with the names it does."""
    from cuda_agent.eval.config import clock_opt_ins

    try:
        return clock_opt_ins(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


CLOCK_HELP = (
    "the evaluator's clock, comma-separated: its burst loop's digest (dense, rank1, hash) and draws (torch, "
    "fast), default the lighter loop (hash, fast) on a GPU that can build it; 'dense,torch' is the loop "
    "before it (for a machine where the lighter one cannot run); opt-ins flush, fresh, cold (docs/internals.md)"
)


BASELINES_HELP = (
    "baselines to report, comma-separated: eager, compile (always: the paper's and the reward's), "
    "max-autotune (torch.compile mode=max-autotune-no-cudagraphs), cuda-graph (eager replayed from a CUDA "
    "graph), or all; each speedup and the one vs the best are reported, the reward stays the paper's"
)
