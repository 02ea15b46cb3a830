"""What a task computes: its `forward` traced on the meta device into a canonical graph of ATen ops.

Contract: `trace_source(code)` executes a task's code in this process (so only
inside `trace_child`, the sandboxed child, for code that is not ours), builds
`Model(*get_init_inputs())` and its inputs under `torch.device("meta")` (no data
is allocated: KernelBench's multi-GB inputs cost nothing), runs `forward` once
under a dispatch mode that logs every ATen op with the values it reads, and
returns the op graph as JSON-able lists (`GRAPH_VERSION` names its format):
`{"nodes": [[label, [[src, k, role], ...], shape], ...], "outputs": [[src, k], ...]}`.
Nodes are in dataflow order (a node's inputs come before it); `src` is an
earlier node, `k` which of its outputs, `role` "f" (the operand has the output's
shape) or "b" (broadcast into it). Sources are nodes labelled `in` (a forward
argument), `param` (a parameter or buffer) or `const` (any other tensor: made in
forward, or a plain attribute).

Canonical form, so that restatements of one computation give one graph:
- sizes never appear: a node's `shape` is its rank and which sizes repeat
  ("abcc"), informational only; reductions are labelled by their dims as roles
  (`sum[L]` the last dim, `sum[1]` dim 1, `sum[*]` all), convolutions by their
  spatial rank, transposition and grouping (`conv2d`, `conv3dT`, `conv2d.dw`);
- views, copies, casts, `contiguous`, `clone`, `detach` and dropout are
  transparent (their output is their input's value); in-place ops are their
  out-of-place twins (`relu_` is `relu`, `x += y` is `add`); overloads and
  `out=` variants are one op;
- Python numbers and one-element constants are scalars, not edges: `mul.s` is
  a multiply by a scalar, and dividing by one is `mul.s`, subtracting one is
  `add.s`;
- every matrix product is `matmul` (`mm`, `bmm`, `mv`, `einsum`, `@`; the
  batch is a shape), `addmm`/`baddbmm` are a `matmul` with the bias folded in,
  and an add of a parameter or constant straight after a matmul or
  convolution is folded into it (`nn.Linear` = `F.linear` = `x @ W.t() + b`);
  norms keep only the normalised input (`batch_norm` in any mode, affine or
  not); instance norm and recurrent layers (`lstm`, `gru`, `rnn_tanh`, with
  `.bi` when bidirectional) are one node each;
- composites written out by hand are expanded where torch has a kernel for
  them: `silu` is `mul(x, sigmoid(x))`, `mish` is `mul(x, tanh(softplus(x)))`;
  `hardtanh`/`relu6`/`clamp_min`/`clamp_max` are `clamp`, a clamp at zero from
  below only is `relu`; `elu` with SELU's or CELU's constants is `selu`/`celu`;
- nodes that no output depends on are dropped (running-stat updates, dead code).
Longer than the usual 250 lines: the canonical form is one table of rules
(renames, transparent ops, labels) and the recorder that applies them; split, each half would be
read only with the other.
Not guaranteed: that two graphs differ only when the computations do (an
algebraic rewrite, e.g. `x / (1 + exp(-x))` for `silu`, gives another graph),
nor that every task traces: data-dependent control flow, `.item()`, ops without
a meta kernel and tensors forced onto another device raise `TraceError`.
"""

from __future__ import annotations

import types
from typing import Any

GRAPH_VERSION = "opgraph-1"

