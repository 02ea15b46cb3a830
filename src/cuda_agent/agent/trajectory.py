"""The trajectory file of a run: an append-only JSON-lines log, and its loader.

Format "cuda-agent-trajectory/1" (documented in docs/trajectory.md): a header
line, then one record per event in the order it happened: messages (system,
task, assistant replies with usage, tool results), evaluator results
(`EvalResult.to_dict()`), notes (elisions, tool-mode switches, retries, harness
errors, new best candidates), and an end record with the reason, usage and
final reward.

Contract: every record is written with flush and fsync before `write` returns,
so a crash loses at most the record being written. Messages are logged as they
were first sent; elision is logged as a note, so the loader rebuilds the full,
unelided conversation. `load_trajectory` accepts a file whose last line is cut
short (a crash mid-write) and reports `complete=False` when the end record is
missing. It refuses another major format version. Damage is never an exception
other than `ValueError` (with the file's name, one line) or `OSError`: a file
that is empty, holds no whole header line, or whose first line is not a header
object is refused; a later line that is not JSON, not an object, or a known
record of the wrong shape is skipped and said in `damaged` ("line N: why"), so
readers render what is readable and the RFT filter can refuse it.

Not guaranteed: records of a future minor addition (unknown "type") are kept in
`other` and otherwise ignored.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.eval.judge.result import EvalResult

FORMAT = "cuda-agent-trajectory/1"


class TrajectoryWriter:
    def __init__(self, path: str | Path, header: dict[str, Any]):
        self.path = Path(path)
        self._f = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the whole run
        self.write({"type": "header", "format": FORMAT, **header})

    def write(self, record: dict[str, Any]) -> None:
        self._f.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def message(self, message: dict[str, Any], turn: int, **meta: Any) -> None:
        self.write({"type": "message", "turn": turn, "message": message, **meta})

    def evaluation(self, turn: int, call_id: str, phase: str, result: EvalResult, best: bool) -> None:
        self.write(
            {"type": "eval", "turn": turn, "call_id": call_id, "phase": phase, "best": best, "result": result.to_dict()}
        )

    def note(self, kind: str, turn: int, **data: Any) -> None:
        self.write({"type": "note", "kind": kind, "turn": turn, **data})

    def end(self, **data: Any) -> None:
        self.write({"type": "end", **data})

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()


@dataclass
class EvalRecord:
    turn: int
    call_id: str
    phase: str
    best: bool
    result: EvalResult


@dataclass
class Trajectory:
    header: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)  # OpenAI-form messages, unelided
    message_meta: list[dict[str, Any]] = field(default_factory=list)  # the rest of each message record
    evals: list[EvalRecord] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] | None = None
    other: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False  # the last line was cut short
    damaged: list[str] = field(default_factory=list)  # "line N: why" for each line skipped as unreadable
    records: list[dict[str, Any]] = field(default_factory=list)  # every record after the header, in order

    @property
    def complete(self) -> bool:
        return self.end is not None

    @property
    def reward(self) -> int | None:
        return None if self.end is None else self.end.get("reward")

    @property
    def best(self) -> EvalRecord | None:
        marked = [e for e in self.evals if e.best]
        return marked[-1] if marked else None


def load_trajectory(path: str | Path) -> Trajectory:
    """Read a trajectory file (or a run directory holding trajectory.jsonl)."""
    p = Path(path)
    if p.is_dir():
        p = p / "trajectory.jsonl"
    lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
    if not any(line.strip() for line in lines):
        raise ValueError(f"{p}: empty trajectory file")
    records: list[tuple[int, Any]] = []
    truncated = False
    damaged: list[str] = []
    last = max(n for n, line in enumerate(lines, 1) if line.strip())
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append((n, json.loads(line)))
        except json.JSONDecodeError:
            if n == last:
                truncated = True  # a crash mid-write; everything before it is intact
                break
            if not records:
                raise ValueError(f"{p}:{n}: the first line is not JSON, so not a cuda-agent trajectory") from None
            damaged.append(f"line {n}: not a JSON line")
    if not records:
        raise ValueError(
            f"{p}: its only line is not whole JSON (a header cut short as the run started, or not a "
            "trajectory); nothing to read"
        )
    head = records[0][1]
    if not isinstance(head, dict):
        raise ValueError(
            f"{p}: not a cuda-agent trajectory (the first line is a JSON {type(head).__name__}, not an object)"
        )
    fmt = str(head.get("format", ""))
    if head.get("type") != "header" or fmt.rsplit("/", 1)[0] != FORMAT.rsplit("/", 1)[0]:
        raise ValueError(f"{p}: not a cuda-agent trajectory (format {fmt!r})")
    if fmt.rsplit("/", 1)[1].split(".")[0] != FORMAT.rsplit("/", 1)[1]:
        raise ValueError(f"{p}: trajectory format {fmt} is not supported by this version (reads {FORMAT})")
    for key in ("task", "config", "budget"):
        if key in head and not isinstance(head[key], dict):
            damaged.append(f"line 1: header field {key!r} is not an object")
            head = {k: v for k, v in head.items() if k != key}
    t = Trajectory(header=head, truncated=truncated, damaged=damaged)
    for n, r in records[1:]:
        why = _shape_error(r)
        if why is None and r.get("type") == "eval":
            try:
                ev = EvalRecord(
                    int(r["turn"]),
                    str(r.get("call_id", "")),
                    str(r["phase"]),
                    bool(r.get("best")),
                    EvalResult.from_dict(r["result"]),
                )
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                why = f"eval record with an unreadable result ({type(e).__name__}: {e})"
        if why is not None:
            t.damaged.append(f"line {n}: {why}"[:300])
            continue
        t.records.append(r)
        kind = r.get("type")
        if kind == "message":
            t.messages.append(r["message"])
            t.message_meta.append({k: v for k, v in r.items() if k not in ("type", "message")})
        elif kind == "eval":
            t.evals.append(ev)
        elif kind == "note":
            t.notes.append(r)
        elif kind == "end":
            t.end = r
        else:
            t.other.append(r)
    return t


def _shape_error(r: Any) -> str | None:
    """Why a record cannot be used as what its type says, or None when it can."""
    if not isinstance(r, dict):
        return f"a JSON {type(r).__name__}, not a record object"
    kind = r.get("type")
    if kind == "message":
        m = r.get("message")
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            return "message record without a message object with a role"
        if not isinstance(m.get("content"), str | None):
            return "message whose content is not text"
        calls = m.get("tool_calls")
        if calls is not None and not (
            isinstance(calls, list)
            and all(
                isinstance(c, dict)
                and isinstance(c.get("function"), dict)
                and isinstance(c["function"].get("name"), str)
                and isinstance(c["function"].get("arguments", ""), str)
                for c in calls
            )
        ):
            return "message with unreadable tool calls"
        if not isinstance(r.get("turn", 0), int):
            return "message record whose turn is not a number"
    elif kind == "eval":
        if not isinstance(r.get("result"), dict):
            return "eval record without a result object"
    elif kind == "note":
        if not isinstance(r.get("kind"), str):
            return "note record without a kind"
    elif kind == "end":
        if not isinstance(r.get("usage", {}), dict):
            return "end record whose usage is not an object"
        if not isinstance(r.get("reward"), int | float | None):
            return "end record whose reward is not a number"
    return None
