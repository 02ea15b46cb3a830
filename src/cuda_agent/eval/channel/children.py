"""The two children of an evaluation, and a spare pair started ahead of need.

Contract:
- `pair_for(cfg, precision)` returns the `Pair` (reference and candidate `Child`,
  each with its private io and tmp dirs, logs on disk) that one evaluation uses
  and then closes. It is the spare this process started while its last
  evaluation ran (just after that one took its own pair; or at its end, when it
  used none) when that spare was made for an equal `spec` and both its
  processes are alive; otherwise a new pair. A pair serves one evaluation only:
  a candidate child has run candidate code and is never reused.
- `prepare(cfg, precision, gpu_key)` starts the spare unless a live one of that spec is
  waiting (at most one per process; one of another spec is closed). Starting is a Popen: the children import torch
  and pay the op log's first use on their own, while the caller is idle (the
  agent's model turn, a pool worker taking its next job); then a thread of this
  process lets them create their CUDA contexts under a shared hold of the GPU's
  lock (`_go`), so that no context is created next to a timing; `pair_for`
  waits for that start-up to end before it hands the spare out. On an H200 that
  start-up was 2-3 s of an evaluation's critical path, more than the nvcc
  build it overlapped; a spare started only when the last evaluation ended
  still cost back-to-back evaluations ~1 s. So for a while two pairs (four
  CUDA contexts) live at once. Opt-in per evaluation (`EvalConfig.spare_children`):
  a one-shot `cuda-agent eval` would start children it never uses.
- `child_env` is every evaluation child's environment; `child_dirs` a child's
  writable dirs and the environment that points into them.

Not guaranteed: that a spare is ready when taken (it may still be warming; the
evaluation then waits as it would for new children). A spare holds two CUDA
contexts (about half a GB of GPU memory each) while the process is idle; it
is closed at exit, and its children also exit when this process dies (their
command pipe closes).
"""

from __future__ import annotations

import atexit
import os
import tempfile
import threading
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Generic, TypeVar

from cuda_agent.eval.channel import messages as P
from cuda_agent.eval.channel.processes import Child, ChildFailure, scrubbed_env
from cuda_agent.eval.timing import gpu_lock
from cuda_agent.sandbox import Sandbox, profile_for
from cuda_agent.sandbox.env import shared_lock_dir
from cuda_agent.task.workspace import cache_root

T = TypeVar("T")


def child_env(precision: str) -> dict[str, str]:
    """The environment of every evaluation child (also lint-task's reference)."""
    root = cache_root()
    extra = {
        "TORCH_EXTENSIONS_DIR": str(root / "torch_extensions"),
        "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
        "TRITON_CACHE_DIR": str(root / "triton"),
    }
    if precision == "fp32":
        extra["NVIDIA_TF32_OVERRIDE"] = "0"  # no TF32 in cuBLAS/cuDNN, whatever the code asks for
    if HIJACK in os.environ:  # test-only: the red team's stand-in for a rewritten harness (child.py)
        extra[HIJACK] = os.environ[HIJACK]
    return scrubbed_env(extra)


HIJACK = "CUDA_AGENT_TEST_HIJACK"


def sandbox_for(cfg: Any) -> tuple[Sandbox | None, str]:
    """The sandbox of this evaluation's candidate processes and its word for the record."""
    return profile_for(cfg.sandbox, cfg.device, cfg.sandbox_max_file_bytes, cfg.sandbox_max_procs)


def child_dirs(tmp: Path, name: str, env: dict[str, str], private_caches: bool) -> tuple[list[Path], dict[str, str]]:
    """A child's io and tmp dirs (all a sandboxed candidate may write: fs_lock) and its environment.
    `private_caches`: load_inline, inductor and triton caches inside its tmp dir, because its file
    system is read-only elsewhere and no shared build dir should be one a candidate can poison."""
    rw = [tmp / f"io_{name}", tmp / f"tmp_{name}"]
    for d in rw:
        d.mkdir()
    out = {**env, "TMPDIR": str(rw[1])}
    if private_caches:
        for var, sub in (
            ("TORCH_EXTENSIONS_DIR", "torch_extensions"),
            ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
            ("TRITON_CACHE_DIR", "triton"),
        ):
            out[var] = str(rw[1] / sub)
    return rw, out


