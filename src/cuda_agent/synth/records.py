"""The records that flow between synthesis stages, and their append-only files.

Contract:
- `OpSpec` describes one op as code templates (see `codegen`); `Seed` is one
  crawled op with its probed signature, its labels and its self-contained task
  code; `Candidate` is one composed task; `Verdict` is what one filter stage
  said about one candidate.
- `append(path, record)` writes one JSON line in one write and flushes it to
  the OS before returning, so a killed process leaves complete records (no
  fsync: a power loss may lose the last records, which a rerun redoes). `read(path, cls)` returns the
  complete records of a file in order and skips a torn last line (a run killed
  mid-write), so a resumed stage re-does exactly the records that were not
  finished.
Not guaranteed: two processes appending to one file at once (each stage has one
writer, its parent process).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

PIPELINE_VERSION = "synth-2"  # 2: decontamination by op graphs (issue 30)

# Why a seed cannot be composed. A labelled seed is kept in seeds.jsonl (with its code when it has
# one) so a reader sees what the crawl found and why it was set aside.
LABELS = (
    "fails",
    "stochastic",
    "input_independent",
    "in_place",
    "integer_inputs",
    "non_float_output",
    "no_meta",
    "crashed",
)


@dataclass
class OpSpec:
    op: str  # the name in the `ops` column: "nn.Conv2d", "F.gelu", "torch.cumsum", "transformers.LlamaMLP"
    init: str = ""  # constructor expression template; "" for a stateless op
    call: str = "{m}({x})"  # forward expression template
    param: str = ""  # a learned second operand: "" | "like" (x.shape[1:]) | "row" (x.shape[-1]) | "matrix" (f, o)
    imports: list[str] = field(default_factory=list)  # extra import lines (transformers blocks)
    in_dtype: str = "float"  # "float" | "long" (an index input: randint)


@dataclass
class Seed:
    id: str  # unique: the op name plus, when one op has several seeds, a suffix
    spec: OpSpec
    source: str  # "torch" | "transformers"
    kind: str  # "module" | "functional" | "tensor" | "block"
    ranks: list[int] = field(default_factory=list)  # input ranks it ran with
    in_shape: list[int] = field(default_factory=list)  # the probe's input
    out_shape: list[int] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    error: str = ""
    code: str = ""  # the seed as a KernelBench task at the probe shape
    anchor: bool = False  # has weights or a matrix operand (conv, linear, matmul): a composition's heavy op

    @property
    def composable(self) -> bool:
        return not self.labels and self.source == "torch"

    @property
    def runs(self) -> bool:
        """Loads and runs on the CPU (stochastic or in-place seeds run too; they are only labelled)."""
        return bool(self.code) and not ({"fails", "crashed"} & set(self.labels))


@dataclass
class Candidate:
    id: str
    code: str
    ops: list[str]
    data_source: str  # "torch#K" or "transformers"
    seed_ids: list[str] = field(default_factory=list)
    composer: str = ""  # "deterministic:<seed>" | "llm:<model>"


@dataclass
class Verdict:
    id: str  # the candidate's id
    stage: str
    passed: bool
    reason: str = ""
    data: dict[str, Any] = field(default_factory=dict)  # stage-specific numbers (times, similarity, shapes)


T = TypeVar("T")


def to_json(record: Any) -> dict[str, Any]:
    return dataclasses.asdict(record)


def from_json(cls: type[T], d: dict[str, Any]) -> T:
    if cls is Seed:
        d = {**d, "spec": OpSpec(**d["spec"])}
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in d.items() if k in names})


def append(path: Path, record: Any) -> None:
    line = json.dumps(to_json(record) if dataclasses.is_dataclass(record) else record) + "\n"
    with open(path, "a") as f:
        f.write(line)


def read(path: Path, cls: type[T]) -> list[T]:
    return [from_json(cls, d) for d in read_dicts(path)]


def read_dicts(path: Path) -> list[dict[str, Any]]:
    if not Path(path).exists():
        return []
    out = []
    for line in Path(path).read_text().splitlines():
        try:
            d = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn line from a killed writer: that record was never finished
        if isinstance(d, dict):
            out.append(d)
    return out


def write_all(path: Path, records: list[Any]) -> None:
    """Replace a file's records at once (write to a sibling, then rename)."""
    tmp = Path(str(path) + ".tmp")
    tmp.write_text("".join(json.dumps(to_json(r) if dataclasses.is_dataclass(r) else r) + "\n" for r in records))
    os.replace(tmp, path)
