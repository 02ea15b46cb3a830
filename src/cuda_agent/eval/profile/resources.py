"""What the compiler says about each kernel: registers, spills, shared memory, stack (no GPU needed).

Contract:
- `ptxas_report(text)` reads `nvcc -Xptxas -v` output (CUDA 11-13 formats) into `Resources` by
  mangled kernel name: registers per thread, spill stores/loads and stack frame (bytes per thread),
  static shared memory per block, barriers.
- `cuobjdump_report(text)` reads `cuobjdump --dump-resource-usage` output (REG, STACK, SHARED, LOCAL)
  the same way, for a built object where the sources are not at hand.
- `compile_report(root, nvcc_cmd, timeout_s)` recompiles each `kernels/*.cu` of a staged workspace
  with the build's own nvcc command plus `-Xptxas -v` into a scratch object (the sources are
  torch-free: seconds each) and merges the reports; `ResourceReport.note` says what failed, never
  raises for a compiler that is missing, fails or runs out of time.
- `demangle(names)` through c++filt where installed (else the names as they are); `short_name` cuts
  a demangled signature to something one summary line can hold.

Not guaranteed: kernels that are not in kernels/*.cu (a single-file solution's load_inline text,
cuBLAS/cuDNN kernels the candidate calls) have no compiler report; their registers and shared memory
come from ncu's launch metrics when counters are readable. Spills are ptxas's static count per
thread, not how often the spilled code runs. Standard library only.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Resources:
    registers: int | None = None
    spill_stores: int | None = None  # bytes per thread
    spill_loads: int | None = None
    stack: int | None = None  # bytes per thread (local arrays and spills)
    smem_static: int | None = None  # bytes per block
    barriers: int | None = None


@dataclass
class ResourceReport:
    kernels: dict[str, Resources] = field(default_factory=dict)  # mangled name -> resources
    source: str = ""  # "nvcc -Xptxas -v", "cuobjdump"
    note: str = ""  # what could not be read, in one line
    seconds: float = 0.0


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_BAR = re.compile(r"used (\d+) barriers")


def ptxas_report(text: str) -> dict[str, Resources]:
    out: dict[str, Resources] = {}
    cur: Resources | None = None
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            cur = out.setdefault(m.group(1), Resources())
        elif m := _PROPS.search(line):
            cur = out.setdefault(m.group(1), Resources())
        elif cur is not None and (m := _FRAME.search(line)):
            cur.stack, cur.spill_stores, cur.spill_loads = (int(g) for g in m.groups())
        elif cur is not None and (m := _USED.search(line)):
            cur.registers = int(m.group(1))
            cur.smem_static = int(s.group(1)) if (s := _SMEM.search(line)) else 0
            cur.barriers = int(b.group(1)) if (b := _BAR.search(line)) else None
    return out


_FUNC = re.compile(r"^\s*Function (\S+?):?\s*$")
_FIELD = re.compile(r"\b(REG|STACK|SHARED|LOCAL):(\d+)")


def cuobjdump_report(text: str) -> dict[str, Resources]:
    out: dict[str, Resources] = {}
    cur: Resources | None = None
    for line in text.splitlines():
        if m := _FUNC.match(line):
            cur = out.setdefault(m.group(1), Resources())
        elif cur is not None and (fields := dict(_FIELD.findall(line))):
            cur.registers = int(fields.get("REG", 0))
            cur.stack = int(fields.get("STACK", 0))
            cur.smem_static = int(fields.get("SHARED", 0))
            local = int(fields.get("LOCAL", 0))
            cur.stack = max(cur.stack, local)
    return out


def _unit_key(cmd: list[str], root: Path) -> str:
    """The command (scratch paths out) and every file under kernels/ (its local headers): a unit's report
    is reused only for the same text and flags."""
    h = hashlib.sha256(" ".join(a for a in cmd if "cuda-agent-ptxas-" not in a).encode())
    for f in sorted((root / "kernels").rglob("*")):
        if f.is_file():
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:24]


def compile_report(
    root: Path,
    nvcc_cmd: Callable[[Path, Path, Path], list[str]],
    timeout_s: float = 60.0,
    cache_dir: Path | None = None,
) -> ResourceReport:
    """`cache_dir`: each unit's report kept there by `_unit_key` (a profile per agent turn recompiles nothing
    that did not change)."""
    t0 = time.monotonic()
    rep = ResourceReport(source="nvcc -Xptxas -v")
    units = sorted((root / "kernels").glob("*.cu")) if (root / "kernels").is_dir() else []
    if not units:
        rep.note = "no kernels/*.cu to report on (a single-file solution or library calls only)"
        return rep
    problems = []
    with tempfile.TemporaryDirectory(prefix="cuda-agent-ptxas-") as tmp:
        for src in units:
            cmd = [*nvcc_cmd(src, Path(tmp) / f"{src.stem}.o", root), "-Xptxas", "-v"]
            hit = cache_dir / f"{_unit_key(cmd, root)}.txt" if cache_dir is not None else None
            if hit is not None and hit.is_file():
                rep.kernels.update(ptxas_report(hit.read_text()))
                continue
            left = timeout_s - (time.monotonic() - t0)
            if left <= 1:
                problems.append(f"{src.name}: out of time")
                continue
            try:
                r = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=left)
            except subprocess.TimeoutExpired:
                problems.append(f"{src.name}: nvcc timed out after {timeout_s:.0f} s")
                continue
            except OSError as e:
                problems.append(f"nvcc could not run ({e.strerror or e})")
                break
            if r.returncode != 0:
                problems.append(f"{src.name}: nvcc failed (exit {r.returncode})")
            elif hit is not None:
                hit.parent.mkdir(parents=True, exist_ok=True)
                tmp_hit = hit.with_suffix(f".{os.getpid()}.tmp")
                tmp_hit.write_text(r.stdout + r.stderr)
                tmp_hit.replace(hit)
            rep.kernels.update(ptxas_report(r.stdout + r.stderr))
    if not rep.kernels and not problems:
        problems.append("kernels/*.cu define no __global__ kernel (library calls only: their kernels show under ncu)")
    rep.note = "; ".join(problems)
    rep.seconds = time.monotonic() - t0
    return rep


def demangle(names: list[str]) -> dict[str, str]:
    """mangled -> demangled, through c++filt where installed; a name it cannot read stays as it is."""
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    try:
        r = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=10)
        got = r.stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return {n: n for n in names}
    return {n: (d or n) for n, d in zip(names, got + [""] * len(names), strict=False)}


def short_name(name: str, width: int = 60) -> str:
    """A demangled signature without its argument list (and `void ` prefix), cut to `width`."""
    base = name[5:] if name.startswith("void ") else name
    depth, cut = 0, len(base)
    for i, ch in enumerate(base):  # the first '(' outside template brackets starts the arguments
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0:
            cut = i
            break
    base = base[:cut]
    return base if len(base) <= width else base[: width - 3] + "..."
