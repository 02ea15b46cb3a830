"""No import circles among the modules of src/cuda_agent, checked on the syntax tree (nothing imported).

An edge A -> B is an import of module B written anywhere in A's source: `import cuda_agent.x.b`,
`from cuda_agent.x import b` (b a module) or `from cuda_agent.x.b import name`, absolute or relative;
`from cuda_agent.x import name` where name is not a module is an edge to the package `cuda_agent.x`
(its `__init__`). The parent packages a dotted import runs first are not edges: a package's
`__init__` that imports its own submodules is the normal layout, and Python has the parent in
`sys.modules` before any child runs.

Function-level (lazy) imports count like module-level ones, and so do imports under
`if TYPE_CHECKING:` and in `try:` blocks. Why: a lazy import does not remove a circle, it moves the
failure from import time to the first call and hides it from the reader; both circles issue 33
found (bench/report*.py, rl/check.py with rl/config.py) were closed by a function-level import.
Lazy imports stay the way to keep a heavy or optional dependency (torch, verl, rich) out of import
time: those are not modules of this package, so this test never sees them. A module that needs
something of a module importing it takes it from a third, lower module (rl.check's ConfigError,
task.cache_dir's cache_root).

KNOWN holds the circles allowed for now, each with the reason; one that is gone fails the test too,
so the list cannot outlive its circles.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "cuda_agent"

# circle (its modules) -> why it is still here; none now (the last, build.workspace <-> checks.symbols, was cut
# by moving the toolchain into build/toolchain.py)
KNOWN: dict[frozenset[str], str] = {}


def module_files(src: Path = SRC) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under `src` (a package is its __init__.py)."""
    mods = {}
    for p in sorted(src.rglob("*.py")):
        parts = list(p.relative_to(src.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = p
    return mods


def edges(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The package's modules that `name` imports anywhere in its source (see the module docstring)."""
    is_pkg = path.name == "__init__.py"

    def resolve(dotted: str) -> str | None:  # the longest prefix that is one of our modules
        while dotted and dotted not in mods:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    out: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(resolve(a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package holding this module (itself, for an __init__)
                pkg = name.split(".")[: len(name.split(".")) - (node.level - 1) - (0 if is_pkg else 1)]
                base = ".".join(pkg + ([base] if base else []))
            out.update(resolve(f"{base}.{a.name}") for a in node.names)
    return {m for m in out if m and m != name}


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(frozenset(comp))
    return found


def path_in(circle: frozenset[str], graph: dict[str, set[str]]) -> str:
    """One closed path through the circle, for the message: a -> b -> a."""
    start = min(circle)
    prev, todo = {start: ""}, [start]
    while todo:  # breadth-first back to start within the circle
        v = todo.pop(0)
        for w in sorted(graph[v] & circle):
            if w == start:
                hops = [v]
                while prev[hops[-1]]:
                    hops.append(prev[hops[-1]])
                return " -> ".join([*reversed(hops), start])
            if w not in prev:
                prev[w] = v
                todo.append(w)
    return ", ".join(sorted(circle))


def test_no_import_circles():
    mods = module_files()
    assert "cuda_agent.eval.pipeline" in mods and "cuda_agent.cli.main" in mods, sorted(mods)[:5]
    graph = {m: edges(m, p, mods) for m, p in mods.items()}
    found = circles(graph)
    new = [path_in(c, graph) for c in found if c not in KNOWN]
    gone = [", ".join(sorted(c)) for c in KNOWN if c not in found]
    assert not new, "import circles (cut each by moving what both need into a lower module):\n" + "\n".join(new)
    assert not gone, "circles in KNOWN no longer exist (or changed): remove them from KNOWN:\n" + "\n".join(gone)


def test_the_finder_sees_lazy_relative_and_package_imports(tmp_path):
    pkg = tmp_path / "cuda_agent"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from cuda_agent.sub import a\n")  # a package importing its child: no circle
    (pkg / "sub" / "__init__.py").write_text("VALUE = 1\n")
    (pkg / "sub" / "a.py").write_text("from . import b\n")  # relative, module level
    (pkg / "sub" / "b.py").write_text("def f():\n    from cuda_agent.sub.c import g\n    return g\n")  # lazy
    (pkg / "sub" / "c.py").write_text("import cuda_agent.sub.a\nfrom cuda_agent.sub import VALUE\n")
    (pkg / "lone.py").write_text("import os\nfrom cuda_agent import sub\n")
    mods = module_files(pkg)
    graph = {m: edges(m, p, mods) for m, p in mods.items()}
    assert graph["cuda_agent.sub.c"] == {"cuda_agent.sub.a", "cuda_agent.sub"}
    assert graph["cuda_agent.lone"] == {"cuda_agent.sub"}
    assert circles(graph) == [frozenset({"cuda_agent.sub.a", "cuda_agent.sub.b", "cuda_agent.sub.c"})]
    assert (
        path_in(circles(graph)[0], graph)
        == "cuda_agent.sub.a -> cuda_agent.sub.b -> cuda_agent.sub.c -> cuda_agent.sub.a"
    )
