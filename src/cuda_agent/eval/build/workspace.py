"""Build a workspace's kernels into one importable module, cached by content.

Contract: `build(root, cfg)` compiles every `kernels/*.cu` with nvcc (no torch
headers needed, so seconds each), every `kernels/*.cpp` plus the fixed
`binding.cpp` with the host C++ compiler against torch's headers (the slow
part), and links them into `cuda_extension.so`. Each object is cached under a
key made of the toolchain fingerprint, the unit's text and the text of every
local file it `#include`s (recursively); the link is cached under the set of
object keys. So an edit to one kernel recompiles that kernel and relinks, and
an unchanged candidate is not rebuilt at all. Compiles run in parallel, each
in its own process group, under one shared deadline. Failures come back as a
`BuildResult` with the compiler's output, never as an exception.

Before the link, every candidate object (all but the pristine binding.cpp's, cached ones
too) goes through the post-build symbol check (`checks.symbols.check`, milliseconds): an object
that references a Python-facing symbol the pristine binding does not need, the loader's
lookup (dlsym, dl_iterate_phdr, ...), or defines a CUDA runtime function is not linked;
the result is not ok, carries the REJECT findings in `findings` and names them in its log.

Not guaranteed: that the module loads or runs (that is the child's job), or
that a compiler given hostile source is harmless (the sandbox's job).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import subprocess
import sysconfig
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from cuda_agent.eval.channel.processes import CommandResult, run_command, tail
from cuda_agent.eval.checks import symbols
from cuda_agent.eval.judge.result import Finding
from cuda_agent.task.workspace import cache_root

_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
MODULE_NAME = "cuda_extension"


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


@dataclass(frozen=True)
class Toolchain:
    nvcc: str
    cxx: str
    cuda_home: str
    include_dirs: tuple[str, ...]
    lib_dirs: tuple[str, ...]
    torch_libs: tuple[str, ...]
    defines: tuple[str, ...]
    arch: str
    versions: str

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(repr(self).encode()).hexdigest()[:16]

    def nvcc_cmd(self, src: Path, obj: Path, root: Path) -> list[str]:
        major, minor = self.arch.split(".")
        return [
            self.nvcc, "-O3", "--use_fast_math", "-std=c++17", "-Xcompiler", "-fPIC",
            f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}",
            f"-I{root}", f"-I{root / 'kernels'}", *(f"-I{d}" for d in self.include_dirs),
            *self.defines, "-c", str(src), "-o", str(obj),
        ]

    def cxx_cmd(self, src: Path, obj: Path, root: Path) -> list[str]:
        return [
            self.cxx, "-O3", "-std=c++17", "-fPIC", "-w",
            f"-I{root}", f"-I{root / 'kernels'}", *(f"-I{d}" for d in self.include_dirs),
            *self.defines, "-c", str(src), "-o", str(obj),
        ]

    def link_cmd(self, objs: list[Path], out: Path, extra_libs: list[str]) -> list[str]:
        libs = [f"-l{n}" for n in self.torch_libs]
        libs += [flag for n in ("cudart", "cublas", "cublasLt", *extra_libs) if (flag := self.lib_flag(n))]
        return [
            self.cxx, "-shared", *(str(o) for o in objs),
            *(f"-L{d}" for d in self.lib_dirs), *(f"-Wl,-rpath,{d}" for d in self.lib_dirs),
            *libs, "-o", str(out),
        ]

    def lib_flag(self, name: str) -> str | None:
        # NVIDIA's pip wheels ship only versioned files (libcublas.so.13), which
        # plain -lcublas does not find; name the file itself then.
        for d in self.lib_dirs:
            if os.path.exists(os.path.join(d, f"lib{name}.so")):
                return f"-l{name}"
        for d in self.lib_dirs:
            found = sorted(Path(d).glob(f"lib{name}.so.*"))
            if found:
                return f"-l:{found[0].name}"
        return None


def _version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return out.strip().splitlines()[-1] if out.strip() else "?"


def _nvidia_wheel_dirs() -> tuple[list[str], list[str]]:
    """Headers and libraries of NVIDIA's pip wheels (cuBLAS, cuDNN), when installed."""
    incs: list[str] = []
    libs: list[str] = []
    try:
        import nvidia  # type: ignore[import-not-found]

        roots = [Path(p) for p in nvidia.__path__]
    except ImportError:
        return incs, libs
    for r in roots:
        for d in sorted(r.glob("*/include")) + sorted(r.glob("*/*/include")):
            incs.append(str(d))
        for d in sorted(r.glob("*/lib")) + sorted(r.glob("*/*/lib")):
            libs.append(str(d))
    return incs, libs


def _cpu_torch_shim(torch_incs: list[str]) -> list[str]:
    """A CPU-only torch wheel ships c10/cuda headers but not the one header its
    CUDA build generates, so bindings that include <c10/cuda/CUDAStream.h> cannot
    even be compiled for a check. Supply that one-line header (its content in
    CUDA builds) from our cache; a CUDA torch never needs it."""
    rel = Path("c10/cuda/impl/cuda_cmake_macros.h")
    if any((Path(d) / rel).exists() for d in torch_incs):
        return []
    shim = Path(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))) / "cuda-agent" / "cpu-torch-shim"
    try:
        _write_shim(shim / rel)
    except OSError:  # a read-only XDG cache: the evaluator's own cache dir (which says what to do if it fails too)
        shim = cache_root() / "cpu-torch-shim"
        _write_shim(shim / rel)
    return [str(shim)]


