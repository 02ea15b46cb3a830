"""Issue 12: the parent believes nothing the candidate process says.

Unit tests of the typed protocol and of the trusted clock's arithmetic, then the whole pipeline
on the CPU lane with the test-only hijack switch standing in for a harness that candidate code
rewrote (the static rules would stop the real hijack first): fake fast times, a spoofed GPU, a
path in a reply, a remount, skipped burst work and a dropped guard report each end with reward -1,
and the honest candidate still scores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import FIXTURES
from test_pipeline_cpu import cpu_cfg, make_ws

from cuda_agent.eval.api import evaluate_workspace
from cuda_agent.eval.channel import messages as P
from cuda_agent.eval.child import main as child
from cuda_agent.eval.judge.result import EvalResult, Status
from cuda_agent.eval.timing import clock as tt
from cuda_agent.sandbox import probe

# ------------------------------------------------------------------ protocol

META = {
    "tensor": True,
    "plain": True,
    "dtype": "float32",
    "shape": [2, 3],
    "device": "cpu",
    "contiguous": True,
    "nbytes": 24,
    "aliases_input": False,
}
STATS = {
    "median_ms": 1.0,
    "mean_ms": 1.1,
    "min_ms": 0.9,
    "cv": 0.01,
    "spread": 0.01,
    "n": 50,
    "rounds": 1,
    "host_over_event": 1.0,
    "probe_ms": 1.0,
    "enqueue_ms": 0.01,
    "hold_ms": 0.05,
}


def test_well_formed_replies_parse_into_types():
    run = P.parse_reply(
        "run", {"ok": True, "outputs": [{"meta": [META], "inputs_mutated": False, "in_nbytes": 8}], "t": {"call": 0.1}}
    )
    assert isinstance(run, P.RunReply) and run.outputs[0].meta[0].shape == (2, 3) and run.guard is None
    tm = P.parse_reply("time", {"ok": True, "stats": STATS, "outputs": [{"meta": [META], "call": 3}]})
    assert isinstance(tm, P.TimeReply) and tm.outputs[0].call == 3
    err = P.parse_reply("run", {"ok": False, "error": "boom", "traceback": "tb", "cuda_error": True})
    assert isinstance(err, P.ErrorReply) and err.cuda_error


@pytest.mark.parametrize(
    "cmd,obj,needle",
    [
        ("setup", {"ok": True, "notes": [], "gpu": "NVIDIA B200"}, "unexpected ['gpu']"),
        ("setup", {"ok": True}, "missing ['notes']"),
        (
            "run",
            {
                "ok": True,
                "outputs": [{"meta": [META], "inputs_mutated": False, "in_nbytes": 8, "file": "/etc/passwd"}],
                "t": {},
            },
            "unexpected ['file']",
        ),
        (
            "run",
            {
                "ok": True,
                "outputs": [{"meta": [{**META, "nbytes": 1}], "inputs_mutated": False, "in_nbytes": 8}],
                "t": {},
            },
            "does not match shape",
        ),
        (
            "run",
            {
                "ok": True,
                "outputs": [{"meta": [{**META, "dtype": "float128"}], "inputs_mutated": False, "in_nbytes": 8}],
                "t": {},
            },
            "unknown dtype",
        ),
        ("time", {"ok": True, "stats": {**STATS, "median_ms": float("nan")}, "outputs": []}, "finite number"),
        ("time", {"ok": True, "stats": {**STATS, "median_ms": -1.0}, "outputs": []}, "finite number"),
        ("time", {"ok": True, "stats": {**STATS, "min_ms": 5.0}, "outputs": []}, "above the median"),
        ("time", {"ok": True, "stats": {k: v for k, v in STATS.items() if k != "n"}, "outputs": []}, "missing ['n']"),
        ("time", {"ok": True, "stats": {**STATS, "n": True}, "outputs": []}, "integer"),
        ("burst", {"ok": True, "digests": [["1.0"]]}, "expected an object"),
        ("burst", {"ok": True, "digests": {"f64": "not base64!", "cols": 2}}, "not base64"),
        ("burst", {"ok": True, "digests": {"f64": "AAAAAAAAAAAA", "cols": 2}}, "are not rows of 2 float64"),
        ("burst", {"ok": True, "digests": {"f64": "", "cols": 65}}, "integer in [0, 64]"),
        ("burst", {"ok": True, "digests": {"f64": "AAAAAAAAAAA=", "cols": 0}}, "are not rows of 0 float64"),
        ("burst", {"ok": True, "digests": {"f64": "", "cols": 2, "more": 1}}, "unexpected"),
        ("run", {"ok": "yes"}, "boolean 'ok'"),
        ("run", ["not", "an", "object"], "boolean 'ok'"),
    ],
)
def test_malformed_replies_are_refused(cmd, obj, needle):
    with pytest.raises(P.ProtocolError, match=None) as e:
        P.parse_reply(cmd, obj)
    assert needle in str(e.value)


def test_a_bursts_digests_travel_packed_and_come_back_as_rows():
    """The burst's reply carries its digests as packed float64 (no per-number JSON inside the parent's
    clock); each row decodes to what was sent, NaN as None, and the wire is checked (above)."""
    rows = [[1.5, -2.25, None, 3.0], [float("inf"), 0.0, 1e-300, None]]
    wire = json.loads(json.dumps({"ok": True, "digests": P.PackedDigests.of(rows).to_wire()}))
    got = P.parse_reply("burst", wire).digests
    assert len(got) == 2 and got[0] == rows[0] and got[1] == rows[1]
    with pytest.raises(IndexError):
        got[2]
    assert len(P.PackedDigests.of([])) == 0
    with pytest.raises(ValueError, match="different lengths"):
        P.PackedDigests.of([[1.0], [1.0, 2.0]])


def test_requests_round_trip_and_paths_are_the_parents():
    req = P.Setup("/t/model.py", 7, "fp32", "cuda", "/t", solution=P.Solution("/t/model_new.py", "/b/x.so"), guard=True)
    assert P.request_from_wire(P.to_wire(req)) == req
    assert P.request_from_wire(P.to_wire(P.Burst(1, 2, 3))) == P.Burst(1, 2, 3)
    assert P.output_path("/io", "seed0", 0) == "/io/seed0_0.bin" and P.timed_path("/io", 5) == "/io/timed_call_5.bin"


# ------------------------------------------------------------------ the evaluator's clock's arithmetic


def _looks(per_call_ms: float, calls: int, fixed_ms: float = 0.2, jitter_ms: float = 0.01, n: int = 3) -> tt.Looks:
    """Looks of a side whose calls take per_call_ms each, with a fixed cost per burst and jitter."""
    best = fixed_ms + calls * per_call_ms
    return tt.Looks(calls, tuple((best + i * jitter_ms) / 1e3 for i in range(n)))


LOOP = tt.fit_loop(_looks(0.05, 256), _looks(0.05, 256 * 4))  # draws and digests: 0.05 ms a call


def _side(name: str, event_ms: float, true_ms: float, calls: int = 256) -> tt.Side:
    looks = _looks(true_ms + 0.05, calls)
    return tt.Side(name, event_ms, tt.net_ms(looks, LOOP), tt.noise_ms(looks))


def _verdict(
    claim_ms: float, true_ms: float, eager_ms: float = 1.0, compile_ms: float = 0.5, bias: float = 0.0, **kw
) -> tt.Verdict:
    """The candidate truly takes true_ms a call and reports claim_ms; its bursts show (1 + bias) x its
    true time (the clock's run-to-run error, which one evaluation's looks do not show); the
    baselines' event times equal their true times."""
    looks = _looks(true_ms * (1 + bias) + 0.05, 256)
    sides = [_side("eager", eager_ms, eager_ms), _side("torch.compile", compile_ms, compile_ms)]
    return tt.judge(claim_ms, tt.net_ms(looks, LOOP), tt.noise_ms(looks), sides, **kw)