SOURCES = ("in", "param", "const")
# binary pointwise ops whose operands may be swapped
COMMUTATIVE = {
    "add",
    "mul",
    "maximum",
    "minimum",
    "eq",
    "ne",
    "logical_and",
    "logical_or",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "hypot",
    "fmax",
    "fmin",
}
# ops whose value is their first tensor input's (views have `is_view`; these are the copies and no-ops)
TRANSPARENT = {
    "clone",
    "contiguous",
    "_to_copy",
    "to",
    "detach",
    "lift_fresh",
    "lift_fresh_copy",
    "alias",
    "_unsafe_view",
    "copy",
    "dropout",
    "native_dropout",
    "feature_dropout",
    "alpha_dropout",
    "feature_alpha_dropout",
    "_conj",
    "resolve_conj",
    "resolve_neg",
    "positive",
    "type_as",
    "_reshape_alias",
    "reshape",
    "view_as",
    "expand_as",
    "flatten",
    "unflatten",
}
FACTORIES = {
    "empty",
    "zeros",
    "ones",
    "full",
    "arange",
    "eye",
    "rand",
    "randn",
    "randint",
    "scalar_tensor",
    "empty_like",
    "zeros_like",
    "ones_like",
    "full_like",
    "rand_like",
    "randn_like",
    "randint_like",
    "linspace",
    "logspace",
    "tensor",
    "empty_strided",
    "new_empty",
    "new_zeros",
    "new_ones",
    "new_full",
    "new_empty_strided",
    "normal",
    "bernoulli",
    "tril_indices",
    "triu_indices",
    "randperm",
}
RENAME = {
    "native_batch_norm": "batch_norm",
    "_native_batch_norm_legit": "batch_norm",
    "_native_batch_norm_legit_no_training": "batch_norm",
    "_native_batch_norm_legit_functional": "batch_norm",
    "native_layer_norm": "layer_norm",
    "native_group_norm": "group_norm",
    "_fused_rms_norm": "rms_norm",
    "addmm": "mm",
    "baddbmm": "bmm",
    "addmv": "mv",
    "addbmm": "bmm",
    "hardtanh": "clamp",
    "clamp_min": "clamp",
    "clamp_max": "clamp",
    "true_divide": "div",
    "multiply": "mul",
    "subtract": "sub",
    "log_sigmoid_forward": "log_sigmoid",
    "max_pool1d_with_indices": "max_pool1d",
    "max_pool2d_with_indices": "max_pool2d",
    "max_pool3d_with_indices": "max_pool3d",
    "_softmax": "softmax",
    "_log_softmax": "log_softmax",
    "_safe_softmax": "softmax",
    "linalg_vector_norm": "norm",
    "_scaled_dot_product_flash_attention_for_cpu": "sdpa",
    "_scaled_dot_product_efficient_attention": "sdpa",
    "_scaled_dot_product_flash_attention": "sdpa",
    "_scaled_dot_product_attention_math": "sdpa",
    "_scaled_dot_product_fused_attention_overrideable": "sdpa",
    "_embedding_bag": "embedding_bag",
    "_cdist_forward": "cdist",
}
# the operands that carry the computation (the rest are weights, biases, running stats of the op itself)
KEEP_ARGS = {"batch_norm": 1, "layer_norm": 1, "group_norm": 1, "rms_norm": 1, "instance_norm": 1, "convolution": 2}
# ops whose label says which dims they reduce or scan
DIM_ARGS = ("dim", "dims")


class TraceError(Exception):
    pass


def _strip(name: str) -> str:
    if name.endswith("_") and not name.endswith("__"):
        name = name[:-1]  # in-place twin
    return RENAME.get(name, name)


def _dims(dim: Any, rank: int) -> str:
    if dim is None or dim == [] or dim == ():
        return "*"
    ds = dim if isinstance(dim, (list, tuple)) else [dim]
    out = []
    for d in ds:
        if not isinstance(d, int) or rank == 0:
            return "*"
        d %= rank
        out.append("L" if d == rank - 1 else str(d))
    return ",".join(sorted(out))


class _Graph:
    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.nodes: list[list[Any]] = []  # [label, ins, shape]
        self.value: dict[int, tuple[int, int]] = {}  # id(tensor) -> (node, output index)
        self.keep: list[Any] = []  # every tensor seen stays alive, so ids are never reused
        self.sizes: dict[int, str] = {}
        self.mute = False  # inside a recurrent layer: its steps are not logged

    def shape(self, t: Any) -> str:
        letters = []
        for s in t.shape:
            letters.append(self.sizes.setdefault(int(s), chr(97 + len(self.sizes) % 26)))
        return "".join(letters)

    def add(self, label: str, ins: list[list[Any]], shape: str = "") -> int:
        self.nodes.append([label, ins, shape])
        return len(self.nodes) - 1

    def bind(self, t: Any, ref: tuple[int, int]) -> None:
        self.value[id(t)] = ref
        self.keep.append(t)

    def source(self, t: Any, kind: str) -> tuple[int, int]:
        ref = (self.add(kind, [], self.shape(t)), 0)
        self.bind(t, ref)
        return ref

    def ref(self, t: Any) -> tuple[int, int]:
        got = self.value.get(id(t))
        if got is None:
            got = self.source(t, "const")
        return got

    def is_scalar(self, t: Any) -> bool:
        """A Python number, or a one-element tensor that is not computed here."""
        if not isinstance(t, self.torch.Tensor):
            return True
        if t.numel() > 1:
            return False
        got = self.value.get(id(t))
        return got is None or self.nodes[got[0]][0] in ("const", "param")


