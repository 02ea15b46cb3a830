"""The agent's shell as the environment sees it, and the one seam that says where it comes from.

The environment core (layer 2) runs the agent's `bash` tool in a persistent,
confined shell. That shell (`BashSession`) lives in `cuda_agent.agent.sandbox`
(layer 3) until it moves to the layer-0 package `cuda_agent.sandbox`; layer 2
may not import layer 3, so until then the shell reaches the environment only as
a factory passed in by the caller (the `optimize` driver, the RL rollout).

THE SEAM: when `cuda_agent.sandbox` exists, replace the line
`DEFAULT_SHELL: ShellFactory | None = None` below with
`from cuda_agent.sandbox import BashSession as DEFAULT_SHELL` and every caller may
stop passing `shell_factory`.

Contract: `make_shell(workspace, timeout_s, factory)` returns a started-on-demand
shell from `factory`, else from `DEFAULT_SHELL`, else raises `ValueError` (a wiring
bug, not something a model can cause). `clip_middle` keeps the head and tail of
long text with a marker. Not guaranteed: anything about isolation; that is the
shell implementation's contract (see its module docstring).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from cuda_agent.task.workspace import META, TEMPLATE_FILES

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

DEFAULT_SHELL: ShellFactory | None = None


def make_shell(workspace: Path, timeout_s: float, factory: ShellFactory | None = None) -> Shell:
    f = factory or DEFAULT_SHELL
    if f is None:
        raise ValueError("no shell for the environment: pass shell_factory=BashSession "
                         "(cuda_agent.agent.sandbox) until the sandbox package exists")
    return f(workspace, timeout_s=timeout_s)


def clip_middle(text: str, limit: int) -> str:
    """Keep the head and tail of long text, with a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[-tail:]}"