def test_the_loop_fit_takes_the_fixed_cost_and_the_loops_share_out():
    fit = tt.fit_loop(_looks(0.03, 100, fixed_ms=0.4), _looks(0.03, 400, fixed_ms=0.4))
    assert abs(fit.fixed_ms - 0.4) < 1e-9 and abs(fit.per_call_ms - 0.03) < 1e-9
    assert abs(tt.net_ms(_looks(0.03 + 0.2, 64, fixed_ms=0.4), fit) - 0.2) < 1e-9
    with pytest.raises(ValueError):
        tt.fit_loop(_looks(0.03, 100), _looks(0.03, 100))
    # the noise is the next-best look's distance, never below JITTER_MS a burst
    assert tt.Looks(10, (0.010, 0.012)).jitter_ms == pytest.approx(2.0)
    assert tt.Looks(10, (0.010, 0.010)).jitter_ms == tt.JITTER_MS


def test_the_clocks_time_counts_and_its_milestones_come_from_it():
    v = _verdict(0.3, 0.3)
    tol = max(v.tol.values())
    assert v.kind == "ok" and v.time_ms == pytest.approx(0.3 * (1 + tol), rel=1e-3)
    assert tt.milestones(v, 1.0, 0.5) == (True, True) and "the clock's" in v.message
    # a claim slower than the clock changes nothing either: the clock's time counts
    slow = _verdict(0.6, 0.48)
    assert slow.kind == "ok" and slow.time_ms == pytest.approx(0.48 * (1 + max(slow.tol.values())), rel=1e-3)
    assert tt.milestones(slow, 1.0, 0.5) == (True, False)


def test_a_milestone_needs_the_clock_beyond_its_noise():
    """A kernel just past the 5 % line by the clock's bare ratio gets the milestone only when it clears
    the line by the clock's tolerance too: on the line, noise would otherwise decide it."""
    compile_ms = 0.5
    on_line = _verdict(0.945 * compile_ms, 0.945 * compile_ms, 1.0, compile_ms)  # 1.058x: inside 1.05 x (1 + tol)
    tol = max(on_line.tol.values())
    assert 0.945 < 0.95 < 0.945 * (1 + tol) and tt.milestones(on_line, 1.0, compile_ms) == (True, False)
    clear = _verdict(0.9 * compile_ms, 0.9 * compile_ms, 1.0, compile_ms)
    assert tt.milestones(clear, 1.0, compile_ms) == (True, True)


@pytest.mark.parametrize("factor", [0.95, 0.9, 0.85, 0.8, 0.7, 0.5, 0.2, 0.05])
@pytest.mark.parametrize("true_vs_compile", [0.97, 1.0, 1.03, 1.2, 2.0])
@pytest.mark.parametrize("bias", [-0.045, 0.0, 0.03])
def test_a_lie_gains_no_milestone(factor, true_vs_compile, bias):
    """The issue's bar as arithmetic: a candidate truly at true_vs_compile x torch.compile reports
    factor x its true time, judged by the same clock as its honest twin (whose error is `bias`, as
    between evaluations on the H100: a kernel's net moved up to 5 %). Its milestones are never more
    than the twin's, its time is never below the twin's, every lie of 20 % or more is flagged (even
    with the clock 4.5 % its way), and one of 2x or more is rejected."""
    compile_ms, eager_ms = 0.5, 0.52
    true = true_vs_compile * compile_ms
    twin = _verdict(true, true, eager_ms, compile_ms, bias=bias)
    v = _verdict(factor * true, true, eager_ms, compile_ms, bias=bias)
    honest = tt.milestones(twin, eager_ms, compile_ms)
    lied = tt.milestones(v, eager_ms, compile_ms) if v.kind != "forged" else (False, False)
    assert lied[0] <= honest[0] and lied[1] <= honest[1], (factor, true_vs_compile, bias, v)
    assert v.time_ms >= twin.time_ms * (1 - 1e-12)
    assert max(v.tol.values()) <= tt.TOL_CAP
    if factor <= 0.8:
        assert v.flagged and v.kind in ("unconfirmed", "forged"), v
    if factor * 1.001 < 0.5 * (1 + bias):  # 2x or more below what the clock saw, beyond its noise
        assert v.kind == "forged" and "not the candidate's" in v.message


