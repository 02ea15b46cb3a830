"""The results store of one bench run: RUN_DIR/results.sqlite (stdlib sqlite3).

Contract:
- `evaluations`: one row per evaluation that landed (task_id, group, attempt,
  task and candidate hash, phase, status, reward, correct, times, speedups,
  GPU, torch, whether the evaluator's result cache answered, the full
  `EvalResult` JSON, start/finish timestamps, and where the candidate came
  from). Each row is committed on its own, as it lands, so a crash of the
  bench (or of one task) never loses results already in.
- `tasks`: one row per task that is finished (`state` "done": evaluated, or
  no solution, which is recorded as a failed task), that could not be scored
  on this machine (`state` "not_scored": status no_gpu or env_error, re-run
  when the machine can score it) or that hit a harness error (`state`
  "error", retried by a rerun). `done_ids()` is what a rerun skips; a task
  whose every evaluation is unscored is never in it, whatever its state (runs
  written before the "not_scored" state marked such tasks "done").
- `meta`: key/value facts of the run (suite, mode, levels); `check_meta`
  refuses to resume a run dir with a different suite or mode.
Safe across threads and processes: every call opens its own connection (WAL).
`ResultStore.open_existing(run_dir)` opens a run for reading only (a report of
a read-only run dir writes nothing there); a file that is not a results
database raises `StoreError` (bad input), never a traceback.

The global evaluation cache is not here on purpose: the evaluator already keeps
results keyed by (evaluator fingerprint, task hash, candidate hash, GPU, torch,
phase) and baselines keyed by (task hash, GPU, torch, precision, timing
settings) in cache_root()/eval.sqlite (`cuda_agent.eval.judge.cache.KVCache`), and
every pool job goes through it; a duplicate candidate comes back with
`cache["result"] = True`, which lands here in the `cached` column.
Not guaranteed: eviction or compaction; the file grows with every evaluation.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from cuda_agent.bench.metrics import Outcome
from cuda_agent.eval.judge.result import NOT_SCORED, EvalResult

FILENAME = "results.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS evaluations (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id TEXT NOT NULL, grp TEXT NOT NULL, attempt INTEGER NOT NULL DEFAULT 0,
  task_hash TEXT, candidate_hash TEXT, phase TEXT, status TEXT NOT NULL,
  reward INTEGER, correct INTEGER NOT NULL, time_ms REAL, eager_ms REAL, compile_ms REAL,
  speedup_vs_eager REAL, speedup_vs_compile REAL, gpu TEXT, torch TEXT, cached INTEGER NOT NULL DEFAULT 0,
  source TEXT, message TEXT, result_json TEXT, started REAL, finished REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS evaluations_task ON evaluations(task_id);
CREATE TABLE IF NOT EXISTS tasks (
  task_id TEXT PRIMARY KEY, grp TEXT NOT NULL, state TEXT NOT NULL, note TEXT, finished REAL NOT NULL
);
"""
_UNSCORED_SQL = ", ".join(f"'{s.value}'" for s in NOT_SCORED)


