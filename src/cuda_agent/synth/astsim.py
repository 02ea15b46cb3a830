"""Structural similarity of two Python programs on their syntax trees, and a cheap upper bound.

The paper decontaminated with the "Python AST Similarity" metric of the
`continuous-eval` package. That package does not install cleanly next to this
project (it pins `openai<2`, and pulls nltk, scikit-learn, tiktoken and a
telemetry client), so this module implements the same measure from its
definition:
- The *significant subtrees* of a program are its nodes of kinds Import,
  FunctionDef, If, ClassDef, While, For, comprehension and Return, each with
  everything below it; each kind has a weight (Import 0.3, FunctionDef 1.2,
  If 0.5, others 1).
- Two subtrees *match* top-down: roots of different node types, or with
  different numbers of children, match nothing (0); two leaves of one type
  match 1; otherwise 1 plus the best one-to-one pairing of their children
  (children may be reordered). Only node types count: identifiers, constants
  and attribute names are not children, so renaming changes nothing.
- similarity(A, B) = 2 * sum(match(a, b) * weight) over the best one-to-one
  pairing of A's and B's significant subtrees, divided by the weighted node
  count of all significant subtrees of both (1.0 for identical structure,
  0.0 for nothing in common).
Differences from that package, on purpose: the package returns 0 whenever
either program has fewer than two significant subtrees (a quirk of its code
path); here such programs are compared like any other.

Contract: `Program.parse(source)` builds the compact tree once;
`similarity(a, b)` is exact (memoised per pair of structurally equal
subtrees); `features(p)` is a vector with `upper_bound(fa, fb) >=
similarity(a, b)` always: it counts, per significant-subtree kind and node
type, weighted nodes, and a match can never pair more nodes of a type than both
sides hold. `decontam` vectorises the bound and computes the exact measure only
where the bound could beat the best found so far.
Not guaranteed: semantic similarity; two different computations written with
the same structure score high (that is the measure's intent).
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

WEIGHTS: dict[str, float] = {
    "Import": 0.3,
    "FunctionDef": 1.2,
    "If": 0.5,
    "ClassDef": 1.0,
    "While": 1.0,
    "For": 1.0,
    "comprehension": 1.0,
    "Return": 1.0,
}


@dataclass(frozen=True, eq=False)
class Node:
    kind: str
    children: tuple[Node, ...]
    size: int  # nodes in this subtree
    key: int  # structural key: equal keys, equal (ordered) structure

    def types(self) -> Counter[str]:
        out: Counter[str] = Counter()
        stack = [self]
        while stack:
            n = stack.pop()
            out[n.kind] += 1
            stack.extend(n.children)
        return out


_INTERN: dict[tuple, int] = {}


def _build(node: ast.AST, sig: list[Node], labelled: bool = False) -> Node:
    kids = tuple(_build(c, sig, labelled) for c in ast.iter_child_nodes(node))
    kind = type(node).__name__
    if (
        labelled
        and isinstance(node, ast.Attribute)
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    ):
        kind += "." + node.attr  # torch.relu is not torch.selu; self.<anything> is a name
    key = _INTERN.setdefault((kind, tuple(k.key for k in kids)), len(_INTERN))
    n = Node(kind, kids, 1 + sum(k.size for k in kids), key)
    if kind in WEIGHTS:
        sig.append(n)
    return n


@dataclass(frozen=True, eq=False)
class Program:
    significant: tuple[Node, ...]

    @classmethod
    def parse(cls, source: str | ast.AST, labelled: bool = False) -> Program:
        """`labelled`: attribute nodes outside `self` carry their name (see `normalized_model`)."""
        tree = ast.parse(source) if isinstance(source, str) else source
        sig: list[Node] = []
        _build(tree, sig, labelled)
        return cls(tuple(sig))

    @property
    def total(self) -> float:
        return sum(n.size * WEIGHTS[n.kind] for n in self.significant)


def assignment_max(m: list[list[float]]) -> float:
    """Best total of a one-to-one pairing of rows and columns (Hungarian method, O(n^3)).
    Rectangular matrices are padded with zeros."""
    rows, cols = len(m), len(m[0]) if m else 0
    n = max(rows, cols)
    if n == 0:
        return 0.0
    big = max((v for r in m for v in r), default=0.0)
    # minimise cost = big - value over a square matrix (padding is worth 0)
    cost = [[big - (m[i][j] if i < rows and j < cols else 0.0) for j in range(n)] for i in range(n)]
    inf = float("inf")
    u, v = [0.0] * (n + 1), [0.0] * (n + 1)
    match_col = [0] * (n + 1)  # column j (1-based) -> row (1-based), 0 = free
    for i in range(1, n + 1):
        match_col[0] = i
        j0 = 0
        minv = [inf] * (n + 1)
        used = [False] * (n + 1)
        way = [0] * (n + 1)
        while True:
            used[j0] = True
            i0, delta, j1 = match_col[j0], inf, 0
            for j in range(1, n + 1):
                if not used[j]:
                    cur = cost[i0 - 1][j - 1] - u[i0] - v[j]
                    if cur < minv[j]:
                        minv[j], way[j] = cur, j0
                    if minv[j] < delta:
                        delta, j1 = minv[j], j
            for j in range(n + 1):
                if used[j]:
                    u[match_col[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if match_col[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            match_col[j0] = match_col[j1]
            j0 = j1
    total = 0.0
    for j in range(1, n + 1):
        i = match_col[j]
        if i and i <= rows and j <= cols:
            total += m[i - 1][j - 1]
    return total


_NODES: dict[int, Node] = {}


def match(a: Node, b: Node) -> int:
    _NODES.setdefault(a.key, a)
    _NODES.setdefault(b.key, b)
    return _match_keys(a.key, b.key) if a.key <= b.key else _match_keys(b.key, a.key)


@lru_cache(maxsize=1 << 20)
def _match_keys(ka: int, kb: int) -> int:
    a, b = _NODES[ka], _NODES[kb]
    if a.kind != b.kind or len(a.children) != len(b.children):
        return 0
    if ka == kb:
        return a.size
    if not a.children:
        return 1
    if len(a.children) == 1:
        return 1 + match(a.children[0], b.children[0])
    return 1 + int(assignment_max([[match(x, y) for y in b.children] for x in a.children]))


def similarity(a: Program, b: Program) -> float:
    denom = a.total + b.total
    if denom == 0:
        return 0.0
    got = 0.0
    for kind, w in WEIGHTS.items():  # nodes of different kinds never match: pair each kind on its own
        xs = [n for n in a.significant if n.kind == kind]
        ys = [n for n in b.significant if n.kind == kind]
        if xs and ys:
            got += w * assignment_max([[match(x, y) for y in ys] for x in xs])
    return round(2 * got / denom, 4)


def features(p: Program) -> Counter[tuple[str, str]]:
    """(significant kind, node type) -> weighted node count; see upper_bound."""
    out: Counter[tuple[str, str]] = Counter()
    for n in p.significant:
        w = WEIGHTS[n.kind]
        for t, c in n.types().items():
            out[(n.kind, t)] += w * c
    return out


def upper_bound(fa: Counter[tuple[str, str]], fb: Counter[tuple[str, str]]) -> float:
    denom = sum(fa.values()) + sum(fb.values())
    common = sum(min(v, fb[k]) for k, v in fa.items() if k in fb)
    return 2 * common / denom if denom else 0.0


def model_class(source: str) -> ast.AST | None:
    """The `Model` class of a task as its own module (what decontamination compares), or None."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            return ast.Module(body=[node], type_ignores=[])
    return None


