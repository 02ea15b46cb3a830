"""The environment and the end of every sandboxed process tree.

Contract: `scrubbed_env(extra_names, extra)` builds an environment from an allow-list of the
caller's variables (paths, locale, CUDA device selection and toolkit locations): API keys,
tokens, evaluator seeds and anything else not named never reach candidate code or the agent's
shell. `kill_group(proc)` SIGKILLs the process group a `Popen(start_new_session=True)` leads
and reaps the leader; with the sandbox's pid namespace that ends every process of the tree.

`shared_lock_dir()` is the machine-wide folder of the evaluator's lock files (the per-GPU timing
lock, the pool's GPU leases): every sandboxed process gets an empty, read-only folder in its place
(`box`), because a candidate that could flock those files could stall every timing on its GPU.

Not guaranteed: variables a caller adds through `extra` are the caller's responsibility.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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