def safe_name(task_id: str) -> str:
    """A task id as one file name in the run dir (ids of folders and datasets may hold '/' or spaces)."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in task_id) or "_"


class StoreError(ValueError):
    """RUN_DIR/results.sqlite cannot be used (not a database, damaged): bad input, not a bug."""


class ResultStore:
    def __init__(self, run_dir: str | Path, *, read_only: bool = False):
        self.run_dir = Path(run_dir)
        self.read_only = read_only
        self.path = self.run_dir / FILENAME
        if read_only:
            self._check_readable()
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)

    @classmethod
    def open_existing(cls, run_dir: str | Path) -> ResultStore:
        """For reading (reports, `view`): nothing is written to the run dir."""
        if not (Path(run_dir) / FILENAME).is_file():
            raise FileNotFoundError(f"no {FILENAME} in {run_dir} (run `cuda-agent bench ... -o {run_dir}` first)")
        return cls(run_dir, read_only=True)

    def _check_readable(self) -> None:
        with self._db() as db:
            names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"meta", "evaluations", "tasks"} <= names:
            raise StoreError(f"{self.path} is not a results database of cuda-agent bench (tables {sorted(names)})")

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        try:
            if self.read_only:
                # immutable: a read-only directory cannot hold the WAL's shared-memory file
                flag = "mode=ro" if os.access(self.run_dir, os.W_OK) else "immutable=1"
                conn = sqlite3.connect(f"file:{self.path}?{flag}", uri=True, timeout=60)
            else:
                conn = sqlite3.connect(self.path, timeout=60)
            with closing(conn) as db, db:
                yield db
        except sqlite3.DatabaseError as e:
            if isinstance(e, sqlite3.OperationalError) and "locked" in str(e):
                raise  # another writer held it past the timeout: not the file's fault
            raise StoreError(f"{self.path} cannot be used ({e}); move it aside to start the run afresh") from None

    # --- meta -------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        with self._db() as db:
            return {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}

    def set_meta(self, **values: Any) -> None:
        with self._db() as db:
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in values.items()])

    def check_meta(self, **expected: Any) -> None:
        """Record `expected` on a new run; on an existing one, refuse a mismatch."""
        have = self.meta()
        for k, v in expected.items():
            if k in have and have[k] != v:
                raise ValueError(f"{self.run_dir} holds a run with {k}={have[k]!r}, not {v!r}; use another -o RUN_DIR")
        self.set_meta(**{k: v for k, v in expected.items() if k not in have})

    # --- rows -------------------------------------------------------------
    def record(
        self,
        task_id: str,
        group: str,
        result: EvalResult,
        *,
        phase: str,
        attempt: int = 0,
        source: str = "",
        started: float | None = None,
    ) -> int:
        r = result
        row = (
            task_id,
            group,
            attempt,
            r.task_hash,
            r.candidate_hash,
            phase,
            r.status.value,
            r.reward,
            int(r.correct),
            r.time_ms,
            r.eager_ms,
            r.compile_ms,
            r.speedup_vs_eager,
            r.speedup_vs_compile,
            r.gpu,
            r.torch,
            int(bool(r.cache.get("result"))),
            source,
            r.message[:2000],
            r.to_json(),
            started,
            time.time(),
        )
        with self._db() as db:
            cur = db.execute(
                "INSERT INTO evaluations (task_id, grp, attempt, task_hash, candidate_hash, phase, status, reward, correct,"
                " time_ms, eager_ms, compile_ms, speedup_vs_eager, speedup_vs_compile, gpu, torch, cached, source, message,"
                " result_json, started, finished) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                row,
            )
            return int(cur.lastrowid or 0)

    def record_missing(self, task_id: str, group: str, why: str) -> None:
        """A task without a candidate: one failed row, and the task is done."""
        with self._db() as db:
            db.execute(
                "INSERT INTO evaluations (task_id, grp, status, correct, reward, message, source, finished)"
                " VALUES (?, ?, 'no_solution', 0, -1, ?, 'none', ?)",
                (task_id, group, why, time.time()),
            )
        self.finish(task_id, group, "done", why)

    def finish(self, task_id: str, group: str, state: str = "done", note: str = "") -> None:
        with self._db() as db:
            db.execute(
                "INSERT OR REPLACE INTO tasks VALUES (?, ?, ?, ?, ?)", (task_id, group, state, note, time.time())
            )

    def done_ids(self) -> set[str]:
        """Tasks a rerun skips: done, and not only unscored evaluations (no_gpu, env_error)."""
        q = (
            "SELECT task_id FROM tasks t WHERE state = 'done' AND (NOT EXISTS (SELECT 1 FROM evaluations e WHERE "
            f"e.task_id = t.task_id) OR EXISTS (SELECT 1 FROM evaluations e WHERE e.task_id = t.task_id AND e.status "
            f"NOT IN ({_UNSCORED_SQL})))"
        )
        with self._db() as db:
            return {r[0] for r in db.execute(q)}

    def task_states(self) -> dict[str, tuple[str, str, str]]:
        """task_id -> (group, state, note)."""
        with self._db() as db:
            return {r[0]: (r[1], r[2], r[3] or "") for r in db.execute("SELECT task_id, grp, state, note FROM tasks")}

    def rows(self, task_id: str | None = None) -> list[dict[str, Any]]:
        q, args = "SELECT * FROM evaluations", ()
        if task_id is not None:
            q, args = q + " WHERE task_id = ?", (task_id,)
        with self._db() as db:
            db.row_factory = sqlite3.Row
            return [dict(r) for r in db.execute(q + " ORDER BY id", args)]

    def outcomes(self) -> list[Outcome]:
        """Every scored evaluation of every task state 'done' or 'error' (for best-of-trajectory);
        compile-only rows never count as correct."""
        out = []
        for r in self.rows():
            correct = bool(r["correct"]) and r["phase"] != "compile"
            out.append(
                Outcome(
                    r["task_id"],
                    r["grp"],
                    correct,
                    r["speedup_vs_eager"],
                    r["speedup_vs_compile"],
                    r["reward"],
                    r["status"],
                    r["id"],
                    _vs_best(r.get("result_json")),
                )
            )
        return out


def _vs_best(result_json: str | None) -> float | None:
    """The speedup against the fastest baseline measured, where the result carries extra baselines."""
    if not result_json or '"baselines_ms": {}' in result_json or "baselines_ms" not in result_json:
        return None
    from cuda_agent.eval.timing.baseline_set import speedup_vs_best

    try:
        return speedup_vs_best(json.loads(result_json))
    except ValueError:
        return None
