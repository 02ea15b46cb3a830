"""The evaluator's clock's rank-one digest (`EvalConfig.clock_digest = "rank1"`, `child_burst.Rank1`).

It replaces the dense (2, n) weight GEMV by v^T X w over the output viewed as an about square matrix, so
that a burst reads its outputs once and not the weights as well. What must hold for it to be a
drop-in: both children compute the same digest from the same salt; its variance over the weights is
the output's squared norm, like the dense digest's, so the reference's tolerance scales still mean
"within atol/rtol"; a wrong or partly skipped output is still caught; the eager sequence (what the
reference digests for the sampled calls) equals the burst's loop. Whether it makes the clock cheaper
is a GPU figure (`scripts/gpu-session.sh X4`), not asserted here.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from cuda_agent.eval.channel import messages as P
from cuda_agent.eval.child.burst import (
    DIGESTS_PER_OUTPUT,
    RANK1_MIN,
    WIDTH,
    Plan,
    Rank1,
    _digest_into,
    _draw_weights,
    _run,
    _sequence_digests,
    _tolerance_scale,
    _weight_buffers,
    rank1_width,
)
from cuda_agent.eval.timing import clock as tt

N = 300 * 256 + 123  # 150 rows of 512 and a tail of 123
W = rank1_width(N)
ROWS = N // W


def _digest(x: torch.Tensor, weights: list) -> torch.Tensor:
    row = torch.full((WIDTH,), float("nan"))
    _digest_into([x], weights, row)
    return row[:DIGESTS_PER_OUTPUT]


def _weights(n: int, seed: int, digest: str = "rank1") -> list:
    torch.manual_seed(seed)
    w = _weight_buffers([n], torch.device("cpu"), digest)
    _draw_weights(w)
    return w


def test_the_rank_one_digest_is_v_x_w_plus_the_tail():
    x = torch.randn(N, dtype=torch.float64).float()
    (w,) = _weights(N, 3)
    assert W == 512 and ROWS == 150 and N - ROWS * W == 123
    assert (
        isinstance(w, Rank1) and w.v.shape == (ROWS, DIGESTS_PER_OUTPUT) and w.tail.shape == (DIGESTS_PER_OUTPUT, 123)
    )
    rows = x[: ROWS * W].double().view(ROWS, W)
    want = [
        float(w.v[:, d].double() @ rows @ w.w[:, d].double() + w.tail[d].double() @ x[ROWS * W :].double())
        for d in range(DIGESTS_PER_OUTPUT)
    ]
    got = _digest(x, [w]).tolist()
    assert got == pytest.approx(want, rel=1e-4, abs=1e-3)
    # an output of another size is not digested (stays NaN: a wrong output)
    assert torch.isnan(_digest(torch.randn(N + 1), [w])).all()


def test_short_outputs_stay_dense_and_an_unknown_digest_is_refused():
    (w,) = _weights(RANK1_MIN - 1, 1)
    assert isinstance(w, torch.Tensor) and w.shape == (DIGESTS_PER_OUTPUT, RANK1_MIN - 1)
    assert rank1_width(1 << 24) == 4096 and rank1_width((1 << 24) + 1) == 8192 and rank1_width(1 << 16) == 256
    with pytest.raises(ValueError, match="unknown digest"):
        _weight_buffers([8], torch.device("cpu"), "sparse")


@pytest.mark.slow
def test_its_variance_is_the_errors_squared_norm_like_the_dense_digest():
    """E over the weights of digest(e)^2 = |e|^2 for every digest (the sign digest of child.hashed too):
    the tolerance scale keeps its meaning."""
    g = torch.Generator().manual_seed(0)
    e = torch.randn(N, generator=g) * torch.linspace(0.1, 2.0, N)
    norm2 = float(e.double().pow(2).sum())
    for digest in ("rank1", "dense", "hash"):
        # weight seeds apart from e's: a default generator seeded 0 would redraw e's own normals
        sq = [float(_digest(e, _weights(N, 1000 + s, digest)).double().pow(2).mean()) for s in range(400)]
        assert sum(sq) / len(sq) == pytest.approx(norm2, rel=0.2), digest


@pytest.mark.slow
def test_honest_outputs_pass_and_wrong_or_skipped_ones_fail_as_often_as_with_dense_weights():
    """Over 200 weight draws: an honest output (errors well within atol/rtol) always passes; an output
    with all work skipped, or one element in seven off by 5, fails nearly always, and the rank-one digest
    misses no more often than the dense one (each digest misses when it lands within Z tolerance scales
    of the truth: for these errors, a few in a thousand per pair of digests). The sign digest
    (child.hashed, `digest="hash"`) is held to the same bar on each."""
    g = torch.Generator().manual_seed(5)
    ref = torch.randn(N, generator=g)
    scale = float(_tolerance_scale(ref, 1e-2, 1e-2))
    honest = ref + 1e-3 * torch.randn(N, generator=g)
    wrong = ref.clone()
    wrong[::7] += 5.0
    skipped = torch.zeros_like(ref)
    misses = {}
    for digest in ("rank1", "dense", "hash"):
        passed = caught_wrong = caught_skip = 0
        for s in range(200):
            w = _weights(N, 5000 + s, digest)
            r = _digest(ref, w).tolist()
            passed += tt.digest_mismatch(_digest(honest, w).tolist(), r, [scale] * 2) is None
            caught_wrong += tt.digest_mismatch(_digest(wrong, w).tolist(), r, [scale] * 2) is not None
            caught_skip += tt.digest_mismatch(_digest(skipped, w).tolist(), r, [scale] * 2) is not None
        assert passed == 200, digest
        misses[digest] = (200 - caught_wrong, 200 - caught_skip)
        assert max(misses[digest]) <= 6, (digest, misses)
    assert all(r <= d + 4 for r, d in zip(misses["rank1"], misses["dense"], strict=True)), misses


def test_the_burst_loop_and_the_eager_sequence_digest_alike():
    """What the reference digests for the sampled calls (`_sequence_digests`) equals what the candidate's
    burst computed for them (`_run`, here the loop: the CPU lane), call by call, for the same salt."""
    st = SimpleNamespace(device=torch.device("cpu"), task=SimpleNamespace(get_inputs=lambda: [torch.randn(N)]))

    def fn(x):
        return [torch.relu(x) * 1.5, x[:100] * 2.0]  # a rank-one output and a short (dense) one

    numels = [N, 100]
    plan = Plan(fn, 3, numels, _weight_buffers(numels, st.device, "rank1"), digest="rank1")
    salt = 1234
    got = _run(st, plan, salt, 2)  # type: ignore[arg-type]
    want, _ = _sequence_digests(st, fn, salt, 3, 2, numels, digest="rank1")  # type: ignore[arg-type]
    n_dig = 2 * DIGESTS_PER_OUTPUT
    assert not torch.isnan(got[:, :n_dig]).any()
    assert torch.allclose(got[:, :n_dig], want[:, :n_dig], rtol=1e-5, atol=1e-4)
    # a different salt draws other inputs and weights: other digests
    other = _run(st, plan, salt + 1, 2)  # type: ignore[arg-type]
    assert not torch.allclose(other[:, :n_dig], got[:, :n_dig])
    assert math.isfinite(float(got[0, 0]))


def test_the_digest_travels_in_both_requests():
    for req in (P.BurstPrepare(8, "model", True, False, False, "rank1"), P.Digests(9, [1, 2], 1e-2, 1e-2, "rank1")):
        assert P.request_from_wire(P.to_wire(req)) == req and req.digest == "rank1"
    assert P.BurstPrepare(8).digest == "dense" and P.Digests(9, [1], 1e-2, 1e-2).digest == "dense"


@pytest.mark.slow
def test_the_clocks_opt_ins_run_end_to_end_on_the_cpu_lane(tmp_path, cache_env):
    """EvalConfig.clock_digest="rank1", clock_flush and clock_fresh_baselines together, through a whole
    evaluation in real children (the CPU lane: the flush is a GPU-only step and is not taken there). The
    candidate's burst digests, rank-one, must match the reference's for the sampled calls (a side that
    digested otherwise ends INCORRECT, "wrong output in the back-to-back calls"). The verdict itself is
    not asserted: the CPU lane's host clock follows the machine's load (on a loaded 2-core machine an
    honest candidate's fresh baselines were read 3x off), which is the GPU's business to measure."""
    import shutil

    from conftest import FIXTURES, cpu_cfg

    from cuda_agent.eval.api import evaluate_workspace
    from cuda_agent.eval.judge.result import Status
    from cuda_agent.task import Task
    from cuda_agent.task.workspace import init_workspace

    lane = FIXTURES / "cpu_lane"
    src = (lane / "task.py").read_text().replace("torch.randn(64, 257)", "torch.randn(512, 257)")
    assert 512 * 257 >= RANK1_MIN
    ws = init_workspace(Task.from_source(src, name="relu2_wide"), tmp_path / "ws")
    shutil.copytree(lane / "kernels", ws / "kernels", dirs_exist_ok=True)
    shutil.copy(lane / "model_new.py", ws / "model_new.py")
    cfg = cpu_cfg(
        reuse_results=False,
        clock_digest="rank1",
        clock_flush=True,
        clock_fresh_baselines=True,
        clock_cold_digest=True,
    )
    r = evaluate_workspace(ws, config=cfg)
    assert r.status is Status.OK or (r.status is Status.REJECTED and "timing-forged" in r.message), (
        r.message,
        r.log[-1500:],
    )
    assert "burst_check" in r.phases_s and r.trusted_mode == "host+rank1" and r.trusted_ms is not None, r.phases_s
