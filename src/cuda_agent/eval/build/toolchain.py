"""The build's toolchain: which compilers, with which flags, against which headers and libraries.

Contract: `toolchain(arch)` finds nvcc, the host C++ compiler, torch's include and library dirs,
CUDA_HOME and NVIDIA's pip wheels (cuBLAS, cuDNN), cached per arch in the process, and returns a frozen
`Toolchain` whose `nvcc_cmd` / `cxx_cmd` / `link_cmd` are the commands every build of the parent
uses (`workspace.py`, `single_file.py`, and `checks/symbols.py` deriving its allowlist with the
same command, so the pristine binding's object is shared). Its `fingerprint` covers every field,
compiler and torch versions included. `_unit_key(tc, src, root)` is a compile unit's cache key:
that fingerprint, the unit's text and the text of every local file it `#include`s, recursively.
`toolchain_id()` is the fingerprint without the target arch, part of the result cache's key.
`_run_compiler` runs one command; a compiler that cannot be started is a failed command whose
output starts with `CANNOT_RUN` (which `env_check.py` turns into env_error), never an exception.
On a CPU-only torch, the one generated header its c10/cuda headers need is supplied from a cache
(`_cpu_torch_shim`), so bindings compile there too.

Not guaranteed: that the compilers found work or agree with each other (a broken install shows up as
a failed compile, told apart by `env_check.py`); that the cache key sees a change outside the
workspace that no field records (a system header edited in place keeps its key: the compiler and torch
versions and the dirs are what the fingerprint holds); or that `toolchain()` notices a change of the
environment (CUDA_HOME, CXX, a newly installed wheel) after its first call in a process (it is cached:
`toolchain.cache_clear()`).

This module sits below both `workspace.py` (the build) and `checks/symbols.py` (the post-build check
the build runs), which is why it imports neither.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import subprocess
import sysconfig
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cuda_agent.eval.channel.processes import CommandResult, run_command
from cuda_agent.task.workspace import cache_root

_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
MODULE_NAME = "cuda_extension"


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
            self.nvcc,
            "-O3",
            "--use_fast_math",
            "-std=c++17",
            "-Xcompiler",
            "-fPIC",
            f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}",
            f"-I{root}",
            f"-I{root / 'kernels'}",
            *(f"-I{d}" for d in self.include_dirs),
            *self.defines,
            "-c",
            str(src),
            "-o",
            str(obj),
        ]

    def cxx_cmd(self, src: Path, obj: Path, root: Path) -> list[str]:
        return [
            self.cxx,
            "-O3",
            "-std=c++17",
            "-fPIC",
            "-w",
            f"-I{root}",
            f"-I{root / 'kernels'}",
            *(f"-I{d}" for d in self.include_dirs),
            *self.defines,
            "-c",
            str(src),
            "-o",
            str(obj),
        ]

    def link_cmd(self, objs: list[Path], out: Path, extra_libs: list[str]) -> list[str]:
        libs = [f"-l{n}" for n in self.torch_libs]
        libs += [flag for n in ("cudart", "cublas", "cublasLt", *extra_libs) if (flag := self.lib_flag(n))]
        return [
            self.cxx,
            "-shared",
            *(str(o) for o in objs),
            *(f"-L{d}" for d in self.lib_dirs),
            *(f"-Wl,-rpath,{d}" for d in self.lib_dirs),
            *libs,
            "-o",
            str(out),
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
    cuda_home = (
        os.environ.get("CUDA_HOME")
        or ext.CUDA_HOME
        or (
            "/usr/local/cuda"
            if os.path.isdir("/usr/local/cuda/include") or not nvcc
            else str(Path(nvcc).resolve().parents[1])
        )
    )
    nvcc = nvcc or os.path.join(cuda_home, "bin", "nvcc")
    cxx = os.environ.get("CXX") or shutil.which("c++") or "g++"
    # The CPU variant of include_paths: the CUDA one insists on CUDA_HOME, which a
    # CPU-only torch cannot find; CUDA's include dir is added below either way.
    torch_incs = ext.include_paths()
    wheel_incs, wheel_libs = _nvidia_wheel_dirs()
    py_inc = sysconfig.get_paths()["include"]
    incs = tuple(
        dict.fromkeys(
            [*torch_incs, py_inc, os.path.join(cuda_home, "include"), *wheel_incs, *_cpu_torch_shim(torch_incs)]
        )
    )
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    names = ["c10", "torch", "torch_cpu", "torch_python"]
    names += [n for n in ("c10_cuda", "torch_cuda") if os.path.exists(os.path.join(torch_lib, f"lib{n}.so"))]
    lib_dirs = [torch_lib, os.path.join(cuda_home, "lib64"), *wheel_libs]
    defines = [
        f"-DTORCH_EXTENSION_NAME={MODULE_NAME}",
        "-DTORCH_API_INCLUDE_EXTENSION_H",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
    ]
    abi = getattr(ext, "_get_pybind11_abi_build_flags", None)
    if abi is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            defines += list(abi())
    versions = f"torch {torch.__version__}; nvcc {_version([nvcc, '--version'])}; cxx {_version([cxx, '--version'])}"
    return Toolchain(
        nvcc=nvcc,
        cxx=cxx,
        cuda_home=cuda_home,
        include_dirs=incs,
        lib_dirs=tuple(d for d in dict.fromkeys(lib_dirs) if os.path.isdir(d)),
        torch_libs=tuple(names),
        defines=tuple(defines),
        arch=arch,
        versions=versions,
    )


CANNOT_RUN = "cuda-agent: cannot run the compiler"  # env_check recognises this line (and checks it)


def _run_compiler(cmd: list[str], *, timeout: float, cwd: Path) -> CommandResult:
    """A compiler that is not installed is the machine's failure, not the candidate's: it becomes
    a failed unit whose log says so (env_check turns it into an env_error), not an exception."""
    try:
        return run_command(cmd, timeout=timeout, cwd=cwd)
    except OSError as e:
        return CommandResult(127, f"{CANNOT_RUN} {cmd[0]}: {e.strerror or e}\n", 0.0)


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
