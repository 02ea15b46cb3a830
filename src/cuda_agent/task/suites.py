"""Suites: named collections of tasks, loaded from disk without running them.

Contract: `load_suite(spec, levels=None)` returns a `Suite` whose `items` are
`SuiteItem(task_id, group, task)` tuples, sorted and with unique task ids.
`spec` is one of (checked in this order):
- "examples": the bundled examples (examples/*/task.py, each with solution/);
- a KernelBench checkout: a directory holding `KernelBench/level{N}/` or
  `level{N}/` folders, or one `level{N}` folder itself. Levels 1-3 load;
  level 4 is skipped by default and refused when asked for, because its
  tasks download weights from a model hub;
  task ids are `L{N}-{file stem}` (e.g. `L1-19_ReLU`), the group `level{N}`;
- a CUDA-Agent-Ops-6K file: `.parquet` (needs pyarrow), `.jsonl` or `.json`,
  with columns `ops`, `data_source`, `code`; ids `ops6k-{row:05d}`, the group
  the row's `data_source` (e.g. "torch#2");
- a folder of examples-style subfolders (`<name>/task.py`): ids and group as
  for the bundled examples ("examples");
- a folder of task files (`*.py`): ids = file stems, group "folder".
A prefix forces the kind: `kernelbench:`, `ops6k:`, `examples:`, `folder:`.

Errors: bad input for the whole suite (missing path, unreadable file,
missing columns, no tasks at all, level 4 asked for) raises `TaskError` with
one line. A single entry that is not a valid task is data: it lands in
`Suite.invalid` as (task_id, group, reason) and the rest loads.

Not guaranteed: that tasks run or are good benchmarks; nothing is executed here.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from cuda_agent.task.taskfile import Task, TaskError

KERNELBENCH_LEVELS = (1, 2, 3)
HUB_LEVELS = (4,)  # tasks that download weights: not usable offline
OPS6K_COLUMNS = ("ops", "data_source", "code")
_LEVEL_DIR = re.compile(r"^level(\d+)$")
_PREFIXES = ("kernelbench", "ops6k", "examples", "folder")


class SuiteItem(NamedTuple):
    task_id: str
    group: str  # "level1", a data source such as "torch#2", "examples", "folder"
    task: Task

    @property
    def level(self) -> int | None:
        m = _LEVEL_DIR.match(self.group)
        return int(m.group(1)) if m else None

    @property
    def problem(self) -> int | None:
        """KernelBench problem number: the leading digits of the file stem."""
        m = re.match(r"^L\d+-(\d+)_", self.task_id)
        return int(m.group(1)) if m else None


@dataclass
class Suite:
    name: str  # the spec as given
    kind: str  # "kernelbench" | "ops6k" | "examples" | "folder"
    items: list[SuiteItem]
    invalid: list[tuple[str, str, str]] = field(default_factory=list)  # (task_id, group, reason)
    notes: list[str] = field(default_factory=list)
    root: Path | None = None

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def counts(self) -> dict[str, tuple[int, int]]:
        """group -> (valid tasks, invalid entries), groups sorted."""
        ok = Counter(i.group for i in self.items)
        bad = Counter(g for _, g, _ in self.invalid)
        return {g: (ok.get(g, 0), bad.get(g, 0)) for g in sorted(set(ok) | set(bad), key=_group_key)}


def _group_key(g: str) -> tuple[int, str]:
    m = _LEVEL_DIR.match(g)
    return (int(m.group(1)), "") if m else (1 << 30, g)


def bundled_examples_dir() -> Path:
    env = os.environ.get("CUDA_AGENT_EXAMPLES")
    d = Path(env) if env else Path(__file__).resolve().parents[3] / "examples"
    if not d.is_dir():
        raise TaskError(f"bundled examples not found at {d} (set CUDA_AGENT_EXAMPLES to the repository's examples/)")
    return d


def load_suite(spec: str | Path, levels: list[int] | None = None) -> Suite:
    text = str(spec)
    kind, _, rest = text.partition(":")
    if kind in _PREFIXES and rest:
        forced, path = kind, Path(rest)
    elif text == "examples":
        forced, path = "examples", bundled_examples_dir()
    else:
        forced, path = None, Path(text)
    if not path.exists():
        raise TaskError(f"suite not found: {path}")
    kind = forced or _detect(path)
    if levels is not None and kind != "kernelbench":
        raise TaskError(f"--levels applies to KernelBench suites only; {path} is a {kind} suite")
    if kind == "kernelbench":
        suite = _kernelbench(path, levels)
    elif kind == "ops6k":
        suite = _ops6k(path)
    elif kind == "examples":
        suite = _examples(path)
    else:
        suite = _folder(path)
    suite.name, suite.root = text, path
    if not suite.items and not suite.invalid:
        raise TaskError(f"{path}: no tasks found in this {kind} suite")
    return suite


def _detect(path: Path) -> str:
    if path.is_file():
        if path.suffix in (".parquet", ".jsonl", ".json"):
            return "ops6k"
        raise TaskError(
            f"{path}: a suite file must be .parquet, .jsonl or .json (Ops-6K columns {', '.join(OPS6K_COLUMNS)})"
        )
    if _level_dirs(path) or _LEVEL_DIR.match(path.name):
        return "kernelbench"
    if any((d / "task.py").is_file() for d in path.iterdir() if d.is_dir()):
        return "examples"
    if any(path.glob("*.py")):
        return "folder"
    raise TaskError(f"{path}: not a suite (no KernelBench level folders, no */task.py, no *.py task files)")


def _level_dirs(path: Path) -> dict[int, Path]:
    base = path / "KernelBench" if (path / "KernelBench").is_dir() else path
    out = {}
    for d in base.iterdir() if base.is_dir() else ():
        m = _LEVEL_DIR.match(d.name)
        if m and d.is_dir():
            out[int(m.group(1))] = d
    return out


def _add(suite: Suite, task_id: str, group: str, load) -> None:
    try:
        suite.items.append(SuiteItem(task_id, group, load()))
    except TaskError as e:
        suite.invalid.append((task_id, group, str(e)))


def _kernelbench(path: Path, levels: list[int] | None) -> Suite:
    found = {int(m.group(1)): path} if (m := _LEVEL_DIR.match(path.name)) else _level_dirs(path)
    if not found:
        raise TaskError(f"{path}: no KernelBench level folders (expected KernelBench/level1 ... or level1 ...)")
    hub = sorted(set(levels or ()) & set(HUB_LEVELS))
    if hub:
        raise TaskError(
            f"level {hub[0]} is not supported: its tasks load pretrained weights from a model hub (network); use levels 1-3"
        )
    wanted = sorted(levels) if levels is not None else [lv for lv in sorted(found) if lv not in HUB_LEVELS]
    missing = [lv for lv in wanted if lv not in found]
    if missing:
        raise TaskError(f"{path}: no level{missing[0]} folder")
    suite = Suite(str(path), "kernelbench", [])
    if levels is None and any(lv in found for lv in HUB_LEVELS):
        suite.notes.append("level 4 skipped: its tasks load pretrained weights from a model hub")
    for lv in wanted:
        for f in sorted(found[lv].glob("*.py"), key=lambda p: _natural(p.stem)):
            _add(suite, f"L{lv}-{f.stem}", f"level{lv}", lambda f=f: Task.from_file(f))
    return suite


def _natural(stem: str) -> tuple[int, str]:
    m = re.match(r"^(\d+)", stem)
    return (int(m.group(1)) if m else 1 << 30, stem)


def _ops6k_rows(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise TaskError("reading .parquet needs pyarrow (pip install 'cuda-agent[data]')") from None
        try:
            table = pq.read_table(path)
        except Exception as e:  # pyarrow raises several types for a bad file
            raise TaskError(f"{path}: cannot read parquet: {str(e).splitlines()[0]}") from None
        _require_columns(path, table.column_names)
        return table.select(list(OPS6K_COLUMNS)).to_pylist()
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"cannot read {path}: {e}") from None
    try:
        if path.suffix == ".json":
            rows = json.loads(text)
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as e:
        raise TaskError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise TaskError(f"{path}: expected one JSON object per row")
    _require_columns(path, set().union(*rows) if rows else set())
    return rows


def _require_columns(path: Path, names) -> None:
    missing = [c for c in OPS6K_COLUMNS if c not in set(names)]
    if missing:
        raise TaskError(f"{path}: missing column(s) {', '.join(missing)} (Ops-6K needs {', '.join(OPS6K_COLUMNS)})")


def _ops6k(path: Path) -> Suite:
    suite = Suite(str(path), "ops6k", [])
    for i, row in enumerate(_ops6k_rows(path)):
        tid, group = f"ops6k-{i:05d}", str(row.get("data_source") or "unknown")
        code = row.get("code")
        if not isinstance(code, str):
            suite.invalid.append((tid, group, "code is not a string"))
            continue
        _add(suite, tid, group, lambda code=code, tid=tid: Task.from_source(code, name=tid))
    return suite


def example_dirs(path: Path) -> list[Path]:
    """The example folders under `path`, sorted: those holding a task.py (a folder without one,
    such as a moved example's leftover build output, is not an example)."""
    return sorted(p for p in path.iterdir() if p.is_dir() and (p / "task.py").is_file())


def _examples(path: Path) -> Suite:
    suite = Suite(str(path), "examples", [])
    for d in example_dirs(path):
        _add(suite, d.name, "examples", lambda d=d: Task.from_file(d / "task.py"))
    return suite


def _folder(path: Path) -> Suite:
    suite = Suite(str(path), "folder", [])
    for f in sorted(path.glob("*.py")):
        _add(suite, f.stem, "folder", lambda f=f: Task.from_file(f))
    return suite