@pytest.mark.parametrize("mode", ["graph", "host"])
def test_the_time_that_counts_does_not_depend_on_the_claim(mode):
    """Any claim between 0.55x and 3x the truth (short of a rejection) yields the same time and the same
    milestones: the reported figure decides findings only. Before (v5 as landed) a claim within the
    clock's tolerance stood, and on an H100 where the clock read the honest kernel 6 % faster than its
    events, a 5 % lie turned reward 2 into 3."""
    times = set()
    for claim in [0.3 * f for f in (0.55, 0.7, 0.9, 0.95, 0.97, 1.0, 1.1, 1.5, 3.0)]:
        v = _verdict(claim, 0.3, mode=mode, enqueue_ms=claim)
        assert v.kind != "forged"
        times.add((round(v.time_ms, 12), tt.milestones(v, 1.0, 0.5)))
    assert len(times) == 1, times
    ((t, _),) = times
    assert t >= 0.3 * (1 + tt.TOL_FLOOR) * (1 - 1e-3)  # charged at least the least tolerance


def test_a_kernel_the_clock_cannot_see_gets_no_milestone():
    """A candidate net within its own noise (the clock saw nothing of its calls): no milestone, said so."""
    looks = tt.Looks(4, (0.2 / 1e3, 0.3 / 1e3))  # 4 calls, 0.1 ms jitter a burst: 0.025 ms noise a call
    sides = [_side("eager", 1.0, 1.0), _side("torch.compile", 0.5, 0.5)]
    v = tt.judge(0.3, 0.02, tt.noise_ms(looks), sides)
    assert not v.grants and tt.milestones(v, 1.0, 0.5) == (False, False) and "cannot see" in v.message


def test_uneven_looks_widen_the_tolerance_only_up_to_its_cap():
    steady = _verdict(0.3, 0.3)
    looks = tt.Looks(256, (0.2 + 256 * 0.35, 0.2 + 256 * 0.35 * 1.5, 0.2 + 256 * 0.35 * 2))  # wildly uneven, in ms
    looks = tt.Looks(256, tuple(x / 1e3 for x in looks.seconds))
    sides = [_side("eager", 1.0, 1.0), _side("torch.compile", 0.5, 0.5)]
    shaky = tt.judge(0.3 * 0.9, tt.net_ms(looks, LOOP), tt.noise_ms(looks), sides)
    assert max(steady.tol.values()) < max(shaky.tol.values()) == tt.TOL_CAP
    assert not shaky.resolved and shaky.kind == "unconfirmed" and shaky.time_ms >= 0.29


def test_a_baseline_the_clock_cannot_see_is_stood_in_for_by_its_event_time():
    """eager's net within its noise (a 2 us call beside a 50 us loop): the candidate's own net is judged
    against the events directly, so a lie is still caught."""
    tiny = tt.Side("eager", 0.002, 0.0, 0.001)
    looks = _looks(0.05 + 0.3, 256)
    v = tt.judge(0.001, tt.net_ms(looks, LOOP), tt.noise_ms(looks), [tiny])
    assert v.kind == "forged" and not v.resolved and v.equiv_ms == pytest.approx(0.3, rel=1e-3)


def test_one_sides_error_cannot_call_an_honest_claim_forged():
    """H200, 2026-12-06 (6a32046): release/scale_add, a 4 us kernel that reports its true time, was rejected
    as 2.13x forged in 2 of 9 runs: on torch.compile's scale (its net far under its events) the clock read it
    2x slow, on eager's not. A rejection needs every side, each at the edge of its noise; the time that
    counts still takes the side least in the candidate's favour, so the honest run is charged, not rejected."""
    claim = 0.004
    eager = _side("eager", 0.0066, 0.0066)
    skewed = _side("torch.compile", 0.0036, 0.0036 * 0.45)  # this side's net 55 % under its events
    looks = _looks(claim * 1.2 + 0.05, 256)  # the candidate's own net 1.2x its events
    v = tt.judge(claim, tt.net_ms(looks, LOOP), tt.noise_ms(looks), [eager, skewed])
    assert v.kind != "forged" and v.flagged and v.equiv_ms > tt.FORGED * claim, v
    assert v.time_ms >= v.equiv_ms and tt.milestones(v, 0.0066, 0.0036) == (False, False)
    # the same clock against a claim every side calls 2x too fast, beyond its noise: rejected
    lie = tt.judge(claim / 3, tt.net_ms(looks, LOOP), tt.noise_ms(looks), [eager, skewed])
    assert lie.kind == "forged" and "not the candidate's" in lie.message
    # a candidate the clock cannot see past its noise is never called forged, however low its claim
    blind = tt.Looks(4, (0.2 / 1e3, 0.3 / 1e3))
    unseen = tt.judge(1e-4, 0.02, tt.noise_ms(blind), [eager, skewed])
    assert unseen.kind != "forged" and not unseen.grants


def test_no_milestone_over_a_baseline_the_clock_cannot_see():
    """H200, 2026-12-06 (6a32046, relu_scale, rank-1 digest): torch.compile's cached net (0.005 ms) sat within
    its noise, so its event time (0.0357 ms) stood in, and a forger whose burst net ran low (0.0283 ms, its
    twin's 0.030-0.031) cleared compile's line on that mixed scale: reward 3 against the twin's 2. The
    candidate's net is on the burst's scale and the event time is not: no milestone over that side."""
    eager = tt.Side("eager", 0.0703, 0.06309, 0.0001)
    unseen = tt.Side("torch.compile", 0.03568, 0.00501, 0.003)
    v = tt.judge(0.03371, 0.02834, 0.0001, [eager, unseen])
    assert v.unseen == ("torch.compile",) and "cannot see torch.compile" in v.message
    assert tt.milestones(v, 0.0703, 0.03568) == (True, False)
    # the same figures with compile seen past its noise: the milestone is the clock's to grant
    seen = tt.judge(0.03371, 0.02834, 0.0001, [eager, tt.Side("torch.compile", 0.03568, 0.0345, 0.0001)])
    assert not seen.unseen and tt.milestones(seen, 0.0703, 0.03568) == (True, True)
    # eager unseen and no compile side: eager stands in for both, and neither milestone stands
    alone = tt.judge(0.01, 0.009, 0.0001, [tt.Side("eager", 0.05, 0.0002, 0.001)])
    assert tt.milestones(alone, 0.05, 0.05) == (False, False)


