"""Subprocesses the trusted parent runs: compilers and evaluation children.

Contract:
- `run_command` runs a command in its own process group with a wall-clock
  timeout; on timeout the whole group is killed (SIGKILL), so a compiler or a
  fork that never ends cannot outlive its budget. Output is captured, cut to
  a bounded tail.
- `Child` is one spawned Python process speaking newline-delimited JSON over
  two pipes the parent created (never its stdout, which goes to a log file).
  `request(req)` sends a typed `channel/messages.py` request and returns the typed reply
  (`channel.messages.parse_reply`: exact keys, types, ranges), or a `ChildFailure` for
  a timeout, a death or a malformed reply (`send` then `receive` is the same in
  two steps, so a command can run while the parent waits on another child); an
  `ErrorReply` is the child's own exception. After any failure or error the
  child is killed and must not be reused (a CUDA error poisons its context).
- `Child(..., wrap=f)` starts `f(argv)` instead of argv (the sandbox's
  namespace and rlimit wrapper); the pipes pass through it unchanged.
  `module` runs another child module with the same protocol (task synthesis's
  filter child, `cuda_agent.synth.check_child`).
- `Child.share` (an evaluation's `timing.gpu_lock.Share`, or None): entered when a
  request is sent, left when its reply, or the child's failure or kill, comes:
  the GPU is held shared exactly while this child has work in flight.
- `scrubbed_env` builds the child's environment from the sandbox's allow-list
  (`cuda_agent.sandbox.env`): secrets such as API keys never reach candidate code.

Not guaranteed: isolation beyond process groups and the scrubbed environment
(namespaces and resource limits are `cuda_agent.sandbox`'s job).
"""

from __future__ import annotations

import collections
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.eval.channel import messages as P
from cuda_agent.sandbox import env as sandbox_env
from cuda_agent.sandbox.env import die_with_parent, kill_group, popen_guarded, tree_cpu_s

LOG_TAIL_CHARS = 6000
MAX_REPLY_BYTES = 1 << 20


def tail(text: str, n: int = LOG_TAIL_CHARS) -> str:
    return text if len(text) <= n else "[...]\n" + text[-n:]


@dataclass
class CommandResult:
    returncode: int | None  # None on timeout
    output: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def run_command(
    cmd: list[str], *, timeout: float, cwd: Path | None = None, env: dict[str, str] | None = None
) -> CommandResult:
    t0 = time.monotonic()
    proc = subprocess.Popen(
        die_with_parent(cmd),  # a killed pool worker takes its compiler with it
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=max(timeout, 0.1))
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, rc = (proc.stdout.read() if proc.stdout else b""), None
    return CommandResult(rc, tail(out.decode(errors="replace")), time.monotonic() - t0)


def scrubbed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    # The child imports cuda_agent from wherever this parent found it.
    pkg_root = str(Path(__file__).resolve().parents[3])
    own = {
        "PYTHONPATH": pkg_root,
        "PYTHONUNBUFFERED": "1",
        "PYTHONHASHSEED": str(int.from_bytes(os.urandom(4), "little")),
    }
    return sandbox_env.scrubbed_env(extra={**own, **(extra or {})})


@dataclass
class ChildFailure:
    kind: str  # "timeout" | "died" | "protocol"
    message: str
    log: str = ""


def failure(reply: P.Reply | ChildFailure) -> str | None:
    """Why a request did not succeed (the child failed, or its handler raised), or None."""
    if isinstance(reply, ChildFailure):
        return reply.message
    return reply.error if isinstance(reply, P.ErrorReply) else None


