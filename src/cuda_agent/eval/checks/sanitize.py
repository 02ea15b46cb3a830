"""The optional compute-sanitizer lane: memcheck and racecheck over one candidate call.

Contract: `find_tool()` locates compute-sanitizer ($CUDA_AGENT_SANITIZER, then
PATH, then $CUDA_HOME/bin, then /usr/local/cuda/bin; the variable also lets the
CPU lane run the plumbing with a stand-in tool in the tests); `wrap(tool, check, log_file)` returns the argv
prefix that runs a command under it, with `--error-exitcode` off and its
report written to `log_file`; `parse(text)` turns that report into a
`SanitizerReport` (error count and the first reports). The pipeline runs one
extra candidate child per check under the prefix, inside the same sandbox,
with `PYTORCH_NO_CUDA_MEMORY_CACHING=1` so that a read past a tensor's end
lands outside any allocation instead of in the caching allocator's slack;
the child loads the candidate and runs one correctness input set.

Not guaranteed: the sanitizer sees only what that one call does (a race that
needs other sizes or timing stays hidden); racecheck covers shared memory
hazards only, not global memory races; kernels run 10-100x slower under it,
so the lane is opt-in (`EvalConfig.sanitize`, `cuda-agent eval --sanitize`).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

CHECKS = ("memcheck", "racecheck")
OVERRIDE = "CUDA_AGENT_SANITIZER"
_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+) error")
_RACE = re.compile(r"RACECHECK SUMMARY:\s*(\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")


@dataclass
class SanitizerReport:
    check: str
    errors: int | None  # None: no summary found (the tool or the target did not finish)
    excerpt: list[str] = field(default_factory=list)


def find_tool() -> str | None:
    if override := os.environ.get(OVERRIDE):
        return override
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (p := Path(home) / "bin" / "compute-sanitizer").is_file():
            return str(p)
    return None


def wrap(tool: str, check: str, log_file: Path) -> list[str]:
    if check not in CHECKS:
        raise ValueError(f"unknown sanitizer check {check!r}; expected one of {CHECKS}")
    argv = [tool, "--tool", check, "--log-file", str(log_file), "--print-limit", "20", "--error-exitcode", "0"]
    if check == "memcheck":
        argv += ["--leak-check", "no"]
    return argv


def parse(check: str, text: str) -> SanitizerReport:
    """Errors reported by one check. racecheck's errors are hazards it is sure of; its warnings
    (possible hazards) are not counted."""
    if check == "racecheck" and (m := _RACE.search(text)):
        errors: int | None = int(m.group(2))
    elif m := _SUMMARY.search(text):
        errors = int(m.group(1))
    else:
        errors = None
    excerpt = [
        line.strip()
        for line in text.splitlines()
        if line.lstrip("= ").startswith(("Invalid", "Error", "Race", "Program hit", "ERROR:"))
    ][:5]
    return SanitizerReport(check, errors, excerpt)
