"""Shared fixtures. Every test gets its own cuda-agent cache (CUDA_AGENT_CACHE)
unless it asks for the session-wide build cache, so results never leak
between tests while slow C++ builds are still shared."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def cpu_cfg(**overrides):
    """The evaluator's settings for CPU-lane evaluations in tests: the lane's quick settings, short limits."""
    from cuda_agent.eval.config import cpu_lane

    return cpu_lane(**{"load_timeout": 60, "correctness_timeout": 20, "timing_timeout": 60, **overrides})


def has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config, items):
    if has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cuda-agent-cache")


@pytest.fixture
def cache_env(shared_cache, tmp_path, monkeypatch) -> Path:
    """Build objects shared across the session; everything else private to the test."""
    private = tmp_path / "cache"
    private.mkdir()
    (shared_cache / "build").mkdir(exist_ok=True)
    os.symlink(shared_cache / "build", private / "build")
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(private))
    return private


def can_mount_read_only() -> bool:
    """Whether `run_read_only` works here (an unprivileged user+mount namespace)."""
    import shutil
    import subprocess

    if shutil.which("unshare") is None:
        return False
    p = subprocess.run(
        [
            "unshare",
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            "mount --bind / /mnt 2>/dev/null || mount --bind /tmp /tmp",
        ],
        capture_output=True,
    )
    return p.returncode == 0


def run_read_only(directory: Path, argv: list[str], env: dict[str, str] | None = None, timeout: float = 300):
    """Run `argv` with `directory` read-only for it, even as root (chmod does not stop root):
    a read-only bind mount in a private user and mount namespace. Returns the CompletedProcess."""
    import subprocess

    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    return subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, str(directory), *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
