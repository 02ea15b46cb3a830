"""A persistent bash session for the agent, confined to its workspace.

What is isolated, when `unshare` user namespaces work (level "full"):
- network: a fresh network namespace with only a loopback that is down, so no
  connection leaves the shell, not even to 127.0.0.1;
- file system: every mount is remounted read-only except the workspace and a
  private temporary directory (also HOME and TMPDIR); the protected workspace
  files (model.py, binding files, SKILL.md, tools/, .cuda-agent/) are bind-mounted
  read-only on top. The read-only flags are set in an outer namespace and the
  shell runs in a nested one, so the kernel locks them: `mount -o remount,rw`
  fails even though the shell sees itself as root;
- processes: a PID namespace; killing the session kills everything it started;
- environment: scrubbed to an allow-list (no API keys, no evaluator seeds).
Level "net" (mount namespaces refused) keeps the network and process isolation
only; level "none" (no usable `unshare`) is a plain bash with the scrubbed
environment, and `note` says so.

Not isolated: CPU, memory and GPU use (the per-command timeout is the only
limit), reads of the whole file system, and /proc. The evaluator's cache is
read-only inside the shell, so `tools/compile` run from the shell cannot write
build caches there; the agent's compile/verify/profile tools run outside.

Contract: `run(command)` never raises for anything the command does; it returns
a `ShellResult` (output cut to head and tail with a marker, exit code, timed_out).
A command that times out or exits the shell restarts the session (working
directory and variables are reset, and the result says so).
"""

from __future__ import annotations

import functools
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.task.workspace import cache_root

PROTECTED_IN_WORKSPACE = ("model.py", "binding.cpp", "binding_registry.h", "SKILL.md", "tools", ".cuda-agent")
_ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
              "TORCH_CUDA_ARCH_LIST", "NVIDIA_VISIBLE_DEVICES", "CUDA_AGENT_PYTHON")
_NS = ["unshare", "--user", "--map-root-user", "--net"]
_NS_FULL = _NS + ["--mount", "--pid", "--fork", "--kill-child", "--mount-proc"]
# Runs as root of the outer namespace: bind the writable paths, remount every
# other mount read-only, pin the protected files read-only, then start the shell
# in a nested user+mount namespace so those flags become locked.
_SETUP = r"""
set -u
ws=$1; tmp=$2; shift 2
mount --bind "$ws" "$ws" && mount --bind "$tmp" "$tmp" || exit 97
while read -r _ m _; do
  m=$(printf '%b' "$m")
  case $m in "$ws"|"$tmp"|/proc|/proc/*) continue;; esac
  mount -o remount,bind,ro "$m" 2>/dev/null
done < /proc/self/mounts
for p in "$@"; do
  [ -e "$ws/$p" ] && mount --bind "$ws/$p" "$ws/$p" && mount -o remount,bind,ro "$ws/$p"
done
cd "$ws" || exit 98
exec unshare --user --map-root-user --mount bash --noprofile --norc
"""


@functools.lru_cache(maxsize=1)
def isolation_level() -> str:
    """"full", "net" or "none": what this machine lets an unprivileged user do."""
    if shutil.which("unshare") is None:
        return "none"
    probe_dir = tempfile.mkdtemp(prefix="cuda-agent-probe-")
    try:
        full = _NS_FULL + ["bash", "-c", _SETUP, "setup", probe_dir, probe_dir]
        r = subprocess.run(full, input=b"exit 0\n", capture_output=True, timeout=20)
        if r.returncode == 0:
            return "full"
        r = subprocess.run(_NS + ["true"], capture_output=True, timeout=20)
        return "net" if r.returncode == 0 else "none"
    except (OSError, subprocess.SubprocessError):
        return "none"
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)


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
    def __init__(self, workspace: str | Path, *, timeout_s: float = 180.0, max_output_chars: int = 20000,
                 isolation: str | None = None, extra_env: dict[str, str] | None = None):
        self.workspace = Path(workspace).resolve()
        self.timeout_s = timeout_s
        self.max_output_chars = max_output_chars
        self.level = isolation or isolation_level()
        self._private = Path(tempfile.mkdtemp(prefix="cuda-agent-shell-")).resolve()
        (self._private / "home").mkdir()
        self._extra_env = extra_env or {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._marker = ""

    @property
    def note(self) -> str:
        return {
            "full": "shell isolated: no network, file system read-only outside the workspace",
            "net": "shell isolated from the network only (mount namespaces unavailable)",
            "none": "shell NOT isolated (unshare unavailable): network and file system are open",
        }[self.level]

    def _env(self) -> dict[str, str]:
        env = {k: os.environ[k] for k in _ENV_ALLOW if k in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        # tools/* inside the shell find the pristine task through the cache (read-only there)
        env.update(HOME=str(self._private / "home"), TMPDIR=str(self._private), TERM="dumb",
                   CUDA_AGENT_CACHE=str(cache_root()), PYTHONDONTWRITEBYTECODE="1")
        env.update(self._extra_env)
        return env

    def _start(self) -> None:
        protected = [p for p in PROTECTED_IN_WORKSPACE if (self.workspace / p).exists()]
        if self.level == "full":
            argv = _NS_FULL + ["bash", "-c", _SETUP, "setup", str(self.workspace), str(self._private), *protected]
        elif self.level == "net":
            argv = _NS + ["bash", "--noprofile", "--norc"]
        else:
            argv = ["bash", "--noprofile", "--norc"]
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      cwd=self.workspace, env=self._env(), start_new_session=True)
        self._marker = "__CUDA_AGENT_DONE_" + uuid.uuid4().hex + "__"

    def _kill(self) -> None:
        if self._proc is None:
            return
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
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
            return ShellResult("the shell could not be started or died; a new one will start on the next command", None, restarted=True)
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
        why = (f"[command timed out after {timeout_s or self.timeout_s:.0f}s and was killed]" if timed_out
               else "[the command ended the shell]")
        return ShellResult(self._clip(text, dropped) + f"\n{why}\n[the shell was restarted: working directory and variables are reset]",
                           None, timed_out=timed_out, restarted=True, elapsed_s=elapsed)

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
            if self._marker.encode() in data[-tail_probe - len(chunk):]:
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
