"""benchmarks/eval_throughput.py's CPU-side parts: the accounting of GPU-seconds by phase (which
must add up to the mode's GPU-seconds), what counts as the expected outcome, and the mix's order
(every candidate once, broken ones spread out). Its GPU figures come from the H200 run."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys

import pytest
from conftest import ROOT

spec = importlib.util.spec_from_file_location("eval_throughput", ROOT / "benchmarks" / "eval_throughput.py")
assert spec and spec.loader
bench = importlib.util.module_from_spec(spec)
sys.modules["eval_throughput"] = bench  # dataclasses look their module up by name
spec.loader.exec_module(bench)


def row(busy: float, phases: dict[str, float], status: str = "ok", correct: bool = True, expect: str = "correct"):
    return bench.Row("pool", "t", expect, status, correct, 1, busy, phases, {}, 0.0, "")


def test_phase_split_adds_up_to_the_gpu_seconds_and_moves_child_start_up_out_of_reference():
    rows = [
        row(
            14.5,
            {
                "children": 0.5,
                "compile": 1.0,
                "reference": 3.0,
                "reference.setup": 1.0,
                "load": 0.5,
                "verify": 1.5,
                "verify.call": 1.2,
                "timing": 4.0,
                "trusted_clock": 1.0,
                "compare": 1.0,
                "compare.load": 0.4,
                "burst_check": 0.25,
                "sanitize_memcheck": 0.5,
            },
        ),
        row(0.0, {"compile": 5.0}, status="compile_error", correct=False),  # settled on the farm: no GPU time
    ]
    split, keys = bench.phase_split(rows, 20.5)
    got = dict(split)
    assert got["compile (the build, on the GPU's path)"] == 1.0
    assert got["child start-up (children, reference.setup)"] == 1.5  # the wait for the pair, and the set-up
    assert got["reference (its runs; start-up below)"] == 2.0
    assert got["candidate (load, verify, shape probe)"] == 2.0
    assert got["timing (timed calls, trusted clock)"] == 5.0
    assert got["baselines (cache misses)"] == 0.0
    assert got["compare (outputs; burst digests)"] == 1.25
    assert got["other (staging, checks, spawn, cleanup)"] == pytest.approx(1.75)  # 14 - 12.75 unbooked + 0.5 unlisted
    assert got["idle (no evaluation on the GPU)"] == 6.0
    assert sum(got.values()) == pytest.approx(20.5)
    assert keys["compile"] == 1.0 and keys["verify.call"] == 1.2  # the gated job's phases are not the GPU's


def test_spread_compares_the_same_honest_candidate_across_modes():
    def timed(mode, label, ms, expect="correct"):
        return bench.Row(mode, label, expect, "ok", expect == "correct", 1, 1.0, {}, {}, 0.0, "", ms)

    rows = [
        timed("serial", "a", 1.00),
        timed("serial", "a", 1.02),
        timed("pool", "a", 1.03),
        timed("serial", "b", 2.0),
        timed("pool", "b", 2.1),
        timed("pool", "b", 2.3),
        timed("pool", "b", 2.2),
        timed("pool", "only_pool", 5.0),
        timed("serial", "x", 1.0, "incorrect"),
        timed("pool", "x", 9.0, "incorrect"),
    ]
    n, worst, median, label = bench.spread(rows)
    assert n == 2 and label == "b"  # a candidate timed in one mode only, and broken ones, are left out
    assert worst == pytest.approx(10.0) and median == pytest.approx((10.0 + 100 * 0.02 / 1.01) / 2)
    assert bench.spread([timed("serial", "a", 1.0)]) is None


def test_baseline_misses_are_counted_per_mode():
    def r(mode, cache):
        return bench.Row(mode, "t", "correct", "ok", True, 1, 1.0, {}, cache, 0.0, "")

    rows = [
        r("serial", {"baselines": False}),
        r("serial", {"baselines": True}),
        r("pool", {"baselines": False}),
        r("pool", {"baselines": False}),
        r("pool", {}),
        r("serial", {"build": False}),
    ]
    assert bench.baseline_misses(rows) == {"serial": 1, "pool": 2}  # no "baselines" key: none were timed
    assert bench.baseline_misses(rows[1:2]) == {}


def test_expected_outcomes():
    assert row(1, {}).as_expected
    assert not row(1, {}, status="incorrect", correct=False).as_expected
    assert row(1, {}, status="incorrect", correct=False, expect="incorrect").as_expected
    assert not row(
        1, {}, status="runtime_error", correct=False, expect="incorrect"
    ).as_expected  # a crash is not "wrong result"
    assert not row(1, {}, status="ok", correct=True, expect="incorrect").as_expected
    assert row(1, {}, status="ok", correct=False, expect="compiled").as_expected


def test_mix_order_holds_every_candidate_once_with_broken_ones_spread(tmp_path):
    mix = json.loads(bench.MIX.read_text())
    stand_in = ROOT / "examples" / "gelu_chain" / "task.py"  # any valid task file: only the lookup is tested
    for t in mix["tasks"]:
        d = tmp_path / "KernelBench" / f"level{t['level']}"
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(stand_in, d / t["file"])
    cands = bench.load_mix(tmp_path, None)
    labels = [c.label for c in cands]
    want = [f"L{t['level']}-{t['problem']}/{v}" for t in mix["tasks"] for v in t["candidates"]]
    examples = [f"examples/{p.parent.parent.name}" for p in sorted((ROOT / "examples").glob("*/solution/model_new.py"))]
    assert sorted(labels) == sorted(want + examples)
    broken = [i for i, c in enumerate(cands) if c.expect == "incorrect"]
    assert len(broken) == sum("broken" in t["candidates"] for t in mix["tasks"])
    assert all(b - a > 1 for a, b in zip(broken, broken[1:], strict=False))  # never two broken in a row
    assert broken[0] < len(cands) // 3  # the first third already holds one
    assert bench.load_mix(tmp_path, None) == cands  # a fixed order
    with pytest.raises(FileNotFoundError):
        bench.load_mix(tmp_path / "nowhere", None)
