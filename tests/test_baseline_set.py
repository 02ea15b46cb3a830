"""The strongest baselines (issue 32, item 2) on the CPU: the set's names, each speedup and the one
against the best, the evaluator's text, the CLI's refusal of a bad name, and a bench report's
fast_p and geomean against the best baseline. The timing of max-autotune and of the CUDA graph
replay (child_burst.compiled_or_model) needs a GPU: scripts/gpu_issue32.sh does not time them yet,
the next GPU session runs `cuda-agent eval DIR --baselines all` (docs/profile.md)."""

from __future__ import annotations

import pytest

from cuda_agent.bench.report import build_report
from cuda_agent.bench.report_text import markdown
from cuda_agent.bench.store import ResultStore
from cuda_agent.eval.judge.render import result_text
from cuda_agent.eval.judge.result import EvalResult, Status
from cuda_agent.eval.timing import baseline_set as bs


def _res(t: float, te: float, tc: float, extra: dict[str, float] | None = None, correct: bool = True) -> EvalResult:
    return EvalResult(
        Status.OK if correct else Status.INCORRECT,
        2 if correct else -1,
        correct,
        time_ms=t,
        eager_ms=te,
        compile_ms=tc,
        speedup_vs_eager=te / t,
        speedup_vs_compile=tc / t,
        baselines_ms=extra or {},
        task_hash="h",
        gpu="NVIDIA H200",
        torch="2.x",
    )


def test_parse_keeps_the_papers_two_and_refuses_unknown_names():
    assert bs.parse(None) == ("eager", "compile")
    assert bs.parse("max-autotune") == ("eager", "compile", "max-autotune")
    assert bs.parse("cuda-graph, eager") == ("eager", "compile", "cuda-graph")
    assert bs.parse("all") == ("eager", "compile", "max-autotune", "cuda-graph")
    with pytest.raises(ValueError, match="unknown baseline"):
        bs.parse("eager,max_autotune")
    assert bs.extras(bs.parse("all")) == ["max-autotune", "cuda-graph"]


def test_speedups_and_vs_best():
    r = _res(1.0, 4.0, 2.0, {"max-autotune": 1.25, "cuda-graph": 3.0})
    assert bs.speedups(r) == {"eager": 4.0, "compile": 2.0, "max-autotune": 1.25, "cuda-graph": 3.0}
    assert bs.best(r) == ("max-autotune", 1.25)
    assert bs.speedup_vs_best(r) == pytest.approx(1.25)
    d = r.to_dict()  # the same from a stored result
    assert bs.speedup_vs_best(d) == pytest.approx(1.25)
    assert bs.speedup_vs_best(EvalResult.from_dict(d)) == pytest.approx(1.25)
    assert bs.speedups(_res(1.0, 4.0, 2.0, correct=False)) == {}  # an incorrect candidate has no speedup
    assert bs.speedup_vs_best(_res(1.0, 4.0, 2.0)) == pytest.approx(2.0)  # default set: the better of the two
    assert bs.times({"eager_ms": 1.0, "baselines_ms": {"bogus": 0.1, "cuda-graph": -1}}) == {"eager": 1.0}


def test_result_text_shows_each_extra_and_the_best_only_when_measured():
    text = result_text(_res(1.0, 4.0, 2.0, {"max-autotune": 1.25}))
    assert "max-autotune:" in text and "speedup 1.25x" in text
    assert "vs best baseline (max-autotune, 1.25 ms): 1.25x" in text and "the reward stays the paper's" in text
    plain = result_text(_res(1.0, 4.0, 2.0))
    assert "vs best" not in plain and "max-autotune" not in plain


def test_cli_refuses_an_unknown_baseline(capsys):
    from cuda_agent.cli.main import main

    for verb in (["eval", "ws"], ["bench", "examples", "--solutions", "s", "-o", "r"], ["baselines", "examples"]):
        with pytest.raises(SystemExit) as e:
            main([*verb, "--baselines", "eager,fastest"])
        assert e.value.code == 2
        assert "unknown baseline(s) fastest" in capsys.readouterr().err


def test_bench_report_has_fast_p_and_geomean_against_the_best(tmp_path):
    run = tmp_path / "run"
    store = ResultStore(run)
    store.set_meta(planned={"a": "level1", "b": "level1", "c": "level1"})
    rows = {
        "a": _res(1.0, 4.0, 2.0, {"max-autotune": 0.5}),  # 2x vs compile, 0.5x vs the best
        "b": _res(1.0, 3.0, 3.0, {"max-autotune": 1.5, "cuda-graph": 2.0}),  # 1.5x vs the best
        "c": _res(1.0, 2.0, 1.0, correct=False),
    }
    for tid, r in rows.items():
        store.record(tid, "level1", r, phase="profile", source="solution")
        store.finish(tid, "level1")
    rep = build_report(run)
    assert rep.has_best
    assert {o.task_id: o.speedup_vs_best for o in rep.scored_outcomes}["b"] == pytest.approx(1.5)
    assert rep.best_geomeans()["overall"] == pytest.approx((0.5 * 1.5) ** 0.5)
    md = markdown(rep)
    assert "## vs the best baseline" in md and "| overall | 0.87x |" in md
    # fast_1 against the best: only b (1.5x) of three tasks; against torch.compile a and b (2x, 1x: only a > 1)
    assert rep.fast_p_table("speedup_vs_best")["overall"][1] == pytest.approx(1 / 3)


def test_bench_report_without_extra_baselines_is_unchanged(tmp_path):
    run = tmp_path / "run"
    store = ResultStore(run)
    store.set_meta(planned={"a": "level1"})
    store.record("a", "level1", _res(1.0, 4.0, 2.0), phase="profile", source="solution")
    store.finish("a", "level1")
    rep = build_report(run)
    assert not rep.has_best and "vs the best baseline" not in markdown(rep)


@pytest.mark.slow
def test_cpu_lane_times_an_extra_baseline_and_caches_it(tmp_path, cache_env):
    """The plumbing end to end on the CPU lane: Time.variant reaches the reference child, whose CUDA-graph
    replay falls back to eager there; the figure is reported, cached per baseline, and the reward is the
    paper's. (The CUDA graph itself and max-autotune need a GPU.)"""
    from test_pipeline_cpu import cpu_cfg, make_ws

    from cuda_agent.eval.api import evaluate_workspace

    ws = make_ws(tmp_path)
    r = evaluate_workspace(ws, config=cpu_cfg(baselines=("eager", "compile", "cuda-graph")))
    assert r.status is Status.OK, r.message + r.log
    assert r.baselines_ms.get("cuda-graph", 0) > 0 and "baseline_cuda-graph" in r.phases_s
    assert "CUDA graph:" in result_text(r) and "vs best baseline" in result_text(r)
    again = evaluate_workspace(ws, config=cpu_cfg(baselines=("eager", "compile", "cuda-graph"), reuse_results=False))
    assert (
        again.baselines_ms["cuda-graph"] == r.baselines_ms["cuda-graph"] and "baseline_cuda-graph" not in again.phases_s
    )