def strip_docstrings(tree: ast.AST) -> None:
    """Drop every bare string statement (docstrings and string "comments": they compute nothing)."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            kept = [
                b
                for b in body
                if not (
                    isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str)
                )
            ]
            node.body = kept or [ast.Pass()]


MAX_INLINED = 400  # nodes: a name used twice per step doubles per step; past this it stays a statement


class _Inline(ast.NodeTransformer):
    def __init__(self, env: dict[str, ast.expr]):
        self.env = env

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.env:
            return self.env[node.id]
        return node


def _size(node: ast.AST) -> int:
    return sum(1 for _ in ast.walk(node))


def _fold(body: list[ast.stmt]) -> list[ast.stmt]:
    """Straight-line assignments to local names folded into their uses; `x += y` as `x = x + y`.
    Bindings still pending at a compound statement are written back before it; unused ones vanish."""
    import copy

    env: dict[str, ast.expr] = {}
    out: list[ast.stmt] = []

    def subst(node: ast.AST) -> ast.AST:
        return _Inline(env).visit(copy.deepcopy(node))

    def flush() -> None:
        out.extend(ast.Assign(targets=[ast.Name(n, ast.Store())], value=v, lineno=0) for n, v in env.items())
        env.clear()

    for st in body:
        if isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name):
            st = ast.Assign(
                targets=[ast.Name(st.target.id, ast.Store())],
                value=ast.BinOp(ast.Name(st.target.id, ast.Load()), st.op, st.value),
                lineno=0,
            )
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            value = subst(st.value)
            if _size(value) <= MAX_INLINED:
                env[st.targets[0].id] = value
                continue
            env.pop(st.targets[0].id, None)
            out.append(ast.Assign(targets=st.targets, value=value, lineno=0))
            continue
        if isinstance(st, (ast.Return, ast.Expr)) or (
            isinstance(st, ast.Assign) and all(isinstance(t, ast.Attribute) for t in st.targets)
        ):
            out.append(subst(st))
            continue
        flush()
        out.append(st)
    return out or [ast.Pass()]


def normalized_model(source: str) -> ast.Module | None:
    """The `Model` class with what does not change the computation taken out: docstrings dropped,
    `super(Model, self).__init__()` as `super().__init__()`, and in every method straight-line
    assignments to locals folded into their uses (`x = f(x); return x` is `return f(x)`; renamed or
    reordered temporaries vanish). Names were never part of the measure; comments never reach the
    tree. None without a parsable Model class."""
    tree = model_class(source)
    if tree is None:
        return None
    strip_docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super":
            node.args = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            node.body = _fold(node.body)
    return tree


def parse_model(source: str) -> Program | None:
    """The syntactic measure's view of a task: its normalised Model class, attribute-labelled."""
    tree = normalized_model(source)
    return Program.parse(tree, labelled=True) if tree is not None else None
