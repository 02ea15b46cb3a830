"""The milestone reward of the CUDA Agent paper (Eq. 1), as a pure function.

Contract: `milestone_reward` depends only on its arguments. "Faster" means
strictly more than 5 % faster: t < 0.95 * t0. Not guaranteed: the caller
decides what counts as correct (including hack findings, which must make
`correct` False).
"""

from __future__ import annotations

import math

MARGIN = 0.05


def clearly_faster(t: float, t0: float) -> bool:
    """b(t, t0) of the paper: (t0 - t) / t0 > 0.05, i.e. t < 0.95 * t0."""
    if not (math.isfinite(t) and math.isfinite(t0)) or t <= 0 or t0 <= 0:
        return False
    return t < (1.0 - MARGIN) * t0


def milestone_reward(correct: bool, t: float, t_eager: float, t_compile: float) -> int:
    """-1 if incorrect; 3 if clearly faster than eager and torch.compile;
    2 if clearly faster than eager only; 1 otherwise."""
    if not correct:
        return -1
    return milestone_from(clearly_faster(t, t_eager), clearly_faster(t, t_compile))


def milestone_from(faster_eager: bool, faster_compile: bool) -> int:
    """The reward of a correct candidate from its milestones (the evaluator may withdraw one that its
    own clock does not confirm: `timing/clock.py`)."""
    if faster_eager and faster_compile:
        return 3
    if faster_eager:
        return 2
    return 1
