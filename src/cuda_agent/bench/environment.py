"""What a bench ran on and with: the facts a report's header states.

Contract: `describe(cfg)` returns a JSON-able dict: GPU names and driver version (from
nvidia-smi, so this process does not start CUDA), torch and the CUDA version it was built
with, nvcc's release, Python, the host's OS, the cuda-agent version and the git commit of
its source (with "+dirty" when the checkout has changes), the UTC start time, and the
evaluator settings that shape the numbers (`settings(cfg)`). Facts that cannot be found are
None. `run_bench` stores it in the run's meta as "environment"; a resumed run keeps a list
of them, one per session, since a rerun may be on another machine.

Not guaranteed: that the GPU named here is the one each evaluation ran on; every result
records its own (`EvalResult.gpu`), and the report shows both.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cuda_agent import __version__
from cuda_agent.eval.config import EvalConfig

# the settings a reader needs to interpret the numbers (the rest are budgets and switches)
SETTINGS = (
    "device",
    "n_correctness",
    "n_timed",
    "n_warmup",
    "max_cv",
    "round_spread",
    "max_rounds",
    "n_timing_sets",
    "fresh_timing_inputs",
    "n_checked_timed",
    "compile_baseline",
    "runtime_guards",
    "shape_probe",
    "side_stream_guard",
    "sandbox",
    "sanitize",
    "arch",
)


def _run(cmd: list[str], cwd: Path | None = None) -> str | None:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=20, cwd=cwd)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def settings(cfg: EvalConfig) -> dict[str, Any]:
    from cuda_agent.eval.shared.compare import REL_L2_MAX  # imports torch: only when a bench starts

    d = dataclasses.asdict(cfg)
    out = {k: d[k] for k in SETTINGS}
    digest, draws = cfg.clock_loop()  # "auto" as this machine resolves it: a report says which loop was timed
    out["clock_loop"] = f"{digest} digests, {draws} draws"
    out["timing"] = "device time per call, L2 flushed, stream held while the host enqueues (eval.shared.events)"
    out["tolerance"] = f"per task (fp32 default atol = rtol = 1e-2), relative L2 at most {REL_L2_MAX:g} per output"
    out["reward"] = "paper Eq. 1: -1 fail; 3 if > 5 % faster than eager and torch.compile; 2 if only eager; else 1"
    return out


def git_commit() -> str | None:
    src = Path(__file__).resolve().parents[1]
    head = _run(["git", "rev-parse", "--short=12", "HEAD"], cwd=src)
    if head is None:
        return None
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=src)
    return head + ("+dirty" if dirty else "")


def describe(cfg: EvalConfig) -> dict[str, Any]:
    smi = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    gpus = [line.split(",")[0].strip() for line in smi.splitlines()] if smi else []
    driver = smi.splitlines()[0].split(",")[-1].strip() if smi else None
    try:
        import torch

        torch_version, torch_cuda = torch.__version__, torch.version.cuda
    except ImportError:
        torch_version = torch_cuda = None
    nvcc_path = shutil.which("nvcc") or os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
    nvcc = _run([nvcc_path, "--version"])
    release = next((line.split("release")[-1].strip() for line in (nvcc or "").splitlines() if "release" in line), None)
    return {
        "gpus": gpus,
        "driver": driver,
        "torch": torch_version,
        "torch_cuda": torch_cuda,
        "nvcc": release,
        "python": sys.version.split()[0],
        "os": platform.platform(),
        "cuda_agent": __version__,
        "commit": git_commit(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "settings": settings(cfg),
    }