# recurrent layers are one node each (label + ".bi" when bidirectional), not their unrolled steps
# (a KernelBench LSTM unrolls into 40,000 ATen ops); caught at the torch function level
RECURRENT = {"lstm", "gru", "rnn_tanh", "rnn_relu"}
# torch functions logged as one node, and how many leading arguments are its operands: the recurrent
# layers (input, hx), and instance norm, which ATen runs as a batch norm over a reshaped input (one
# node, or InstanceNorm and BatchNorm tasks would be the same task)
WHOLE = {**{n: 2 for n in RECURRENT}, "instance_norm": 1}


def _recurrent_shapes(torch: Any, args: Any) -> tuple[Any, ...] | None:
    """The outputs of `_VF.lstm/gru/rnn_*(input, hx, params, has_biases, layers, dropout, train,
    bidirectional, batch_first)` as empty meta tensors: running the layer on the meta device
    steps through every time step in Python (seconds for KernelBench's LSTMs)."""
    if len(args) < 9 or not isinstance(args[0], torch.Tensor) or args[0].device.type != "meta":
        return None
    hx = list(args[1]) if isinstance(args[1], (list, tuple)) else [args[1]]
    if not hx or not all(isinstance(h, torch.Tensor) and h.dim() == args[0].dim() for h in hx):
        return None
    x, width = args[0], hx[0].shape[-1] * (2 if args[7] is True else 1)
    out = torch.empty([*x.shape[:-1], width], dtype=x.dtype, device="meta")
    return (out, *[torch.empty_like(h) for h in hx])


