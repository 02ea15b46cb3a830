"""KernelBench-format task files: load and validate without executing them.

Contract: `Task.from_file` / `Task.from_source` accept a Python file that
defines `class Model` (with `forward`), `get_inputs()` and
`get_init_inputs()`, checked on the syntax tree only; the code is never run
in this process, so loading is safe on any machine. `Task.hash` is a content
hash of the source. A task may declare optional module-level constants, read
statically: `PRECISION = "fp32" | "fp16" | "bf16" | "fp64"` and `ATOL` / `RTOL`
(defaults per precision, see `DEFAULT_TOLERANCE`). Without `PRECISION` the
precision follows the task's own tensors (`precision.infer_precision`: the
lowest floating dtype among its inputs, parameters, buffers and outputs; a
source naming no dtype but float32 is fp32 without running anything, others
are run once in a subprocess on meta tensors). `Task.precision_source` says
where the precision came from ("declared", "inferred from inputs: bfloat16 x2",
"default: ...") and `Task.describe_precision()` is the line the CLI prints;
`Task.dtypes` are the floating dtypes its tensors have (declared or not), whose
plain loads, stores and conversions the static checks never call lowered.

Not guaranteed: that the task runs, is deterministic, or is a good benchmark
(that is what lint-task and the evaluator's reference run are for).
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.task.precision import infer_precision

# The paper's default is atol = rtol = 1e-2 for fp32 tasks; half precisions
# get looser bounds because their rounding alone reaches 1e-2 relative.
DEFAULT_TOLERANCE: dict[str, float] = {"fp64": 1e-5, "fp32": 1e-2, "fp16": 2e-2, "bf16": 5e-2}


class TaskError(ValueError):
    """The file is not a usable KernelBench-format task (bad input, not a bug)."""


@dataclass(frozen=True)
class Task:
    name: str
    source: str
    path: Path | None = None
    precision: str = "fp32"
    atol: float = DEFAULT_TOLERANCE["fp32"]
    rtol: float = DEFAULT_TOLERANCE["fp32"]
    precision_source: str = "default"  # "declared", "inferred from inputs: bfloat16 x2", "default: ..."
    tolerance_declared: tuple[str, ...] = ()  # which of "ATOL", "RTOL" the task gives
    dtypes: tuple[str, ...] = ()  # floating dtypes of the task's tensors ("bfloat16", ...), where known

    def describe_precision(self) -> str:
        """One line: `precision bf16 (inferred from inputs: bfloat16 x2), atol 0.05 rtol 0.05 (the bf16 defaults)`."""
        given = self.tolerance_declared
        tol = (
            "declared"
            if len(given) == 2
            else f"{given[0]} declared, the other the {self.precision} default"
            if given
            else f"the {self.precision} defaults"
        )
        return f"precision {self.precision} ({self.precision_source}), atol {self.atol:g} rtol {self.rtol:g} ({tol})"

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    @classmethod
    def from_file(cls, path: str | Path) -> Task:
        p = Path(path)
        if p.is_dir():
            hint = f" (did you mean {p / 'task.py'}?)" if (p / "task.py").is_file() else ""
            raise TaskError(f"{p} is a directory; give the task file{hint}")
        if not p.is_file():
            raise TaskError(f"task file not found: {p}")
        try:
            source = p.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise TaskError(f"cannot read task file {p}: {e}") from None
        # examples/<name>/task.py and <workspace>/model.py are named after their folder
        name = p.resolve().parent.name if p.stem in ("task", "model") else p.stem
        return cls.from_source(source, name=name, path=p.resolve())

    @classmethod
    def from_source(cls, source: str, name: str = "task", path: Path | None = None) -> Task:
        where = str(path) if path else name
        try:
            tree = ast.parse(source)
        except SyntaxError as e:
            raise TaskError(f"{where}: not valid Python (line {e.lineno}: {e.msg})") from None
        top = {
            node.name: node
            for node in tree.body
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        }
        missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in top]
        if missing:
            raise TaskError(f"{where}: not a KernelBench task, missing {', '.join(missing)}")
        model = top["Model"]
        if not isinstance(model, ast.ClassDef):
            raise TaskError(f"{where}: Model must be a class")
        if not any(isinstance(n, ast.FunctionDef) and n.name == "forward" for n in model.body):
            raise TaskError(f"{where}: class Model has no forward method")
        consts = _module_constants(tree)
        if "PRECISION" in consts:
            precision, precision_source = str(consts["PRECISION"]), "declared"
            if precision not in DEFAULT_TOLERANCE:
                raise TaskError(f"{where}: PRECISION must be one of {sorted(DEFAULT_TOLERANCE)}")
        tol_declared = tuple(k for k in ("ATOL", "RTOL") if k in consts)
        if not all(isinstance(v, (int, float)) and v > 0 for v in (consts.get("ATOL", 1.0), consts.get("RTOL", 1.0))):
            raise TaskError(f"{where}: ATOL and RTOL must be positive numbers")
        inferred = infer_precision(source)  # after the cheap checks: this may run the task (in a subprocess)
        if "PRECISION" not in consts:
            precision, precision_source = inferred.precision, inferred.source
        tol = DEFAULT_TOLERANCE[precision]
        atol, rtol = consts.get("ATOL", tol), consts.get("RTOL", tol)
        return cls(
            name=name,
            source=source,
            path=path,
            precision=precision,
            atol=float(atol),
            rtol=float(rtol),
            precision_source=precision_source,
            tolerance_declared=tol_declared,
            dtypes=inferred.dtypes,
        )


def _module_constants(tree: ast.Module) -> dict[str, object]:
    out: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out
