"""Timed sections exclusive per physical GPU, across every process of the machine.

Why: with six evaluations started together on one H200, an honest candidate's timing had a
coefficient of variation of 1.28 and lost a reward milestone, with no warning (issue 13): the
timed calls of one evaluation ran while another's ran. Timing is only meaningful alone.

Evaluations that share a GPU (the pool's slots, several agents) run their untimed work at
once; timing waits until it runs alone (issue 16: more evaluations per GPU-hour without
timing next to anyone's work).

Contract: `exclusive(key, wait_s)` is a context manager that holds an advisory `flock` on
`<lock dir>/<key>.lock` (key: the GPU's UUID, or "cpu" on the CPU lane; `directory` overrides
the lock dir) exclusively and yields the seconds it waited; `untimed(key, wait_s)` holds it
shared, for an evaluation's GPU work that is not timed. Both pass a gate first
(`<key>.lock.gate`), so a timing waits only for the shared holders already in, not for those
that come after it. A thread's timed section sets aside its own shared hold on the same key and
takes it back after. The kernel drops a flock when its descriptor closes, so a crash or a kill
of the holder never leaves the lock held. The lock dir is `CUDA_AGENT_LOCK_DIR`, else
`/tmp/cuda-agent-locks` (world-writable with the sticky bit, so evaluations of every user of
the machine see the same file); the sandbox puts an empty read-only folder in its place for every
candidate process, so candidate code cannot take or hold these locks. Past `wait_s` either yields without the lock and says so
(`Held.exclusive` False, for a shared hold too): a stuck holder must not stall every evaluation.
`Share` is how an evaluation takes `untimed`: only while one of its children has a request in
flight, so a timing waits for GPU work under way, not for other evaluations' CPU-side steps.
`foreign_work(uuid, since_s)` names GPU processes that are not evaluation processes and
used the GPU since `since_s` (NVML through pynvml, where installed), so a timing taken next to
outside work can carry a warning (NVML initialized once per process, again after a fork).

Not guaranteed: exclusion from processes that do not take the lock (another program's jobs,
an older cuda-agent, a child started without `eval.channel.children`'s gate), hence `foreign_work`; fairness between
waiters of one kind (flock has none; the gate only puts a timing ahead of later shared takers).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.sandbox.env import flock_until, shared_lock_dir

POLL_S = 0.005  # how often a waiter tries the lock again: a timing waits on it, so not long


def lock_dir() -> Path:
    return shared_lock_dir()  # the sandbox hides this folder from every candidate process


@dataclass
class Held:
    waited_s: float
    exclusive: bool


def _paths(key: str, directory: str | Path | None = None) -> tuple[Path, Path]:
    base = (Path(directory) if directory is not None else lock_dir()) / re.sub(r"[^A-Za-z0-9_.-]", "_", key)
    return Path(f"{base}.lock"), Path(f"{base}.lock.gate")


def _through_gate(gate_path: Path, lock_fd: int, op: int, deadline: float) -> bool:
    """Take `op` on the lock after passing the gate. A taker holds the gate only while it waits
    for the lock, so shared takers that come after an exclusive waiter queue behind it (flock alone
    favours no one: with evaluations taking the shared lock in turns, a timing could wait forever)."""
    gate = os.open(gate_path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        if not flock_until(gate, fcntl.LOCK_EX, deadline, POLL_S):
            return False
        return flock_until(lock_fd, op, deadline, POLL_S)
    finally:
        os.close(gate)  # releases the gate


# This thread's shared holds, per key: a timed section of the same thread sets its own aside
# (a flock of one descriptor conflicts with another descriptor's, in one process too).
_own = threading.local()


def _holds() -> dict[str, list[int]]:
    if not hasattr(_own, "fds"):
        _own.fds = {}
    return _own.fds


def _timing() -> set[str]:
    """Lock paths this thread holds exclusively now (its children's requests then take nothing)."""
    if not hasattr(_own, "excl"):
        _own.excl = set()
    return _own.excl


@contextlib.contextmanager
def exclusive(key: str, wait_s: float = 600.0, directory: str | Path | None = None) -> Iterator[Held]:
    """Hold the GPU alone: no other timed section and no untimed work (`untimed`) runs meanwhile.
    This thread's own `untimed` hold on `key` is set aside for the duration and taken back after."""
    path, gate = _paths(key, directory)
    mine = _holds().get(str(path), [])
    for fd in mine:
        fcntl.flock(fd, fcntl.LOCK_UN)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    t0 = time.monotonic()
    held = Held(0.0, False)
    _timing().add(str(path))
    try:
        held.exclusive = _through_gate(gate, fd, fcntl.LOCK_EX, t0 + wait_s)
        held.waited_s = time.monotonic() - t0
        yield held
    finally:
        _timing().discard(str(path))
        os.close(fd)  # releases the flock
        for fd in mine:  # back to shared; past the wait, without it (the timed part is what matters)
            _through_gate(gate, fd, fcntl.LOCK_SH, time.monotonic() + wait_s)


@contextlib.contextmanager
def untimed(key: str, wait_s: float = 600.0, directory: str | Path | None = None) -> Iterator[Held]:
    """Hold the GPU shared for untimed work (correctness runs, compares): any number of holders at
    once, none while a timed section (`exclusive`) runs. Yields the seconds waited; past `wait_s`
    it yields without the lock (`Held.exclusive` is then False, and True when held)."""
    path, gate = _paths(key, directory)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    t0 = time.monotonic()
    held = Held(0.0, False)
    mine = _holds().setdefault(str(path), [])
    try:
        held.exclusive = _through_gate(gate, fd, fcntl.LOCK_SH, t0 + wait_s)
        held.waited_s = time.monotonic() - t0
        mine.append(fd)
        yield held
    finally:
        if fd in mine:
            mine.remove(fd)
        os.close(fd)


class Share:
    """One evaluation's shared hold, taken only while one of its children works: `enter()` when a
    request goes out, `leave()` when its reply (or the child's failure) comes back; the hold is
    taken on the first outstanding request and let go after the last. Between requests (the
    parent's build, staging, file checks, waiting for nvcc) the GPU is free for another's timing,
    so a timing waits for work in flight, not for whole evaluations. Requests sent inside this
    thread's own timed section take nothing (the section holds the GPU already). `waited_s` sums
    the waits; `missed` counts takes that gave up after `wait_s`. One evaluation, one thread."""

    def __init__(self, key: str, wait_s: float = 600.0, directory: str | Path | None = None):
        self.key, self.wait_s, self.directory = key, wait_s, directory
        self._path = str(_paths(key, directory)[0])  # once: enter() runs for every request sent
        self.depth = 0
        self.waited_s = 0.0
        self.missed = 0
        self._cm: contextlib.AbstractContextManager[Held] | None = None

    def enter(self) -> None:
        self.depth += 1
        if self._cm is None and self._path not in _timing():
            cm = untimed(self.key, self.wait_s, self.directory)
            held = cm.__enter__()
            self._cm = cm
            self.waited_s += held.waited_s
            self.missed += not held.exclusive

    def leave(self) -> None:
        self.depth = max(0, self.depth - 1)
        if self.depth == 0:
            self.close()

    def close(self) -> None:
        self.depth = 0
        cm, self._cm = self._cm, None
        if cm is not None:
            cm.__exit__(None, None, None)


def _is_evaluation(pid: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return False
    return b"cuda_agent" in cmd


_nvml_pid: int | None = None  # the process that initialized NVML (a forked child must do it again)


def _nvml() -> Any:
    """pynvml, initialized once per process: nvmlInit enumerates the machine's GPUs, and this runs
    after every timed section (twice per evaluation) on the evaluation's critical path."""
    global _nvml_pid
    import pynvml  # type: ignore[import-not-found]

    if _nvml_pid != os.getpid():
        pynvml.nvmlInit()
        _nvml_pid = os.getpid()
    return pynvml


def foreign_work(uuid: str, since_s: float) -> str | None:
    """Processes other than evaluations that ran on this GPU since `since_s` (time.time()), named
    in one line; None when there were none; "unavailable: why" without NVML."""
    global _nvml_pid
    try:
        pynvml = _nvml()
    except ImportError:
        return "unavailable: pynvml (nvidia-ml-py) is not installed"
    except Exception as e:  # noqa: BLE001 - NVML is advisory: its failure is a note, never an error
        return f"unavailable: {type(e).__name__}: {e}"[:200]
    try:
        h = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        busy: dict[int, int] = {}
        try:
            for s in pynvml.nvmlDeviceGetProcessUtilization(h, int(since_s * 1e6)):
                if s.smUtil > 0:
                    busy[s.pid] = max(busy.get(s.pid, 0), s.smUtil)
        except pynvml.NVMLError:  # no samples in the window (NOT_FOUND) is normal
            pass
        foreign = {pid: u for pid, u in busy.items() if not _is_evaluation(pid)}
        return ", ".join(f"pid {pid} at {u}% SM" for pid, u in sorted(foreign.items())) or None
    except Exception as e:  # noqa: BLE001
        _nvml_pid = None  # initialize again next time: the library may have been reset under us
        return f"unavailable: {type(e).__name__}: {e}"[:200]
