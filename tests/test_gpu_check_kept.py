"""scripts/gpu_check.py's summary of issue 28's bar for the honest examples, on saved rows (no GPU): an
example keeps its reward when every run, alone and sharing the GPU, got the same one."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
gc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gc)


def _rows(**rewards: list) -> list[dict]:
    out = []
    for key, got in rewards.items():
        side, name = key.split("__")
        out += [{"name": f"{side}/{name}#{i + 1}", "reward": r} for i, r in enumerate(got)]
    return out


def test_kept_counts_an_example_whose_runs_all_agree_whatever_the_reward():
    rows = _rows(example__gelu=[3, 3, 3], shared__gelu=[3, 3, 3], example__softmax=[2, 2, 2], shared__softmax=[2, 2, 2])
    rows += [{"name": "hack/x", "reward": -1}, {"name": "inline/gelu", "reward": 1}]  # not the examples' runs
    kept, n, lines = gc.kept_rewards(rows)
    assert (kept, n) == (2, 2) and not any("NOT KEPT" in ln for ln in lines)
    assert "  softmax: alone 2,2,2 / shared 2,2,2" in lines


def test_one_run_apart_or_a_missing_reward_is_not_kept():
    rows = _rows(example__gelu=[3, 3, 3], shared__gelu=[3, 2, 3], example__diag=[None, None, None])
    kept, n, lines = gc.kept_rewards(rows)
    assert (kept, n) == (0, 2)
    assert "  gelu: alone 3,3,3 / shared 3,2,3  NOT KEPT" in lines


def test_clock_lines_show_each_sides_net_over_its_events_and_the_candidates_spread():
    """H200 figures of row_softmax_wide (2026-12-06): the candidate's clock moved between runs while the
    cached baselines' could not."""
    base = {"eager_ms": 0.175, "compile_ms": 0.157, "trusted_eager_ms": 0.1575, "trusted_compile_ms": 0.1413}
    rows = [
        {"name": "example/row_softmax_wide#1", "reported_ms": 0.142, "trusted_ms": 0.1349, **base},
        {"name": "shared/row_softmax_wide#1", "reported_ms": 0.142, "trusted_ms": 0.1491, **base},
        {"name": "hack/x", "reported_ms": 0.1, "trusted_ms": 0.5, **base},  # not an example's run
        {"name": "example/diag_matmul#1", "reported_ms": None, "trusted_ms": None},  # rejected: no figures
    ]
    (line,) = gc.clock_lines(rows)
    assert line.startswith("  row_softmax_wide: clock/events candidate 0.950 1.050 (spread 10.5%)")
    assert "; eager 0.900; compile 0.900; vs compile 1.056 1.167" in line


def test_an_example_must_earn_what_its_own_events_earn_on_this_gpu_and_no_less():
    """row_softmax_wide's events: 1.105x torch.compile on the H200 (2026-12-06) must get 3; 0.974x on an H100
    (2026-12-07) earns 2, and 2 is what the clock must give; a named lower reward stays the cap."""
    from cuda_agent.eval.judge.result import EvalResult, Status

    def run(reported, eager, compile_):
        return EvalResult(Status.OK, 2, True, reported_ms=reported, eager_ms=eager, compile_ms=compile_)

    assert gc.example_want("row_softmax_wide", run(0.142, 0.175, 0.157)) == (3, "")
    assert gc.example_want("row_softmax_wide", run(0.1883, 0.2179, 0.1832)) == (2, "its events give 2 on this GPU")
    assert gc.example_want("silu_mul_bf16", run(0.09, 0.2, 0.12)) == (2, "")  # EXAMPLE_REWARD's 2 stays the bar
    assert gc.example_want("gelu_chain", EvalResult(Status.REJECTED, -1, False)) == (3, "")  # no events: the default
