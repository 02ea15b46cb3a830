"""Build a workspace's kernels into one importable module, cached by content.

Contract: `build(root, cfg)` compiles every `kernels/*.cu` with nvcc (no torch
headers needed, so seconds each), every `kernels/*.cpp` plus the fixed
`binding.cpp` with the host C++ compiler against torch's headers (the slow
part), and links them into `cuda_extension.so`. Each object is cached under a
key made of the toolchain fingerprint, the unit's text and the text of every
local file it `#include`s (recursively); the link is cached under the set of
object keys. So an edit to one kernel recompiles that kernel and relinks, and
an unchanged candidate is not rebuilt at all. Compiles run in parallel, each
in its own process group, under one shared deadline; a unit that another build on this
machine is compiling (same key, same cache) is waited for, not compiled twice. Failures come back as a
`BuildResult` with the compiler's output, never as an exception. The compilers, their
flags and the unit key are `toolchain.py`'s.

Before the link, every candidate object (all but the pristine binding.cpp's, cached ones
too) goes through the post-build symbol check (`checks.symbols.check`, milliseconds): an object
that references a Python-facing symbol the pristine binding does not need, the loader's
lookup (dlsym, dl_iterate_phdr, ...), or defines a CUDA runtime function is not linked;
the result is not ok, carries the REJECT findings in `findings` and names them in its log.

Not guaranteed: that the module loads or runs (that is the child's job), or
that a compiler given hostile source is harmless (the sandbox's job).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent.eval.build.toolchain import MODULE_NAME, _run_compiler, _unit_key, toolchain
from cuda_agent.eval.channel.processes import tail
from cuda_agent.eval.checks import symbols
from cuda_agent.eval.judge.result import Finding
from cuda_agent.sandbox.env import flock_until


@dataclass
class BuildResult:
    ok: bool
    so_path: Path | None
    log: str = ""
    seconds: float = 0.0
    timed_out: bool = False
    cached: bool = False  # nothing was compiled or linked
    rebuilt: list[str] = field(default_factory=list)  # units compiled this time
    note: str = ""  # how it was built, where that is worth saying (a single file's CUDA text split or not)
    # REJECT findings of the post-build symbol check (`checks.symbols.check`): the objects compiled, but link to
    # what a candidate may not reach; ok is False and nothing is linked
    findings: list[Finding] = field(default_factory=list)


def rejected_build(
    findings: list[Finding], logs: list[str], seconds: float, rebuilt: list[str], note: str = ""
) -> BuildResult:
    """The objects compiled but the symbol check rejects them: not linked, not loaded."""
    why = "\n".join(f"{f.rule}: {f.message}" for f in findings)
    return BuildResult(
        False,
        None,
        tail("\n".join([*logs, f"== symbol check: rejected\n{why}"])),
        seconds,
        False,
        False,
        rebuilt,
        note,
        findings,
    )


def build(
    root: Path,
    cache_dir: Path,
    *,
    arch: str,
    timeout: float,
    jobs: int = 0,
    use_cache: bool = True,
    check_symbols: bool = True,
) -> BuildResult:
    t0 = time.monotonic()
    root = root.resolve()
    tc = toolchain(arch)
    kernels = root / "kernels"
    cu = sorted(kernels.glob("*.cu")) if kernels.is_dir() else []
    cpp = (sorted(kernels.glob("*.cpp")) if kernels.is_dir() else []) + [root / "binding.cpp"]
    if not cu and len(cpp) == 1:
        return BuildResult(False, None, "kernels/ holds no .cu or .cpp files: nothing to build", time.monotonic() - t0)
    objdir = cache_dir / "objects"
    objdir.mkdir(parents=True, exist_ok=True)
    units = [(src, objdir / f"{_unit_key(tc, src, root)}.o") for src in cu + cpp]
    todo = [(s, o) for s, o in units if not (use_cache and o.exists())]
    deadline = t0 + timeout

    def compile_one(unit: tuple[Path, Path]) -> tuple[Path, int | None, str]:
        src, obj = unit
        # one compile per unit key at a time, machine-wide: a build that finds the same unit being compiled
        # (the pristine binding.cpp of every evaluation, the same answer in several rollouts) waits for that
        # object instead of compiling it again beside it (the CPU warm-up, 2026-12-07: four builds at once on
        # 2 cores, each compiling the same torch-header units, all ran past the 300 s budget)
        with open(obj.with_suffix(".lock"), "a") as lock:
            if not flock_until(lock, fcntl.LOCK_EX, deadline, poll_s=0.1):  # a compile takes seconds
                return src, None, "timed out waiting for the same unit's compile in another build"
            if use_cache and obj.exists():
                return src, 0, ""
            tmp = obj.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp.o")
            cmd = tc.nvcc_cmd(src, tmp, root) if src.suffix == ".cu" else tc.cxx_cmd(src, tmp, root)
            r = _run_compiler(cmd, timeout=deadline - time.monotonic(), cwd=root)
            if r.returncode == 0:
                os.replace(tmp, obj)
            else:
                tmp.unlink(missing_ok=True)
            return src, r.returncode, r.output

    logs: list[str] = []
    failed = timed_out = False
    if todo:
        # Heavy torch-header units first: they bound the wall time.
        todo.sort(key=lambda u: u[0].suffix == ".cu")
        with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2) as pool:
            for src, rc, out in pool.map(compile_one, todo):
                rel = src.relative_to(root)
                if rc != 0:
                    failed = True
                    timed_out |= rc is None
                    why = "timed out" if rc is None else f"failed (exit {rc})"
                    logs.append(f"== {rel}: compile {why}\n{out}")
                elif out.strip():
                    logs.append(f"== {rel}: warnings\n{out}")
    rebuilt = [str(s.relative_to(root)) for s, _ in todo]
    if failed:
        return BuildResult(False, None, tail("\n".join(logs)), time.monotonic() - t0, timed_out, False, rebuilt)
    # every candidate object's symbols, the pristine binding.cpp's excepted (cached objects too: milliseconds)
    objects = [(str(s.relative_to(root)), str(s.relative_to(root)), o) for s, o in units if s != root / "binding.cpp"]
    # check_symbols off only for the red team's runtime lane (EvalConfig.static_gate): the run-time defences alone
    bad = (
        symbols.check(objects, "workspace", cache_dir=cache_dir, arch=arch, deadline=deadline) if check_symbols else []
    )
    if bad:
        return rejected_build(bad, logs, time.monotonic() - t0, rebuilt)
    sources_text = "".join(p.read_text(errors="replace") for p, _ in units)
    extra = ["cudnn"] if "cudnn.h" in sources_text else []
    link_key = hashlib.sha256(("|".join(o.name for _, o in units) + "|" + ",".join(extra)).encode()).hexdigest()[:24]
    so_dir = cache_dir / "modules" / link_key
    so = so_dir / f"{MODULE_NAME}.so"
    if use_cache and so.exists():
        return BuildResult(True, so, "\n".join(logs), time.monotonic() - t0, False, not todo, rebuilt)
    so_dir.mkdir(parents=True, exist_ok=True)
    tmp_so = so_dir / f"{MODULE_NAME}.{os.getpid()}.{threading.get_ident()}.tmp.so"
    r = _run_compiler(
        tc.link_cmd([o for _, o in units], tmp_so, extra), timeout=max(deadline - time.monotonic(), 5), cwd=root
    )
    if r.returncode != 0:
        tmp_so.unlink(missing_ok=True)
        logs.append(f"== link {'timed out' if r.timed_out else 'failed'}\n{r.output}")
        return BuildResult(False, None, tail("\n".join(logs)), time.monotonic() - t0, r.timed_out, False, rebuilt)
    os.replace(tmp_so, so)
    return BuildResult(True, so, tail("\n".join(logs)), time.monotonic() - t0, False, False, rebuilt)