def log_dir(stack: ExitStack) -> Path:
    """Children's logs go to the default temp dir (disk, usually), not to the /dev/shm scratch:
    a candidate printing gigabytes (up to RLIMIT_FSIZE) should not take that much RAM."""
    return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cuda-agent-logs-")))


def scratch_dir() -> tempfile.TemporaryDirectory[str]:
    # Outputs travel parent <-> child through files: keep them in memory when we can.
    shm = "/dev/shm"
    use = os.path.isdir(shm) and os.access(shm, os.W_OK)
    return tempfile.TemporaryDirectory(prefix="cuda-agent-eval-", dir=shm if use else None)


def spec(cfg: Any, precision: str) -> tuple[Any, ...]:
    """Everything a pair's processes were started with: a spare serves only an equal spec."""
    return (
        cfg.device,
        precision,
        cfg.sandbox,
        cfg.sandbox_max_file_bytes,
        cfg.sandbox_max_procs,
        bool(cfg.runtime_guards),
        str(shared_lock_dir()),  # the folder its sandbox hides
        tuple(sorted((k, v) for k, v in child_env(precision).items() if k not in _PER_CHILD)),
    )


_PER_CHILD = {"PYTHONHASHSEED"}  # drawn afresh for every child by scrubbed_env: not part of a spec


@dataclass
class Pair:
    key: tuple[Any, ...]
    ref: Child
    cnd: Child
    cnd_io: Path  # where the candidate writes its output files
    sandbox: str  # the sandbox's word for the record
    _stack: ExitStack = field(repr=False)
    _warming: threading.Thread | None = field(default=None, repr=False)  # a spare's CUDA start-up (_go)

    def alive(self) -> bool:
        return self.ref.alive() and self.cnd.alive()

    def ready(self) -> bool:
        """Wait for a spare's CUDA start-up to end; whether both children live."""
        if self._warming is not None:
            self._warming.join()
            self._warming = None
        return self.alive()

    def close(self) -> None:
        if self._warming is not None:  # killed children end the thread's wait for their replies
            self.ref.kill()
            self.cnd.kill()
            self._warming.join(timeout=2)  # a thread still waiting for the lock is a daemon: it ends with us
        self._stack.close()


GO_TIMEOUT_S = 300.0  # a child's torch import (no lock held) that takes longer is given up on
CUDA_START_S = 60.0  # its CUDA start-up, under the GPU's shared lock (every timing on that GPU waits)


def _go(pair: Pair, gpu_key: str, wait_s: float) -> None:
    """A spare's CUDA start-up, in a thread of the process that will use it. The children import
    torch on their own (CPU work) and say so; then, under a shared hold of the GPU's lock
    (`timing.gpu_lock.untimed`), they create their CUDA contexts and warm the digest path: never while
    an evaluation times on that GPU, and a timing that asks meanwhile waits for it to end. A spare
    started at an evaluation's beginning otherwise created its contexts during that evaluation's
    timed calls, or another pool slot's. (On the H200, 2026-12-04, 4 of 4 evaluations whose spare
    started after them timed in one round, but with this gate extra rounds still came on both sides
    of the defences' comparison: they are mostly single outlier calls, see timing's `round_spread`.
    What the gate surely removes is work that no timing should have beside it.) A failure kills the
    children: `pair_for` then starts a new pair."""
    kids = (pair.ref, pair.cnd)
    try:
        for kid in kids:
            if isinstance(kid.receive_raw(GO_TIMEOUT_S, "imported"), ChildFailure):
                raise RuntimeError(f"{kid.role} did not start")
        with gpu_lock.untimed(gpu_key, wait_s):
            for kid in kids:
                if kid.send({"cmd": "warm_cuda"}) is not None:
                    raise RuntimeError(f"{kid.role} exited")
            for kid in kids:
                if isinstance(kid.receive_raw(CUDA_START_S, "warm_cuda"), ChildFailure):
                    raise RuntimeError(f"{kid.role} failed to start CUDA")
    except Exception:  # noqa: BLE001 - a spare that cannot start is replaced, never used
        for kid in kids:
            kid.kill()


def spawn(cfg: Any, precision: str, gpu_key: str | None = None) -> Pair:
    """A new pair. With `gpu_key` (a spare), CUDA starts under the GPU's lock (`_go`); without, at
    once, overlapping the caller's build (the evaluation then needs the children soon)."""
    gated = gpu_key is not None and cfg.device == "cuda"
    pair = _spawn(cfg, precision, gated)
    if gated:
        pair._warming = threading.Thread(
            target=_go, args=(pair, gpu_key, cfg.gpu_lock_wait_s), daemon=True, name="spare-cuda-start"
        )
        pair._warming.start()
    return pair


