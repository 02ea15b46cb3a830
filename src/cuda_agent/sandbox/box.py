"""The one sandbox: namespaces, locked read-only mounts and resource limits around a process tree.

Used for every candidate process of the evaluator (its candidate children, the sanitizer lane)
and for the agent's bash shell; `probe` decides once per process what this machine allows.

Contract: `Sandbox.wrap(argv, writable=DIRS, readonly=PINS, cwd=DIR)` prefixes a command so that
it runs as `prlimit --fsize --nproc --core=0 -- unshare --user --map-root-user --mount --net
--pid --fork --kill-child --mount-proc python -I fs_lock.py --rw DIR... --ro PIN... -- ARGV`:
- network: a new, empty network namespace (only a loopback device, and it is down): no
  connection to anything, 127.0.0.1 included (`loopback=True` brings the namespace's own `lo`
  up for compute-sanitizer; it still reaches nothing outside);
- processes: a new pid namespace whose init is the command; when the caller kills the
  `unshare` process (timeout or end of evaluation, `kill_group`) the kernel kills every process
  in the namespace, including ones that called setsid() to leave the process group.
  RLIMIT_NPROC bounds a fork bomb for non-root users (the kernel does not enforce it for uid 0,
  where the pid-namespace kill is the only bound);
- files: every mount is read-only except the writable DIRs (`fs_lock`), the PINs inside them
  are read-only again, the evaluator's lock folder (`env.shared_lock_dir`) is an empty read-only
  tmpfs unless a caller lists it as writable (a candidate that could flock the per-GPU lock could
  hold it and stall every timing on the GPU: tests/redteam/hacks/hijack_lock_hold), and the command runs in a nested user namespace where the kernel has
  locked those flags: a remount, an unmount of a pin or a new mount over them fails even though
  the command is root there. RLIMIT_FSIZE bounds every file the tree writes; core dumps are off;
- environment: callers pass `scrubbed_env(...)` (an allow-list: no API keys, no seeds).
`probe(device)` runs a tiny program in the same wrapping (for CUDA it also starts the driver
there). When the full sandbox fails it tries weaker profiles, dropping one layer at a time
(the nesting lock, then the fs lock, the network, the pid namespace), and uses the strongest
that works; `Sandbox.word` then names what is missing and why ("on without nest: ...").
`profile_for(mode, device, ...)` is that decision for a caller's settings.

Not isolated: reads (the command runs with the caller's uid mapped to root inside the user
namespace, so it can read whatever the caller can), the GPU (shared, not partitioned), CPU time
(bounded only by the callers' wall-clock budgets) and memory (no RLIMIT_AS: CUDA reserves huge
virtual ranges). A process that is root on the host is still confined by the namespaces, but a
kernel exploit is out of scope.
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

from cuda_agent.sandbox.env import shared_lock_dir

LAYERS = ("nest", "fs_lock", "net", "pid")  # what a profile may drop, weakest loss first
FS_LOCK = Path(__file__).with_name("fs_lock.py")

# Inside a locked profile: clearing the read-only flag of / must fail (EPERM), or the lock is not real.
_PROBE_LOCKED = (
    "\nimport ctypes,os\n"
    "libc=ctypes.CDLL(None,use_errno=True)\n"
    "r=libc.mount(None,b'/',None,32|4096|32768,None)\n"  # MS_REMOUNT|MS_BIND, read-write
    "r==0 and sys.exit('the read-only flags are not locked: a remount of / succeeded')\n"
)
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

    @property
    def locked(self) -> bool:
        """Whether the read-only flags are locked against the wrapped command."""
        return not {"nest", "fs_lock"} & set(self.without)

    def wrap(
        self,
        argv: list[str],
        writable: Sequence[str | os.PathLike[str]] = (),
        loopback: bool = False,
        readonly: Sequence[str | os.PathLike[str]] = (),
        cwd: str | os.PathLike[str] | None = None,
    ) -> list[str]:
        """`loopback`: bring up the new network namespace's own `lo` (reaches nothing outside it);
        `readonly`: paths inside `writable` pinned read-only; `cwd`: the command's working dir.
        The evaluator's lock folder is hidden unless it is one of `writable`."""
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
        if "fs_lock" not in self.without or up or cwd is not None:
            lock = [sys.executable, "-I", str(FS_LOCK)]
            lock += [] if "fs_lock" not in self.without else ["--no-lock"]
            lock += ["--no-nest"] if "nest" in self.without else []
            lock += ["--loopback-up"] if up else []
            for d in writable:
                lock += ["--rw", os.fspath(d)]
            for p in readonly:
                lock += ["--ro", os.fspath(p)]
            hidden = os.path.realpath(shared_lock_dir())  # made now if missing: one made later would show
            if not any(os.path.realpath(d) == hidden for d in writable):
                lock += ["--hide", hidden]
            lock += ["--cwd", os.fspath(cwd)] if cwd is not None else []
            lock.append("--")
        return [
            prlimit,
            f"--fsize={self.max_file_bytes}",
            f"--nproc={nproc}",
            "--core=0",
            "--",
            unshare,
            *ns,
            *lock,
            *argv,
        ]


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
    code = _PROBE_CUDA if device == "cuda" else "import sys"
    with tempfile.TemporaryDirectory(prefix="cuda-agent-probe-") as rw:
        code += f"\nopen({str(Path(rw) / 'w')!r}, 'w').write('ok')"  # the writable dir really is
        if "nest" not in without and "fs_lock" not in without:
            code += _PROBE_LOCKED  # the flags really are locked
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
    for n in (1, 2, 3):
        for without in combinations(LAYERS, n):
            if _try(device, without) is None:
                return without, f"full profile failed: {first}"
    return None, f"probe failed: {first}"


def profile_for(mode: str, device: str, max_file_bytes: int, max_procs: int) -> tuple[Sandbox | None, str]:
    """The sandbox for these settings (`mode` "auto" or "off"), and a word for the record: "on",
    "on without net (why)", "off", "unavailable: why"."""
    if mode == "off":
        return None, "off"
    without, note = probe(device)
    if without is None:
        return None, f"unavailable: {note}"
    word = "on" if not without else f"on without {'+'.join(without)} ({note})"
    return Sandbox(max_file_bytes, max_procs, without), word
