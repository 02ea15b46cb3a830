"""A small persistent key-value store for the evaluator's caches (SQLite).

Contract: `KVCache(path).get(key)` returns the JSON value stored under key or
None; `put(key, value)` replaces it. Safe across processes (SQLite locking,
WAL journal). Used for baseline timings keyed by (task hash, GPU, torch
version, precision, timing settings) and for whole results keyed by
(evaluator version, task hash, candidate hash, GPU, torch, phase).

A cache file that cannot be used (read-only, not a database) raises
`CacheDirError` with the fix, never a bare sqlite error.

Not guaranteed: eviction; entries stay until the file is deleted.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from cuda_agent.task.workspace import CacheDirError


class KVCache:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        with self._db() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"
            )

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        try:
            with closing(sqlite3.connect(self.path, timeout=30)) as db, db:
                yield db
        except sqlite3.DatabaseError as e:
            if isinstance(e, sqlite3.OperationalError) and "locked" in str(e):
                raise  # contention past the timeout is not the file's fault
            raise CacheDirError(
                5,
                f"the evaluator's cache {self.path} cannot be used ({e}); delete it (it is only "
                "a cache) or set CUDA_AGENT_CACHE to another directory",
            ) from None

    def get(self, key: str) -> Any | None:
        with self._db() as db:
            row = db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: Any) -> None:
        with self._db() as db:
            db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?, ?)", (key, json.dumps(value), time.time()))
