"""The paper's metrics: rates over all tasks, plain "faster", geomeans over correct
tasks, task-count weighting of levels, best of trajectory, and the edge cases."""

from __future__ import annotations

import math

import pytest

from cuda_agent.bench.metrics import OVERALL, Outcome, best_of_trajectory, geomean, group_metrics, overall, summarize


def ok(tid: str, group: str, se: float | None, sc: float | None, reward: int = 1) -> Outcome:
    return Outcome(tid, group, True, se, sc, reward)


def bad(tid: str, group: str) -> Outcome:
    return Outcome(tid, group, False, None, None, -1)


def test_rates_are_over_all_tasks_and_faster_is_strict():
    rows = [ok("a", "level1", 2.0, 1.0), ok("b", "level1", 1.0, 0.5), ok("c", "level1", 8.0, 4.0), bad("d", "level1")]
    g = group_metrics("level1", rows)
    assert (g.n_tasks, g.n_correct) == (4, 3)
    assert g.pass_rate == 0.75
    assert g.faster_than_eager == 0.5  # 2.0 and 8.0; exactly 1.0 is not faster
    assert g.faster_than_compile == 0.25  # equal time (1.0) is not faster
    assert g.geomean_vs_eager == pytest.approx((2.0 * 1.0 * 8.0) ** (1 / 3))  # failed task excluded
    assert g.geomean_vs_compile == pytest.approx((1.0 * 0.5 * 4.0) ** (1 / 3))


def test_faster_needs_no_five_percent_margin_and_failed_fast_task_does_not_count():
    rows = [ok("a", "g", 1.01, 1.001), Outcome("b", "g", False, 50.0, 50.0, -1)]
    g = group_metrics("g", rows)
    assert g.faster_than_eager == 0.5 and g.faster_than_compile == 0.5
    assert g.geomean_vs_eager == pytest.approx(1.01)


def test_no_correct_tasks_and_empty_group():
    g = group_metrics("level3", [bad("a", "level3"), bad("b", "level3")])
    assert g.pass_rate == 0.0 and g.faster_than_compile == 0.0
    assert g.geomean_vs_eager is None and g.geomean_vs_compile is None
    e = group_metrics("level2", [])
    assert e.n_tasks == 0 and e.pass_rate is None and e.geomean_vs_eager is None
    o = overall([g, e])
    assert o.n_tasks == 2 and o.pass_rate == 0.0 and o.geomean_vs_compile is None
    assert overall([]).pass_rate is None


def test_overall_weights_levels_by_task_count_and_reproduces_the_paper():
    # per-level figures of the paper (CUDA Agent), levels of 100/100/50 tasks
    def level(name, n, n_ok, ge, gc):
        return [ok(f"{name}-{i}", name, ge, gc) for i in range(n_ok)] + [
            bad(f"{name}-x{i}", name) for i in range(n - n_ok)
        ]

    rows = summarize(
        level("level1", 100, 100, 2.48, 1.87)
        + level("level2", 100, 100, 3.27, 2.80)
        + level("level3", 50, 47, 1.80, 1.52)
    )
    assert [r.group for r in rows] == ["level1", "level2", "level3", OVERALL]
    o = rows[-1]
    assert o.n_tasks == 250 and o.pass_rate == pytest.approx(0.988)
    assert round(o.geomean_vs_eager, 2) == 2.60 and round(o.geomean_vs_compile, 2) == 2.11
    w = (100 * math.log(1.87) + 100 * math.log(2.80) + 50 * math.log(1.52)) / 250
    assert o.geomean_vs_compile == pytest.approx(math.exp(w))


def test_summarize_keeps_empty_groups_and_sorts_levels_numerically():
    rows = summarize([ok("a", "level10", 2, 2), ok("b", "level2", 2, 2)], groups=["level1"])
    assert [r.group for r in rows] == ["level1", "level2", "level10", OVERALL]
    assert rows[0].n_tasks == 0 and rows[-1].n_tasks == 2 and rows[-1].geomean_vs_eager == pytest.approx(2.0)


def test_correct_but_untimed_counts_for_pass_only():
    g = group_metrics("g", [Outcome("a", "g", True), ok("b", "g", 3.0, 3.0)])
    assert g.pass_rate == 1.0 and g.faster_than_eager == 0.5 and g.geomean_vs_eager == pytest.approx(3.0)


def test_best_of_trajectory_prefers_correct_then_timed_then_reward_then_speed():
    traj = [
        Outcome("t", "g", False, None, None, -1),
        Outcome("t", "g", True, None, None, None),  # verified, not timed
        ok("t", "g", 3.0, 0.9, reward=2),
        ok("t", "g", 2.0, 1.5, reward=3),
        ok("t", "g", 4.0, 1.2, reward=3),
        ok("t", "g", 2.0, 1.5, reward=3),  # tie: the earlier one stays
        bad("u", "g"),
        bad("u", "g"),
    ]
    best = best_of_trajectory(traj)
    assert best["t"] is traj[3]
    assert not best["u"].correct
    assert best_of_trajectory(traj[:2])["t"] is traj[1]


def test_geomean():
    assert geomean([]) is None
    assert geomean([4.0, 1.0]) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])


def test_fast_p_curve_and_reward_counts():
    from cuda_agent.bench.metrics import fast_p, fast_p_points, reward_counts

    rows = [
        Outcome("a", "g", True, 3.0, 2.0, 3),
        Outcome("b", "g", True, 0.5, 0.5, 1),
        Outcome("c", "g", False, reward=-1),
        Outcome("d", "g", True, None, None, None),
        Outcome("e", "g", True, 2.0, 2.0, 2),
    ]
    assert (
        fast_p(rows, 0.0) == 3 / 5 and fast_p(rows, 1.0) == 2 / 5 and fast_p(rows, 2.0) == 0.0
    )  # strictly faster than p
    assert fast_p(rows, 1.0, "speedup_vs_eager") == 2 / 5 and fast_p([], 1.0) is None
    assert fast_p_points(rows) == [(0.0, 3 / 5), (0.5, 2 / 5), (2.0, 0.0)]  # the two 2.0x drop together
    assert reward_counts(rows) == {"3": 1, "2": 1, "1": 1, "-1": 1, "none": 1}
