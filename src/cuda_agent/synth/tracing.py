"""Op graphs of many tasks: sandboxed tracing children in parallel, and a disk cache for references.

Contract: `trace_many(sources, workers=, sandbox=, cache=)` returns, per source
and in order, a `Traced`: the validated `semantic.OpGraph`, or the reason
there is none (the task raised or needs data on the meta device: the
`trace_child` reply; the child died or ran past `timeout_s`: it is restarted
and the next task goes on; a task's own SIGALRM timeout restarts it too). The parent executes no task code: every task runs
in a `trace_child` process inside the evaluator's sandbox (`sandbox="auto"`:
where this machine has one, as the filter's device stages do; "off" runs it
unsandboxed). `workers` children run at once, each tracing its share of the
tasks one after another (torch's import is paid once per child).
With `cache` (a directory; `reference_cache()` by default for reference
suites), a result is kept under the digest of (`opgraph.GRAPH_VERSION`, torch's
version, the source), so a reference suite is traced once per machine: a
graph and a deterministic trace error are cached; a dead or timed-out child is
not (the next run retries).
Not guaranteed: that a cache written by another user is honest (it is read
back through `OpGraph.from_json`, which checks its form, not its truth).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from cuda_agent.synth.opgraph import GRAPH_VERSION
from cuda_agent.synth.semantic import OpGraph


@dataclass
class Traced:
    graph: OpGraph | None
    error: str = ""
    cached: bool = False


def reference_cache() -> Path:
    from cuda_agent.task.workspace import cache_root

    return cache_root() / "synth-opgraph"


def _digest(source: str) -> str:
    import torch

    return hashlib.sha256(f"{GRAPH_VERSION}\0{torch.__version__}\0{source}".encode()).hexdigest()[:32]


def _read_cache(path: Path) -> Traced | None:
    try:
        d = json.loads(path.read_text())
        if "graph" in d:
            return Traced(OpGraph.from_json(d["graph"]), cached=True)
        return Traced(None, str(d["error"]), cached=True)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent or damaged: trace again


def _write_cache(path: Path, record: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, path)


class _Worker:
    """One tracing child (restarted after a death or a timeout) with its private scratch dir."""

    def __init__(self, sandbox: str):
        self.sandbox = sandbox
        self.child: Any = None
        self.tmp: Path | None = None

    def _start(self) -> None:
        from cuda_agent.eval.channel.children import child_dirs, child_env
        from cuda_agent.eval.channel.processes import Child
        from cuda_agent.sandbox import profile_for

        self.close()
        self.tmp = Path(tempfile.mkdtemp(prefix="cuda-agent-trace-"))
        rw, env = child_dirs(self.tmp, "trace", child_env("fp32"), private_caches=True)
        box, _ = profile_for(self.sandbox, "cpu", 1 << 30, 256)
        self.child = Child(
            "trace",
            cwd=self.tmp,
            env=env,
            log_path=self.tmp / "child.log",
            module="cuda_agent.synth.trace_child",
            wrap=partial(box.wrap, writable=rw) if box is not None else None,
        )

    def trace(self, source: str, name: str, timeout_s: float) -> tuple[dict[str, Any] | None, str, bool]:
        """(graph JSON, error, deterministic): a failure of the child itself is not deterministic."""
        from cuda_agent.eval.channel.processes import ChildFailure

        if self.child is None or not self.child.alive():
            self._start()
        reply = self.child.request_raw(
            {"cmd": "trace", "source": source, "name": name, "timeout_s": timeout_s}, timeout_s + 60.0
        )  # + the child's start-up (torch's import)
        if isinstance(reply, ChildFailure):
            self.close()
            return None, f"tracing child: {reply.message}", False
        if not reply.get("ok"):
            if reply.get("timed_out"):
                self.close()  # the interrupted task may have left the child's state anywhere
            return None, str(reply.get("error", "?"))[:600], True
        return reply.get("graph"), "", True

    def close(self) -> None:
        if self.child is not None:
            self.child.close()
            self.child = None
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def trace_many(
    sources: list[str],
    *,
    names: list[str] | None = None,
    workers: int = 2,
    sandbox: str = "auto",
    timeout_s: float = 30.0,
    cache: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Traced]:
    names = names or [f"task{i}" for i in range(len(sources))]
    out: list[Traced | None] = [None] * len(sources)
    todo: list[int] = []
    keys = [_digest(s) for s in sources] if cache is not None else []
    for i in range(len(sources)):
        hit = _read_cache(cache / f"{keys[i]}.json") if cache is not None else None
        if hit is not None:
            out[i] = hit
        else:
            todo.append(i)
    lock = threading.Lock()
    state = {"next": 0, "done": len(sources) - len(todo)}

    def work() -> None:
        w = _Worker(sandbox)
        try:
            while True:
                with lock:
                    if state["next"] >= len(todo):
                        return
                    i = todo[state["next"]]
                    state["next"] += 1
                raw, error, deterministic = w.trace(sources[i], names[i], timeout_s)
                result = Traced(None, error)
                if raw is not None:
                    try:
                        result = Traced(OpGraph.from_json(raw))
                    except ValueError as e:
                        result, deterministic = Traced(None, f"malformed op graph: {e}"), False
                out[i] = result
                if cache is not None and deterministic:
                    _write_cache(
                        cache / f"{keys[i]}.json",
                        {"graph": raw} if result.graph is not None else {"error": result.error},
                    )
                with lock:
                    state["done"] += 1
                    if progress is not None:
                        progress(state["done"], len(sources))
        finally:
            w.close()

    threads = [threading.Thread(target=work, daemon=True) for _ in range(max(1, min(workers, len(todo))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [o if o is not None else Traced(None, "not traced") for o in out]
