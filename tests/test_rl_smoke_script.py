"""scripts/rl_gpu_smoke.py on the CPU lane (without the TRL stage): the GPU smoke's
code path, rewards and mask checks must keep working between GPU sessions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def test_smoke_script_on_the_cpu_lane(tmp_path, cache_env):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "CUDA_AGENT_CACHE": str(cache_env)}
    p = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "rl_gpu_smoke.py"),
            "--cpu",
            "--skip-trl",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    table = p.stdout[p.stdout.index("trajectory good") :]
    assert "RESULT: all checks passed" in table and "reward -1 (expected -1)" in table and "masks ok" in table
    assert "evaluation share" in table.splitlines()[-3]
