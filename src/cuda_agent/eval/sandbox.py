"""Sandbox for the candidate child: namespaces and resource limits around one process tree.

Contract: `for_config(cfg)` returns a `Sandbox` (or None with the reason) and
`Sandbox.wrap(argv)` prefixes a command so that it runs as
`prlimit --fsize --nproc --core=0 -- unshare --user --map-root-user --net --pid --fork --kill-child ARGV`:
- network: a new, empty network namespace (only a loopback device, and it is
  down): no connection to anything, 127.0.0.1 included;
- processes: a new pid namespace whose init is the child; when the parent kills
  the `unshare` process (timeout or end of evaluation) the kernel kills every
  process in the namespace, including ones that called setsid() to leave the
  process group. RLIMIT_NPROC bounds a fork bomb for non-root users (the
  kernel does not enforce it for uid 0, where the pid-namespace kill at the end
  of the budget is the only bound);
- files: RLIMIT_FSIZE bounds every file the tree writes (a write past it fails
  with EFBIG, or SIGXFSZ kills a process that does not ignore it); core dumps
  are off (RLIMIT_CORE 0). The pipeline also gives the child a private TMPDIR
  and a scrubbed environment (`procs.scrubbed_env`: no secrets, no seed).
- `probe(device)` runs a tiny program in the same wrapping (and, for CUDA,
  initialises the driver there) once per parent process; `EvalConfig.sandbox`
  = "auto" uses the sandbox only when the probe succeeds, "off" never.

Not isolated: the file system (the child runs with the parent's uid mapped to
root inside the user namespace, so it can read and write whatever the parent
can: the workspace copy, the caches, other files of that user), the GPU (shared
with nothing else by design, but not partitioned), CPU time (bounded only by the
wall-clock budgets) and memory (no RLIMIT_AS: CUDA reserves huge virtual
ranges). A write outside the workspace is therefore not prevented, only
bounded in size; the evaluation reads nothing the candidate could write
except its output file, which is validated.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

UNSHARE_ARGS = ("--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child")

_PROBE_CUDA = (
    "import ctypes,sys\n"
    "lib=ctypes.CDLL('libcuda.so.1')\n"
    "n=ctypes.c_int(0)\n"
    "sys.exit(0 if lib.cuInit(0)==0 and lib.cuDeviceGetCount(ctypes.byref(n))==0 and n.value>0 else 3)\n"
)


@dataclass(frozen=True)
class Sandbox:
    max_file_bytes: int
    max_procs: int

    def wrap(self, argv: list[str]) -> list[str]:
        prlimit, unshare = shutil.which("prlimit"), shutil.which("unshare")
        if not prlimit or not unshare:
            raise RuntimeError("prlimit/unshare disappeared after the sandbox probe")
        nproc = self.max_procs + (_user_task_count() if os.getuid() != 0 else 0)
        return [prlimit, f"--fsize={self.max_file_bytes}", f"--nproc={nproc}", "--core=0", "--",
                unshare, *UNSHARE_ARGS, *argv]


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


@lru_cache(maxsize=4)
def probe(device: str) -> str | None:
    """None when the sandbox works here (for CUDA: the driver starts inside it), else why not."""
    if not sys.platform.startswith("linux"):
        return "not Linux"
    if not shutil.which("unshare") or not shutil.which("prlimit"):
        return "unshare or prlimit (util-linux) not found"
    code = _PROBE_CUDA if device == "cuda" else "pass"
    argv = Sandbox(1 << 30, 4096).wrap([sys.executable, "-c", code])
    try:
        p = subprocess.run(argv, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"probe failed: {e}"
    if p.returncode != 0:
        err = p.stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {p.returncode}"]
        return f"probe failed: {err[0][:200]}"
    return None


def for_config(cfg: Any) -> tuple[Sandbox | None, str]:
    """The sandbox for this evaluation, and a word for the record ("on", "off", "unavailable: ...")."""
    if getattr(cfg, "sandbox", "auto") == "off":
        return None, "off"
    why = probe(cfg.device)
    if why is not None:
        return None, f"unavailable: {why}"
    return Sandbox(cfg.sandbox_max_file_bytes, cfg.sandbox_max_procs), "on"
