"""EvalConfig.round_spread: what max_cv bounds, end to end in the parent. The timing requests carry
it to the children, the unstable flag and the baselines' cache key follow it, and an older cached
TimingStats (no `spread`) falls back to its CV. time_calls' own rounds: tests/test_timing_hold.py."""

from __future__ import annotations

from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.judge.result import EvalResult, Status, TimingStats
from cuda_agent.eval.timing import timed


def _stats(cv: float, spread: float | None) -> TimingStats:
    return TimingStats(median_ms=1.0, mean_ms=1.05, min_ms=0.9, cv=cv, n=1000, rounds=3, spread=spread)


def _res(t: TimingStats) -> EvalResult:
    return EvalResult(status=Status.OK, reward=None, correct=True, timing=t, eager_timing=_stats(0.01, 0.01))


def test_the_unstable_flag_reads_the_configured_spread():
    outliers = _stats(cv=0.2, spread=0.01)  # a few slow calls: the CV is high, the p10-p90 spread is not
    cv_cfg, robust = EvalConfig(device="cuda", round_spread="cv"), EvalConfig(device="cuda")
    r = _res(outliers)
    timed.flag_unstable(r, cv_cfg)
    assert r.unstable and "cv 0.200" in r.findings[-1].message
    r = _res(outliers)
    timed.flag_unstable(r, robust)
    assert not r.unstable and not r.findings
    wide = _res(_stats(cv=0.2, spread=0.15))  # spread over the whole round: unstable either way
    timed.flag_unstable(wide, robust)
    assert wide.unstable and "p10-p90 spread 0.150" in wide.findings[-1].message


def test_an_older_record_without_spread_falls_back_to_its_cv():
    old = TimingStats.from_dict({"median_ms": 1.0, "mean_ms": 1.0, "min_ms": 1.0, "cv": 0.07, "n": 50})
    assert old.spread is None and old.spread_by("p10p90") == 0.07 and old.spread_by("cv") == 0.07


def test_requests_and_the_baselines_key_carry_the_choice():
    robust, classic = EvalConfig(), EvalConfig(round_spread="cv")
    req = timed.time_request(robust, [1, 2], None)
    assert req.spread == "p10p90" and timed.time_request(classic, [1, 2], None).spread == "cv"
    res = EvalResult(status=Status.OK, reward=None, correct=False, task_hash="t", gpu="g", torch="2", precision="fp32")
    # baselines timed under one criterion are not served to the other
    assert timed.baseline_key(robust, res, req) != timed.baseline_key(classic, res, req)
    # the CV rule keeps the key it had before p10p90 became the default (its cached baselines still serve)
    assert timed.baseline_key(classic, res, req).endswith("/fresh")
    assert timed.baseline_key(robust, res, req).endswith("/fresh/p10p90")


def test_the_result_text_leads_with_the_spread_that_decides():
    """One outlier call in a thousand puts the CV in the hundreds of percent on a timing whose median
    it did not move: the agent and the user see the p10-p90 spread first, and the CV beside it."""
    from cuda_agent.eval.judge.render import result_text

    r = EvalResult(
        status=Status.OK,
        reward=3,
        correct=True,
        time_ms=0.021,
        eager_ms=0.05,
        compile_ms=0.04,
        timing=_stats(cv=6.0, spread=0.012),
    )
    text = result_text(r)
    assert "(spread 1.2%, cv 600.0%, n=1000)" in text
    r.timing = TimingStats.from_dict({"median_ms": 1.0, "mean_ms": 1.0, "min_ms": 1.0, "cv": 0.07, "n": 50})
    assert "(cv 7.0%, n=50)" in result_text(r)  # an older record: no spread to show
