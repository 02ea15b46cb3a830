"""The training framework stays behind the `rl` extra: nothing outside
cuda_agent.rl imports verl (checked on the syntax tree), and the rl modules
meant to run without verl (the GPU smoke uses them) do not import it either."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "cuda_agent"
VERL_FREE_RL = ("tokens", "rollout", "replay", "scoring", "gae", "prompts", "rft", "tiny", "sft_data")


def verl_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
        )
        found += [n for n in names if n.split(".")[0] == "verl"]
    return found


def test_only_rl_imports_verl():
    bad = [
        f"{p.relative_to(SRC)}: {verl_imports(p)}"
        for p in SRC.rglob("*.py")
        if p.relative_to(SRC).parts[0] != "rl" and verl_imports(p)
    ]
    assert not bad, bad


def test_framework_free_rl_modules_do_not_import_verl():
    bad = [m for m in VERL_FREE_RL if verl_imports(SRC / "rl" / f"{m}.py")]
    assert not bad and verl_imports(SRC / "rl" / "verl_loop.py")  # the check can see an import
