"""Re-shape a task by scaling its batch-like dimension in the source.

Contract: `batch_site(source)` finds the batch-like dimension of a task: the
first argument of the first tensor-creating call in `get_inputs` (for
`torch.randn(batch_size, 64)` that is `batch_size`). When that argument is a
name bound by a module-level `NAME = <int>`, the site is that assignment; when
it is an int literal, the literal itself. `scale_batch(source, factor)` rewrites
only that integer (the rest of the text is untouched) and returns the new source
with the old and new values, or None when there is no site or the value would
not change. Imports only the standard library (it also runs inside the filter's
child process).
Not guaranteed: that the task still runs (a Model that hardcodes the batch
size breaks; the filter then rejects it with the error), nor that time scales
linearly with the batch.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

_CREATORS = {"randn", "rand", "randint", "empty", "zeros", "ones", "full", "normal"}


@dataclass(frozen=True)
class Site:
    value: int
    lineno: int
    col: int
    end_col: int
    name: str = ""  # the module-level constant, "" for a literal


def _first_dim(tree: ast.Module) -> ast.expr | None:
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"), None)
    if fn is None:
        return None
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in _CREATORS and node.args:
                arg = node.args[1] if name == "randint" and len(node.args) >= 3 else node.args[0]
                if isinstance(arg, (ast.Tuple, ast.List)) and arg.elts:
                    arg = arg.elts[0]
                return arg
    return None


def batch_site(source: str) -> Site | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    arg = _first_dim(tree)
    if isinstance(arg, ast.Constant) and type(arg.value) is int:
        return Site(arg.value, arg.lineno, arg.col_offset, arg.end_col_offset or arg.col_offset)
    if isinstance(arg, ast.Name):
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == arg.id
                and isinstance(node.value, ast.Constant)
                and type(node.value.value) is int
                and node.value.lineno == node.value.end_lineno
            ):
                v = node.value
                return Site(v.value, v.lineno, v.col_offset, v.end_col_offset or v.col_offset, arg.id)
    return None


def scale_batch(source: str, factor: float) -> tuple[str, int, int] | None:
    site = batch_site(source)
    if site is None:
        return None
    new = max(1, int(round(site.value * factor)))
    if new == site.value:
        return None
    lines = source.splitlines(keepends=True)
    line = lines[site.lineno - 1].encode()  # ast columns are byte offsets
    lines[site.lineno - 1] = (line[: site.col] + str(new).encode() + line[site.end_col :]).decode()
    return "".join(lines), site.value, new
