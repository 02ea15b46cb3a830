"""The best candidate of a run: ranking and the copy kept in RUN_DIR/best/.

Contract: only correct results compete. A timed result beats an untimed one;
among timed ones the higher reward wins, then the higher speedup over
torch.compile, then over eager; a tie keeps the earlier candidate. `save`
replaces RUN_DIR/best/ as a whole (model_new.py, kernels/..., result.json =
`EvalResult.to_dict()`, turn.json), swapping directories so a crash leaves
either the old or the new copy, never a mix.
Not guaranteed: speedups measured in different evaluator calls share a GPU
but not a moment; close ones may swap order if measured again.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.eval.judge.result import EvalResult


def rank(r: EvalResult) -> tuple[int, int, float, float] | None:
    if not r.correct:
        return None
    return (
        1 if r.time_ms is not None else 0,
        r.reward if r.reward is not None else -1,
        r.speedup_vs_compile or 0.0,
        r.speedup_vs_eager or 0.0,
    )


@dataclass
class Best:
    result: EvalResult
    sources: dict[str, str]
    turn: int


def better(new: EvalResult, old: Best | None) -> bool:
    k = rank(new)
    if k is None:
        return False
    return old is None or k > (rank(old.result) or (-1, -2, 0.0, 0.0))


def save(dest: str | Path, best: Best) -> None:
    dest = Path(dest)
    tmp, old = dest.with_name(dest.name + ".new"), dest.with_name(dest.name + ".old")
    for d in (tmp, old):
        shutil.rmtree(d, ignore_errors=True)
    tmp.mkdir(parents=True)
    for rel, text in best.sources.items():
        p = tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (tmp / "kernels").mkdir(exist_ok=True)
    (tmp / "result.json").write_text(json.dumps(best.result.to_dict(), indent=1))
    (tmp / "turn.json").write_text(json.dumps({"turn": best.turn}))
    if dest.exists():
        dest.rename(old)
    tmp.rename(dest)
    shutil.rmtree(old, ignore_errors=True)


def reward_of(best: Best | None) -> int:
    """The episode's reward: the best candidate's; -1 when no correct candidate was evaluated;
    1 (the milestone reward of a correct candidate not shown to be faster) when the best was
    verified but never timed (`Environment.settle` times it)."""
    if best is None:
        return -1
    return 1 if best.result.reward is None else best.result.reward


def summary_line(best: Best | None, improved: bool) -> str:
    """The line appended to every evaluator observation, so the model knows what is kept."""
    if best is None:
        return "best so far: none (no correct candidate yet)"
    r = best.result
    sp = ", ".join(
        f"{v:.2f}x vs {k}" for k, v in (("eager", r.speedup_vs_eager), ("torch.compile", r.speedup_vs_compile)) if v
    )
    head = "new best, kept" if improved else f"best so far: turn {best.turn}"
    return f"{head} (reward {r.reward}{', ' + sp if sp else ''})"
