"""The device scripts leave the compiler variables alone: Triton builds its launchers with $CC and
inductor reads $CXX, so a script that reuses such a name for something else breaks torch.compile in
every process it starts (H100, 2026-12-06, 530e0ab: `CC=$(nvidia-smi --query-gpu=compute_cap ...)` in
scripts/gpu_issue29.sh, over an exported CC, made every torch.compile baseline of the RL run fail with
"No such file or directory: '9.0'", and eager stood in for it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMPILER_VARS = ("CC", "CXX", "CUDAHOSTCXX", "NVCC_CCBIN", "LD")


def test_no_script_assigns_a_compiler_variable():
    assign = re.compile(r"(?:^|[\s;(]|export\s+)(" + "|".join(COMPILER_VARS) + r")=")
    found = []
    for path in sorted(
        [*(ROOT / "scripts").glob("*.sh"), *(ROOT / ".ci").glob("*"), *(ROOT / "benchmarks").glob("*.sh")]
    ):
        if not path.is_file():
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            code = line.split("#", 1)[0]
            if assign.search(code):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "a compiler variable is assigned:\n" + "\n".join(found)