def _modes(g: _Graph) -> tuple[Any, Any]:
    """The torch-function mode (recurrent layers) and the dispatch mode that logs every ATen op
    (built here so that this module imports without torch)."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    torch = g.torch

    class Functions(TorchFunctionMode):
        def __torch_function__(self, func: Any, types_: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name not in WHOLE or g.mute or not args or not isinstance(args[0], torch.Tensor):
                return func(*args, **kwargs)
            out = _recurrent_shapes(torch, args) if name in RECURRENT else None
            if out is None:  # another overload (packed sequences): run it, unlogged
                g.mute = True
                try:
                    out = func(*args, **kwargs)
                finally:
                    g.mute = False
            ins = [a for a in tree_flatten(list(args[: WHOLE[name]]))[0] if isinstance(a, torch.Tensor)]
            bi = name in RECURRENT and len(args) > 7 and args[7] is True
            outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
            node = g.add(name + (".bi" if bi else ""), _ins(g, ins, None, False), g.shape(outs[0]) if outs else "")
            for k, o in enumerate(outs):
                g.bind(o, (node, k))
            return out

    class Dispatch(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types_: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if g.mute:
                return out
            try:
                _record(g, func, args, kwargs, out, tree_flatten, torch)
            except TraceError:
                raise
            except Exception as e:  # noqa: BLE001 - a bug in the recorder must name the op
                raise TraceError(f"recording {func}: {type(e).__name__}: {e}") from e
            return out

    return Functions(), Dispatch()


def _bound(func: Any, args: Any, kwargs: Any) -> dict[str, Any]:
    names = [a.name for a in func._schema.arguments]
    got = dict(zip(names, args, strict=False))
    got.update(kwargs)
    return got


def _record(g: _Graph, func: Any, args: Any, kwargs: Any, out: Any, tree_flatten: Any, torch: Any) -> None:
    name = func.overloadpacket.__name__
    base = _strip(name)
    flat_in = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
    flat_out = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
    writes = (
        bool(func._schema.arguments)
        and func._schema.arguments[0].alias_info is not None
        and func._schema.arguments[0].alias_info.is_write
    )
    if base in FACTORIES or (not flat_in and flat_out):
        for o in flat_out:
            g.source(o, "const")
        return
    if func.is_view or base in TRANSPARENT:
        if flat_in:
            src = g.ref(flat_in[0])
            for o in flat_out:
                g.bind(o, src)
        return
    if base == "copy" and writes and len(flat_in) >= 2:  # dst.copy_(src): dst now holds src's value
        dst, src = flat_in[0], g.ref(flat_in[1])
        if dst._base is not None and id(dst._base) in g.value:  # a write into part of a tensor
            node = g.add("write", _ins(g, [dst._base, flat_in[1]], None, False), g.shape(dst._base))
            g.bind(dst._base, (node, 0))
        g.bind(dst, src)
        for o in flat_out:
            g.bind(o, src)
        return
    bound = _bound(func, args, kwargs)
    label, operands = _label(g, base, bound, flat_in, torch)
    if label is None:
        return
    ref_out = flat_out[0] if flat_out else None
    pointwise = torch.Tag.pointwise in func.tags
    if label in ("silu", "mish"):  # expanded: x * sigmoid(x), x * tanh(softplus(x))
        x = operands[0]
        ins = _ins(g, [x], ref_out, True)
        inner = (
            g.add("sigmoid", ins, g.shape(ref_out))
            if label == "silu"
            else g.add("tanh", [[g.add("softplus", ins, g.shape(ref_out)), 0, "f"]], g.shape(ref_out))
        )
        node = g.add("mul", ins + [[inner, 0, "f"]], g.shape(ref_out))
    else:
        ins = _ins(g, operands, ref_out, pointwise)
        if not ins:  # computed from scalars alone: a constant
            for o in flat_out:
                g.source(o, "const")
            return
        if label in ("mul", "add", "sub", "div") and len(ins) < 2:
            label = {"mul": "mul.s", "div": "mul.s", "add": "add.s", "sub": "add.s"}[label]
        elif label in ("rsub",) and len(ins) < 2:
            label = "rsub.s"
        node = g.add(label, ins, g.shape(ref_out) if ref_out is not None else "")
    for k, o in enumerate(flat_out):
        g.bind(o, (node, k))
    if writes and flat_in:
        g.bind(flat_in[0], (node, 0))  # the in-place op's target now holds the result
        b = flat_in[0]._base
        if b is not None and id(b) in g.value:
            g.bind(b, (g.add("write", _ins(g, [b, flat_in[0]], None, False), g.shape(b)), 0))


def _ins(g: _Graph, operands: list[Any], out: Any, pointwise: bool) -> list[list[Any]]:
    ins = []
    for t in operands:
        if g.is_scalar(t):
            continue
        src, k = g.ref(t)
        role = "b" if pointwise and out is not None and tuple(t.shape) != tuple(out.shape) else "f"
        ins.append([src, k, role])
    return ins


def _label(g: _Graph, base: str, bound: dict[str, Any], flat_in: list[Any], torch: Any) -> tuple[str | None, list[Any]]:
    """The node's label and the operands that become edges (tensors; scalars are dropped later)."""
    first = flat_in[0] if flat_in else None
    rank = first.dim() if first is not None else 0
    if base == "convolution":
        w = bound["weight"]
        label = f"conv{w.dim() - 2}d" + ("T" if bound.get("transposed") else "")
        groups = int(bound.get("groups") or 1)
        if groups > 1:
            label += ".dw" if groups == bound["input"].shape[1] else ".g"
        return label, [bound["input"], w]
    # one matrix multiplication however it is batched or written (mm, bmm, mv, einsum, `@`), with an
    # add*'s bias folded in
    if base == "mm":
        return "matmul", [bound["mat1"], bound["mat2"]] if "mat1" in bound else flat_in
    if base == "bmm":
        return "matmul", [bound["batch1"], bound["batch2"]] if "batch1" in bound else flat_in
    if base == "mv":
        return "matmul", [bound["mat"], bound["vec"]] if "vec" in bound and "mat" in bound else flat_in
    if base in KEEP_ARGS:
        return base, flat_in[: KEEP_ARGS[base]]
    if base == "clamp":
        lo = bound.get("min", bound.get("min_val"))
        hi = bound.get("max", bound.get("max_val"))
        if "min_val" in bound or "max_val" in bound:  # hardtanh(x, min_val=-1, max_val=1) by default
            lo = bound.get("min_val", -1.0)
            hi = bound.get("max_val", 1.0)
        if isinstance(lo, (int, float)) and lo == 0 and hi is None and not isinstance(hi, torch.Tensor):
            return "relu", [first]
        return "clamp", [t for t in (first, lo, hi) if isinstance(t, torch.Tensor)]
    if base == "elu":
        scale, in_scale = bound.get("scale", 1), bound.get("input_scale", 1)
        return ("selu" if scale != 1 else "celu" if in_scale != 1 else "elu"), [first]
    if base == "gelu":
        return ("gelu[tanh]" if bound.get("approximate") == "tanh" else "gelu"), [first]
    dims = [bound[k] for k in DIM_ARGS if k in bound]
    label = base
    if dims and first is not None:
        label = f"{base}[{_dims(dims[0], rank)}]"
    elif (
        base
        in (
            "sum",
            "mean",
            "amax",
            "amin",
            "max",
            "min",
            "prod",
            "norm",
            "var",
            "std",
            "logsumexp",
            "argmax",
            "argmin",
            "all",
            "any",
        )
        and first is not None
    ):
        label = f"{base}[*]"
    return label, flat_in


