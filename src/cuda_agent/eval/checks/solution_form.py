"""Is this a solution at all? The shape checks that need no GPU and no build.

Contract: `form_findings(sources, single_file=...)` returns REJECT findings with rule
`not-a-solution` for what can never be scored as a candidate, so that `cuda-agent check` and
`eval` say so on any machine instead of "clean" or "compiled with nvcc":
- model_new.py (the single file) missing, empty, not UTF-8 text (binary), or not parseable;
- no `ModelNew` at the top level (a class, an assignment or an import alias); a task file
  (`class Model` with `get_inputs`) is named as such;
- `class ModelNew(nn.Module)` without a `forward`;
- workspace form only: kernels/ without a .cu or .cpp file (nothing would be built; said as
  "nothing is written yet" when model_new.py is also the untouched template). Kernels with
  the template model_new.py are only a WARN: compiling kernels before writing ModelNew is a
  normal step of the agent's workflow, and the load then fails with the template's message.
Pure function of the texts; standard library only.

Not guaranteed: that what passes imports, builds or runs; the build and the children decide.
"""

from __future__ import annotations

import ast

from cuda_agent.eval.judge.result import Finding, Severity

RULE = "not-a-solution"
KERNEL_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx")
_NN_MODULE = {"Module", "nn.Module", "torch.nn.Module"}


def form_findings(
    sources: dict[str, str], *, single_file: bool, template: str | None = None, name: str = "model_new.py"
) -> list[Finding]:
    """`sources["model_new.py"]` is the solution's Python (the single file, shown as `name`);
    `template`: the text `cuda-agent init` writes to model_new.py (workspace form)."""
    text = sources.get("model_new.py")
    if text is None:
        return [_reject("no model_new.py: the workspace holds no solution (write ModelNew there)", None)]
    problem = _python_problem(text)
    if problem is not None:
        return [_reject(f"{name} {problem[0]}", problem[1], name)]
    if single_file:
        return []
    untouched = template is not None and text.strip() == template.strip()
    if not any(rel.startswith("kernels/") and rel.endswith(KERNEL_SUFFIXES) for rel in sources):
        what = "nothing is written yet: model_new.py is the template and kernels/" if untouched else "kernels/"
        return [_reject(f"{what} holds no .cu or .cpp file: nothing would be built", None, "kernels/")]
    if untouched:
        # kernels but no ModelNew yet: compiling them is a normal step, so the build still runs
        return [
            Finding(
                RULE,
                "model_new.py is still the template written by `cuda-agent init`: the kernels build, "
                "but the evaluation fails at load until ModelNew is written",
                Severity.WARN,
                "model_new.py",
            )
        ]
    return []


def _python_problem(text: str) -> tuple[str, int | None] | None:
    """(what is wrong, line) with the file's text, or None when it can hold a ModelNew."""
    if not text.strip():
        return "is empty", None
    if "\x00" in text or "\ufffd" in text:
        return "is not UTF-8 text (a binary file?)", None
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        return f"is not valid Python (line {e.lineno}: {e.msg})", e.lineno
    defined = _top_level_names(tree)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    if "ModelNew" not in defined:
        if {"Model", "get_inputs"} <= defined:
            return (
                "is a task file (class Model, get_inputs), not a solution: a solution defines class ModelNew "
                "with Model's constructor"
            ), None
        return "defines no ModelNew (a solution defines class ModelNew with Model's constructor)", None
    if (
        cls is not None
        and all(ast.unparse(b) in _NN_MODULE for b in cls.bases)
        and not any(
            isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Assign)) and _names(n) & {"forward"}
            for n in cls.body
        )
    ):
        return "defines class ModelNew without a forward method", cls.lineno
    return None


def _top_level_names(tree: ast.Module) -> set[str]:
    out: set[str] = set()
    for node in tree.body:
        out |= _names(node)
    return out


def _names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    return set()


def _reject(message: str, line: int | None, file: str = "model_new.py") -> Finding:
    return Finding(RULE, message, Severity.REJECT, file, line)
