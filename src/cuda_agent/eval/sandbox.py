"""Sandbox for the candidate child: namespaces and resource limits around one process tree.

Contract: `for_config(cfg)` returns a `Sandbox` (or None) and a word for the
record, and `Sandbox.wrap(argv, writable=DIRS)` prefixes a command so that it runs as
`prlimit --fsize --nproc --core=0 -- unshare --user --map-root-user --mount --net --pid --fork --kill-child
--mount-proc python -I fs_lock.py --rw DIR... -- ARGV`:
- network: a new, empty network namespace (only a loopback device, and it is
  down): no connection to anything, 127.0.0.1 included;
- processes: a new pid namespace whose init is the child; when the parent kills
  the `unshare` process (timeout or end of evaluation) the kernel kills every
  process in the namespace, including ones that called setsid() to leave the
  process group. RLIMIT_NPROC bounds a fork bomb for non-root users (the
  kernel does not enforce it for uid 0, where the pid-namespace kill at the end
  of the budget is the only bound);
- files: in a private mount namespace every mount is read-only except the
  directories the caller names (`fs_lock`); RLIMIT_FSIZE bounds every file the
  tree writes (a write past it fails with EFBIG, or SIGXFSZ kills a process
  that does not ignore it); core dumps are off (RLIMIT_CORE 0). The pipeline
  gives the child a private TMPDIR and a scrubbed environment
  (`procs.scrubbed_env`: no secrets, no seed).
- `probe(device)` runs a tiny program in the same wrapping (and, for CUDA,
  initialises the driver there) once per parent process. When the full
  sandbox fails there it tries weaker profiles, dropping one layer at a time
  (fs lock, then network, then pid namespace), and uses the strongest that
  works; the record then names the missing layer and the reason
  ("on without net: ..."). `EvalConfig.sandbox` = "auto" uses it when some
  profile works, "off" never.

Not isolated: reads (the child runs with the parent's uid mapped to root
inside the user namespace, so it can read whatever the parent can), the GPU
(shared with nothing else by design, but not partitioned), CPU time (bounded
only by the wall-clock budgets) and memory (no RLIMIT_AS: CUDA reserves huge
virtual ranges).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from pathlib import Path
from typing import Any

LAYERS = ("fs_lock", "net", "pid")  # what a profile may drop, weakest loss first
FS_LOCK = Path(__file__).with_name("fs_lock.py")

_PROBE_CUDA = (
    "import ctypes,sys\n"
    "lib=ctypes.CDLL('libcuda.so.1')\n"
    "n=ctypes.c_int(0)\n"
    "r=lib.cuInit(0)\n"
    "c=lib.cuDeviceGetCount(ctypes.byref(n)) if r==0 else -1\n"
    "r==0 and c==0 and n.value>0 or sys.exit(f'cuInit returned {r}, cuDeviceGetCount {c}, {n.value} devices')\n"
)


@dataclass(frozen=True)
class Sandbox:
    max_file_bytes: int
    max_procs: int
    without: tuple[str, ...] = ()  # layers of LAYERS this profile drops

    def wrap(self, argv: list[str], writable: Sequence[str | os.PathLike[str]] = (), loopback: bool = False) -> list[str]:
        """`loopback`: bring up the new network namespace's own `lo` (reaches nothing outside it)."""
        prlimit, unshare = shutil.which("prlimit"), shutil.which("unshare")
        if not prlimit or not unshare:
            raise RuntimeError("prlimit/unshare disappeared after the sandbox probe")
        nproc = self.max_procs + (_user_task_count() if os.getuid() != 0 else 0)
        ns = ["--user", "--map-root-user"]
        ns += [] if "fs_lock" in self.without else ["--mount"]
        ns += [] if "net" in self.without else ["--net"]
        # --mount-proc: a /proc of the new pid namespace; with the parent's /proc the CUDA
        # driver finds itself under the wrong pid and cuInit fails (304) - seen on the H200
        ns += [] if "pid" in self.without else ["--pid", "--fork", "--kill-child", "--mount-proc"]
        lock: list[str] = []
        up = loopback and "net" not in self.without
        if "fs_lock" not in self.without or up:
            lock = [sys.executable, "-I", str(FS_LOCK)]
            lock += [] if "fs_lock" not in self.without else ["--no-lock"]
            lock += ["--loopback-up"] if up else []
            for d in writable:
                lock += ["--rw", os.fspath(d)]
            lock.append("--")
        return [prlimit, f"--fsize={self.max_file_bytes}", f"--nproc={nproc}", "--core=0", "--",
                unshare, *ns, *lock, *argv]


def _user_task_count() -> int:
    """Threads of this uid (RLIMIT_NPROC counts them all, in every namespace)."""
    uid, n = str(os.getuid()), 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            if fields.get("Uid", "").split()[:1] == [uid]:
                n += int(fields.get("Threads", "1"))
        except (OSError, ValueError):
            continue
    return n


def _try(device: str, without: tuple[str, ...]) -> str | None:
    """None when this profile runs a program (for CUDA: starts the driver), else why not."""
    code = _PROBE_CUDA if device == "cuda" else "pass"
    with tempfile.TemporaryDirectory(prefix="cuda-agent-probe-") as rw:
        code += f"\nopen({str(Path(rw) / 'w')!r}, 'w').write('ok')"  # the writable dir really is
        argv = Sandbox(1 << 30, 4096, without).wrap([sys.executable, "-c", code], writable=[rw])
        try:
            p = subprocess.run(argv, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{e}"
    if p.returncode != 0:
        err = p.stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {p.returncode}"]
        return err[0][:200]
    return None


@lru_cache(maxsize=4)
def probe(device: str) -> tuple[tuple[str, ...] | None, str]:
    """(layers to drop, note): the strongest profile that works here; (None, reason) when none does."""
    if not sys.platform.startswith("linux"):
        return None, "not Linux"
    if not shutil.which("unshare") or not shutil.which("prlimit"):
        return None, "unshare or prlimit (util-linux) not found"
    first = _try(device, ())
    if first is None:
        return (), ""
    for n in (1, 2):
        for without in combinations(LAYERS, n):
            if _try(device, without) is None:
                return without, f"full profile failed: {first}"
    return None, f"probe failed: {first}"


def for_config(cfg: Any) -> tuple[Sandbox | None, str]:
    """The sandbox for this evaluation, and a word for the record: "on", "on without net: why",
    "off", "unavailable: why"."""
    if getattr(cfg, "sandbox", "auto") == "off":
        return None, "off"
    without, note = probe(cfg.device)
    if without is None:
        return None, f"unavailable: {note}"
    word = "on" if not without else f"on without {'+'.join(without)} ({note})"
    return Sandbox(cfg.sandbox_max_file_bytes, cfg.sandbox_max_procs, without), word
