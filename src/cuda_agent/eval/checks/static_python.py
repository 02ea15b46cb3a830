"""The Python half of the static checks: the syntax-tree checker of `model_new.py` (or a single file).

Contract: `check_python(text, file, precision)` returns the findings of the Python rules for one file, and of
the C++ rules for every string literal in it that holds C++/CUDA source (load_inline's sources). It never
imports or runs the file. Imports only the standard library and the other static modules.
"""

from __future__ import annotations

import ast
import re

from cuda_agent.eval.checks.static_cpp import check_cpp
from cuda_agent.eval.checks.static_cpp_symbols import DEFINE_FLAG, RENAME_FLAGS, build_flag
from cuda_agent.eval.checks.static_python_names import (
    ALLOWED_INPLACE,
    BAD_LDLIBS,
    CPP_HINT,
    DUNDER_MATH,
    DYNAMIC_BUILTINS,
    FILE_CALLS,
    FILE_METHODS,
    FP8_DTYPES,
    FRAME_ATTRS,
    GRAPH_PY,
    INTROSPECT_BUILTINS,
    LOW_DTYPES,
    LOW_PRECISION_PY,
    MODULE_RULES,
    OS_FILE,
    OS_PROCESS,
    PRECISION_ATTRS,
    RNG_PY,
    STREAM_PY,
    SUBCLASS_NAMES,
    SYS_INTROSPECT,
    SYSCALL_PY,
    TENSOR_COMPUTE,
    TENSOR_VIEW,
    THIRD_PARTY_PY,
    TORCH_ALLOWED_CALLS,
    _build_ctx,
    _chain,
    _docstring_nodes,
    _self_attr_kinds,
)
from cuda_agent.eval.checks.static_rules import W, _low_precision, _Sink, _task_dtype_name
from cuda_agent.eval.judge.result import Finding


