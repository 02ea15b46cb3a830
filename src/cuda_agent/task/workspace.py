"""The CUDA-Agent workspace: layout, creation, and a staged copy for evaluation.

Contract:
- `init_workspace(task, dest)` (`make_workspace` for the CLI's options) lays out a
  workspace: protected files (model.py, binding.cpp, binding_registry.h, SKILL.md,
  tools/) made read-only, agent files (model_new.py template, kernels/) writable,
  and a `.cuda-agent/task.json` naming the task hash. A new workspace is built in
  a temporary sibling and renamed into place, so a failure leaves nothing behind.
  On an existing workspace (`force`) only the protected files are refreshed; the
  agent's files change only when asked (`solution`, `reset`), as a unit, and the
  old ones are kept in `.cuda-agent/replaced-<time>/`. A pristine copy of the
  task is kept in the user cache so that evaluation never trusts the workspace's model.py.
- `stage(...)` builds a fresh directory in which protected files come from the
  pristine task and the package templates, and only agent-writable files come
  from the workspace; differences in protected files are returned as findings.

Not guaranteed: read-only bits stop accidents, not a determined agent; the
evaluator's staging is what makes tampering harmless.

Longer than the 250-line guide: creation, replacement of the agent's files and
staging must agree on one split of protected and agent-owned files, so they
live beside the lists that define it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from cuda_agent.task.cache_dir import CacheDirError, cache_root  # noqa: F401 - callers import them from here
from cuda_agent.task.taskfile import Task, TaskError

TEMPLATE_FILES = ("binding.cpp", "binding_registry.h", "SKILL.md")
TOOLS = ("compile", "verify", "profile")
AGENT_FILES = ("model_new.py",)
AGENT_DIRS = ("kernels",)
SOURCE_SUFFIXES = (".cu", ".cpp", ".h", ".cuh", ".hpp")
META = ".cuda-agent/task.json"
# Files whose content reaches the build or the reference; SKILL.md and tools/
# do not affect a result, so editing them is not reported.
INTEGRITY_CHECKED = ("model.py", "binding.cpp", "binding_registry.h")


def template_text(name: str) -> str:
    return (resources.files("cuda_agent.task") / "templates" / name).read_text()


def tool_script(phase: str) -> str:
    # The interpreter that created the workspace runs the tool, so the tool works
    # without cuda-agent on PATH (e.g. inside the agent's sandboxed shell). tools/profile adds the
    # expert profile (eval.profile.expert: per-kernel counters, roofline) after the evaluation's text.
    return (
        "#!/bin/sh\n"
        f"# cuda-agent tool: {phase}. Protected; runs the trusted evaluator on this workspace.\n"
        f'exec "${{CUDA_AGENT_PYTHON:-{sys.executable}}}" -m cuda_agent eval '
        f'"$(dirname "$0")/.." --phase {phase}{" --expert" if phase == "profile" else ""} "$@"\n'
    )


def pristine_dir(task_hash: str) -> Path:
    return cache_root() / "tasks" / task_hash


def remember_task(task: Task) -> Path:
    d = pristine_dir(task.hash)
    d.mkdir(parents=True, exist_ok=True)
    f = d / "model.py"
    if not f.exists():
        tmp = d / f"model.py.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_text(task.source)
        tmp.replace(f)
    return f


def _read_only(p: Path) -> None:
    p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def check_solution(src: str | Path) -> Path:
    """A solution folder (model_new.py, optional kernels/): checked before anything is written."""
    s = Path(src)
    if not s.is_dir():
        raise TaskError(
            f"solution folder not found: {s}"
            if not s.exists()
            else f"{s} is not a folder (a solution "
            "folder holds model_new.py and kernels/; a single-file solution is evaluated with --solution)"
        )
    if not (s / "model_new.py").is_file():
        raise TaskError(f"{s} is not a solution folder (no model_new.py)")
    return s


def copy_solution(src: str | Path, workspace: str | Path) -> Path | None:
    """Make a solution folder's agent files (model_new.py, kernels/) the workspace's, as a unit
    (never a mix of old and new kernels); returns where the replaced ones were kept, if anywhere."""
    return replace_agent_files(Path(workspace), check_solution(src))


def replace_agent_files(ws: Path, solution: Path | None) -> Path | None:
    """model_new.py and kernels/ become the solution's (None: the template and an empty kernels/).
    The old ones, unless identical or untouched, move to .cuda-agent/replaced-<time>/ (returned),
    so nothing the agent wrote is lost. The new set is laid out beside them first and swapped in
    by renames: a failure leaves the old set in place."""
    meta = ws / META
    meta.parent.mkdir(parents=True, exist_ok=True)
    incoming = Path(tempfile.mkdtemp(prefix="incoming-", dir=meta.parent))
    try:
        if solution is not None:
            shutil.copy(solution / "model_new.py", incoming / "model_new.py")
            if (solution / "kernels").is_dir():
                shutil.copytree(solution / "kernels", incoming / "kernels")
        else:
            (incoming / "model_new.py").write_text(template_text("model_new.py"))
        (incoming / "kernels").mkdir(exist_ok=True)
        old = read_agent_sources(ws)
        keep = (
            bool(old) and old != read_agent_sources(incoming) and old != {"model_new.py": template_text("model_new.py")}
        )
        prefix = f"replaced-{time.strftime('%Y%m%d-%H%M%S')}-" if keep else "old-"
        aside = Path(tempfile.mkdtemp(prefix=prefix, dir=meta.parent))
        for name in (*AGENT_FILES, *AGENT_DIRS):
            if (ws / name).exists():
                os.rename(ws / name, aside / name)
        for name in (*AGENT_FILES, *AGENT_DIRS):
            os.rename(incoming / name, ws / name)
        if keep:
            return aside
        shutil.rmtree(aside)
        return None
    finally:
        shutil.rmtree(incoming, ignore_errors=True)


@dataclass
class InitResult:
    path: Path
    created: bool  # a new workspace (False: protected files refreshed in an existing one)
    agent_files: str  # "template" | "solution" | "kept"
    replaced_to: Path | None = None  # where the previous agent files were kept


def init_workspace(task: Task, dest: str | Path, force: bool = False) -> Path:
    return make_workspace(task, dest, force=force).path


def make_workspace(
    task: Task, dest: str | Path, *, force: bool = False, solution: str | Path | None = None, reset: bool = False
) -> InitResult:
    """A new workspace (built in a temporary sibling and renamed into place, so a failure leaves
    nothing behind), or with `force` an existing one whose protected files are refreshed while the
    agent's files stay; `solution` or `reset` replace the agent's files as a unit (kept aside)."""
    d = Path(dest)
    sol = check_solution(solution) if solution is not None else None
    if d.exists() and not d.is_dir():
        raise NotADirectoryError(f"{d} exists and is not a directory")
    fresh = not d.exists() or not any(d.iterdir())
    if not fresh and not force:
        raise FileExistsError(
            f"{d} exists and is not empty: --force refreshes its protected files and keeps your "
            "model_new.py and kernels/; --force with --reset or --solution DIR replaces those too, "
            "keeping the old ones in .cuda-agent/replaced-*/"
        )
    remember_task(task)
    if not fresh:
        _write_protected(task, d)
        if sol is None and not reset:
            if not (d / "model_new.py").exists():
                (d / "model_new.py").write_text(template_text("model_new.py"))
            (d / "kernels").mkdir(exist_ok=True)
            return InitResult(d, False, "kept")
        return InitResult(d, False, "solution" if sol else "template", replace_agent_files(d, sol))
    made = [p for p in (d, *d.parents) if not p.exists()]
    d.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{d.name}.init-", dir=d.parent))
    except OSError as e:  # name the directory the user gave, not the temporary one
        raise OSError(e.errno, e.strerror, str(d)) from None
    try:
        _write_protected(task, tmp)
        if sol is not None:
            shutil.copy(sol / "model_new.py", tmp / "model_new.py")
            if (sol / "kernels").is_dir():
                shutil.copytree(sol / "kernels", tmp / "kernels")
        else:
            (tmp / "model_new.py").write_text(template_text("model_new.py"))
        (tmp / "kernels").mkdir(exist_ok=True)
        os.rename(tmp, d)  # replaces an empty directory too
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        for p in made[1:]:  # parents this call created, innermost first
            with contextlib.suppress(OSError):
                p.rmdir()
        raise
    return InitResult(d, True, "solution" if sol else "template")


def _write_protected(task: Task, d: Path) -> None:
    """model.py, the fixed templates, tools/ (read-only) and the metadata naming the task."""
    protected: dict[str, str] = {"model.py": task.source}
    protected.update({n: template_text(n) for n in TEMPLATE_FILES})
    protected.update({f"tools/{t}": tool_script(t) for t in TOOLS})
    for rel, text in protected.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.exists():
            p.chmod(0o644)
        p.write_text(text)
        if rel.startswith("tools/"):
            p.chmod(0o555)
        else:
            _read_only(p)
    meta = d / META
    meta.parent.mkdir(exist_ok=True)
    written = {rel: _digest(text) for rel, text in protected.items() if rel in INTEGRITY_CHECKED}
    meta.write_text(
        json.dumps(
            {
                "task": task.name,
                "task_hash": task.hash,
                "precision": task.precision,
                "precision_source": task.precision_source,
                "protected": written,
            }
        )
    )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Staged:
    """A fresh copy ready to build and run; `findings` are (rule, file, message)."""

    root: Path
    task: Task
    sources: dict[str, str]  # relative path -> text, agent-written files only
    findings: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def candidate_hash(self) -> str:
        h = hashlib.sha256()
        for rel in sorted(self.sources):
            h.update(rel.encode() + b"\0" + self.sources[rel].encode() + b"\0")
        return h.hexdigest()[:16]


# The public CUDA-Agent release's workspace (its agent_workdir): the same files as ours, its own
# binding.cpp / binding_registry.h and utils/ scripts, and no .cuda-agent/ record.
RELEASE_FILES = ("model.py", "model_new.py", "binding.cpp", "binding_registry.h")


def is_release_layout(workdir: Path) -> bool:
    return (
        not (workdir / META).exists()
        and all((workdir / f).is_file() for f in RELEASE_FILES)
        and ((workdir / "kernels").is_dir() or (workdir / "utils").is_dir())
    )


IMPORTED_NOTE = (
    "imported-layout",
    "",
    "a workspace in the public CUDA-Agent release's layout was imported: scored against its "
    "own model.py, with the evaluator's pristine binding.cpp and binding_registry.h; its utils/ is not used",
)


def find_task(workdir: Path, explicit: Task | None = None) -> tuple[Task, list[tuple[str, str, str]]]:
    """The pristine task for a workspace: given explicitly, else from the cache
    by the hash recorded at init, else (with a finding) the workspace's model.py;
    a workspace in the public release's layout is its own model.py's (a note says so)."""
    if explicit is not None:
        return explicit, []
    if is_release_layout(workdir):
        return Task.from_file(workdir / "model.py"), [IMPORTED_NOTE]
    meta = workdir / META
    if meta.is_file():
        try:
            info = json.loads(meta.read_text())
            p = pristine_dir(info["task_hash"]) / "model.py"
            if p.is_file():
                return Task.from_source(p.read_text(), name=info.get("task", "task"), path=p), []
        except (ValueError, KeyError, OSError):
            pass
    model = workdir / "model.py"
    if not model.is_file():
        raise TaskError(f"{workdir} is not a workspace: no model.py (create one with `cuda-agent init`)")
    note = (
        "no-pristine-task",
        "model.py",
        "no pristine copy of the task was found; model.py was taken from the workspace",
    )
    return Task.from_file(model), [note]


def read_agent_sources(workdir: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for rel in AGENT_FILES:
        p = workdir / rel
        if p.is_file():
            out[rel] = p.read_text(errors="replace")
    for d in AGENT_DIRS:
        base = workdir / d
        if base.is_dir():
            for p in sorted(base.rglob("*")):
                if p.is_file() and p.suffix in SOURCE_SUFFIXES + (".py",):
                    out[p.relative_to(workdir).as_posix()] = p.read_text(errors="replace")
    return out


def stage(workdir: str | Path, dest: str | Path, task: Task | None = None) -> Staged:
    w = Path(workdir)
    if not w.is_dir():
        raise TaskError(f"workspace not found: {w}")
    pristine, findings = find_task(w, task)
    expected = {"model.py": pristine.source, **{n: template_text(n) for n in TEMPLATE_FILES}}
    # A file counts as modified when it matches neither the pristine text nor what
    # init wrote (so an upgrade of the templates does not flag old workspaces).
    try:
        at_init = json.loads((w / META).read_text()).get("protected", {})
    except (OSError, ValueError):
        at_init = {}
    release = is_release_layout(w)
    for rel in INTEGRITY_CHECKED:
        p = w / rel
        if not p.is_file() or release:  # the release's own infrastructure differs from ours by design
            continue
        got = p.read_text(errors="replace")
        if got != expected[rel] and _digest(got) != at_init.get(rel):
            findings.append(
                ("protected-file-modified", rel, f"{rel} differs from the pristine copy; the pristine one is used")
            )
    sources = read_agent_sources(w)
    root = Path(dest)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for rel, text in {**expected, **sources}.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return Staged(root=root, task=pristine, sources=sources, findings=findings)
