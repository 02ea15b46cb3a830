"""The agent's shell as the environment sees it.

The environment core runs the agent's `bash` tool in a persistent, confined shell:
by default `cuda_agent.sandbox.shell.BashSession` (the one sandbox), with the
workspace's protected files pinned read-only and the evaluator's cache visible (so
`tools/*` inside the shell find the pristine task); a caller may pass another factory
(tests, a remote shell).

Contract: `make_shell(workspace, timeout_s, factory)` returns a started-on-demand
shell from `factory`, else the default. `clip_middle` keeps the head and tail of long
text with a marker. Not guaranteed: anything about isolation; that is the shell
implementation's contract (see `cuda_agent.sandbox.shell`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from cuda_agent.sandbox.shell import BashSession
from cuda_agent.sandbox.shell import cut_middle as clip_middle
from cuda_agent.task.workspace import META, TEMPLATE_FILES, cache_root

# What the agent may read but never write inside its workspace: the reference,
# the fixed infrastructure, the tool scripts and the task metadata.
PROTECTED_IN_WORKSPACE = ("model.py", *TEMPLATE_FILES, "tools", META.split("/", 1)[0])


class ShellOutput(Protocol):
    output: str
    exit_code: int | None  # None: timed out or the shell died


class Shell(Protocol):
    level: str  # "full", "net" or "none": how isolated the shell is

    @property
    def note(self) -> str: ...

    def run(self, command: str, timeout_s: float | None = None) -> ShellOutput: ...

    def close(self) -> None: ...


ShellFactory = Callable[..., Shell]  # called as factory(workspace, timeout_s=seconds)


def default_shell(workspace: Path, timeout_s: float) -> Shell:
    return BashSession(
        workspace,
        timeout_s=timeout_s,
        protected=PROTECTED_IN_WORKSPACE,
        extra_env={"CUDA_AGENT_CACHE": str(cache_root())},
    )


def make_shell(workspace: Path, timeout_s: float, factory: ShellFactory | None = None) -> Shell:
    return (factory or default_shell)(workspace, timeout_s=timeout_s)


__all__ = ["PROTECTED_IN_WORKSPACE", "Shell", "ShellFactory", "clip_middle", "make_shell"]
