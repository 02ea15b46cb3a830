"""Tell a machine that cannot build from a candidate that is wrong.

Contract: `classify(res)` returns `res` unchanged unless it is a compile error (or a failure
of the load phase, where a single-file solution builds with load_inline) whose log shows this
machine lacking something a candidate may rightly use, and the parent confirms the lack on
its own:
- a toolkit header from a known family (CUDA runtime and libcu++, cuBLAS, cuDNN, torch's C++
  headers and pybind11, Python.h) that the compiler could not open
  (`fatal error: cublasLt.h: No such file or directory`) and that is in none of the
  toolchain's include directories nor the system's;
- a compiler that could not be started (`build` logs `cuda-agent: cannot run the compiler X`)
  and that is indeed not an executable file;
- an unresolved cuBLAS or cuDNN symbol at load (`undefined symbol: cublasLtCreate`) while the
  toolchain finds no such library to link.
Such a result becomes `Status.ENV_ERROR`: reward None, `correct` False, and a message that names
what is missing and how to install it. The pipeline never caches it, the pool does not send it
on to a GPU, and a bench leaves the task unfinished so that a rerun scores it.

Why the confirmation: the log is compiler output, which quotes the candidate's own text (an
`#error` line, a `#line` file name); printing the pattern must not turn a -1 into "no reward".
The parent's search of the include and library dirs cannot be steered by the candidate. A
header outside the known families (`#include "my_typo.h"`) stays the candidate's compile error.

Not guaranteed: every broken machine is recognised (a bad driver fails the reference and the
candidate alike and shows as a runtime error); and on a machine that does lack, say, cuDNN, a
candidate that includes cudnn.h gets env_error instead of a verdict, which is the point: such
a machine should not be scoring candidates until it is fixed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.eval.build.toolchain import CANNOT_RUN, toolchain
from cuda_agent.eval.judge.result import EvalResult, Status

# "<file>:<line>:<col>: fatal error: <header>: No such file or directory", the whole line: a file
# name without colons, so an #error message quoting the pattern after "error:" does not match
_MISSING_HEADER = re.compile(
    r"^[^\s:][^:\n]*:\d+(?::\d+)?: fatal error: (?P<h>[\w./+-]+): No such file or directory$", re.M
)
_CANNOT_RUN = re.compile(rf"^{re.escape(CANNOT_RUN)} (?P<exe>\S+):", re.M)
_UNDEFINED = re.compile(r"undefined symbol: (?P<sym>(?:cublas|cudnn)\w*)")
_SYSTEM_INCLUDE = ("/usr/include", "/usr/local/include")


@dataclass(frozen=True)
class Family:
    name: str
    pattern: re.Pattern[str]
    fix: str


FAMILIES = (
    Family(
        "cuBLAS",
        re.compile(r"^cublas\w*\.h$"),
        "pip install nvidia-cublas (the wheel for your CUDA major version, e.g. nvidia-cublas-cu12 on CUDA 12), "
        "or install the toolkit's cuBLAS development package (libcublas-dev)",
    ),
    Family(
        "cuDNN",
        re.compile(r"^cudnn\w*\.h$"),
        "pip install nvidia-cudnn-cu12 or -cu13 (matching your CUDA), or install libcudnn-dev",
    ),
    Family(
        "CUDA toolkit",
        re.compile(
            r"^(cuda\w*\.h|cuda/.+|math_constants\.h|device_launch_parameters\.h|"
            r"vector_types\.h|mma\.h|cooperative_groups(\.h|/.+)|crt/.+|sm_\d+\w*\.h)$"
        ),
        "install the CUDA toolkit and point CUDA_HOME at it",
    ),
    Family(
        "torch C++",
        re.compile(r"^(torch|ATen|c10|caffe2|pybind11)/.+$"),
        "reinstall torch (pip install --force-reinstall torch); its wheel ships these headers",
    ),
    Family(
        "Python development",
        re.compile(r"^Python\.h$"),
        "install the Python development headers (e.g. apt-get install python3-dev)",
    ),
)


def classify(res: EvalResult) -> EvalResult:
    """`res`, turned into an env_error when the machine is confirmed to be at fault (module docstring)."""
    load_failure = res.status is Status.RUNTIME_ERROR and res.message.startswith("load:")
    if not (res.status is Status.COMPILE_ERROR or load_failure) or not res.log:
        return res
    problem = diagnose(res.log)
    if problem is None:
        return res
    res.status, res.reward, res.correct = Status.ENV_ERROR, None, False
    res.message = (
        f"environment error, not the candidate's: {problem}. The candidate was not judged "
        "(no reward, nothing cached); rerun after the fix"
    )
    return res


def diagnose(log: str) -> str | None:
    """What this machine lacks, with the fix, or None when the log shows no confirmed lack."""
    tc = toolchain("9.0")  # include and library dirs do not depend on the target arch
    for m in _MISSING_HEADER.finditer(log):
        header = m.group("h")
        family = next((f for f in FAMILIES if f.pattern.match(header)), None)
        if family is None or _findable(header, (*tc.include_dirs, *_SYSTEM_INCLUDE)):
            continue
        where = f"CUDA_HOME={tc.cuda_home}" if family.name == "CUDA toolkit" else "the toolchain's include dirs"
        return f"the {family.name} header {header} is not installed (searched {where}). Fix: {family.fix}"
    for m in _CANNOT_RUN.finditer(log):
        exe = m.group("exe")
        if exe in (tc.nvcc, tc.cxx) and not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            fix = (
                "install the CUDA toolkit and set CUDA_HOME" if exe == tc.nvcc else "install a C++ compiler or set CXX"
            )
            return f"the compiler {exe} cannot be run. Fix: {fix}"
    for m in _UNDEFINED.finditer(log):
        lib = "cublasLt" if m.group("sym").startswith("cublasLt") else m.group("sym")[:6]
        if tc.lib_flag(lib) is None:
            family = FAMILIES[0] if lib.startswith("cublas") else FAMILIES[1]
            return f"the {family.name} library lib{lib}.so is not installed ({m.group('sym')} is unresolved). Fix: {family.fix}"
    return None


def _findable(header: str, dirs: tuple[str, ...]) -> bool:
    return any((Path(d) / header).is_file() for d in dirs)