def test_the_clock_is_never_taken_below_the_speed_of_light():
    """A candidate that fuses the harness's draws and digests into its own kernel could make its burst
    cheaper than the loop's: its net is floored at the task's speed-of-light time."""
    looks = _looks(0.01, 256)  # burst per call below the loop's 0.05: a negative net
    sides = [_side("eager", 1.0, 1.0)]
    assert tt.net_ms(looks, LOOP) < 0
    v = tt.judge(0.05, tt.net_ms(looks, LOOP), tt.noise_ms(looks), sides, floor_ms=0.2)
    # the floor makes the clock's time count; it never rejects (it is too high for a task that reads
    # part of its inputs)
    assert v.kind == "unconfirmed" and v.flagged and v.equiv_ms == pytest.approx(0.2, rel=1e-6)
    assert v.time_ms == pytest.approx(0.2 * (1 + max(v.tol.values())), rel=1e-6)


def test_host_mode_lets_reported_host_time_excuse_a_slow_burst_but_confirm_nothing():
    host = _verdict(0.1, 0.49, mode="host", enqueue_ms=0.45)
    assert host.kind == "unconfirmed" and host.time_ms >= 0.49 and tt.milestones(host, 1.0, 0.5) == (True, False)
    assert _verdict(0.1, 0.49, mode="host").kind == "forged"
    assert _verdict(0.1, 0.49, mode="graph", enqueue_ms=0.45).kind == "forged"  # a graph's host work is O(1)


def test_the_cpu_lanes_floor_absorbs_its_baselines_drift_and_charges_for_it():
    """CI's numbers (b02afbb): an honest candidate's net matched its claim (4.835 vs 4.828 ms) but
    eager's net sat 11 % under its events, so on eager's scale the clock read 13 % slower. The GPU's
    floor calls that unconfirmed; the CPU lane's floor (its known drift) does not, and charges it."""
    eager = tt.Side("eager", 0.02875, 0.02554, 0.00015)
    gpu = tt.judge(4.828, 4.835, 0.01, [eager], "host")
    lane = tt.judge(4.828, 4.835, 0.01, [eager], "host", bounds=tt.HOST_LANE_BOUNDS)
    assert gpu.kind == "unconfirmed" and lane.kind == "ok", (gpu, lane)
    assert lane.time_ms == pytest.approx(lane.equiv_ms * (1 + tt.HOST_LANE_FLOOR)) and lane.time_ms > gpu.time_ms
    liar = tt.judge(4.835 / 1.5, 4.835, 0.01, [eager], "host", bounds=tt.HOST_LANE_BOUNDS)
    assert liar.kind == "unconfirmed" and liar.flagged  # a lie past the lane's noise is still seen


def test_the_cpu_lane_rejects_only_what_the_candidates_own_net_also_calls_a_lie():
    """The RL smoke's honest relu on a loaded CPU lane (2026-12-07): eager's net 0.0052 ms against its
    0.027 ms of events put the candidate at 7.9x its claim on eager's scale, past the lane's 5x, while
    its own net was 1.5x its claim. It is flagged, not rejected; a 20x lie is still rejected; the GPU's
    bounds keep their rule (nets sit a steady fraction under their events there)."""
    eager = tt.Side("eager", 0.02698, 0.00521, 0.0002)
    honest = tt.judge(0.09298, 0.1424, 0.002, [eager], "host", enqueue_ms=0.09298, bounds=tt.HOST_LANE_BOUNDS)
    assert honest.kind == "unconfirmed" and honest.flagged and honest.equiv_ms / 0.09298 > tt.HOST_LANE_FORGED
    liar = tt.judge(0.1424 / 20, 0.1424, 0.002, [eager], "host", enqueue_ms=0.1424 / 20, bounds=tt.HOST_LANE_BOUNDS)
    assert liar.kind == "forged"
    gpu = tt.judge(0.09298, 0.1424, 0.002, [eager], "graph", bounds=tt.Bounds(tt.TOL_FLOOR, tt.TOL_CAP, 5.0))
    assert gpu.kind == "forged"  # without `own`, the same figures are a rejection


def test_the_cpu_lane_reads_a_busy_machine_by_the_cpu_time_the_kernel_charged():
    """The RL tests' honest relu beside the suite on 2 cores (2026-12-07, f7d9188): its wall net read 3.799 ms
    against its claim of 0.2466 ms (the machine kept it off a core), past the lane's 5x on every side and
    on its own net, so it was rejected as forged. Its CPU time bears the claim out: it agrees, and the
    wall still sets the time. A 20x lie is still rejected, and one that hides its CPU time (work in a
    process that ends before the reading) escapes the finding and the rejection, not the time."""
    eager = tt.Side("eager", 0.05336, 0.05103, 0.0004)
    wall, claim = 3.799, 0.2466

    def lane(claim_ms: float, wall_ms: float, cpu_net_ms: float | None = None) -> tt.Verdict:
        return tt.judge(
            claim_ms,
            wall_ms,
            0.01,
            [eager],
            "host",
            enqueue_ms=claim_ms,
            bounds=tt.HOST_LANE_BOUNDS,
            cpu_net_ms=cpu_net_ms,
        )

    before = lane(claim, wall)
    assert before.kind == "forged"  # the bug, without the CPU time
    honest = lane(claim, wall, 0.25)
    assert honest.kind == "ok" and "by its CPU time" in honest.message, honest
    assert honest.time_ms == pytest.approx(before.time_ms) and honest.equiv_ms > 10 * claim  # the wall counts
    assert lane(claim / 20, wall, 0.25).kind == "forged"
    hidden = lane(claim / 20, wall, 0.001)
    assert hidden.kind != "forged" and hidden.time_ms == pytest.approx(honest.time_ms)
    # a CPU time above the wall's (threads on several cores) never moves the verdict
    threads, alone = lane(claim, 0.26, 0.5), lane(claim, 0.26)
    assert (threads.kind, threads.time_ms) == (alone.kind, alone.time_ms) and "CPU time" not in alone.message


