"""Import layering, checked on the syntax tree (no imports executed).

Layers (ARCHITECTURE.md): task, sandbox 0; eval, llm 1; env, pool 2; agent,
synth 3; bench, rl 4; cli 5. A package may import its own modules and packages of lower layers only,
so siblings on one layer never import each other. The evaluation child's
modules import only the standard library, numpy, torch and each other."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "cuda_agent"
LAYER = {
    "task": 0,
    "sandbox": 0,
    "eval": 1,
    "llm": 1,
    "env": 2,
    "pool": 2,
    "agent": 3,
    "synth": 3,
    "bench": 4,
    "rl": 4,
    "cli": 5,
}
CHILD_ROOT = "cuda_agent.eval.child.main"


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_packages_import_only_downwards():
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).parts
        if len(rel) < 2:
            continue  # cuda_agent/__init__.py, __main__.py
        pkg = rel[0]
        assert pkg in LAYER, f"package {pkg} has no layer; add it to ARCHITECTURE.md and this test"
        for name in imports_of(path):
            parts = name.split(".")
            if parts[0] != "cuda_agent" or len(parts) < 2 or parts[1] not in LAYER or parts[1] == pkg:
                continue
            if LAYER[parts[1]] >= LAYER[pkg]:
                bad.append(f"{path.relative_to(SRC)} imports {name}")
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def _module_path(mod: str) -> Path | None:
    parts = mod.split(".")[1:]
    p = SRC.joinpath(*parts)
    if p.with_suffix(".py").is_file():
        return p.with_suffix(".py")
    if (p / "__init__.py").is_file():
        return p / "__init__.py"
    return None


def test_evaluation_child_imports_only_stdlib_numpy_torch():
    allowed_third_party = {"torch", "numpy"}
    seen: set[str] = set()
    todo = [CHILD_ROOT]
    bad = []
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        path = _module_path(mod)
        if path is None:
            continue  # "from pkg import name" where name is not a module
        for name in imports_of(path):
            top = name.split(".")[0]
            if top == "cuda_agent":
                todo.append(name)
            elif top not in sys.stdlib_module_names and top not in allowed_third_party and top != "__future__":
                bad.append(f"{path.relative_to(SRC)} imports {name}")
    assert "cuda_agent.eval.shared.events" in seen and "cuda_agent.eval.channel.tensorfile" in seen
    assert not any(
        m.startswith(("cuda_agent.task", "cuda_agent.agent", "cuda_agent.llm", "cuda_agent.cli")) for m in seen
    ), seen
    assert not bad, "\n".join(bad)
