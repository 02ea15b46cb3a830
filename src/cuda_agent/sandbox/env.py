"""The environment and the end of every sandboxed process tree.

Contract: `scrubbed_env(extra_names, extra)` builds an environment from an allow-list of the
caller's variables (paths, locale, CUDA device selection and toolkit locations): API keys,
tokens, evaluator seeds and anything else not named never reach candidate code or the agent's
shell. `kill_group(proc)` SIGKILLs the process group a `Popen(start_new_session=True)` leads
and reaps the leader; with the sandbox's pid namespace that ends every process of the tree.
`die_with_parent(argv)` prefixes a command so the kernel SIGKILLs it when the thread that started it
ends: a pool worker killed on Ctrl-C (`pool.local`, SIGKILL, no clean-up of its own) takes its
compilers and its evaluation's children with it, a candidate spinning in a hang included (before:
it spun on, orphaned, after `bench` had exited 130). With the sandbox's `unshare --kill-child`
outermost-but-one, the signal ends the whole namespace.

`tree_cpu_s(pid)` is the CPU time the kernel has charged a process and its live descendants (every
thread, on every core): the parent's own reading of how much work a sandboxed tree did, which the
tree cannot lower except by moving work into processes that end before the reading (their time is
then lost, never gained: a caller must use it only where less time can only help the tree's side).

`shared_lock_dir()` is the machine-wide folder of the evaluator's lock files (the per-GPU timing
lock, the pool's GPU leases): every sandboxed process gets an empty, read-only folder in its place
(`box`), because a candidate that could flock those files could stall every timing on its GPU.
`flock_until(fd, op, deadline, poll_s)` takes such a lock with a deadline (flock(2) has none), by polling:
the timing lock's and the build cache's per-unit locks.

The parent-death signal belongs to the starting *thread* (prctl(2)), so a process that outlives the
call starting it (an evaluation's children, the agent's shell) is started by `popen_guarded`: from the
main thread directly, from any other thread (the episodes of `bench --agent`) by one spawner thread
that lives as long as the process, so the signal fires when the process ends, not when an episode's
thread does.

Not guaranteed: variables a caller adds through `extra` are the caller's responsibility. A machine
without util-linux's `setpriv --pdeathsig` gets every command as it was (no guard).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from functools import cache
from pathlib import Path
from typing import IO, Any

LOCK_DIR_ENV = "CUDA_AGENT_LOCK_DIR"


def shared_lock_dir() -> Path:
    """`CUDA_AGENT_LOCK_DIR`, else /tmp/cuda-agent-locks; made world-writable with the sticky bit
    (every user's evaluations on the machine must see the same files) when this call creates it."""
    d = Path(os.environ.get(LOCK_DIR_ENV) or "/tmp/cuda-agent-locks")
    if not d.is_dir():
        d.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            d.chmod(0o1777)
    return d


ENV_ALLOW = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "USER",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "TRITON_PTXAS_PATH",
    "CC",
    "CXX",
)


def scrubbed_env(extra_names: Iterable[str] = (), extra: dict[str, str] | None = None) -> dict[str, str]:
    allow = set(ENV_ALLOW) | set(extra_names)
    env = {k: v for k, v in os.environ.items() if k in allow}
    env.update(extra or {})
    return env


def kill_group(proc: subprocess.Popen[Any], wait_s: float = 10.0) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        pass


def flock_until(fd: int | IO[Any], op: int, deadline: float, poll_s: float) -> bool:
    """flock(2) `op` (LOCK_EX or LOCK_SH) on `fd`, tried every `poll_s` seconds until `deadline`
    (time.monotonic()); False if it never came."""
    while True:
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(poll_s)


def tree_cpu_s(pid: int) -> float | None:
    """CPU seconds the kernel charged `pid` and every live descendant (each process's CPU-time clock,
    clock_getcpuclockid(3): all its threads, nanoseconds); None when `pid` itself cannot be read."""
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # ended while listed
        # the command name is in parentheses and may hold spaces or ')': the fields follow the last one
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and fields[1].isdigit():
            parent[int(name)] = int(fields[1])
    tree, frontier = {pid}, [pid]
    children: dict[int, list[int]] = {}
    for child, ppid in parent.items():
        children.setdefault(ppid, []).append(child)
    while frontier:
        for c in children.get(frontier.pop(), ()):
            if c not in tree:
                tree.add(c)
                frontier.append(c)
    total = 0.0
    for p in tree:
        try:
            total += time.clock_gettime((~p << 3) | 2)  # MAKE_PROCESS_CPUCLOCK(p, CPUCLOCK_SCHED)
        except OSError:
            if p == pid:
                return None
    return total


@cache
def _setpriv() -> str | None:
    """util-linux's setpriv when it can set a parent-death signal here (2.33 and later), else None."""
    exe = shutil.which("setpriv")
    if exe is None:
        return None
    try:
        ok = subprocess.run([exe, "--pdeathsig", "KILL", "--", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return None
    return exe if ok else None


def die_with_parent(argv: list[str]) -> list[str]:
    """`argv` prefixed with `setpriv --pdeathsig KILL --` (module docstring), for a command the calling
    thread waits for; one that outlives the call goes through `popen_guarded`."""
    exe = _setpriv()
    if exe is None:
        return argv
    if not argv or (not os.path.isabs(argv[0]) and "/" in argv[0]) or shutil.which(argv[0]) is None:
        return argv  # Popen's own error for a missing program (callers turn it into a clear line)
    return [exe, "--pdeathsig", "KILL", "--", *argv]


def popen_guarded(argv: list[str], **popen_kwargs: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen(die_with_parent(argv), **popen_kwargs)` for a process that outlives this call:
    started from the main thread, or else by the process's spawner thread (module docstring), so
    the parent-death signal fires when this process ends and not when the calling thread does."""
    guarded = die_with_parent(argv)
    if guarded is argv or threading.current_thread() is threading.main_thread():
        return subprocess.Popen(guarded, **popen_kwargs)
    return _Spawner.get().call(lambda: subprocess.Popen(guarded, **popen_kwargs))


class _Spawner:
    """One daemon thread per process that starts processes for other threads (it never ends before
    its process does). Rebuilt after a fork, whose child has no copy of the thread."""

    _lock = threading.Lock()
    _current: _Spawner | None = None

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="cuda-agent-spawner", daemon=True).start()

    @classmethod
    def get(cls) -> _Spawner:
        with cls._lock:
            if cls._current is None or cls._current.pid != os.getpid():
                cls._current = cls()
            return cls._current

    def call(self, fn: Callable[[], Any]) -> Any:
        fut: Future[Any] = Future()
        self._jobs.put((fn, fut))
        return fut.result()  # re-raises Popen's own errors (a missing program) in the caller

    def _run(self) -> None:
        while True:
            fn, fut = self._jobs.get()
            try:
                fut.set_result(fn())
            except BaseException as e:  # noqa: BLE001 - handed to the caller, which re-raises it
                fut.set_exception(e)