def test_without_like_for_like_baselines_no_milestone_stands():
    v = tt.Verdict("unconfirmed", 0.1, 0.1, {}, False, False, "x", grants=False)
    assert tt.milestones(v, 1.0, 0.5) == (False, False)


def test_burst_shapes():
    assert tt.burst_shape(0.001, 1 << 20, True) == (tt.K_MAX, tt.MAX_REPLAYS)
    assert tt.burst_shape(100.0, 1 << 20, True) == (tt.K_MIN, 1)
    k, r = tt.burst_shape(0.02, 1 << 20, True)
    assert k == tt.K_MAX and k * r * 0.02 >= tt.TARGET_MS
    assert tt.burst_shape(0.001, 1 << 30, False) == (tt.BURST_BYTES // (1 << 30), 1)


def test_burst_shape_counts_the_loop():
    """A call of 0.013 ms carrying a 0.1 ms loop (diag_matmul on the H100): sized by the claim alone its
    burst ran ~90 ms; counting the loop it lasts about TARGET_MS."""
    alone = tt.burst_shape(0.013, 1 << 20, True)
    k, r = tt.burst_shape(0.013, 1 << 20, True, loop_ms=0.1)
    assert k * r < alone[0] * alone[1]
    assert tt.TARGET_MS <= k * r * 0.113 < tt.TARGET_MS + k * 0.113
    assert tt.burst_shape(0.013, 1 << 20, True, loop_ms=-1.0) == alone  # a fit below zero is no loop


def test_same_shape_cancels_the_loop_fit_and_the_fixed_cost():
    """At one shape the nets' difference is the bursts' difference over n whatever the fit; at two shapes a
    wrong fixed cost moves it (what v6 did: 16-call bursts corrected by a fit from 69 and 138 calls)."""
    true_fit, wrong_fit = tt.LoopFit(0.5, 0.75), tt.LoopFit(0.8, 0.73)
    n = 16

    def burst(net: float, calls: int) -> tt.Looks:
        return tt.Looks(calls, ((true_fit.fixed_ms + calls * (net + true_fit.per_call_ms)) / 1e3,))

    cand, base = burst(0.187, n), burst(0.184, n)
    for fit in (true_fit, wrong_fit):
        diff = tt.net_ms(cand, fit) - tt.net_ms(base, fit)
        assert diff == pytest.approx(0.003, abs=1e-9)
    other = burst(0.184, 69)
    assert tt.net_ms(cand, wrong_fit) - tt.net_ms(other, wrong_fit) != pytest.approx(0.003, abs=1e-4)


def test_candidate_shape_is_the_nearest_baselines():
    eager, comp = tt.SideShape(16, 1, 0.968), tt.SideShape(17, 1, 0.933)  # row_softmax_wide, loop 0.749 ms
    assert tt.candidate_shape(0.189, 1 << 20, True, [eager, comp], 0.749) == (17, 1)  # nearest: torch.compile
    assert tt.candidate_shape(0.25, 1 << 20, True, [eager, comp], 0.749) == (16, 1)  # nearest: eager
    slow = tt.candidate_shape(4.0, 1 << 20, True, [eager, comp], 0.749)  # 4.75 ms a call: near neither
    assert slow == tt.burst_shape(4.0, 1 << 20, True, 0.749) and slow not in ((16, 1), (17, 1))
    assert tt.candidate_shape(0.19, 1 << 20, True, None) == tt.burst_shape(0.19, 1 << 20, True)
    assert tt.reburst(0.189, 0.749, eager, (64, 1)) and not tt.reburst(0.189, 0.749, eager, (16, 1))
    assert not tt.reburst(4.0, 0.749, eager, slow)  # far from it: eager keeps its own bursts
    # the CPU lane's slow candidate, 72x eager's time: it keeps its own shape and eager its own (at the
    # candidate's 13 calls eager's net was too short to time: the honest claim read 1.85x under the clock)
    lane = tt.SideShape(256, 1, 0.0168)
    own = tt.candidate_shape(1.217, 1 << 20, False, [lane])
    assert own == tt.burst_shape(1.217, 1 << 20, False) and not tt.reburst(1.217, 0.0, lane, own)
    # a lie cannot leave the near regime without FORGED: claiming half a time near compile stays near it
    assert tt.candidate_shape(0.189 / 2, 1 << 20, True, [eager, comp], 0.749) == (17, 1)


class _FakeRef:
    """burst_baselines' child requests, answered by a model: each burst costs F + calls x (net + loop)."""

    def __init__(self, monkeypatch, timed, nets: dict[str, float]):
        self.nets, self.bursts, self.loop = nets, [], 0.75
        monkeypatch.setattr(timed, "ask", lambda *a, **k: None)
        monkeypatch.setattr(
            timed, "_prepare", lambda child, res, cfg, k, mode, graph, verify=False: P.PrepareReply(graph, "")
        )
        monkeypatch.setattr(timed, "_looks", self.looks)
        self.timed = timed

    def looks(self, child, res, cfg, kind, k, replays, mode):
        self.bursts.append((mode, k, replays))
        per = self.loop + self.nets.get(mode, 0.0)
        secs = [(0.5 + k * replays * per) / 1e3] * 3
        return self.timed.BurstRecord(kind, k, replays, [1, 2, 3], secs, [])


def test_baselines_burst_at_their_own_shapes_and_again_at_a_near_candidates(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from cuda_agent.eval.config import EvalConfig
    from cuda_agent.eval.judge.cache import KVCache
    from cuda_agent.eval.timing import timed

    ref = _FakeRef(monkeypatch, timed, {"model": 0.2186, "compiled": 0.1841})
    res = SimpleNamespace(
        eager_timing=SimpleNamespace(median_ms=0.2186),
        compile_timing=SimpleNamespace(median_ms=0.1841),
        timing=SimpleNamespace(median_ms=0.189),
        defences={},
    )
    cfg, cache = EvalConfig(), KVCache(tmp_path / "c.sqlite")
    assert timed.cached_shapes(cfg, cache, "b", "graph") is None
    # the task's first evaluation: the candidate burst at its own (claim-sized) shape; both sides are near
    own = tt.burst_shape(0.189, 1 << 20, True)
    base = timed.burst_baselines(None, res, cfg, 1 << 20, cache, "b", "graph", own)
    shapes, loop = timed.cached_shapes(cfg, cache, "b", "graph")
    assert loop == pytest.approx(0.749, rel=1e-6) or loop == pytest.approx(0.75, rel=1e-6)
    # eager and torch.compile are near each other: both at the faster one's shape, each with its own cost
    assert [(x.k, x.replays) for x in shapes] == [tt.burst_shape(0.1841, 1 << 20, True, loop)] * 2
    assert [x.sized_ms for x in shapes] == pytest.approx([0.2186 + loop, 0.1841 + loop])
    assert base.eager.calls == base.compiled.calls == own[0] * own[1]  # the verdict's sides: at the candidate's
    assert ref.bursts[-2:] == [("model", *own), ("compiled", *own)]
    # the next candidate near them bursts at that shape: the cached sides serve as they are
    ref.bursts.clear()
    mine = tt.candidate_shape(0.19, 1 << 20, True, shapes, loop)
    assert mine == (shapes[1].k, shapes[1].replays)
    again = timed.burst_baselines(None, res, cfg, 1 << 20, cache, "b", "graph", mine)
    assert ref.bursts == [] and again.compiled.calls == mine[0] * mine[1] == again.eager.calls
    # sides far apart (eager 8x torch.compile, light loop) keep their own shapes
    ref.bursts.clear()
    far = SimpleNamespace(
        eager_timing=SimpleNamespace(median_ms=1.24),
        compile_timing=SimpleNamespace(median_ms=0.146),
        timing=SimpleNamespace(median_ms=0.1),
        defences={},
    )
    ref.nets, ref.loop = {"model": 1.24, "compiled": 0.146}, 0.01
    timed.burst_baselines(None, far, cfg, 1 << 20, cache, "far", "graph", None)
    (e, c), _ = timed.cached_shapes(cfg, cache, "far", "graph")
    assert (e.k, e.replays) != (c.k, c.replays)
    fit = tt.fit_loop(again.loop_small, again.loop_large)
    assert tt.net_ms(again.compiled, fit) == pytest.approx(0.1841, rel=1e-6)


def test_digests_within_tolerance_pass_and_skipped_work_fails():
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(4096, generator=g)
    w = torch.randn(4096, generator=g)
    scale = float(torch.linalg.vector_norm(1e-2 + 1e-2 * ref.abs()))
    honest = ref + 1e-3 * torch.randn(4096, generator=g)
    d = lambda t: float((t * w).sum())  # noqa: E731
    assert tt.digest_mismatch([d(honest)], [d(ref)], [scale]) is None
    assert "tolerance scales" in (tt.digest_mismatch([d(torch.zeros(4096))], [d(ref)], [scale]) or "")
    assert tt.digest_mismatch([float("nan")], [d(ref)], [scale]) is not None


def test_the_reference_reads_only_the_candidates_io_dir(tmp_path):
    st = child.State("reference")
    io = tmp_path / "io"
    io.mkdir()
    st.peer_io = os.path.realpath(io)
    st.kept["ref#0"] = [torch.ones(3)]
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    with pytest.raises(PermissionError):
        child.cmd_compare(st, P.Compare("ref#0", "x", str(victim), [], 1e-2, 1e-2, 1 << 20))
    assert victim.read_text() == "keep me"
    os.symlink(victim, io / "seed0_0.bin")  # a link the candidate planted in its own dir
    out = child.cmd_compare(st, P.Compare("ref#0", "x", str(io / "seed0_0.bin"), [], 1e-2, 1e-2, 1 << 20))
    assert out["check"]["passed"] is False and "link" in out["check"]["message"]
    assert victim.read_text() == "keep me" and not (io / "seed0_0.bin").exists()


def test_the_reference_drops_each_kept_output_once_compared(tmp_path):
    """Large outputs must not pile up on the device for the whole evaluation (child.main.cmd_compare)."""
    from cuda_agent.eval.channel.tensorfile import save_tensors

    st = child.State("reference")
    st.device = torch.device("cpu")
    io = tmp_path / "io"
    io.mkdir()
    st.peer_io = os.path.realpath(io)
    st.kept["ref#0"] = [torch.arange(6.0)]
    st.kept["ref#1"] = [torch.arange(6.0)]
    meta = [child.describe(torch.arange(6.0), [])]
    save_tensors(str(io / "seed0_0.bin"), [torch.arange(6.0)], None)
    out = child.cmd_compare(st, P.Compare("ref#0", "x", str(io / "seed0_0.bin"), meta, 1e-2, 1e-2, 1 << 20))
    assert out["check"]["passed"] is True
    assert "ref#0" not in st.kept and "ref#1" in st.kept
    save_tensors(str(io / "seed0_0.bin"), [torch.arange(6.0)], None)
    with pytest.raises(KeyError, match="compared once"):
        child.cmd_compare(st, P.Compare("ref#0", "x", str(io / "seed0_0.bin"), meta, 1e-2, 1e-2, 1 << 20))


# ------------------------------------------------------------------ the pipeline against a rewritten harness (CPU lane)


@pytest.fixture
def hijack(monkeypatch):
    def set_(value: str) -> None:
        monkeypatch.setenv("CUDA_AGENT_TEST_HIJACK", value)

    return set_


@pytest.mark.slow
def test_an_honest_slow_candidate_agrees_with_the_parents_clock(tmp_path, cache_env):
    r = evaluate_workspace(make_ws(tmp_path, "slow"), config=cpu_cfg(reuse_results=False))
    assert r.status is Status.OK and r.correct, (r.message, r.log[-1500:])
    assert r.trusted_ms is not None and r.defences["trusted_clock"].startswith("ok"), r.defences
    assert (
        r.timing is not None and r.timing.median_ms / 3 < r.trusted_ms < 3 * r.timing.median_ms
    )  # same work, within noise
    assert r.trusted_eager_ms is not None and r.trusted_eager_ms < r.trusted_ms  # the task's own relu is far faster
    # the looks the nets came from are in the result, and give them back (benchmarks/clock_leak.py reads them)
    looks, fit = r.trusted_looks, r.trusted_looks["fit"]
    for side, net in (("candidate", r.trusted_ms), ("eager", r.trusted_eager_ms)):
        again = (min(looks[side]["ms"]) - fit["fixed_ms"]) / looks[side]["calls"] - fit["per_call_ms"]
        assert again == pytest.approx(net, rel=1e-3, abs=1e-5), (side, looks)
    assert looks["loop_large"]["calls"] > looks["loop_small"]["calls"] and len(looks["candidate"]["ms"]) >= tt.LOOKS
    assert EvalResult.from_dict(json.loads(r.to_json())).trusted_looks == looks


@pytest.mark.slow
def test_an_honest_slow_candidate_is_not_called_forged_on_a_busy_machine(tmp_path, cache_env):
    """As the RL tests' candidates beside the suite, every core kept busy by other processes (2026-12-07,
    f7d9188: an honest relu rejected as 16x forged). The wall clock's looks are stretched by the time the
    machine kept the candidate off a core; the CPU time the kernel charged its processes is not, and the
    wall never reads less than it (a look once read 0.26 ms for 14 ms of CPU: the clock started after the
    request was written, and the parent ran again only once the child had worked)."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        r = evaluate_workspace(make_ws(tmp_path, "slow"), config=cpu_cfg(reuse_results=False))
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert r.status is Status.OK and r.correct and r.reward is not None and r.reward >= 1, (r.message, r.log[-1500:])
    assert not r.defences["trusted_clock"].startswith("forged"), r.defences
    looks, fit = r.trusted_looks, r.trusted_looks["fit"]
    cpu, wall = looks["candidate_cpu"], looks["candidate"]
    assert cpu["calls"] == wall["calls"] and len(cpu["ms"]) == len(wall["ms"]) >= tt.LOOKS
    # one thread of work (torch's own threads may help with a digest): its CPU time is real, and not far past
    # the wall's; the clock started after the write read 0.26 ms of wall for 14 ms of CPU
    assert all(0 < c <= 1.5 * w + 0.5 for c, w in zip(cpu["ms"], wall["ms"], strict=True)), looks
    cpu_net = (min(cpu["ms"]) - fit["fixed_ms"]) / cpu["calls"] - fit["per_call_ms"]
    assert r.timing is not None and r.timing.median_ms / 3 < cpu_net < 3 * r.timing.median_ms, (cpu_net, r.timing)


@pytest.mark.slow
def test_fake_fast_times_are_rejected_by_the_parents_clock(tmp_path, cache_env, hijack):
    hijack("fake_time=0.0001")  # ~6 ms per call reported as below a microsecond: faster than eager
    r = evaluate_workspace(make_ws(tmp_path, "slow"), config=cpu_cfg(reuse_results=False))
    assert r.status is Status.REJECTED and r.reward == -1, (r.status, r.message)
    assert "timing-forged" in r.message and r.trusted_ms is not None and r.trusted_eager_ms is not None
    assert r.reported_ms is not None and r.trusted_ms > tt.FORGED * r.reported_ms


MATMUL_TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4096, 4096) / 64)

    def forward(self, x):
        return x @ self.w


def get_inputs():
    return [torch.randn(64, 4096)]


def get_init_inputs():
    return []
"""

EAGER_TWIN = """import cuda_extension  # noqa: F401 - built, not used: this candidate is eager PyTorch itself
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4096, 4096) / 64)

    def forward(self, x):
        return x @ self.w
"""


@pytest.mark.slow
def test_a_fake_time_for_a_kernel_as_fast_as_eager_is_rejected(tmp_path, cache_env, hijack, monkeypatch):
    """The case clock v2 missed on the H200: the candidate is as fast as eager (here it is eager: the
    static gate and the op log are off so that only the clock judges) and reports 20x faster. Its
    net on the evaluator's clock equals eager's, so the 20x claim is rejected; honest, it stands."""
    import shutil

    from cuda_agent.eval import pipeline
    from cuda_agent.eval.checks import gate as static_gate
    from cuda_agent.task import Task
    from cuda_agent.task.workspace import init_workspace

    monkeypatch.setattr(pipeline, "static_findings", lambda *a, **k: [])
    monkeypatch.setattr(static_gate, "static_findings", lambda *a, **k: [])
    ws = init_workspace(Task.from_source(MATMUL_TASK, name="mm"), tmp_path / "ws")
    shutil.copytree(FIXTURES / "cpu_lane" / "kernels", ws / "kernels", dirs_exist_ok=True)
    (ws / "model_new.py").write_text(EAGER_TWIN)
    cfg = cpu_cfg(reuse_results=False, runtime_guards=False)
    honest = evaluate_workspace(ws, config=cfg)
    assert honest.status is Status.OK and honest.correct, (honest.message, honest.log[-1500:])
    assert not honest.defences["trusted_clock"].startswith("forged"), honest.defences
    hijack("fake_time=0.05")
    r = evaluate_workspace(ws, config=cfg)
    assert r.status is Status.REJECTED and r.reward == -1, (r.status, r.message, r.defences)
    assert "timing-forged" in r.message and "not the candidate's" in r.message
    assert r.trusted_ms is not None and r.trusted_eager_ms is not None and r.reported_ms is not None
    assert r.trusted_ms < 3 * r.trusted_eager_ms  # it is eager: the clock sees eager's time, not the claim


@pytest.mark.slow
def test_skipped_burst_work_is_incorrect(tmp_path, cache_env, hijack):
    hijack("fake_digest=1")
    r = evaluate_workspace(make_ws(tmp_path), config=cpu_cfg(reuse_results=False))
    assert r.status is Status.INCORRECT and r.reward == -1 and "evaluator's clock" in r.message, r.message


@pytest.mark.slow
@pytest.mark.parametrize(
    "switch,status,needle",
    [
        ("spoof_gpu=NVIDIA B200", Status.RUNTIME_ERROR, "unexpected ['gpu']"),
        ("drop_guard=1", Status.REJECTED, "runtime-guard-missing"),
    ],
)
def test_forged_replies_score_minus_one(tmp_path, cache_env, hijack, switch, status, needle):
    hijack(switch)
    r = evaluate_workspace(make_ws(tmp_path), config=cpu_cfg(reuse_results=False))
    assert r.status is status and r.reward == -1 and needle in r.message, (r.status, r.message)
    assert r.gpu == "cpu"  # the parent's own identity, whatever the reply said


@pytest.mark.slow
def test_a_path_in_a_reply_never_reaches_the_reference(tmp_path, cache_env, hijack):
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"precious")
    hijack(f"reply_path={victim}")
    r = evaluate_workspace(make_ws(tmp_path), config=cpu_cfg(reuse_results=False))
    assert r.status is Status.RUNTIME_ERROR and r.reward == -1 and "unexpected ['file']" in r.message, r.message
    assert victim.read_bytes() == b"precious"


@pytest.mark.slow
@pytest.mark.skipif(probe("cpu")[0] != (), reason="the full sandbox is not available here")
def test_a_remount_from_the_candidate_process_fails(tmp_path, cache_env, hijack):
    planted = tmp_path / "planted.txt"
    hijack(f"remount={planted}")
    r = evaluate_workspace(make_ws(tmp_path), config=cpu_cfg(reuse_results=False))
    assert r.status is Status.RUNTIME_ERROR and r.reward == -1 and "remount of / refused" in r.message, r.message
    assert not planted.exists()
    assert r.defences["sandbox"] == "on"


@pytest.mark.slow
@pytest.mark.skipif(probe("cpu")[0] != (), reason="the full sandbox is not available here")
def test_a_candidate_cannot_hold_the_gpu_lock(tmp_path, cache_env, hijack, monkeypatch):
    """A harness rewritten to flock the evaluator's lock files shared and keep them makes every
    timed section wait out `gpu_lock_wait_s` without the sandbox; inside it the folder is empty."""
    locks = tmp_path / "locks"
    monkeypatch.setenv("CUDA_AGENT_LOCK_DIR", str(locks))
    hijack(f"lock_hold={locks}")
    cfg = dict(reuse_results=False, gpu_lock_wait_s=1.5)
    bare = evaluate_workspace(make_ws(tmp_path, name="bare"), config=cpu_cfg(sandbox="off", **cfg))
    assert any(f.rule == "gpu-lock-timeout" for f in bare.findings), [f.rule for f in bare.findings]  # the hijack bites
    boxed = evaluate_workspace(make_ws(tmp_path, name="boxed"), config=cpu_cfg(**cfg))
    assert boxed.defences["sandbox"] == "on", boxed.defences
    assert boxed.status is Status.OK and boxed.correct, (boxed.message, boxed.log[-1500:])
    assert not any(f.rule == "gpu-lock-timeout" for f in boxed.findings), [(f.rule, f.message) for f in boxed.findings]


def test_the_sandbox_hides_the_lock_folder(tmp_path, monkeypatch):
    """What a sandboxed process sees at the lock folder: nothing, and it cannot write there; a
    caller that lists the folder as writable (the synth check child) sees it."""
    if probe("cpu")[0] != ():
        pytest.skip("the full sandbox is not available here")
    from cuda_agent.sandbox import Sandbox

    locks = tmp_path / "locks"
    locks.mkdir()
    (locks / "gpu.lock").write_text("")
    monkeypatch.setenv("CUDA_AGENT_LOCK_DIR", str(locks))
    rw = tmp_path / "rw"
    rw.mkdir()
    code = (
        f"import os,sys\nprint(sorted(os.listdir({str(locks)!r})))\n"
        f"try:\n open({str(locks / 'x.lock')!r}, 'w')\nexcept OSError as e:\n print('refused', e.errno)\n"
    )
    box = Sandbox(1 << 30, 4096)
    hidden = subprocess.run(box.wrap([sys.executable, "-c", code], writable=[rw]), capture_output=True, text=True)
    assert hidden.returncode == 0, hidden.stderr
    assert hidden.stdout.split("\n")[:2] == ["[]", "refused 30"], hidden.stdout  # EROFS
    shown = subprocess.run(box.wrap([sys.executable, "-c", code], writable=[rw, locks]), capture_output=True, text=True)
    assert shown.stdout.startswith("['gpu.lock']"), (shown.stdout, shown.stderr)


def test_hijack_switch_only_reaches_children_when_set(monkeypatch):
    from cuda_agent.eval.channel.children import HIJACK, child_env

    monkeypatch.delenv(HIJACK, raising=False)
    assert HIJACK not in child_env("fp32")
    monkeypatch.setenv(HIJACK, "fake_time=0.5")
    assert child_env("fp32")[HIJACK] == "fake_time=0.5"
    assert Path(child.__file__).read_text().count("CUDA_AGENT_TEST_HIJACK") >= 1
