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
missing. It refuses another major format version.

Not guaranteed: records of a future minor addition (unknown "type") are kept in
`other` and otherwise ignored.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.eval.result import EvalResult

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
        self.write({"type": "eval", "turn": turn, "call_id": call_id, "phase": phase, "best": best, "result": result.to_dict()})

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
    lines = p.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise ValueError(f"{p}: empty trajectory file")
    records: list[dict[str, Any]] = []
    truncated = False
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if n == len(lines):
                truncated = True  # a crash mid-write; everything before it is intact
                break
            raise ValueError(f"{p}:{n}: not a JSON line") from None
    head = records[0]
    fmt = str(head.get("format", ""))
    if head.get("type") != "header" or fmt.rsplit("/", 1)[0] != FORMAT.rsplit("/", 1)[0]:
        raise ValueError(f"{p}: not a cuda-agent trajectory (format {fmt!r})")
    if fmt.rsplit("/", 1)[1].split(".")[0] != FORMAT.rsplit("/", 1)[1]:
        raise ValueError(f"{p}: trajectory format {fmt} is not supported by this version (reads {FORMAT})")
    t = Trajectory(header=head, truncated=truncated, records=records[1:])
    for r in records[1:]:
        kind = r.get("type")
        if kind == "message":
            t.messages.append(r["message"])
            t.message_meta.append({k: v for k, v in r.items() if k not in ("type", "message")})
        elif kind == "eval":
            t.evals.append(EvalRecord(r["turn"], r.get("call_id", ""), r["phase"], bool(r.get("best")), EvalResult.from_dict(r["result"])))
        elif kind == "note":
            t.notes.append(r)
        elif kind == "end":
            t.end = r
        else:
            t.other.append(r)
    return t