def _light_loop(cfg: Any) -> bool:
    """Whether the clock's lighter loop may be asked for (child.hashed): its kernels are then compiled
    when the child starts CUDA, not in the first burst's prepare. "auto" counts as asking, unresolved:
    resolving it imports torch and runs NVRTC here, which `cuda-agent eval` starts the children early to
    avoid; a child that cannot build the kernels only records why (the parent's own resolution then
    asks it for the loop before them)."""
    if cfg.device != "cuda":
        return False  # the CPU lane's children start no CUDA, whatever the loop asked for
    digest, draws = cfg.clock_loop(probe=False)
    return P.light_loop(draws, digest)


def _spawn(cfg: Any, precision: str, gated: bool) -> Pair:
    stack = ExitStack()
    try:
        tmp = Path(stack.enter_context(scratch_dir()))
        logs = log_dir(stack)
        env = child_env(precision)
        box, word = sandbox_for(cfg)
        kids: dict[str, Child] = {}
        io: dict[str, Path] = {}
        for role in ("reference", "candidate"):
            rw, role_env = child_dirs(tmp, role, env, private_caches=role == "candidate")
            io[role] = rw[0]
            # cwd: the pair's own scratch; `setup` moves into the staged candidate dir
            kids[role] = Child(
                role,
                cwd=tmp,
                env=role_env,
                log_path=logs / f"{role}.log",
                warm_cuda=cfg.device == "cuda" and not gated,
                wrap=partial(box.wrap, writable=rw) if box is not None and role == "candidate" else None,
                child_args=(("--warm-oplog",) if cfg.runtime_guards and role == "candidate" else ())
                + (("--warm-cuda-on-go",) if gated else ())
                + (("--warm-light-loop",) if _light_loop(cfg) else ()),
            )
            stack.callback(kids[role].close)
        return Pair(spec(cfg, precision), kids["reference"], kids["candidate"], io["candidate"], word, stack)
    except BaseException:
        stack.close()
        raise


class SpareSlot(Generic[T]):
    """At most one spare of something that is started ahead of need and serves once (an
    evaluation's pair here, a synthesis filter child in `synth.device_job`). Its items have a
    `key` (what they were started with), `alive()` and `close()`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.item: T | None = None

    def take(self, key: Any, start: Callable[[], T]) -> T:
        """The spare when it fits and lives (it leaves the slot), else a new one from `start`."""
        with self._lock:
            spare, self.item = self.item, None
        if spare is not None:
            if spare.key == key and spare.alive():  # type: ignore[attr-defined]
                return spare
            spare.close()  # type: ignore[attr-defined]
        return start()

    def prepare(self, key: Any, start: Callable[[], T]) -> None:
        """Keep a live spare that fits, else start one in its place."""
        with self._lock:
            if self.item is not None and self.item.key == key and self.item.alive():  # type: ignore[attr-defined]
                return
        fresh = start()
        with self._lock:
            old, self.item = self.item, fresh
        if old is not None:
            old.close()  # type: ignore[attr-defined]

    def discard(self) -> None:
        with self._lock:
            old, self.item = self.item, None
        if old is not None:
            old.close()  # type: ignore[attr-defined]


_slot: SpareSlot[Pair] = SpareSlot()


def pair_for(cfg: Any, precision: str) -> Pair:
    """The spare when it fits and lives (once its CUDA start-up has ended), else a new pair; the
    caller closes it."""
    pair = _slot.take(spec(cfg, precision), lambda: spawn(cfg, precision))
    if pair.ready():
        return pair
    pair.close()
    return spawn(cfg, precision)


def prepare(cfg: Any, precision: str, gpu_key: str | None = None) -> None:
    """Have a spare for this spec: keep a live one that fits (an evaluation that used no
    children, such as the compile phase, leaves it warm), else start one in place of it. With
    `gpu_key` its CUDA start-up waits for that GPU's timed sections (`_go`)."""
    _slot.prepare(spec(cfg, precision), lambda: spawn(cfg, precision, gpu_key))


def discard() -> None:
    """Close the spare, if any (also at exit)."""
    _slot.discard()


atexit.register(discard)
