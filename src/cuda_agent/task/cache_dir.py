"""The user's cache directory (`$CUDA_AGENT_CACHE`, default ~/.cache/cuda-agent).

Contract: `cache_root()` returns it, created; a directory that cannot be used raises
`CacheDirError` (an `OSError`) naming `CUDA_AGENT_CACHE`. Its own module, below `taskfile`
and `workspace`, because the task's precision (`precision.py`, imported by `taskfile`)
caches its answers there too: in `workspace` it closed an import circle (issue 33).
"""

from __future__ import annotations

import os
from pathlib import Path


class CacheDirError(OSError):
    """The cache directory cannot be used (read-only, no space, damaged): the user's to fix."""


def cache_root() -> Path:
    base = os.environ.get("CUDA_AGENT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "cuda-agent"
    )
    p = Path(base)
    try:
        p.mkdir(parents=True, exist_ok=True)
        if not os.access(p, os.W_OK):
            raise PermissionError(13, "not writable", str(p))
    except OSError as e:
        raise CacheDirError(
            e.errno,
            f"the cache directory {p} cannot be used ({e.strerror}); set CUDA_AGENT_CACHE to a writable directory",
        ) from None
    return p
