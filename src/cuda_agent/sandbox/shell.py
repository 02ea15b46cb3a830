"""A persistent bash session for the agent, confined to its workspace by the one sandbox.

Isolation comes from `cuda_agent.sandbox.box` (the same wrapping, probe and guarantees as the
evaluator's candidate processes): no network, a pid namespace whose processes all die with the
session, every mount read-only except the workspace and a private temporary directory (also
HOME and TMPDIR), the protected workspace files (model.py, binding files, SKILL.md, tools/,
.cuda-agent/) pinned read-only on top, and all of that locked by a nested user namespace, so
`mount -o remount,rw` fails even though the shell sees itself as root. The environment is the
sandbox's allow-list plus what the caller adds (`extra_env`, e.g. CUDA_AGENT_CACHE).
`level`: "full" (the locked file system and the rest), "net" (the probe found the file system
layers unusable: network and process isolation only), "none" (no usable `unshare`: a plain
bash with the scrubbed environment); `note` says which, and why.

Not isolated: CPU, memory and GPU use (the per-command timeout is the only limit), reads of the
whole file system, and /proc.

Contract: `run(command)` never raises for anything the command does; it returns a
`ShellResult` (output cut to head and tail with a marker, exit code, timed_out). A command that
times out or exits the shell restarts the session (working directory and variables are reset,
and the result says so).
"""

from __future__ import annotations

import functools
import os
import re
import select
import shlex
import shutil
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.sandbox.box import Sandbox, probe
from cuda_agent.sandbox.env import kill_group, popen_guarded, scrubbed_env

PROTECTED_IN_WORKSPACE = ("model.py", "binding.cpp", "binding_registry.h", "SKILL.md", "tools", ".cuda-agent")
_SHELL_ENV = ("TORCH_CUDA_ARCH_LIST", "CUDA_AGENT_PYTHON")
_SHELL_FILE_BYTES = 8 << 30
_SHELL_PROCS = 4096


@functools.lru_cache(maxsize=1)
def isolation_level() -> str:
    """ "full", "net" or "none": what the sandbox probe found this machine allows."""
    without, _ = probe("cpu")
    if without is None or "net" in without:
        return "none"
    return "net" if {"fs_lock", "nest"} & set(without) else "full"


def _box(level: str) -> Sandbox | None:
    without, _ = probe("cpu")
    if level == "none" or without is None:
        return None
    if level == "net":
        return Sandbox(_SHELL_FILE_BYTES, _SHELL_PROCS, tuple(sorted(set(without) | {"fs_lock", "nest"})))
    return Sandbox(_SHELL_FILE_BYTES, _SHELL_PROCS, without)


@dataclass
class ShellResult:
    output: str
    exit_code: int | None  # None when the command timed out or killed the shell
    timed_out: bool = False
    restarted: bool = False
    elapsed_s: float = 0.0


