"""The evaluator's clock's commands in an evaluation child: prepared bursts, bursts, digests (`timing/clock.py`).

Contract: a burst's sequence, for a secret salt, is fixed: seed the default generators once with
the salt; draw each output's digest weights (a (DIGESTS_PER_OUTPUT, numel) standard-normal
matrix, `normal_` into a buffer, in output order); then, per replay, k times: the task's next
input set (`get_inputs` under the evaluation device), the call, each output reduced to its
digests (W @ out, one GEMV into a row of a device buffer; with `digest="rank1"` the bilinear
v^T X w of the output viewed as an about square matrix, which reads only the output, not W as well:
the same variance per digest, a third of the memory traffic; with `digest="hash"` sums of +-out_i
whose signs hash the index under a per-burst key, one read of the output in its own dtype,
`hashed.digest_into`); with `draws="fast"` the task's float draws come from `hashed`'s counter-based
generator instead of torch's (the same shapes, dtypes and distributions, bound by memory, not
arithmetic); with `cold_digest`, L2 is flushed
between each call and its digest, so the digest reads the output from memory, as the loop's does. `cmd_prepare` makes a side's burst
ready before any clocked request: learns its outputs' sizes from one call and, on a GPU,
captures the k calls as one CUDA graph under a dummy seed (a capture that fails is reported,
and the side falls back to the Python loop). `cmd_burst` runs it for the request's salt: the
weights drawn eagerly into the graph's own buffers, then `replays` graph replays (replay reads
the generator's seed and offset on the device, so the graph's draws continue the salt's
sequence exactly as the eager draws would), or the Python loop; one read-back at the end; the
parent clocks the request. `cmd_digests` (reference) replays the sequence eagerly and digests
its own outputs for sampled calls, with each digest's tolerance scale; on a GPU it reaches each
sampled call's draws by setting the generator's offset (`_jumped_digests`) where the draws step
that offset evenly and touch no other generator, and says so (`jumped`): the parent then asks for
the sequence drawn call by call before it calls a mismatch wrong. `cmd_warm` (reference)
makes torch.compile's callable ready, or (mode "loop") keeps one set of outputs for the loop,
which times the draws and digests with no model. Mode "draws" (reference) digests the inputs
themselves: `cmd_prepare(verify=True)` replays its graph once and compares with the eager
sequence, so a task whose draws are not graph-safe (CPU generator, numpy) is found before any
candidate is judged by it.

Not guaranteed: anything once candidate code runs in the process: the parent checks sampled
digests against the reference and judges the clock's times (`timing/clock.py`).
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from cuda_agent.eval.channel import messages as P
from cuda_agent.eval.child import hashed
from cuda_agent.eval.child.state import State, device_index, flatten, hijack, make_inputs, seed_all, sync
from cuda_agent.eval.shared.events import derive_seed, l2_flush_buffer

DIGESTS_PER_OUTPUT = 2  # independent weight rows: a wrong output slips past one with ~10 % chance, past both ~1 %
MAX_OUTPUTS = 16  # outputs digested per call
WIDTH = MAX_OUTPUTS * DIGESTS_PER_OUTPUT
RANK1_MIN = 1 << 16  # outputs shorter than this stay dense (their weights are small anyway)


def rank1_width(n: int) -> int:
    """Columns of the rank-one digest's view of an n-element output: the power of two at or above sqrt(n),
    so the view is about square. A wrong output's error matrix then has many rows of its own, and
    v^T E w, a sum of many products of normals, is near normal; a view of a few long rows would leave
    it a product of two normals, small far more often (a skipped half caught 36 times in 40, not 40)."""
    return 1 << max(0, math.ceil(math.log2(math.sqrt(n))))


@dataclass
class Rank1:
    """One output's rank-one digest weights: the output's first rows x width elements (`rank1_width`)
    viewed as a matrix X give v^T X w per digest (w: (width, D), v: (rows, D)); the rest, fewer than
    width elements, is digested densely by `tail` (D, rest). With v, w and tail standard normal,
    a digest's variance over the weights is the squared norm of the output's error (as the dense
    digest's), so the reference's tolerance scales hold for both; its tails are heavier (a product of
    two normals), which matters only for errors near the whole tolerance everywhere."""

    w: torch.Tensor
    v: torch.Tensor
    tail: torch.Tensor

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return (self.w, self.v, self.tail)


@dataclass
class HashKey:
    """One output's sign digest (`hashed.digest_into`): its key, drawn per burst, and its element count."""

    key: torch.Tensor
    n: int

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return (self.key,)


@dataclass
class Plan:
    """One side's prepared burst: its callable, its outputs' sizes, its weight buffers and, on a GPU,
    its captured graph and the graph's digest buffer."""

    fn: Callable[..., Any]
    k: int
    numels: list[int | None]  # per output (up to MAX_OUTPUTS): its element count, None for a non-tensor
    weights: list[Any]  # per output: a dense (D, n) tensor, a Rank1, or None
    graph: Any = None
    digests: torch.Tensor | None = None
    flush: torch.Tensor | None = None  # written before each call: the L2 flush of the event timing
    digest: str = "dense"
    cold: torch.Tensor | None = None  # written between each call and its digest: the digest reads from memory
    draws: str = "torch"  # "fast": the task's float draws from `hashed` (EvalConfig.clock_draws)


def _flat(t: torch.Tensor) -> torch.Tensor:
    return (torch.view_as_real(t) if t.is_complex() else t).reshape(-1).to(torch.float32)


def _numels(outs: list[Any]) -> list[int | None]:
    return [(_flat(t).numel() if isinstance(t, torch.Tensor) else None) for t in outs[:MAX_OUTPUTS]]


def _weight_buffers(numels: list[int | None], device: torch.device, digest: str = "dense") -> list[Any]:
    if digest not in P.DIGESTS:
        raise ValueError(f"unknown digest {digest!r}")
    out: list[Any] = []
    for n in numels:
        if n is None:
            out.append(None)
        elif digest == "hash":
            out.append(HashKey(torch.zeros(2, dtype=torch.int32, device=device), n))
        elif digest == "rank1" and n >= RANK1_MIN:
            width = rank1_width(n)
            rows = n // width
            out.append(
                Rank1(
                    torch.empty((width, DIGESTS_PER_OUTPUT), device=device),
                    torch.empty((rows, DIGESTS_PER_OUTPUT), device=device),
                    torch.empty((DIGESTS_PER_OUTPUT, n - rows * width), device=device),
                )
            )
        else:
            out.append(torch.empty((DIGESTS_PER_OUTPUT, n), device=device))
    return out


def _weight_tensors(w: Any) -> tuple[torch.Tensor, ...]:
    """The tensors one output's weights draw into, in their drawing order."""
    return w.tensors() if isinstance(w, (Rank1, HashKey)) else () if w is None else (w,)


def _draw_weights(weights: list[Any]) -> None:
    """The salt's weights, in output order, from the default generator (seeded just before)."""
    for w in weights:
        for t in _weight_tensors(w):
            if t.dtype == torch.int32:
                t.random_()  # a sign digest's key
            else:
                t.normal_()


def _numel_of(w: Any) -> int:
    if isinstance(w, Rank1):
        return int(w.v.shape[0]) * int(w.w.shape[0]) + int(w.tail.shape[1])
    if isinstance(w, HashKey):
        return w.n
    return int(w.shape[1])


def _digest_into(outs: list[Any], weights: list[Any], row: torch.Tensor) -> None:
    """Per output, DIGESTS_PER_OUTPUT entries of W @ out in `row` (one GEMV each, no read-back); an output
    that is not a tensor, or whose size differs from the weights', stays NaN (a wrong output)."""
    for j, t in enumerate(outs[:MAX_OUTPUTS]):
        w = weights[j] if j < len(weights) else None
        if not isinstance(t, torch.Tensor) or w is None:
            continue
        native = isinstance(w, HashKey) and t.dtype in hashed.DTYPES
        x = t.reshape(-1) if native else _flat(t)  # the sign digest reads a float output in its own dtype
        if x.numel() != _numel_of(w):
            continue
        dst = row[DIGESTS_PER_OUTPUT * j : DIGESTS_PER_OUTPUT * (j + 1)]
        if isinstance(w, HashKey):
            hashed.digest_into(x, w.key, dst)
        elif isinstance(w, Rank1):
            width = int(w.w.shape[0])
            main = int(w.v.shape[0]) * width
            # each row of X against w (one skinny GEMM that reads X once), the rows weighted by v and summed
            torch.sum(torch.mm(x[:main].view(-1, width), w.w).mul_(w.v), dim=0, out=dst)
            if w.tail.shape[1]:
                dst.add_(torch.mv(w.tail, x[main:]))
        else:
            torch.mv(w, x, out=dst)


def _draw(st: State, draws: str = "torch") -> list[Any]:
    """The next input set from the task's own get_inputs (no reseeding: the sequence's); with
    draws "fast", its float draws from `hashed` (the same shapes, dtypes and distributions)."""
    with st.device, hashed.patched(st.device) if draws == "fast" else contextlib.nullcontext():
        inputs = st.task.get_inputs()
    return [x.to(st.device) if isinstance(x, torch.Tensor) else x for x in inputs]


def _draws(st: State, k: int, draws: str = "torch") -> Iterator[list[Any]]:
    """The next k input sets (`_draw`)."""
    for _ in range(k):
        yield _draw(st, draws)


def _body(st: State, plan: Plan, digests: torch.Tensor) -> None:
    """k calls, each on the next input set (then, with a flush buffer, L2 flushed), digested into
    digests[i]: what a graph captures."""
    for i, x in enumerate(_draws(st, plan.k, plan.draws)):
        if plan.flush is not None:
            plan.flush.zero_()
        outs = flatten(plan.fn(*x))
        if plan.cold is not None:
            plan.cold.zero_()
        _digest_into(outs, plan.weights, digests[i])


def _tolerance_scale(t: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """sqrt(sum((atol + rtol |t|)^2)): how far a digest of an output within tolerance may move."""
    return torch.linalg.vector_norm((atol + rtol * t.abs()).to(torch.float64))


def _columns(values: torch.Tensor, n_out: int) -> torch.Tensor:
    """The digests of the outputs there are, as float64 on the host (one device sync for the whole burst)."""
    return values[:, : n_out * DIGESTS_PER_OUTPUT].double().cpu().contiguous()


def _rows(values: torch.Tensor, n_out: int) -> list[list[float | None]]:
    return [[None if math.isnan(v) else v for v in r] for r in _columns(values, n_out).tolist()]


def compiled_or_model(st: State, mode: str) -> Any:
    if mode == "loop":  # the burst loop with no model in it: draws and digests only
        if st.role != "reference" or st.loop_outs is None:
            raise PermissionError("the loop burst runs in the reference, after its Warm")
        outs = st.loop_outs
        return lambda *_: outs
    if mode == "draws":  # the inputs themselves: the graph-safety probe of the task's draws
        if st.role != "reference":
            raise PermissionError("the draws probe runs in the reference")
        return lambda *xs: [x for x in xs if isinstance(x, torch.Tensor)]
    if mode == "compiled":
        if st.role != "reference":
            raise PermissionError("only the reference is compiled")
        if st.compiled is None:
            st.compiled = torch.compile(st.model)
        return st.compiled
    if mode in ("max-autotune", "cuda-graph"):  # extra baselines (eval.timing.baseline_set), reference only
        if st.role != "reference":
            raise PermissionError("only the reference times the extra baselines")
        if mode not in st.extra_baselines:
            st.extra_baselines[mode] = (
                torch.compile(st.model, mode="max-autotune-no-cudagraphs")
                if mode == "max-autotune"
                else GraphReplay(st.model)
            )
        return st.extra_baselines[mode]
    return st.model


class GraphReplay:
    """Eager replayed from a CUDA graph: captured on the first call (after 3 warm-up calls on a side
    stream), then each call copies its inputs into the graph's static buffers and replays it; the
    outputs are the graph's static outputs. A new input shape captures again. On the CPU lane: eager."""

    def __init__(self, model: Any):
        self.model = model
        self.graphs: dict[tuple[Any, ...], tuple[Any, list[Any], Any]] = {}

    def __call__(self, *inputs: Any) -> Any:
        if not any(isinstance(x, torch.Tensor) and x.is_cuda for x in inputs):
            return self.model(*inputs)
        key = tuple((tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else repr(x) for x in inputs)
        if key not in self.graphs:
            static = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    self.model(*static)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                out = self.model(*static)
            self.graphs[key] = (g, static, out)
        g, static, out = self.graphs[key]
        for s, x in zip(static, inputs, strict=True):
            if isinstance(s, torch.Tensor):
                s.copy_(x)
        g.replay()
        return out


def warm_digest_path(device: torch.device) -> None:
    """Load the digests' kernels (and the GEMV's cuBLAS handle) before any request: at start-up, which a
    spare child does while its caller is idle (H200, 2026-12-04: a first burst paid 0.08-0.13 s for
    them). Sizes on both sides of cuBLAS's GEMV kernel choices. Draws from private generators only."""
    for n in (1 << 12, 1 << 22):
        g = torch.Generator(device=device)
        g.manual_seed(n)
        x = torch.randn(n, generator=g, device=device)  # not the default generator: the task's draws are seeded
        w = torch.randn((DIGESTS_PER_OUTPUT, n), generator=g, device=device)
        row = torch.full((2 * DIGESTS_PER_OUTPUT,), float("nan"), device=device)
        _digest_into([x], [w], row)
        r1 = _weight_buffers([n], device, "rank1")[0]  # the rank-one digest's GEMM too (EvalConfig.clock_digest)
        for t in _weight_tensors(r1):
            t.normal_(generator=g)
        _digest_into([x], [r1], row)
        _rows(row.unsqueeze(0), 1)
        float(_tolerance_scale(x, 1e-5, 1e-5))


def cmd_warm(st: State, req: P.Warm) -> dict[str, Any]:
    if req.mode == "loop":
        if st.role != "reference":
            raise PermissionError("the loop burst runs in the reference")
        with torch.no_grad():
            st.loop_outs = [
                t.clone() if isinstance(t, torch.Tensor) else t for t in flatten(st.model(*make_inputs(st, req.seed)))
            ]
        sync(st)
        return {}
    fn = compiled_or_model(st, req.mode)
    with torch.no_grad():
        fn(*make_inputs(st, req.seed))
    sync(st)
    return {}


def reset_generators() -> None:
    """After a failed capture the CUDA generators stay in capture mode (torch skips their epilogue when
    ending the capture raises), and every later draw fails: give each a fresh state, same seed."""
    for gen in torch.cuda.default_generators:
        fresh = torch.Generator(device=gen.device)
        fresh.manual_seed(gen.initial_seed())
        gen.graphsafe_set_state(fresh.graphsafe_get_state())


def _capture(st: State, plan: Plan) -> str | None:
    """Capture the plan's k calls as one graph; None, or why it could not be captured."""
    cur = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(cur)
    with torch.cuda.stream(side):  # torch's advice: warm up on a side stream before capturing
        for x in _draws(st, 2, plan.draws):
            plan.fn(*x)
    cur.wait_stream(side)
    sync(st)
    digests = torch.full((plan.k, WIDTH), float("nan"), device=st.device)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            _body(st, plan, digests)
    except Exception as e:  # noqa: BLE001 - the candidate's code may not be capturable: then the Python loop
        reset_generators()
        sync(st)  # a sticky CUDA error surfaces here and ends the child, as any CUDA error does
        return f"{type(e).__name__}: {e}"[:300]
    sync(st)
    plan.graph, plan.digests = graph, digests
    return None


def _sequence_digests(
    st: State,
    fn: Callable[..., Any],
    salt: int,
    k: int,
    replays: int,
    numels: list[int | None],
    only: set[int] | None = None,
    digest: str = "dense",
    draws: str = "torch",
) -> tuple[torch.Tensor, list[list[Any]]]:
    """The salt's sequence run eagerly: digests of every call (or of `only`), and those calls' outputs."""
    seed_all(salt)
    weights = _weight_buffers(numels, st.device, digest)
    _draw_weights(weights)
    digests = torch.full((k * replays, WIDTH), float("nan"), device=st.device)
    kept: list[list[Any]] = []
    for c, x in enumerate(_draws(st, k * replays, draws)):
        if only is not None and c not in only:
            continue  # drawn all the same: the draws must follow the sequence
        outs = flatten(fn(*x))
        _digest_into(outs, weights, digests[c])
        kept.append(outs)
    return digests, kept


class _NoJump(Exception):
    """The sequence's draws are not one fixed step of the device generator's offset per call, touching
    nothing else: the calls before a sampled one must be drawn."""


def _device_generator(device: torch.device) -> torch.Generator:
    return torch.cuda.default_generators[device_index(device)]


def _other_rng(device: torch.device) -> tuple[Any, ...]:
    """Every generator state a task may draw from, but the device's default generator's offset: the CPU's,
    the other GPUs' offsets, Python's and numpy's."""
    own = device_index(device)
    gpus = tuple(g.get_offset() for i, g in enumerate(torch.cuda.default_generators) if i != own)
    np_state: Any = None
    with contextlib.suppress(ImportError):
        import numpy as np

        name, keys, pos, has_gauss, cached = np.random.get_state()
        np_state = (name, keys.tobytes(), pos, has_gauss, cached)
    return (bytes(torch.default_generator.get_state().numpy()), gpus, random.getstate(), np_state)


def _jumped_digests(
    st: State, fn: Callable[..., Any], salt: int, numels: list[int | None], only: set[int], digest: str, draws: str
) -> tuple[torch.Tensor, list[list[Any]]]:
    """`_sequence_digests` of calls `only` (k = 1 + the last), each sampled call's draws reached by setting the
    device generator's offset to where the sequence puts it (the offset's step per call is read from the
    first two calls), not by drawing every call before it: the reference's share of the clock's check was
    about 0.8 of each burst's draws (0.154 s an evaluation on the H100, 2026-12-07, fbd4f67). Raises _NoJump
    where the draws move anything but that offset, or by another step (a task drawing its sizes, say);
    the caller then draws every call, and the parent asks for that (`exact`) before calling a mismatch wrong."""
    last = max(only)
    gen = _device_generator(st.device)
    seed_all(salt)
    weights = _weight_buffers(numels, st.device, digest)
    _draw_weights(weights)
    start, others = gen.get_offset(), _other_rng(st.device)
    first = [_draw(st, draws)]
    step = gen.get_offset() - start
    first.append(_draw(st, draws))
    if gen.get_offset() != start + 2 * step or _other_rng(st.device) != others:
        raise _NoJump
    sampled = {c: x for c, x in enumerate(first) if c in only}  # an input set unsampled is not kept
    del first
    digests = torch.full((last + 1, WIDTH), float("nan"), device=st.device)
    kept: list[list[Any]] = []
    for c in sorted(only):
        if c < 2:
            x = sampled.pop(c)
        else:
            gen.set_offset(start + c * step)
            x = _draw(st, draws)
            if gen.get_offset() != start + (c + 1) * step or _other_rng(st.device) != others:
                raise _NoJump
        outs = flatten(fn(*x))
        _digest_into(outs, weights, digests[c])
        kept.append(outs)
    return digests, kept


def cmd_prepare(st: State, req: P.BurstPrepare) -> dict[str, Any]:
    """Make mode's burst of k calls ready (untimed): its outputs' sizes and, with req.graph on a GPU,
    its graph. Reply {"graph": captured?, "why": why not}. With req.verify (reference), one replay
    is compared with the eager sequence of the same salt, exactly (the draws are the same tensors)."""
    st.bursts.clear()  # one side at a time: each side's bursts follow its prepare (graphs hold memory)
    if req.draws not in P.DRAWS:
        raise ValueError(f"unknown draws {req.draws!r}")
    if P.light_loop(req.draws, req.digest):
        hashed.ready(st.device)  # or the reason it cannot be, the same in every child: the evaluation ends with it
    fn = compiled_or_model(st, req.mode)
    with torch.no_grad():
        numels = _numels(flatten(fn(*make_inputs(st, derive_seed(req.k, -7)))))
        weights = _weight_buffers(numels, st.device, req.digest)
        plan = Plan(fn, req.k, numels, weights, digest=req.digest, draws=req.draws)
        if req.flush and st.device.type == "cuda":
            plan.flush = l2_flush_buffer(st.device)
        if req.cold_digest and st.device.type == "cuda":
            plan.cold = plan.flush if plan.flush is not None else l2_flush_buffer(st.device)
        st.bursts[(req.mode, req.k)] = plan
        if not req.graph or st.device.type != "cuda":
            return {"graph": False, "why": "not asked" if not req.graph else "no GPU"}
        why = _capture(st, plan)
        if why is None and req.verify:
            salt = derive_seed(req.k, -11)
            got = _run(st, plan, salt, 1)
            want, _ = _sequence_digests(st, fn, salt, req.k, 1, numels, digest=req.digest, draws=req.draws)
            # mismatched draws are unrelated numbers (digests of order sqrt(numel)); GEMV rounding is not
            scale = float(torch.nan_to_num(want, nan=0.0).abs().max()) * 1e-4 + 1e-6
            if not torch.allclose(got, want, rtol=1e-4, atol=scale, equal_nan=True):
                plan.graph = None
                why = "the graph's draws differ from the eager sequence's (the task draws outside the CUDA generator?)"
    return {"graph": why is None, "why": why}


def _run(st: State, plan: Plan, salt: int, replays: int) -> torch.Tensor:
    """One burst of a prepared plan: the salt's weights, then the graph's replays (or the Python loop)."""
    seed_all(salt)  # the CUDA generators' seed and offset: graph replay reads them on the device
    _draw_weights(plan.weights)
    if plan.graph is not None and plan.digests is not None:
        out = torch.empty((replays * plan.k, WIDTH), device=st.device)
        for r in range(replays):
            plan.graph.replay()
            out[r * plan.k : (r + 1) * plan.k].copy_(plan.digests)
        return out
    out = torch.full((replays * plan.k, WIDTH), float("nan"), device=st.device)
    loop = Plan(
        plan.fn,
        replays * plan.k,
        plan.numels,
        plan.weights,
        flush=plan.flush,
        digest=plan.digest,
        cold=plan.cold,
        draws=plan.draws,
    )
    _body(st, loop, out)
    return out


def cmd_burst(st: State, req: P.Burst) -> dict[str, Any]:
    """k x replays back-to-back calls of a prepared side on the salt's sequence, digested on the device,
    one read-back at the end. The parent's clock around this request is the evaluator's clock."""
    if st.role == "candidate" and hijack().get("fake_digest"):  # a rewritten harness skipping the work
        return {"digests": P.PackedDigests.of([[float(i)] for i in range(req.k * req.replays)]).to_wire()}
    plan = st.bursts.get((req.mode, req.k))
    if plan is None:
        raise RuntimeError(f"no prepared burst of {req.k} calls for mode {req.mode!r}")
    with torch.no_grad():
        digests = _run(st, plan, req.salt, req.replays)
        rows = _columns(digests, len(plan.numels))  # NaN stands for None (P.PackedDigests)
        return {"digests": P.PackedDigests(rows.numpy().tobytes(), rows.shape[1]).to_wire()}


def cmd_digests(st: State, req: P.Digests) -> dict[str, Any]:
    """Reference role only: the digests of its own outputs for the sampled calls (indices into the
    burst's k x replays calls) and each one's tolerance scale sqrt(sum((atol + rtol |ref|)^2)): an
    output within atol/rtol everywhere has a digest within a few scales of the reference's."""
    if st.role != "reference":
        raise PermissionError("digests run in the reference process only")
    with torch.no_grad():
        numels = _numels(flatten(st.model(*make_inputs(st, derive_seed(req.salt, -3)))))
        only = set(req.calls)
        total = max(only) + 1 if only else 0
        if P.light_loop(req.draws, req.digest):
            hashed.ready(st.device)
        jumped = not req.exact and total > 2 and st.device.type == "cuda"
        if jumped:
            try:
                digests, kept = _jumped_digests(st, st.model, req.salt, numels, only, req.digest, req.draws)
            except _NoJump:
                jumped = False
        if not jumped:
            digests, kept = _sequence_digests(st, st.model, req.salt, total, 1, numels, only, req.digest, req.draws)
        order = sorted(only)
        rows = digests[order] if order else digests[:0]
        scales = torch.full_like(rows, float("nan"), dtype=torch.float64)
        for r, outs in enumerate(kept):
            for j, t in enumerate(outs[:MAX_OUTPUTS]):
                if isinstance(t, torch.Tensor):
                    scales[r, DIGESTS_PER_OUTPUT * j : DIGESTS_PER_OUTPUT * (j + 1)] = _tolerance_scale(
                        t, req.atol, req.rtol
                    )
        n_out = len(numels)
        return {"digests": _rows(rows, n_out), "scales": _rows(scales, n_out), "jumped": jumped}