def _write_shim(f: Path) -> None:
    if not f.exists():
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")


@lru_cache(maxsize=4)
def toolchain(arch: str) -> Toolchain:
    import torch
    import torch.utils.cpp_extension as ext

    nvcc = shutil.which("nvcc") or ""
    cuda_home = os.environ.get("CUDA_HOME") or ext.CUDA_HOME or (
        "/usr/local/cuda" if os.path.isdir("/usr/local/cuda/include") or not nvcc
        else str(Path(nvcc).resolve().parents[1])
    )
    nvcc = nvcc or os.path.join(cuda_home, "bin", "nvcc")
    cxx = os.environ.get("CXX") or shutil.which("c++") or "g++"
    # The CPU variant of include_paths: the CUDA one insists on CUDA_HOME, which a
    # CPU-only torch cannot find; CUDA's include dir is added below either way.
    torch_incs = ext.include_paths()
    wheel_incs, wheel_libs = _nvidia_wheel_dirs()
    py_inc = sysconfig.get_paths()["include"]
    incs = tuple(dict.fromkeys([*torch_incs, py_inc, os.path.join(cuda_home, "include"), *wheel_incs, *_cpu_torch_shim(torch_incs)]))
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    names = ["c10", "torch", "torch_cpu", "torch_python"]
    names += [n for n in ("c10_cuda", "torch_cuda") if os.path.exists(os.path.join(torch_lib, f"lib{n}.so"))]
    lib_dirs = [torch_lib, os.path.join(cuda_home, "lib64"), *wheel_libs]
    defines = [
        f"-DTORCH_EXTENSION_NAME={MODULE_NAME}", "-DTORCH_API_INCLUDE_EXTENSION_H",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
    ]
    abi = getattr(ext, "_get_pybind11_abi_build_flags", None)
    if abi is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            defines += list(abi())
    versions = f"torch {torch.__version__}; nvcc {_version([nvcc, '--version'])}; cxx {_version([cxx, '--version'])}"
    return Toolchain(
        nvcc=nvcc, cxx=cxx, cuda_home=cuda_home, include_dirs=incs,
        lib_dirs=tuple(d for d in dict.fromkeys(lib_dirs) if os.path.isdir(d)),
        torch_libs=tuple(names), defines=tuple(defines), arch=arch, versions=versions,
    )


CANNOT_RUN = "cuda-agent: cannot run the compiler"  # env_check recognises this line (and checks it)


def _run_compiler(cmd: list[str], *, timeout: float, cwd: Path) -> CommandResult:
    """A compiler that is not installed is the machine's failure, not the candidate's: it becomes
    a failed unit whose log says so (env_check turns it into an env_error), not an exception."""
    try:
        return run_command(cmd, timeout=timeout, cwd=cwd)
    except OSError as e:
        return CommandResult(127, f"{CANNOT_RUN} {cmd[0]}: {e.strerror or e}\n", 0.0)


def rejected_build(findings: list[Finding], logs: list[str], seconds: float, rebuilt: list[str], note: str = "") -> BuildResult:
    """The objects compiled but the symbol check rejects them: not linked, not loaded."""
    why = "\n".join(f"{f.rule}: {f.message}" for f in findings)
    return BuildResult(False, None, tail("\n".join([*logs, f"== symbol check: rejected\n{why}"])), seconds, False, False,
                       rebuilt, note, findings)


def toolchain_id() -> str:
    """The toolchain minus its target arch (compiler versions, include and library dirs): part of
    the result cache's key, since installing a header or a compiler can change a verdict."""
    return dataclasses.replace(toolchain("9.0"), arch="").fingerprint


def _unit_key(tc: Toolchain, src: Path, root: Path) -> str:
    h = hashlib.sha256(tc.fingerprint.encode() + src.suffix.encode())
    seen: set[Path] = set()
    stack = [src]
    while stack:
        p = stack.pop()
        if p in seen or not p.is_file():
            continue
        seen.add(p)
        text = p.read_bytes()
        h.update(str(p.relative_to(root) if p.is_relative_to(root) else p).encode() + b"\0" + text + b"\0")
        for inc in _INCLUDE.findall(text.decode(errors="replace")):
            for base in (p.parent, root, root / "kernels"):
                cand = (base / inc).resolve()
                if cand.is_file() and cand.is_relative_to(root.resolve()):
                    stack.append(cand)
                    break
    return h.hexdigest()[:24]


def build(root: Path, cache_dir: Path, *, arch: str, timeout: float, jobs: int = 0, use_cache: bool = True,
          check_symbols: bool = True) -> BuildResult:
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
    bad = symbols.check(objects, "workspace", cache_dir=cache_dir, arch=arch, deadline=deadline) if check_symbols else []
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
    r = _run_compiler(tc.link_cmd([o for _, o in units], tmp_so, extra), timeout=max(deadline - time.monotonic(), 5), cwd=root)
    if r.returncode != 0:
        tmp_so.unlink(missing_ok=True)
        logs.append(f"== link {'timed out' if r.timed_out else 'failed'}\n{r.output}")
        return BuildResult(False, None, tail("\n".join(logs)), time.monotonic() - t0, r.timed_out, False, rebuilt)
    os.replace(tmp_so, so)
    return BuildResult(True, so, tail("\n".join(logs)), time.monotonic() - t0, False, False, rebuilt)