class _PyChecker:
    def __init__(self, tree: ast.Module, sink: _Sink, precision: str) -> None:
        self.tree, self.sink, self.precision = tree, sink, precision
        self.ctx = _build_ctx(tree)
        self.funcs: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.funcs.setdefault(n.name, []).append(n)
            elif isinstance(n, ast.ClassDef):
                self.classes[n.name] = n

    # -- file-wide rules ------------------------------------------------------------------
    def run(self) -> None:
        self._imports()
        for n in ast.walk(self.tree):
            self._node_anywhere(n)
        model_new = self.classes.get("ModelNew")
        if model_new is not None:
            self._model_new(model_new)

    def _module_rule(self, mod: str) -> str | None:
        parts = mod.split(".")
        for i in range(len(parts), 0, -1):
            rule = MODULE_RULES.get(".".join(parts[:i]))
            if rule:
                return rule
        if parts[0] in THIRD_PARTY_PY:
            return "third-party-library"
        return None

    def _imports(self) -> None:
        for n in ast.walk(self.tree):
            mods: list[str] = []
            if isinstance(n, ast.Import):
                mods = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom):
                if n.level:
                    mods = ["model"] if n.module in (None, "model") else [n.module]
                else:
                    mods = [n.module or ""] + [f"{n.module}.{a.name}" for a in n.names]
                    if any(a.name == "*" for a in n.names) and (n.module or "").startswith("torch"):
                        self.sink.add(
                            "torch-compute",
                            n.lineno,
                            f"`from {n.module} import *` hides which torch functions are called",
                        )
            for m in mods:
                rule = self._module_rule(m)
                if rule:
                    self.sink.add(rule, n.lineno, f"import of {m}")
                if m.split(".")[0] in ("time", "timeit"):
                    self.sink.add("timing-probe", n.lineno, f"import of {m}")

    def _name_rule(self, dotted: str) -> tuple[str, str] | None:
        """A forbidden meaning of a resolved dotted name anywhere in the file."""
        last = dotted.rsplit(".", 1)[-1]

        def under(prefixes: set[str]) -> bool:
            return any(dotted == p or dotted.startswith(p + ".") for p in prefixes)

        if under({"torch.nn.functional"}):
            return "nn-functional", f"{dotted} is torch.nn.functional"
        if under(STREAM_PY) or dotted in ("torch.cuda.Stream", "torch.cuda.stream"):
            return "cuda-stream", f"{dotted} creates or switches streams"
        if under(GRAPH_PY):
            return "cuda-graph", f"{dotted} is a CUDA graph"
        if under(RNG_PY) or (dotted.startswith("random.") and dotted.count(".") == 1):
            return "rng-state", f"{dotted} touches RNG state"
        if dotted in ("torch.compile",) or under({"torch.jit", "torch._dynamo", "torch._inductor", "torch.fx"}):
            return "torch-compiler", f"{dotted} hands the work to a compiler"
        if last in SUBCLASS_NAMES or under(
            {"torch.utils._python_dispatch", "torch.overrides", "torch._C._DisableTorchFunction"}
        ):
            return "tensor-subclass", f"{dotted} hooks tensor dispatch"
        if under(SYS_INTROSPECT):
            return "introspection", f"{dotted} reaches into the interpreter"
        if dotted in SYSCALL_PY:
            return "system-call", f"{dotted} is a namespace or privilege system call"
        if under({"torch.ops.load_library", "torch.classes.load_library", "torch.cuda.cudart"}):
            return "native-code", f"{dotted} loads native code"
        if _low_precision(self.precision) and (
            (last in LOW_DTYPES and not _task_dtype_name(last)) or under(LOW_PRECISION_PY) or last in PRECISION_ATTRS
        ):
            return "lowered-precision", f"{dotted} lowers precision below {self.precision}"
        if self.precision in ("fp16", "bf16") and last in FP8_DTYPES and not _task_dtype_name(last):
            return "lowered-precision", f"{dotted} lowers precision below {self.precision}"
        if dotted in ("torch.cuda.is_current_stream_capturing", "torch.cuda.Event") or under(
            {"torch.profiler", "torch.autograd.profiler"}
        ):
            return "timing-probe", f"{dotted} observes timing or capture"
        return None

    def _node_anywhere(self, n: ast.AST) -> None:
        sink, ctx = self.sink, self.ctx
        line = getattr(n, "lineno", None)
        if isinstance(n, (ast.Attribute, ast.Name)):
            dotted = ctx.resolve(n)
            if dotted:
                hit = self._name_rule(dotted)
                if hit:
                    sink.add(hit[0], line, hit[1])
            if isinstance(n, ast.Attribute):
                if n.attr in FRAME_ATTRS:
                    sink.add("introspection", line, f"attribute {n.attr} reaches into frames or globals")
                elif n.attr in SUBCLASS_NAMES:
                    sink.add("tensor-subclass", line, f"{n.attr} hooks tensor dispatch")
                elif n.attr in PRECISION_ATTRS and _low_precision(self.precision):
                    sink.add("lowered-precision", line, f"{n.attr} changes matmul/conv precision")
                elif n.attr == "__dict__" and ctx.resolve(n.value):
                    sink.add("introspection", line, "a module's __dict__")
            elif n.id == "__builtins__":
                sink.add("introspection", line, "__builtins__")
            elif n.id in ("Model",) and "Model" not in ctx.defined and isinstance(n.ctx, ast.Load):
                sink.add("reference-model", line, "reference to the reference Model")
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if n.name in SUBCLASS_NAMES:
                sink.add("tensor-subclass", n.lineno, f"defines {n.name}")
        elif isinstance(n, ast.ClassDef):
            for b in n.bases:
                origin = ctx.resolve(b) or ""
                if (
                    origin in ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase")
                    or origin.endswith("TorchDispatchMode")
                    or origin.endswith("TorchFunctionMode")
                ):
                    sink.add("tensor-subclass", n.lineno, f"class {n.name} subclasses {origin}")
                if (isinstance(b, ast.Name) and b.id == "Model") or origin.endswith(".Model"):
                    sink.add("reference-model", n.lineno, f"class {n.name} subclasses Model")
        elif isinstance(n, ast.Call):
            self._call_anywhere(n)
        elif isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = n.targets if isinstance(n, (ast.Assign, ast.Delete)) else [n.target]
            for t in targets:
                self._assign_target(t, line)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and BAD_LDLIBS.match(n.value.strip()):
            sink.add("third-party-library", line, f"links {n.value.strip()}")
        elif (
            isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and (n.value.lstrip().startswith("-") or re.fullmatch(r"@\S+", n.value.strip()))
        ):  # a flag, or a response file of flags (`@/tmp/flags`)
            self._flag(n.value.strip(), line)
        elif isinstance(n, ast.With):
            for item in n.items:
                origin = (
                    ctx.resolve(
                        item.context_expr.func if isinstance(item.context_expr, ast.Call) else item.context_expr
                    )
                    or ""
                )
                if origin in ("torch.autocast", "torch.cuda.amp.autocast", "torch.amp.autocast") and _low_precision(
                    self.precision
                ):
                    sink.add("lowered-precision", line, "autocast")

    def _flag(self, flag: str, line: int | None) -> None:
        """A compiler or linker flag (load_inline's extra_*flags): a macro it defines is checked as the
        C++ it becomes (`-Drun=PyRun_SimpleString` renames as well as a #define); --wrap / --defsym rename;
        flags that run programs, load plugins or touch files (`build_flag`) are rejected by what they do."""
        if RENAME_FLAGS.search(flag):
            self.sink.add("symbol-rename", line, f"the flag {flag[:60]!r} binds one symbol to another")
        bad = build_flag(flag)
        if bad:
            self.sink.add(
                bad[0], line, f"the flag {bad[1]!r} makes the compiler run, load, read or write what no check sees"
            )
        m = DEFINE_FLAG.match(flag)
        if m:
            text = f"#define {m.group(1)} {m.group(2) or ''}\n"
            self.sink.out += check_cpp(text, self.sink.file, self.precision, line_offset=(line or 1) - 1, kind=".cpp")

    def _assign_target(self, t: ast.AST, line: int | None) -> None:
        if isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self._assign_target(e, line)
            return
        if isinstance(t, ast.Subscript):
            dotted = self.ctx.resolve(t.value) or ""
            if dotted in ("sys.modules",) or dotted.endswith("__dict__"):
                self.sink.add("monkey-patch", line, f"edits {dotted}")
            elif dotted == "os.environ":
                self.sink.add("env-access", line, "sets an environment variable")
            return
        if isinstance(t, ast.Attribute):
            dotted = self.ctx.resolve(t) or ""
            if dotted and dotted.split(".")[0] not in self.ctx.defined:
                last = dotted.rsplit(".", 1)[-1]
                if last in PRECISION_ATTRS and _low_precision(self.precision):
                    return  # reported as lowered-precision
                self.sink.add("monkey-patch", line, f"assigns {dotted}")
            elif isinstance(t.value, ast.Name) and t.value.id in ("builtins", "__builtins__"):
                self.sink.add("monkey-patch", line, f"assigns builtins.{t.attr}")

    def _call_anywhere(self, n: ast.Call) -> None:
        sink, ctx, line = self.sink, self.ctx, n.lineno
        dotted = ctx.resolve(n.func) or ""
        fname = n.func.id if isinstance(n.func, ast.Name) else None
        if fname in DYNAMIC_BUILTINS and fname not in ctx.defined:
            sink.add("dynamic-code", line, f"{fname}()")
        elif fname in INTROSPECT_BUILTINS and fname not in ctx.defined:
            sink.add("introspection", line, f"{fname}() exposes namespaces", W)
        elif fname == "open" and "open" not in ctx.defined:
            sink.add("file-access", line, "open()")
        if fname in ("getattr", "setattr", "delattr", "hasattr") and n.args:
            target = ctx.resolve(n.args[0])
            if target:
                if fname in ("setattr", "delattr"):
                    sink.add("monkey-patch", line, f"{fname} on module {target}")
                else:
                    sink.add("dynamic-code", line, f"{fname} on module {target} hides which function is used")
        if fname in ("__setattr__",) or (
            isinstance(n.func, ast.Attribute)
            and n.func.attr in ("__setattr__", "__delattr__")
            and n.args
            and ctx.resolve(n.args[0])
        ):
            sink.add("monkey-patch", line, "__setattr__ on a module")
        if (
            dotted in FILE_CALLS
            or OS_FILE.match(dotted)
            or dotted.startswith(
                ("shutil.", "tempfile.", "pathlib.", "mmap.", "pickle.", "glob.", "os.path.expanduser")
            )
        ):
            sink.add("file-access", line, f"{dotted}()")
        elif OS_PROCESS.match(dotted) or dotted.startswith(("subprocess.", "socket.", "urllib.", "http.", "requests.")):
            sink.add("process-network", line, f"{dotted}()")
        elif dotted in (
            "os.getenv",
            "os.putenv",
            "os.unsetenv",
            "os.environ.get",
            "os.environ.setdefault",
            "os.environ.update",
            "os.environ.pop",
        ):
            sink.add("env-access", line, f"{dotted}()")
        elif (
            dotted.startswith("os.")
            and not dotted.startswith(("os.path.", "os.environ"))
            and dotted not in ("os.getpid", "os.cpu_count", "os.fspath", "os.sep")
        ):
            sink.add("os-call", line, f"{dotted}()")
        elif dotted.startswith(("importlib.", "types.FunctionType", "types.CodeType")):
            sink.add("dynamic-code", line, f"{dotted}()")
        if (
            isinstance(n.func, ast.Attribute)
            and n.func.attr in ("half", "bfloat16")
            and not n.args
            and _low_precision(self.precision)
        ):
            sink.add("lowered-precision", line, f".{n.func.attr}() casts below {self.precision}")
        if isinstance(n.func, ast.Attribute) and n.func.attr in FILE_METHODS:
            sink.add("file-access", line, f".{n.func.attr}() touches files")

    # -- ModelNew and everything forward can reach -------------------------------------------
    def _model_new(self, cls: ast.ClassDef) -> None:
        ctx, sink = self.ctx, self.sink
        kinds = _self_attr_kinds(cls, ctx)
        methods = {m.name: m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
        entry = [methods[m] for m in ("forward", "__call__", "_call_impl") if m in methods]
        reach = self._reachable(entry, methods)
        ext_calls = 0
        for fn in reach:
            ext_calls += self._check_forward_fn(fn, kinds, fn in entry)
        if entry and ext_calls == 0:
            sink.add("no-extension-call", entry[0].lineno, "forward never calls the compiled extension")
        init = methods.get("__init__")
        if init is not None and init not in reach:
            for n in ast.walk(init):
                if isinstance(n, ast.Call) and self._is_ext_call(n.func, kinds):
                    sink.add("extension-in-init", n.lineno, "extension called in __init__")
        for fn in entry:
            params = {a.arg for a in fn.args.args[1:]}
            for n in ast.walk(fn):
                if isinstance(n, ast.Return) and n.value is not None:
                    vals = n.value.elts if isinstance(n.value, ast.Tuple) else [n.value]
                    if any(isinstance(v, ast.Name) and v.id in params for v in vals):
                        sink.add("returns-input", n.lineno, "forward returns an input tensor")

    def _reachable(self, entry: list, methods: dict) -> list:
        seen: list = []
        todo = list(entry)
        all_methods = {}
        for c in self.classes.values():
            for m in c.body:
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    all_methods.setdefault(m.name, []).append(m)
        while todo:
            fn = todo.pop()
            if fn in seen:
                continue
            seen.append(fn)
            for n in ast.walk(fn):
                if not isinstance(n, ast.Call):
                    continue
                f = n.func
                if isinstance(f, ast.Name):
                    todo += [g for g in self.funcs.get(f.id, []) if g not in seen]
                    if f.id in self.classes:  # instantiating a helper class: its methods run
                        todo += [
                            m for m in self.classes[f.id].body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                        ]
                elif isinstance(f, ast.Attribute):
                    if isinstance(f.value, ast.Name) and f.value.id == "self" and f.attr in methods:
                        todo.append(methods[f.attr])
                    else:
                        todo += all_methods.get(f.attr, [])
        return seen

    def _is_ext_call(self, func: ast.AST, kinds: dict[str, str]) -> bool:
        parts = _chain(func)
        if not parts:
            return False
        if parts[0] in self.ctx.ext_names:
            return True
        return parts[0] == "self" and len(parts) >= 2 and kinds.get(parts[1]) == "ext"

    def _check_forward_fn(self, fn, kinds: dict[str, str], is_entry: bool) -> int:
        sink, ctx = self.sink, self.ctx
        tensors = {a.arg for a in fn.args.args if a.arg != "self" and not _scalar_annotation(a.annotation)}
        tensors |= {a.arg for a in fn.args.kwonlyargs if not _scalar_annotation(a.annotation)}
        if fn.args.vararg:
            tensors.add(fn.args.vararg.arg)
        nn_locals: set[str] = set()
        ext_calls = 0

        def is_tensor(e: ast.AST) -> bool:
            if isinstance(e, ast.Name):
                return e.id in tensors
            if isinstance(e, ast.Attribute):
                if isinstance(e.value, ast.Name) and e.value.id == "self":
                    return kinds.get(e.attr) == "tensor"
                if e.attr in ("weight", "bias", "data", "T", "mT", "grad"):
                    return True
                return False
            if isinstance(e, ast.Call):
                if self._is_ext_call(e.func, kinds):
                    return True
                origin = ctx.resolve(e.func) or ""
                if origin.startswith("torch."):
                    return True
                if isinstance(e.func, ast.Attribute) and e.func.attr in (
                    "contiguous",
                    "view",
                    "reshape",
                    "flatten",
                    "squeeze",
                    "unsqueeze",
                    "view_as",
                    "reshape_as",
                    "detach",
                ):
                    return is_tensor(e.func.value)
                return False
            if isinstance(e, ast.Subscript):
                return is_tensor(e.value)
            if isinstance(e, ast.BinOp):
                return is_tensor(e.left) or is_tensor(e.right)
            if isinstance(e, ast.UnaryOp):
                return is_tensor(e.operand)
            return False

        # propagate tensor-ness through assignments (two passes cover use-before-def in loops)
        for _ in range(2):
            for n in ast.walk(fn):
                if isinstance(n, ast.Assign) and is_tensor(n.value):
                    for t in n.targets:
                        for e in t.elts if isinstance(t, ast.Tuple) else [t]:
                            if isinstance(e, ast.Name):
                                tensors.add(e.id)
                if isinstance(n, ast.For) and isinstance(n.target, ast.Name):
                    src = _chain(n.iter)
                    if src and src[0] == "self" and len(src) == 2 and kinds.get(src[1]) == "nn":
                        nn_locals.add(n.target.id)

        for n in ast.walk(fn):
            line = getattr(n, "lineno", None)
            if isinstance(n, ast.Try):
                sink.add("try-fallback", line, "try/except around forward code")
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                sink.add("forward-state", line, "global/nonlocal state in forward")
            elif isinstance(n, (ast.Assign, ast.AugAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:
                    root = t
                    while isinstance(root, (ast.Attribute, ast.Subscript)):
                        root = root.value
                    if isinstance(root, ast.Name) and root.id == "self":
                        sink.add("forward-state", line, "forward stores state on self")
                    elif isinstance(t, ast.Subscript) and is_tensor(t.value):
                        sink.add("torch-compute", line, "item assignment into a tensor (index_put/copy)")
                    if isinstance(n, ast.AugAssign) and isinstance(t, ast.Name) and t.id in tensors:
                        sink.add("torch-compute", line, "augmented assignment on a tensor")
            elif isinstance(n, ast.BinOp) and (is_tensor(n.left) or is_tensor(n.right)):
                sink.add("torch-compute", line, f"tensor operator {type(n.op).__name__}")
            elif isinstance(n, ast.UnaryOp) and not isinstance(n.op, ast.Not) and is_tensor(n.operand):
                sink.add("torch-compute", line, f"tensor operator {type(n.op).__name__}")
            elif isinstance(n, ast.Compare):
                ops_ok = all(isinstance(o, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for o in n.ops)
                if not ops_ok and any(is_tensor(x) for x in [n.left, *n.comparators]):
                    sink.add("torch-compute", line, "tensor comparison")
                if any(
                    isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute) and x.func.attr == "data_ptr"
                    for x in [n.left, *n.comparators]
                ):
                    sink.add("forward-state", line, "data_ptr comparison (output cache keyed on pointers?)")
            elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and is_tensor(n.value):
                sink.add("torch-view", line, "tensor indexing")
            elif isinstance(n, ast.Attribute) and n.attr in ("T", "mT", "H", "mH") and is_tensor(n.value):
                sink.add("torch-view", line, f".{n.attr} transposes")
            elif isinstance(n, ast.Call):
                ext_calls += self._forward_call(n, kinds, nn_locals)
        return ext_calls

    def _forward_call(self, n: ast.Call, kinds: dict[str, str], nn_locals: set[str]) -> int:
        sink, ctx, line = self.sink, self.ctx, n.lineno
        f = n.func
        if self._is_ext_call(f, kinds):
            return 1
        parts = _chain(f) or []
        origin = ctx.resolve(f) or ""
        if origin.startswith("torch.") or origin == "torch":
            if origin in TORCH_ALLOWED_CALLS or self._name_rule(origin):
                return 0  # allowed, or already reported by its own rule
            if origin.startswith("torch.nn.") and origin.rsplit(".", 1)[-1][:1].isupper():
                sink.add("nn-submodule-call", line, f"{origin}(...) builds an nn module in forward")
            else:
                sink.add("torch-compute", line, f"{origin}() in forward")
            return 0
        if origin.startswith("numpy.") or origin.startswith("scipy."):
            sink.add("torch-compute", line, f"{origin}() computes on the host in forward")
            return 0
        if isinstance(f, ast.Name) and f.id in nn_locals:
            sink.add("nn-submodule-call", line, f"calls nn module {f.id}")
            return 0
        if parts[:1] == ["self"] and len(parts) >= 2:
            kind = kinds.get(parts[1])
            if kind in ("nn", "model") and (len(parts) == 2 or parts[2] in ("forward", "__call__")):
                sink.add(
                    "nn-submodule-call" if kind == "nn" else "reference-model",
                    line,
                    f"calls self.{parts[1]} ({kind} module)",
                )
                return 0
            if kind == "torch-fn" and len(parts) == 2:
                sink.add("torch-compute", line, f"self.{parts[1]} is a torch function")
                return 0
        if isinstance(f, ast.Subscript):
            src = _chain(f.value)
            if src and src[0] == "self" and len(src) == 2 and kinds.get(src[1]) == "nn":
                sink.add("nn-submodule-call", line, f"calls an entry of self.{src[1]}")
            return 0
        if isinstance(f, ast.Attribute):
            m = f.attr
            if (
                isinstance(f.value, ast.Call)
                and isinstance(f.value.func, ast.Name)
                and f.value.func.id == "super"
                and m in ("forward", "__call__")
            ):
                sink.add("reference-model", line, "super().forward runs the parent's forward")
            elif (
                m in TENSOR_COMPUTE
                or DUNDER_MATH.match(m)
                or (m.endswith("_") and not m.startswith("_") and m not in ALLOWED_INPLACE)
            ):
                sink.add("torch-compute", line, f".{m}() computes with torch")
            elif m in TENSOR_VIEW:
                sink.add("torch-view", line, f".{m}()")
            elif m in ("forward",) and not (parts[:1] == ["self"]):
                sink.add("nn-submodule-call", line, "calls another module's forward", W)
        return 0


def _scalar_annotation(ann: ast.AST | None) -> bool:
    return isinstance(ann, ast.Name) and ann.id in ("int", "float", "bool", "str")


def _cpp_strings(tree: ast.Module) -> list[tuple[str, int]]:
    """String literals of a Python file that hold C++/CUDA source, with their first line."""
    docs = _docstring_nodes(tree)
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            if any(h in n.value for h in CPP_HINT):
                out.append((n.value, n.lineno))
        elif isinstance(n, ast.JoinedStr):
            text = "".join(
                v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else " 0 " for v in n.values
            )
            if any(h in text for h in CPP_HINT):
                out.append((text, n.lineno))
    return out


def check_python(text: str, file: str | None = "model_new.py", precision: str = "fp32") -> list[Finding]:
    sink = _Sink(file)
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        sink.add("syntax-error", e.lineno, f"not valid Python: {e.msg}")
        return sink.out
    _PyChecker(tree, sink, precision).run()
    out = list(sink.out)
    for src, line in _cpp_strings(tree):
        # load_inline prepends torch/extension.h to cpp_sources, so treat every literal as torch-aware
        out += check_cpp(src, file, precision, line_offset=line - 1, kind=".cpp")
    return out
