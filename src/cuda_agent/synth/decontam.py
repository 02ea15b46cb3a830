"""Deduplication by normalised source, and decontamination against a reference suite (KernelBench).

Contract:
- `normalized_key(code)` is a digest of the task's syntax tree with docstrings
  (every bare string statement) removed and every name the code binds (arguments, assigned variables,
  `self.<attr>` it sets) renamed in order of first appearance: two candidates
  that differ only in names, comments, formatting or docstrings share a key.
  None for code that does not parse.
- `RefIndex.build(refs)` parses the `Model` class of each reference task once
  and keeps the bound features (`astsim.features`) as one dense matrix.
  `RefIndex.nearest(sources)` returns, per candidate, the reference with the
  highest exact `astsim.similarity` of the Model classes, and how many exact
  comparisons it took: the bounds of all pairs come from one vectorised L1
  distance (torch.cdist), and the exact measure runs on references in order of
  decreasing bound only until the next bound cannot beat the best so far
  (branch and bound), so the maximum is exact, not sampled.
Not guaranteed: speed when every reference is structurally close to every
candidate (the bound then prunes little); semantic copies written with a
different structure are not found (that is the measure's limit).
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field

from cuda_agent.synth.astsim import Program, features, model_class, similarity


class _Canon(ast.NodeTransformer):
    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.attrs: dict[str, str] = {}

    def _name(self, n: str) -> str:
        return self.names.setdefault(n, f"v{len(self.names)}")

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self._name(node.arg)
        return node

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if isinstance(node.ctx, ast.Store) or node.id in self.names:
            node.id = self._name(node.id)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == self.names.get("self", "self"):
            node.attr = self.attrs.setdefault(node.attr, f"a{len(self.attrs)}")
        return node


def _strip_docstrings(tree: ast.AST) -> None:
    """Drop every bare string statement (docstrings and string "comments": they compute nothing)."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            kept = [b for b in body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
                                            and isinstance(b.value.value, str))]
            node.body = kept or [ast.Pass()]


def normalized_key(code: str) -> str | None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    _strip_docstrings(tree)
    # Function and class names stay: Model / forward / get_inputs are the task format.
    canon = _Canon()
    canon.names.update({n: n for n in ("self", "super", "torch", "nn", "F")})
    tree = canon.visit(tree)
    return hashlib.sha256(ast.dump(tree, annotate_fields=False).encode()).hexdigest()[:20]


@dataclass
class Nearest:
    similarity: float  # -1.0 when the candidate has no Model class to compare
    ref: str
    exact_evals: int


@dataclass
class RefIndex:
    names: list[str]
    programs: list[Program]
    columns: dict[tuple[str, str], int]
    matrix: object  # torch.Tensor [refs, columns], float64
    invalid: list[str] = field(default_factory=list)  # reference tasks without a parsable Model class

    @classmethod
    def build(cls, refs: list[tuple[str, str]]) -> RefIndex:
        import torch

        names, programs, feats, invalid = [], [], [], []
        for name, code in refs:
            tree = model_class(code)
            if tree is None:
                invalid.append(name)
                continue
            p = Program.parse(tree)
            names.append(name)
            programs.append(p)
            feats.append(features(p))
        columns: dict[tuple[str, str], int] = {}
        for f in feats:
            for k in f:
                columns.setdefault(k, len(columns))
        matrix = torch.zeros(len(feats), max(1, len(columns)), dtype=torch.float64)
        for i, f in enumerate(feats):
            for k, v in f.items():
                matrix[i, columns[k]] = v
        return cls(names, programs, columns, matrix, invalid)

    def bounds(self, progs: list[Program | None]):
        """Upper bounds of similarity, [candidates, refs] (0 for a candidate without a Model)."""
        import torch

        x = torch.zeros(len(progs), self.matrix.shape[1], dtype=torch.float64)
        outside = torch.zeros(len(progs), dtype=torch.float64)  # mass in columns no reference has
        for i, p in enumerate(progs):
            if p is None:
                continue
            for k, v in features(p).items():
                j = self.columns.get(k)
                if j is None:
                    outside[i] += v
                else:
                    x[i, j] = v
        ref_mass = self.matrix.sum(1)
        l1 = torch.cdist(x, self.matrix, p=1) + outside[:, None]
        denom = (x.sum(1) + outside)[:, None] + ref_mass[None, :]
        return torch.where(denom > 0, 1 - l1 / denom.clamp_min(1e-12), torch.zeros_like(l1))

    def nearest(self, sources: list[str], chunk: int = 2048) -> list[Nearest]:
        out: list[Nearest] = []
        for s in range(0, len(sources), chunk):
            progs = []
            for code in sources[s: s + chunk]:
                tree = model_class(code)
                progs.append(Program.parse(tree) if tree is not None else None)
            ub = self.bounds(progs)
            order = ub.argsort(dim=1, descending=True).tolist()
            ubl = ub.tolist()
            for i, p in enumerate(progs):
                if p is None or not self.programs:
                    out.append(Nearest(-1.0, "", 0))
                    continue
                best, ref, n = -1.0, "", 0
                for j in order[i]:
                    if ubl[i][j] + 1e-9 < best or ubl[i][j] <= 0:
                        break  # no later reference can beat the best: their bounds are lower
                    sim = similarity(p, self.programs[j])
                    n += 1
                    if sim > best:
                        best, ref = sim, self.names[j]
                out.append(Nearest(max(best, 0.0), ref, n))
        return out
