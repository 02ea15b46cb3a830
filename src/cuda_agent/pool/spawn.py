"""Process pools of fresh interpreters with an environment of their own (the local pool's workers, a
leased evaluation moved out of a process whose CUDA view is fixed).

Contract: `executor(n, env)` is a `ProcessPoolExecutor` of n spawned workers (never forked: a fork
would inherit the parent's CUDA state), each starting with `env` over the parent's environment and
ignoring SIGINT (the parent decides when they stop). Not guaranteed: anything about the jobs'
own children (evaluations start theirs in their own process groups).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor


def _init_worker(env: dict[str, str]) -> None:
    os.environ.update(env)
    # Ctrl-C reaches the whole process group: the parent decides (close(cancel=True) stops the
    # workers); a worker that took it would print a traceback and leave its job half done
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def executor(n: int, env: dict[str, str]) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        max_workers=n, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker, initargs=(env,)
    )