def cut_middle(text: str, limit: int) -> str:
    """Keep the head and tail of long text, with a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}"


class BashSession:
    def __init__(
        self,
        workspace: str | Path,
        *,
        timeout_s: float = 180.0,
        max_output_chars: int = 20000,
        isolation: str | None = None,
        extra_env: dict[str, str] | None = None,
        protected: tuple[str, ...] = PROTECTED_IN_WORKSPACE,
    ):
        self.workspace = Path(workspace).resolve()
        self.timeout_s = timeout_s
        self.max_output_chars = max_output_chars
        self.level = isolation or isolation_level()
        self._private = Path(tempfile.mkdtemp(prefix="cuda-agent-shell-")).resolve()
        (self._private / "home").mkdir()
        self._extra_env = extra_env or {}
        self._protected = protected  # workspace paths pinned read-only (the caller knows the layout)
        self._proc: subprocess.Popen[bytes] | None = None
        self._marker = ""

    @property
    def note(self) -> str:
        return {
            "full": "shell isolated: no network, file system read-only (and locked) outside the workspace",
            "net": "shell isolated from the network only (mount namespaces unavailable)",
            "none": "shell NOT isolated (unshare unavailable): network and file system are open",
        }[self.level]

    def _env(self) -> dict[str, str]:
        env = scrubbed_env(_SHELL_ENV)
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env.update(
            HOME=str(self._private / "home"), TMPDIR=str(self._private), TERM="dumb", PYTHONDONTWRITEBYTECODE="1"
        )
        env.update(self._extra_env)
        return env

    def _start(self) -> None:
        shell = ["bash", "--noprofile", "--norc"]
        box = _box(self.level)
        if box is not None:
            pins = [self.workspace / p for p in self._protected if (self.workspace / p).exists()]
            argv = box.wrap(shell, writable=[self.workspace, self._private], readonly=pins, cwd=self.workspace)
        else:
            argv = shell
        self._proc = popen_guarded(
            argv,  # the agent's end ends its shell, from an episode's thread too (sandbox.env)
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=self.workspace,
            env=self._env(),
            start_new_session=True,
        )
        self._marker = "__CUDA_AGENT_DONE_" + uuid.uuid4().hex + "__"

    def _kill(self) -> None:
        if self._proc is None:
            return
        kill_group(self._proc, wait_s=5)
        for f in (self._proc.stdin, self._proc.stdout):
            if f:
                f.close()
        self._proc = None

    def run(self, command: str, timeout_s: float | None = None) -> ShellResult:
        t0 = time.monotonic()
        if self._proc is None or self._proc.poll() is not None:
            self._kill()
            self._start()
        assert self._proc and self._proc.stdin and self._proc.stdout
        # The command goes through a file sourced with stdin from /dev/null: no
        # quoting problems, and a command that reads stdin cannot swallow the
        # end marker. Sourcing keeps `cd` and variables for the next command.
        script = self._private / "cmd.sh"
        script.write_text(command + "\n")
        line = f". {shlex.quote(str(script))} </dev/null; printf '\\n{self._marker} %d\\n' $?\n"
        try:
            self._proc.stdin.write(line.encode())
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self._kill()
            return ShellResult(
                "the shell could not be started or died; a new one will start on the next command", None, restarted=True
            )
        deadline = t0 + (timeout_s or self.timeout_s)
        data, dropped = self._read_until_marker(deadline)
        text = data.decode(errors="replace")
        m = re.search(re.escape(self._marker) + r" (\d+)\n?\Z", text)
        elapsed = time.monotonic() - t0
        if m:
            out = text[: m.start()].removesuffix("\n")
            return ShellResult(self._clip(out, dropped), int(m.group(1)), elapsed_s=elapsed)
        timed_out = time.monotonic() >= deadline
        self._kill()
        why = (
            f"[command timed out after {timeout_s or self.timeout_s:.0f}s and was killed]"
            if timed_out
            else "[the command ended the shell]"
        )
        return ShellResult(
            self._clip(text, dropped)
            + f"\n{why}\n[the shell was restarted: working directory and variables are reset]",
            None,
            timed_out=timed_out,
            restarted=True,
            elapsed_s=elapsed,
        )

    def _read_until_marker(self, deadline: float) -> tuple[bytes, int]:
        assert self._proc and self._proc.stdout
        fd = self._proc.stdout.fileno()
        data = bytearray()
        dropped = 0
        keep = self.max_output_chars * 2  # bytes kept at each end while reading
        tail_probe = len(self._marker) + 32
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break  # the shell died
            data += chunk
            if len(data) > 3 * keep:  # bound memory on endless output (e.g. `yes`)
                dropped += len(data) - 2 * keep
                data = data[:keep] + data[-keep:]
            if self._marker.encode() in data[-tail_probe - len(chunk) :]:
                break
        return bytes(data), dropped

    def _clip(self, text: str, dropped: int) -> str:
        if dropped:
            half = len(text) // 2
            text = f"{text[:half]}\n[... {dropped} bytes cut ...]\n{text[half:]}"
        return cut_middle(text, self.max_output_chars)

    def close(self) -> None:
        self._kill()
        shutil.rmtree(self._private, ignore_errors=True)
