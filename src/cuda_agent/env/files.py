"""File tools of the agent: read, write, edit, multi-edit, glob, grep, all confined
to one workspace.

Contract:
- Every path is resolved (symlinks followed) and must lie inside the workspace;
  anything else is refused. Protected files (model.py, binding.cpp,
  binding_registry.h, SKILL.md, tools/, .cuda-agent/) can be read, never written.
- An existing file may be written or edited only after it was read (or written)
  through these tools and has not changed on disk since; new files need no read.
- Every refusal or failure raises `ToolFailure` with a message that says how to
  fix the call; the toolbox turns it into an observation for the model.

Not guaranteed: the bash tool can still change files (inside the workspace), so
the "changed since read" check is what catches edits based on stale content.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent.env.shell import PROTECTED_IN_WORKSPACE

READ_LIMIT = 2000  # lines returned by one read unless asked otherwise
LINE_CHARS = 2000  # longer lines are cut when shown
MAX_MATCHES = 200


class ToolFailure(Exception):
    """A tool call that cannot be carried out; the message is shown to the model."""


@dataclass
class FileTools:
    workspace: Path
    _seen: dict[Path, tuple[int, int]] = field(default_factory=dict)  # path -> (mtime_ns, size) at last read/write

    def __post_init__(self) -> None:
        self.workspace = Path(self.workspace).resolve()

    # paths -------------------------------------------------------------------
    def resolve(self, path: str) -> Path:
        if not isinstance(path, str) or not path.strip():
            raise ToolFailure("path must be a non-empty string (relative to the workspace, or absolute inside it)")
        p = Path(path)
        p = (p if p.is_absolute() else self.workspace / p).resolve()
        if p != self.workspace and self.workspace not in p.parents:
            raise ToolFailure(f"{path} is outside the workspace {self.workspace}; only files inside it can be used")
        return p

    def rel(self, p: Path) -> str:
        return p.relative_to(self.workspace).as_posix() if p != self.workspace else "."

    def _check_writable(self, p: Path) -> None:
        rel = self.rel(p)
        top = rel.split("/", 1)[0]
        if rel in PROTECTED_IN_WORKSPACE or top in ("tools", ".cuda-agent"):
            raise ToolFailure(
                f"{rel} is protected and cannot be changed; write model_new.py and files under kernels/ instead"
            )

    def _stamp(self, p: Path) -> tuple[int, int]:
        st = p.stat()
        return st.st_mtime_ns, st.st_size

    def _check_fresh(self, p: Path, verb: str) -> None:
        if not p.exists():
            return
        seen = self._seen.get(p)
        if seen is None:
            raise ToolFailure(f"{self.rel(p)} exists and has not been read; read it before you {verb} it")
        if seen != self._stamp(p):
            raise ToolFailure(
                f"{self.rel(p)} changed on disk since you last read it; read it again before you {verb} it"
            )

    def _read_text(self, p: Path) -> str:
        if not p.is_file():
            raise ToolFailure(
                f"{self.rel(p)} does not exist or is not a file" + ("" if p.exists() else "; use glob to find files")
            )
        raw = p.read_bytes()
        if b"\0" in raw[:8192]:
            raise ToolFailure(f"{self.rel(p)} is a binary file; only text files can be read")
        return raw.decode("utf-8", errors="replace")

    # tools -------------------------------------------------------------------
    def read(self, path: str, offset: int = 1, limit: int = READ_LIMIT) -> str:
        p = self.resolve(path)
        text = self._read_text(p)
        self._seen[p] = self._stamp(p)
        lines = text.splitlines()
        if offset < 1 or limit < 1:
            raise ToolFailure("offset (first line, counting from 1) and limit (number of lines) must be positive")
        chunk = lines[offset - 1 : offset - 1 + limit]
        if not lines:
            return f"({self.rel(p)} is empty)"
        if not chunk:
            raise ToolFailure(f"offset {offset} is past the end: {self.rel(p)} has {len(lines)} lines")
        body = "\n".join(
            f"{i:6d}\t{ln if len(ln) <= LINE_CHARS else ln[:LINE_CHARS] + ' [line cut]'}"
            for i, ln in enumerate(chunk, start=offset)
        )
        end = offset + len(chunk) - 1
        if end < len(lines) or offset > 1:
            body += f"\n[lines {offset}-{end} of {len(lines)}; use offset/limit to see more]"
        return body

    def write(self, path: str, content: str) -> str:
        p = self.resolve(path)
        self._check_writable(p)
        if p.is_dir():
            raise ToolFailure(f"{self.rel(p)} is a directory")
        self._check_fresh(p, "overwrite")
        existed = p.exists()
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
        self._seen[p] = self._stamp(p)
        n = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        return f"{'overwrote' if existed else 'created'} {self.rel(p)} ({n} lines)"

    def edit(self, path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
        return self.multi_edit(path, [{"old_string": old_string, "new_string": new_string, "replace_all": replace_all}])

    def multi_edit(self, path: str, edits: list[dict]) -> str:
        p = self.resolve(path)
        self._check_writable(p)
        if not p.exists():
            raise ToolFailure(f"{self.rel(p)} does not exist; create it with write")
        self._check_fresh(p, "edit")
        text = self._read_text(p)
        if not isinstance(edits, list) or not edits:
            raise ToolFailure("edits must be a non-empty list of {old_string, new_string[, replace_all]} objects")
        # All edits apply in order to an in-memory copy; the file changes only if every one succeeds.
        for i, e in enumerate(edits, 1):
            if (
                not isinstance(e, dict)
                or not isinstance(e.get("old_string"), str)
                or not isinstance(e.get("new_string"), str)
            ):
                raise ToolFailure(f"edit {i}: needs string fields old_string and new_string")
            old, new = e["old_string"], e["new_string"]
            if old == "":
                raise ToolFailure(f"edit {i}: old_string is empty; to create or replace a whole file use write")
            if old == new:
                raise ToolFailure(f"edit {i}: old_string and new_string are the same")
            n = text.count(old)
            if n == 0:
                raise ToolFailure(
                    f"edit {i}: old_string not found in {self.rel(p)}; copy it exactly from a fresh read "
                    "(whitespace and indentation count, no line-number prefixes); no edit was applied"
                )
            if n > 1 and not e.get("replace_all"):
                raise ToolFailure(
                    f"edit {i}: old_string occurs {n} times in {self.rel(p)}; add surrounding lines to make it "
                    "unique, or set replace_all; no edit was applied"
                )
            text = text.replace(old, new) if e.get("replace_all") else text.replace(old, new, 1)
        p.write_text(text)
        self._seen[p] = self._stamp(p)
        return f"edited {self.rel(p)}: {len(edits)} edit{'s' if len(edits) > 1 else ''} applied"

    def glob(self, pattern: str, path: str = ".") -> str:
        base = self.resolve(path)
        if not base.is_dir():
            raise ToolFailure(f"{self.rel(base)} is not a directory")
        hits = []
        for p in sorted(base.glob(pattern)):
            r = p.resolve()
            if r == self.workspace or self.workspace in r.parents:
                hits.append(self.rel(p) + ("/" if p.is_dir() else ""))
        if not hits:
            return f"no files match {pattern!r} under {self.rel(base)}"
        more = f"\n[{len(hits) - MAX_MATCHES} more not shown]" if len(hits) > MAX_MATCHES else ""
        return "\n".join(hits[:MAX_MATCHES]) + more

    def grep(self, pattern: str, path: str = ".", glob: str | None = None, ignore_case: bool = False) -> str:
        try:
            rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as e:
            raise ToolFailure(f"pattern is not a valid Python regular expression: {e}") from None
        base = self.resolve(path)
        files = [base] if base.is_file() else sorted(q for q in base.rglob("*") if q.is_file())
        out: list[str] = []
        total = 0
        for f in files:
            r = f.resolve()
            if r != self.workspace and self.workspace not in r.parents:
                continue
            if glob and not (fnmatch.fnmatch(f.name, glob) or fnmatch.fnmatch(self.rel(f), glob)):
                continue
            try:
                raw = f.read_bytes()
            except OSError:
                continue
            if b"\0" in raw[:8192]:
                continue
            for i, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
                if rx.search(line):
                    total += 1
                    if len(out) < MAX_MATCHES:
                        out.append(f"{self.rel(f)}:{i}:{line[:LINE_CHARS]}")
        if not out:
            return f"no matches for {pattern!r}"
        return "\n".join(out) + (f"\n[{total - MAX_MATCHES} more matches not shown]" if total > MAX_MATCHES else "")
