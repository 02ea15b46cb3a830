"""Timed sections exclusive per physical GPU, across every process of the machine.

Why: with six evaluations started together on one H200, an honest candidate's timing had a
coefficient of variation of 1.28 and lost a reward milestone, with no warning (issue 13): the
timed calls of one evaluation ran while another's ran. Timing is only meaningful alone.

Contract: `exclusive(key, wait_s)` is a context manager that holds an advisory `flock` on
`<lock dir>/<key>.lock` (key: the GPU's UUID, or "cpu" on the CPU lane) and yields the seconds
it waited. The kernel drops a flock when its descriptor closes, so a crash or a kill of the
holder never leaves the lock held. The lock dir is `CUDA_AGENT_LOCK_DIR`, else
`/tmp/cuda-agent-locks` (world-writable with the sticky bit, so evaluations of every user of
the machine see the same file). Past `wait_s` it yields without the lock and says so
(`Held.exclusive` False): a stuck holder must not stall every evaluation.
`foreign_work(uuid, since_s, ours)` names GPU processes that are not evaluation processes and
used the GPU since `since_s` (NVML through pynvml, where installed), so a timing taken next to
outside work can carry a warning.

Not guaranteed: exclusion from processes that do not take the lock (another program's jobs,
an older cuda-agent), hence `foreign_work`; fairness between waiters (flock has none).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


def lock_dir() -> Path:
    d = Path(os.environ.get("CUDA_AGENT_LOCK_DIR") or "/tmp/cuda-agent-locks")
    if not d.is_dir():
        d.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            d.chmod(0o1777)
    return d


@dataclass
class Held:
    waited_s: float
    exclusive: bool


@contextlib.contextmanager
def exclusive(key: str, wait_s: float = 600.0) -> Iterator[Held]:
    path = lock_dir() / (re.sub(r"[^A-Za-z0-9_.-]", "_", key) + ".lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    t0 = time.monotonic()
    held = Held(0.0, False)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held.exclusive = True
                break
            except BlockingIOError:
                if time.monotonic() - t0 > wait_s:
                    break
                time.sleep(0.02)
        held.waited_s = time.monotonic() - t0
        yield held
    finally:
        os.close(fd)  # releases the flock


def _is_evaluation(pid: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return False
    return b"cuda_agent" in cmd


def foreign_work(uuid: str, since_s: float) -> str | None:
    """Processes other than evaluations that ran on this GPU since `since_s` (time.time()), named
    in one line; None when there were none; "unavailable: why" without NVML."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return "unavailable: pynvml (nvidia-ml-py) is not installed"
    try:
        pynvml.nvmlInit()
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
    except Exception as e:  # noqa: BLE001 - NVML is advisory: its failure is a note, never an error
        return f"unavailable: {type(e).__name__}: {e}"[:200]
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
