"""The CUDA-Agent workspace: layout, creation, and a staged copy for evaluation.

Contract:
- `init_workspace(task, dest)` lays out a workspace: protected files
  (model.py, binding.cpp, binding_registry.h, SKILL.md, tools/) made read-only,
  agent files (model_new.py template, kernels/) writable, and a
  `.cuda-agent/task.json` naming the task hash. A pristine copy of the task is
  kept in the user cache so that evaluation never trusts the workspace's model.py.
- `stage(...)` builds a fresh directory in which protected files come from the
  pristine task and the package templates, and only agent-writable files come
  from the workspace; differences in protected files are returned as findings.

Not guaranteed: read-only bits stop accidents, not a determined agent; the
evaluator's staging is what makes tampering harmless.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

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


def cache_root() -> Path:
    base = os.environ.get("CUDA_AGENT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "cuda-agent"
    )
    p = Path(base)
    p.mkdir(parents=True, exist_ok=True)
    return p


def template_text(name: str) -> str:
    return (resources.files("cuda_agent.task") / "templates" / name).read_text()


def tool_script(phase: str) -> str:
    # The interpreter that created the workspace runs the tool, so the tool works
    # without cuda-agent on PATH (e.g. inside the agent's sandboxed shell).
    return (
        "#!/bin/sh\n"
        f"# cuda-agent tool: {phase}. Protected; runs the trusted evaluator on this workspace.\n"
        f'exec "${{CUDA_AGENT_PYTHON:-{sys.executable}}}" -m cuda_agent eval '
        f'"$(dirname "$0")/.." --phase {phase} "$@"\n'
    )


def pristine_dir(task_hash: str) -> Path:
    return cache_root() / "tasks" / task_hash


def remember_task(task: Task) -> Path:
    d = pristine_dir(task.hash)
    d.mkdir(parents=True, exist_ok=True)
    f = d / "model.py"
    if not f.exists():
        tmp = d / f"model.py.{os.getpid()}.tmp"
        tmp.write_text(task.source)
        tmp.replace(f)
    return f


def _read_only(p: Path) -> None:
    p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def copy_solution(src: str | Path, workspace: str | Path) -> None:
    """Copy a solution folder's agent files (model_new.py, kernels/) into a workspace."""
    s, w = Path(src), Path(workspace)
    if not (s / "model_new.py").is_file():
        raise TaskError(f"{s} is not a solution folder (no model_new.py)")
    shutil.copy(s / "model_new.py", w / "model_new.py")
    if (s / "kernels").is_dir():
        shutil.copytree(s / "kernels", w / "kernels", dirs_exist_ok=True)


def init_workspace(task: Task, dest: str | Path, force: bool = False) -> Path:
    d = Path(dest)
    if d.exists() and any(d.iterdir()) and not force:
        raise FileExistsError(f"{d} exists and is not empty (use --force to overwrite)")
    d.mkdir(parents=True, exist_ok=True)
    remember_task(task)
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
    if not (d / "model_new.py").exists() or force:
        (d / "model_new.py").write_text(template_text("model_new.py"))
    (d / "kernels").mkdir(exist_ok=True)
    meta = d / META
    meta.parent.mkdir(exist_ok=True)
    written = {rel: _digest(text) for rel, text in protected.items() if rel in INTEGRITY_CHECKED}
    meta.write_text(json.dumps({"task": task.name, "task_hash": task.hash, "precision": task.precision, "protected": written}))
    return d


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


def find_task(workdir: Path, explicit: Task | None = None) -> tuple[Task, list[tuple[str, str, str]]]:
    """The pristine task for a workspace: given explicitly, else from the cache
    by the hash recorded at init, else (with a finding) the workspace's model.py."""
    if explicit is not None:
        return explicit, []
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
    note = ("no-pristine-task", "model.py", "no pristine copy of the task was found; model.py was taken from the workspace")
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
    for rel in INTEGRITY_CHECKED:
        p = w / rel
        if not p.is_file():
            continue
        got = p.read_text(errors="replace")
        if got != expected[rel] and _digest(got) != at_init.get(rel):
            findings.append(("protected-file-modified", rel, f"{rel} differs from the pristine copy; the pristine one is used"))
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