def _dead_code(nodes: list[list[Any]], outputs: list[tuple[int, int]]) -> tuple[list[list[Any]], list[list[int]]]:
    live = set()
    stack = [n for n, _ in outputs]
    while stack:
        n = stack.pop()
        if n in live:
            continue
        live.add(n)
        stack.extend(src for src, _, _ in nodes[n][1])
    order = sorted(live)
    new = {old: i for i, old in enumerate(order)}
    kept = [[nodes[o][0], [[new[s], k, r] for s, k, r in nodes[o][1]], nodes[o][2]] for o in order]
    return kept, [[new[n], k] for n, k in outputs]


def _fold_bias(nodes: list[list[Any]], outputs: list[list[int]]) -> tuple[list[list[Any]], list[list[int]]]:
    """add(mm/conv(x), p) with p a parameter or constant, and the matmul used only there: the add is the
    op's own bias (nn.Linear and Conv with bias=True are the same task as bias=False plus a bias add)."""
    users: dict[int, int] = {}
    for _, ins, _ in nodes:
        for s, _, _ in ins:
            users[s] = users.get(s, 0) + 1
    for n, _ in outputs:
        users[n] = users.get(n, 0) + 1
    alias: dict[int, int] = {}
    for i, (label, ins, _) in enumerate(nodes):
        if label != "add" or len(ins) != 2:
            continue
        for a, b in ((ins[0], ins[1]), (ins[1], ins[0])):
            ha = nodes[a[0]][0]
            if (
                (ha == "matmul" or ha.startswith("conv"))
                and a[1] == 0
                and users.get(a[0]) == 1
                and nodes[b[0]][0] in ("param", "const")
            ):
                alias[i] = a[0]
                break
    if not alias:
        return nodes, outputs

    def res(n: int) -> int:
        while n in alias:
            n = alias[n]
        return n

    for node in nodes:
        node[1] = [[res(s), k, r] for s, k, r in node[1]]
    outputs = [[res(n), k] for n, k in outputs]
    return _dead_code(nodes, [(n, k) for n, k in outputs])


def trace_source(code: str, filename: str = "<task>") -> dict[str, Any]:
    """Trace a task's forward on the meta device (see the module docstring). Raises TraceError."""
    import torch
    from torch.utils._pytree import tree_flatten

    mod = types.ModuleType("traced_task")
    mod.__file__ = filename
    try:
        exec(compile(code, filename, "exec"), mod.__dict__)  # noqa: S102 - the sandboxed child's job
        torch.manual_seed(0)
        with torch.device("meta"):
            init = list(mod.get_init_inputs())
            inputs = list(mod.get_inputs())
            try:
                model = mod.Model(*init)
            except RuntimeError as e:
                if "meta" not in str(e):
                    raise
                model = None  # its constructor needs values (`.item()`): built on the CPU below
        if model is None:
            model = mod.Model(*[x.to("cpu") if isinstance(x, torch.Tensor) else x for x in init])
        if isinstance(model, torch.nn.Module):
            model = model.to("meta")
        inputs = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs]
    except Exception as e:  # noqa: BLE001 - whatever the task raises is a verdict
        raise TraceError(f"building the task on the meta device: {type(e).__name__}: {_first(e)}") from None
    g = _Graph()
    for x in tree_flatten(inputs)[0]:
        if isinstance(x, torch.Tensor):
            g.source(x, "in")
    if isinstance(model, torch.nn.Module):
        for t in list(model.parameters()) + list(model.buffers()):
            if id(t) not in g.value:
                g.source(t, "param")
    functions, dispatch = _modes(g)
    try:
        with torch.no_grad(), functions, dispatch:
            out = model(*inputs)
    except TraceError:
        raise
    except Exception as e:  # noqa: BLE001
        raise TraceError(f"forward on the meta device: {type(e).__name__}: {_first(e)}") from None
    outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
    if not outs:
        raise TraceError("forward returned no tensor")
    nodes, outputs = _dead_code(g.nodes, [g.ref(o) for o in outs])
    nodes, outputs = _fold_bias(nodes, outputs)
    return {"version": GRAPH_VERSION, "nodes": nodes, "outputs": outputs}


def _first(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return (lines[0] if lines else "")[:300]