class Child:
    """A spawned `python -m cuda_agent.eval.child.main` with a JSON-lines channel."""

    def __init__(
        self,
        role: str,
        *,
        cwd: Path,
        env: dict[str, str],
        log_path: Path,
        warm_cuda: bool = False,
        wrap: Callable[[list[str]], list[str]] | None = None,
        child_args: tuple[str, ...] = (),
        module: str = "cuda_agent.eval.child.main",
    ):
        self.role = role
        self.log_path = log_path
        c2p_r, c2p_w = os.pipe()  # child -> parent replies
        p2c_r, p2c_w = os.pipe()  # parent -> child commands
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in close()
        argv = [
            sys.executable,
            "-m",
            module,
            "--role",
            role,
            "--fd-in",
            str(p2c_r),
            "--fd-out",
            str(c2p_w),
            *(["--warm-cuda"] if warm_cuda else []),
            *child_args,
        ]
        self.proc = popen_guarded(
            # a killed pool worker takes its children with it, even a candidate that spins and never
            # reads its pipe (sandbox.env.die_with_parent)
            wrap(argv) if wrap is not None else argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            pass_fds=(p2c_r, c2p_w),
            start_new_session=True,
        )
        os.close(p2c_r)
        os.close(c2p_w)
        self._rfd, self._wfd = c2p_r, p2c_w
        self._buf = b""
        self.dead = False
        self.sent_at = 0.0  # perf_counter() just before the last request was written (`send`): a burst's start
        # the evaluation's `timing.gpu_lock.Share`: entered per request sent, left per reply or failure
        self.share: Any = None
        self._inflight: collections.deque[Any] = (
            collections.deque()
        )  # per request sent, oldest first: its share or None

    def log_tail(self) -> str:
        try:
            if not self._log.closed:
                self._log.flush()
            # only the end: a candidate may have written gigabytes (bounded by the sandbox's RLIMIT_FSIZE)
            with open(self.log_path, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - 4 * LOG_TAIL_CHARS))
                return tail(f.read().decode(errors="replace"))
        except OSError:
            return ""

    def cpu_s(self) -> float | None:
        """CPU seconds the kernel has charged this child's process tree (`sandbox.env.tree_cpu_s`): the
        parent's reading, never the child's word; None once it has ended."""
        return tree_cpu_s(self.proc.pid)

    def request(self, req: P.Request, timeout: float) -> P.Reply | ChildFailure:
        return self.send(req) or self.receive(timeout, req.cmd)

    def request_raw(self, msg: dict[str, Any], timeout: float) -> dict[str, Any] | ChildFailure:
        """For a child `module` with its own dict protocol (synthesis's filter child, which runs task
        code, not a candidate's): the reply as a dict, not validated here."""
        return self.send(msg) or self._receive_raw(timeout, str(msg.get("cmd")))

    def send(self, req: P.Request | dict[str, Any]) -> ChildFailure | None:
        """Queue a command without waiting (the child answers in order): the parent can keep
        two children busy at once, e.g. the reference comparing while the candidate runs."""
        if self.dead:
            return ChildFailure("died", f"{self.role} process is no longer usable")
        wire = req if isinstance(req, dict) else P.to_wire(req)
        if self.share is not None:  # the GPU shared with others' untimed work while the child works
            self.share.enter()
        self._inflight.append(self.share)
        line = (json.dumps(wire) + "\n").encode()
        # read before the write: once written, the child may run (even on this core, woken by the pipe)
        # before this thread runs again, so a clock read after it can miss part of the child's work
        self.sent_at = time.perf_counter()
        try:
            os.write(self._wfd, line)
        except (BrokenPipeError, OSError):
            return self._fail("died", f"{self.role} process exited before '{wire.get('cmd')}'")
        return None

    def _settle(self, n: int) -> None:
        """The `n` oldest requests in flight are answered or will never be: their holds go (replies
        come in the order of the requests, so the oldest is the one answered)."""
        for _ in range(min(n, len(self._inflight))):
            share = self._inflight.popleft()
            if share is not None:
                share.leave()

    def receive(self, timeout: float, cmd: str) -> P.Reply | ChildFailure:
        """The next reply, in the order the commands were sent, typed and validated for `cmd`."""
        raw = self._receive_raw(timeout, cmd)
        if isinstance(raw, ChildFailure):
            return raw
        try:
            return P.parse_reply(cmd, raw)
        except P.ProtocolError as e:
            return self._fail("protocol", f"{self.role} sent a malformed reply: {e}"[:600])

    def receive_raw(self, timeout: float, cmd: str) -> dict[str, Any] | ChildFailure:
        """The next line as a dict, not validated: a reply outside `channel/messages.py` (a spare's start-up
        stages, eval.channel.children) or of a child `module` with its own protocol."""
        return self._receive_raw(timeout, cmd)

    def _receive_raw(self, timeout: float, cmd: str) -> dict[str, Any] | ChildFailure:
        try:
            return self._next_line(timeout, cmd)
        finally:
            self._settle(1)

    def _next_line(self, timeout: float, cmd: str) -> dict[str, Any] | ChildFailure:
        if self.dead:
            return ChildFailure("died", f"{self.role} process is no longer usable")
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return self._fail("timeout", f"'{cmd}' exceeded its {timeout:.0f} s budget")
            ready, _, _ = select.select([self._rfd], [], [], min(left, 1.0))
            if not ready:
                if self.proc.poll() is not None:
                    return self._fail("died", self._death_reason())
                continue
            chunk = os.read(self._rfd, 65536)
            if not chunk:
                self.proc.wait(timeout=10)
                return self._fail("died", self._death_reason())
            self._buf += chunk
            if len(self._buf) > MAX_REPLY_BYTES:
                return self._fail("protocol", f"{self.role} sent an oversized reply")
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except ValueError:
            return self._fail("protocol", f"{self.role} sent a malformed reply")
        if not isinstance(reply, dict):
            return self._fail("protocol", f"{self.role} sent a malformed reply")
        return reply

    def _death_reason(self) -> str:
        rc = self.proc.poll()
        if rc is not None and rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = str(-rc)
            return f"{self.role} process was killed by signal {name}"
        return f"{self.role} process exited with code {rc}"

    def _fail(self, kind: str, message: str) -> ChildFailure:
        self.kill()
        return ChildFailure(kind, message, self.log_tail())

    def kill(self) -> None:
        self.dead = True
        kill_group(self.proc)
        self._settle(len(self._inflight))  # no reply will come

    def alive(self) -> bool:
        """Usable: not given up on here, and the process still runs."""
        return not self.dead and self.proc.poll() is None

    def finish(self, timeout: float) -> int | None:
        """Ask the child to exit and wait for it (a wrapper such as compute-sanitizer writes its
        report only when the child ends); kill it after `timeout`. The exit code, or None."""
        try:
            os.write(self._wfd, b'{"cmd": "exit"}\n')
            rc: int | None = self.proc.wait(timeout=timeout)
        except (OSError, subprocess.TimeoutExpired):
            rc = None
        self.close()
        return rc

    def close(self) -> None:
        """Kill the process group and release the pipes (idempotent). No graceful
        exit: nothing in a child needs flushing, and CUDA teardown costs a second."""
        self.kill()
        for fd in (self._rfd, self._wfd):
            try:
                os.close(fd)
            except OSError:
                pass
        self._rfd = self._wfd = -1
        if not self._log.closed:
            self._log.close()
