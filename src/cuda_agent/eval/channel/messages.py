"""The messages between the trusted parent and its evaluation children, typed and validated.

Contract:
- One frozen dataclass per request (`Setup`, `Run`, `Time`, `BurstPrepare`, `Burst`, `Warm`, `Digests`,
  `Compare`, `Controls`, `Bandwidth`); `to_wire(req)` makes the JSON object the parent sends and
  `request_from_wire(obj)` rebuilds it in the child (the child trusts its parent).
- One dataclass per reply; `parse_reply(cmd, obj)` is how the parent reads every reply. It
  checks the exact key set (a missing or an extra key is an error), every type, that numbers
  are finite and in range, and sizes are bounded, and returns the typed reply or raises
  `ProtocolError`. For the candidate child a `ProtocolError` is the candidate's failure (reward
  -1), never a harness error: a hijacked harness may send anything.
- Nothing a reply carries names a path, a GPU or a cache key: output files live at
  `output_path` / `timed_path` under a directory the parent created, and the parent computes
  those paths itself (a reply that carries a `file` is malformed). The GPU identity and the
  torch version are read by the parent.

Not guaranteed: that the values in a well-formed reply are true. The parent checks outputs
against the reference, bounds times with its own clock (`timing/clock.py`) and judges the guard
report; this module only guarantees their shape.

Standard library and `result` only (the children import it before the candidate loads).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import math
import os
from array import array
from dataclasses import dataclass, field
from typing import Any

from cuda_agent.eval.judge.result import CheckRecord

_CHECK_FIELDS = {f.name for f in dataclasses.fields(CheckRecord)}


class ProtocolError(ValueError):
    """A reply that is not what the protocol allows."""


# ------------------------------------------------------------------ paths (the parent's own)


def output_path(out_dir: str, tag: str, i: int) -> str:
    return os.path.join(out_dir, f"{tag}_{i}.bin")


def timed_path(out_dir: str, call: int) -> str:
    return os.path.join(out_dir, f"timed_call_{call}.bin")


# ------------------------------------------------------------------ requests


@dataclass(frozen=True)
class Solution:
    path: str
    so_path: str | None = None
    inline: dict[str, str] | None = None  # single-file: load_inline name -> the module the parent built


@dataclass(frozen=True)
class Setup:
    task_path: str
    init_seed: int
    precision: str
    device: str
    cwd: str
    solution: Solution | None = None
    guard: bool = False
    peer_io: str | None = None  # reference: the only dir whose output files it reads and removes
    cmd: str = "setup"


@dataclass(frozen=True)
class Run:
    seeds: list[int]
    tag: str
    keep: bool = False  # reference: keep outputs on the device for `Compare`
    out_dir: str | None = None  # candidate: write outputs to output_path(out_dir, tag, i)
    grow_seed: int | None = None  # the shape probe: join with this seed's set along dim 0
    cmd: str = "run"


@dataclass(frozen=True)
class Time:
    seeds: list[int]
    n_warmup: int
    n_timed: int
    max_cv: float
    max_rounds: int
    fresh_seed: int | None = None
    out_dir: str | None = None
    checked: list[float] = field(default_factory=list)  # fractions of a round: the parent picks the checked calls
    sync_before_end: bool = False
    compiled: bool = False
    spread: str = "cv"  # what a round's max_cv bounds: "cv" or "p10p90" (timing.time_calls)
    variant: str = ""  # reference only: an extra baseline's mode (baseline_set.CHILD_MODE); "" as `compiled` says
    cmd: str = "time"


@dataclass(frozen=True)
class BurstPrepare:
    """Make a side's burst of k calls ready before any clocked request (`child.burst.cmd_prepare`): its
    outputs' sizes and, with `graph` on a GPU, a CUDA graph of the k calls. mode "model": the model as
    loaded; "compiled" (reference): torch.compile of it, warmed up by `Warm`; "loop" (reference): no
    model, the outputs `Warm` kept (the draws and digests alone); "draws" (reference): the inputs
    themselves, with `verify` (one replay against the eager sequence: are the task's draws graph-safe?).
    `flush`: before each call the L2 cache is flushed (a write of twice its size), as the event timing
    does, so that a burst's calls read their inputs from memory as timed calls do (EvalConfig.clock_flush).
    `cold_digest`: the L2 cache is flushed between each call and its digest, so that the digest reads the
    output from memory on every side, the loop's included (EvalConfig.clock_cold_digest)."""

    k: int
    mode: str = "model"
    graph: bool = True
    verify: bool = False
    flush: bool = False
    digest: str = "dense"  # "dense", "rank1" or "hash" (child_burst): EvalConfig.clock_digest
    cold_digest: bool = False
    draws: str = "torch"  # or "fast" (child.hashed): EvalConfig.clock_draws
    cmd: str = "prepare"


DIGESTS = ("dense", "rank1", "hash")  # a burst's digest (EvalConfig.clock_digest, besides "auto"; child.burst)
DRAWS = ("torch", "fast")  # a burst's draws (EvalConfig.clock_draws, besides "auto"; child.hashed)


def light_loop(draws: str, digest: str) -> bool:
    """Whether a burst's settings ask for the clock's lighter loop (child.hashed): EvalConfig.clock_draws
    "fast" or clock_digest "hash". Both sides ask it: the parent to warm the children, a child to refuse."""
    return draws == "fast" or digest == "hash"


@dataclass(frozen=True)
class Burst:
    """k x replays back-to-back calls of a prepared side on the sequence of the secret `salt` (the
    digest weights, then the task's input sets), each output reduced to digests on the device
    (`timing/clock.py`). The parent clocks the request."""

    salt: int
    k: int
    mode: str = "model"
    replays: int = 1
    cmd: str = "burst"


@dataclass(frozen=True)
class Warm:
    """Reference: make `mode`'s callable ready (compile it, call it once) outside any timed request."""

    mode: str
    seed: int
    cmd: str = "warm"


@dataclass(frozen=True)
class Digests:
    """Reference: digests of its own outputs for calls `calls` (indices into a burst's k x replays
    calls) of the salt's sequence, and the tolerance scale of each."""

    salt: int
    calls: list[int]
    atol: float
    rtol: float
    digest: str = "dense"  # as the burst's BurstPrepare said
    draws: str = "torch"  # likewise
    exact: bool = False  # draw every call before the last sampled one (no jump by the generator's offset)
    cmd: str = "digests"


@dataclass(frozen=True)
class Compare:
    ref: str
    label: str
    file: str
    meta: list[dict[str, Any]]
    atol: float
    rtol: float
    max_bytes: int
    cmd: str = "compare"


@dataclass(frozen=True)
class Controls:
    seeds: list[int]
    fixed_seed: int
    atol: float
    rtol: float
    cmd: str = "controls"


@dataclass(frozen=True)
class Bandwidth:
    nbytes: int = 1 << 30
    repeats: int = 5
    cmd: str = "bandwidth"


Request = Setup | Run | Time | BurstPrepare | Burst | Warm | Digests | Compare | Controls | Bandwidth
_REQUESTS: dict[str, type] = {
    c.cmd: c for c in (Setup, Run, Time, BurstPrepare, Burst, Warm, Digests, Compare, Controls, Bandwidth)
}  # type: ignore[attr-defined]


def to_wire(req: Request) -> dict[str, Any]:
    return dataclasses.asdict(req)


def request_from_wire(obj: dict[str, Any]) -> Request:
    cls = _REQUESTS.get(obj.get("cmd", ""))
    if cls is None:
        raise ProtocolError(f"unknown command {obj.get('cmd')!r}")
    kw = dict(obj)
    if cls is Setup and kw.get("solution") is not None:
        kw["solution"] = Solution(**kw["solution"])
    return cls(**kw)


# ------------------------------------------------------------------ replies

MAX_LIST = 100_000
MAX_TEXT = 20_000
DTYPES = {
    "float32",
    "float64",
    "float16",
    "bfloat16",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "bool",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e5m2",
}
_ITEMSIZE = {
    "float32": 4,
    "float64": 8,
    "float16": 2,
    "bfloat16": 2,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "bool": 1,
    "complex64": 8,
    "complex128": 16,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}


def _keys(obj: Any, where: str, required: set[str], optional: set[str] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    if not isinstance(obj, dict):
        raise ProtocolError(f"{where}: expected an object, got {type(obj).__name__}")
    keys = set(obj)
    if missing := required - keys:
        raise ProtocolError(f"{where}: missing {sorted(missing)}")
    if extra := keys - required - optional:
        raise ProtocolError(f"{where}: unexpected {sorted(extra)[:5]}")
    return obj


def _int(v: Any, where: str, lo: int = 0, hi: int = 1 << 62) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ProtocolError(f"{where}: expected an integer in [{lo}, {hi}], got {v!r}"[:200])
    return v


def _num(v: Any, where: str, lo: float = 0.0, hi: float = 1e12, none: bool = False) -> float | None:
    if v is None and none:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not lo <= v <= hi:
        raise ProtocolError(f"{where}: expected a finite number in [{lo}, {hi}], got {v!r}"[:200])
    return float(v)


def _bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise ProtocolError(f"{where}: expected true or false, got {v!r}"[:200])
    return v


def _str(v: Any, where: str, limit: int = MAX_TEXT) -> str:
    if not isinstance(v, str) or len(v) > limit:
        raise ProtocolError(f"{where}: expected a string of at most {limit} characters")
    return v


def _list(v: Any, where: str, limit: int = MAX_LIST) -> list[Any]:
    if not isinstance(v, list) or len(v) > limit:
        raise ProtocolError(f"{where}: expected a list of at most {limit} items")
    return v


@dataclass(frozen=True)
class TensorMeta:
    tensor: bool
    type: str | None = None  # non-tensor outputs: the Python type's name
    plain: bool = True
    dtype: str = ""
    shape: tuple[int, ...] = ()
    device: str = ""
    contiguous: bool = True
    nbytes: int = 0
    aliases_input: bool = False

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["shape"] = list(self.shape)
        return d


def _meta(obj: Any, where: str) -> TensorMeta:
    if isinstance(obj, dict) and obj.get("tensor") is False:
        o = _keys(obj, where, {"tensor", "type"})
        return TensorMeta(False, type=_str(o["type"], where + ".type", 200))
    o = _keys(obj, where, {"tensor", "plain", "dtype", "shape", "device", "contiguous", "nbytes", "aliases_input"})
    dtype = _str(o["dtype"], where + ".dtype", 40)
    if dtype not in DTYPES:
        raise ProtocolError(f"{where}.dtype: unknown dtype {dtype!r}")
    shape = tuple(_int(s, where + ".shape", 0, 1 << 40) for s in _list(o["shape"], where + ".shape", 16))
    nbytes = _int(o["nbytes"], where + ".nbytes")
    if nbytes != math.prod(shape) * _ITEMSIZE[dtype]:
        raise ProtocolError(f"{where}: nbytes {nbytes} does not match shape {list(shape)} of {dtype}")
    return TensorMeta(
        True,
        None,
        _bool(o["plain"], where + ".plain"),
        dtype,
        shape,
        _str(o["device"], where + ".device", 40),
        _bool(o["contiguous"], where + ".contiguous"),
        nbytes,
        _bool(o["aliases_input"], where + ".aliases_input"),
    )


@dataclass(frozen=True)
class OutputRecord:
    meta: list[TensorMeta]
    inputs_mutated: bool = False
    in_nbytes: int = 0
    call: int | None = None  # timed outputs: which timed call produced them


def _output(obj: Any, where: str, timed: bool) -> OutputRecord:
    req = {"meta", "call"} if timed else {"meta", "inputs_mutated", "in_nbytes"}
    o = _keys(obj, where, req)
    meta = [_meta(m, f"{where}.meta[{i}]") for i, m in enumerate(_list(o["meta"], where + ".meta", 64))]
    if timed:
        return OutputRecord(meta, call=_int(o["call"], where + ".call", 0, 1 << 30))
    return OutputRecord(
        meta, _bool(o["inputs_mutated"], where + ".inputs_mutated"), _int(o["in_nbytes"], where + ".in_nbytes")
    )


@dataclass(frozen=True)
class GuardReport:
    ops: dict[str, int]
    new_threads: list[str]


def _guard(obj: Any, where: str) -> GuardReport:
    o = _keys(obj, where, {"ops", "new_threads"})
    ops = o["ops"]
    if not isinstance(ops, dict) or len(ops) > 10_000:
        raise ProtocolError(f"{where}.ops: expected an object")
    return GuardReport(
        {_str(k, where + ".ops", 300): _int(v, where + ".ops") for k, v in ops.items()},
        [_str(t, where + ".new_threads", 300) for t in _list(o["new_threads"], where + ".new_threads", 1000)],
    )


def _split(obj: Any, where: str) -> dict[str, float]:
    if not isinstance(obj, dict) or len(obj) > 16:
        raise ProtocolError(f"{where}: expected an object of seconds")
    return {_str(k, where, 40): _num(v, f"{where}.{k}", 0.0, 1e6) for k, v in obj.items()}  # type: ignore[misc]


_STAT_KEYS = {
    "median_ms",
    "mean_ms",
    "min_ms",
    "cv",
    "spread",
    "n",
    "rounds",
    "host_over_event",
    "probe_ms",
    "enqueue_ms",
    "hold_ms",
}


def _stats(obj: Any, where: str) -> dict[str, Any]:
    o = _keys(obj, where, _STAT_KEYS)
    out: dict[str, Any] = {
        k: _num(o[k], f"{where}.{k}", 0.0, 1e9, none=k in ("host_over_event", "probe_ms", "enqueue_ms", "hold_ms"))
        for k in _STAT_KEYS - {"n", "rounds"}
    }
    out["n"] = _int(o["n"], where + ".n", 1, 10_000_000)
    out["rounds"] = _int(o["rounds"], where + ".rounds", 1, 1000)
    if not out["min_ms"] <= out["median_ms"] * (1 + 1e-9) or out["mean_ms"] < out["min_ms"] * (1 - 1e-9):
        raise ProtocolError(f"{where}: min {out['min_ms']} is above the median or the mean")
    return out


@dataclass(frozen=True)
class SetupReply:
    notes: list[str]


@dataclass(frozen=True)
class RunReply:
    outputs: list[OutputRecord]
    guard: GuardReport | None = None
    t: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class TimeReply:
    stats: dict[str, Any]
    outputs: list[OutputRecord]
    guard: GuardReport | None = None
    t: dict[str, float] = field(default_factory=dict)  # the child's split (calls, guard, save): a report only


MAX_BURST_CALLS = 1 << 16  # a burst's calls, far above what clock.burst_shape asks (K_MAX x MAX_REPLAYS)


@dataclass(frozen=True)
class PackedDigests:
    """A burst's digests as the child sent them: one row of `cols` float64 per call, packed (native byte
    order: both ends run on one machine). Why packed: the reply is inside the parent's clock, and as JSON
    numbers it cost about 2 us a call to write and read (4096 calls: 8 ms of a 15 ms burst), host work
    that scales with the calls, so it lands in the loop's per-call cost and its jitter in every net. A row
    is decoded only when the reference checks it (`check_burst_outputs`). NaN is None: a non-tensor
    output, or a candidate's non-finite one (judged by the parent, not a malformed reply)."""

    raw: bytes
    cols: int

    def __len__(self) -> int:
        return len(self.raw) // (8 * self.cols) if self.cols else 0

    def __getitem__(self, i: int) -> list[float | None]:
        if not 0 <= i < len(self):
            raise IndexError(i)
        row = array("d")
        row.frombytes(self.raw[8 * self.cols * i : 8 * self.cols * (i + 1)])
        return [None if math.isnan(v) else v for v in row]

    @classmethod
    def of(cls, rows: list[list[float | None]]) -> PackedDigests:
        """From rows of numbers (None: NaN), all of one length."""
        cols = len(rows[0]) if rows else 0
        if any(len(r) != cols for r in rows):
            raise ValueError("digest rows of different lengths")
        return cls(array("d", [math.nan if v is None else v for r in rows for v in r]).tobytes(), cols)

    def to_wire(self) -> dict[str, Any]:
        return {"f64": base64.b64encode(self.raw).decode("ascii"), "cols": self.cols}


def _packed_digests(v: Any, where: str) -> PackedDigests:
    o = _keys(v, where, {"f64", "cols"})
    cols = _int(o["cols"], where + ".cols", 0, 64)
    text = _str(o["f64"], where + ".f64", 4 * (8 * 64 * MAX_BURST_CALLS) // 3 + 4)
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError(f"{where}.f64: not base64") from None
    if (cols == 0 and raw) or (cols and len(raw) % (8 * cols)):
        raise ProtocolError(f"{where}: {len(raw)} bytes are not rows of {cols} float64")
    return PackedDigests(raw, cols)


@dataclass(frozen=True)
class BurstReply:
    digests: PackedDigests


@dataclass(frozen=True)
class PrepareReply:
    graph: bool  # the side's burst is a captured CUDA graph (else the Python loop)
    why: str | None  # why not


@dataclass(frozen=True)
class WarmReply:
    pass


@dataclass(frozen=True)
class DigestsReply:
    digests: list[list[float | None]]
    scales: list[list[float | None]]
    jumped: bool = False  # the sampled calls' draws reached by the generator's offset, not by drawing the calls before


@dataclass(frozen=True)
class CompareReply:
    check: dict[str, Any]
    t: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ControlsReply:
    controls: dict[str, dict[str, Any]]  # reference role only (lint-task): control name -> its result


@dataclass(frozen=True)
class BandwidthReply:
    bytes_per_s: float | None


@dataclass(frozen=True)
class ErrorReply:
    error: str
    traceback: str = ""
    cuda_error: bool = False


Reply = (
    SetupReply
    | RunReply
    | TimeReply
    | PrepareReply
    | BurstReply
    | WarmReply
    | DigestsReply
    | CompareReply
    | ControlsReply
    | BandwidthReply
    | ErrorReply
)


def _digest_rows(v: Any, where: str) -> list[list[float | None]]:
    """Rows of numbers (None for a non-tensor output). A non-finite digest is kept: it is the
    candidate's wrong output, judged by the parent, not a malformed reply."""
    out = []
    for r in _list(v, where, 100_000):
        row: list[float | None] = []
        for x in _list(r, where, 64):
            if x is not None and (isinstance(x, bool) or not isinstance(x, (int, float))):
                raise ProtocolError(f"{where}: expected a number, got {x!r}"[:200])
            row.append(None if x is None else float(x))
        out.append(row)
    return out


def parse_reply(cmd: str, obj: Any) -> Reply:
    """The typed reply to `cmd`, or ProtocolError."""
    where = f"reply to {cmd}"
    if not isinstance(obj, dict) or not isinstance(obj.get("ok"), bool):
        raise ProtocolError(f"{where}: expected an object with a boolean 'ok'")
    body = {k: v for k, v in obj.items() if k != "ok"}
    if not obj["ok"]:
        o = _keys(body, where, {"error"}, {"traceback", "cuda_error"})
        return ErrorReply(
            _str(o["error"], where + ".error"),
            _str(o.get("traceback", ""), where + ".traceback"),
            _bool(o.get("cuda_error", False), where + ".cuda_error"),
        )
    if cmd == "setup":
        o = _keys(body, where, {"notes"})
        return SetupReply([_str(n, where + ".notes", 2000) for n in _list(o["notes"], where + ".notes", 50)])
    if cmd == "run":
        o = _keys(body, where, {"outputs", "t"}, {"guard"})
        outs = [
            _output(r, f"{where}.outputs[{i}]", False)
            for i, r in enumerate(_list(o["outputs"], where + ".outputs", 1000))
        ]
        return RunReply(
            outs, _guard(o["guard"], where + ".guard") if "guard" in o else None, _split(o["t"], where + ".t")
        )
    if cmd == "time":
        o = _keys(body, where, {"stats", "outputs"}, {"guard", "t"})
        outs = [
            _output(r, f"{where}.outputs[{i}]", True)
            for i, r in enumerate(_list(o["outputs"], where + ".outputs", 1000))
        ]
        return TimeReply(
            _stats(o["stats"], where + ".stats"),
            outs,
            _guard(o["guard"], where + ".guard") if "guard" in o else None,
            _split(o.get("t", {}), where + ".t"),
        )
    if cmd == "burst":
        o = _keys(body, where, {"digests"})
        return BurstReply(_packed_digests(o["digests"], where + ".digests"))
    if cmd == "prepare":
        o = _keys(body, where, {"graph", "why"})
        return PrepareReply(
            _bool(o["graph"], where + ".graph"), None if o["why"] is None else _str(o["why"], where + ".why", 400)
        )
    if cmd == "warm":
        _keys(body, where, set())
        return WarmReply()
    if cmd == "digests":
        o = _keys(body, where, {"digests", "scales"}, {"jumped"})
        return DigestsReply(
            _digest_rows(o["digests"], where + ".digests"),
            _digest_rows(o["scales"], where + ".scales"),
            _bool(o.get("jumped", False), where + ".jumped"),
        )
    if cmd == "compare":
        o = _keys(body, where, {"check"}, {"t"})
        return CompareReply(
            _keys(o["check"], where + ".check", {"label", "passed"}, _CHECK_FIELDS - {"label", "passed"}),
            _split(o.get("t", {}), where + ".t"),
        )
    if cmd == "controls":
        o = _keys(body, where, {"controls"})
        ctl = o["controls"]
        if not isinstance(ctl, dict) or not all(isinstance(v, dict) for v in ctl.values()):
            raise ProtocolError(f"{where}.controls: expected an object of objects")
        return ControlsReply(ctl)
    if cmd == "bandwidth":
        o = _keys(body, where, {"bytes_per_s"})
        return BandwidthReply(_num(o["bytes_per_s"], where + ".bytes_per_s", 0.0, 1e16, none=True))
    raise ProtocolError(f"unknown command {cmd!r}")
