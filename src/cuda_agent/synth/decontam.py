"""Deduplication by normalised source, and decontamination against a reference suite (KernelBench).

Contract:
- `normalized_key(code)` is a digest of the task's syntax tree with docstrings
  (every bare string statement) removed and every name the code binds (arguments, assigned variables,
  `self.<attr>` it sets) renamed in order of first appearance: two candidates
  that differ only in names, comments, formatting or docstrings share a key.
  None for code that does not parse.
- `Decontaminator.build(refs)` traces every reference (sandboxed children,
  `tracing.trace_many`, cached on disk by content) into its op graph
  (`semantic.SemIndex`) and parses its normalised Model class
  (`astsim.parse_model`, `RefIndex`). `check(codes)` traces the candidates and
  decides, per candidate, in this order:
  1. *semantic*: its op graph contains a reference's whole graph with at most
     trivial additions (`semantic.embeds`): a copy of that reference;
  2. *syntactic*, only where a graph is missing: a candidate that cannot be
     traced is compared with every reference, a traced one with the references
     that could not be traced; normalised AST similarity above `threshold` is a
     copy.
  Every `Decision` also carries the nearest reference by both measures (the
  semantic Dice of the graphs, the exact maximum AST similarity), for audit.
- `RefIndex.build(refs)` parses each reference's normalised Model class once
  and keeps the bound features (`astsim.features`) as one dense matrix;
  `RefIndex.nearest(sources)` returns, per candidate, the reference with the
  highest exact `astsim.similarity`, and how many exact comparisons it took:
  the bounds of all pairs come from one vectorised L1 distance (torch.cdist),
  and the exact measure runs on references in order of decreasing bound only
  until the next bound cannot beat the best so far (branch and bound).
Not guaranteed: that a copy rewritten algebraically (other ATen ops) is found
(see `semantic`); the syntactic fallback has the AST measure's limits (a
different structure for one computation is not found).
"""

from __future__ import annotations

import ast
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent.synth.astsim import Program, features, parse_model, similarity, strip_docstrings
from cuda_agent.synth.semantic import SemIndex
from cuda_agent.synth.tracing import Traced, reference_cache, trace_many


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


def normalized_key(code: str) -> str | None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    strip_docstrings(tree)
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
            p = parse_model(code)
            if p is None:
                invalid.append(name)
                continue
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
            progs = [parse_model(code) for code in sources[s : s + chunk]]
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


MEASURES = ("semantic", "syntactic")


@dataclass
class Decision:
    copy: bool
    measure: str  # what decided a copy: "semantic" | "syntactic"; "" when kept
    ref: str  # the reference it copies ("" when kept)
    reason: str
    semantic: float | None  # Dice of the op graphs to `semantic_ref`; None without a graph
    semantic_ref: str
    syntactic: float  # the exact maximum normalised AST similarity (-1: no Model class)
    syntactic_ref: str
    trace_error: str = ""  # why the candidate has no op graph

    def data(self) -> dict[str, object]:
        return {
            "measure": self.measure,
            "ref": self.ref,
            "semantic": self.semantic,
            "semantic_ref": self.semantic_ref,
            "similarity": self.syntactic,
            "syntactic_ref": self.syntactic_ref,
            "trace_error": self.trace_error,
        }


@dataclass
class Decontaminator:
    threshold: float
    sem: SemIndex
    syn: RefIndex
    syn_untraced: RefIndex  # the references without an op graph (the fallback of traced candidates)
    untraced: list[tuple[str, str]]  # (reference, why it has no graph)
    workers: int = 2
    sandbox: str = "auto"
    summaries: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # where build and the last check spent their time

    @classmethod
    def build(
        cls,
        refs: list[tuple[str, str]],
        *,
        threshold: float = 0.9,
        workers: int = 2,
        sandbox: str = "auto",
        cache: Path | None | bool = True,
    ) -> Decontaminator:
        where = reference_cache() if cache is True else (cache or None)
        t0 = time.perf_counter()
        traced = trace_many(
            [c for _, c in refs], names=[n for n, _ in refs], workers=workers, sandbox=sandbox, cache=where
        )
        graphs = [(n, t.graph) for (n, _), t in zip(refs, traced, strict=True) if t.graph is not None]
        untraced = [(n, t.error) for (n, _), t in zip(refs, traced, strict=True) if t.graph is None]
        missing = {n for n, _ in untraced}
        t1 = time.perf_counter()
        out = cls(
            threshold,
            SemIndex.build(graphs),
            RefIndex.build(refs),
            RefIndex.build([(n, c) for n, c in refs if n in missing]),
            untraced,
            workers,
            sandbox,
            {n: g.summary() for n, g in graphs},
        )
        out.seconds = {
            "trace_refs": t1 - t0,
            "index_refs": time.perf_counter() - t1,
            "refs_cached": float(sum(t.cached for t in traced)),
        }
        return out

    def check(self, codes: list[str], traced: list[Traced] | None = None) -> list[Decision]:
        t0 = time.perf_counter()
        if traced is None:
            traced = trace_many(codes, workers=self.workers, sandbox=self.sandbox)
        graphs = [t.graph for t in traced]
        have = [i for i, g in enumerate(graphs) if g is not None]
        t1 = time.perf_counter()
        sem = dict(zip(have, self.sem.check([graphs[i] for i in have]), strict=True))
        t2 = time.perf_counter()
        syn = self.syn.nearest(codes)
        fallback = (
            dict(zip(have, self.syn_untraced.nearest([codes[i] for i in have]), strict=True))
            if self.syn_untraced.programs
            else {}
        )
        self.seconds.update({"trace": t1 - t0, "semantic": t2 - t1, "syntactic": time.perf_counter() - t2})
        out = []
        for i, near in enumerate(syn):
            s = sem.get(i)
            d = Decision(
                False,
                "",
                "",
                "",
                s.similarity if s else None,
                s.nearest if s else "",
                near.similarity,
                near.ref,
                traced[i].error,
            )
            if s is not None and s.copy_of:
                d.copy, d.measure, d.ref = True, "semantic", s.copy_of
                d.reason = (
                    f"semantic copy of {s.copy_of}: its op graph contains the reference's "
                    f"({self.summaries.get(s.copy_of, '')})"
                )
            else:
                alt = fallback.get(i) if s is not None else near
                if alt is not None and alt.similarity > self.threshold:
                    why = "the reference has no op graph" if s is not None else f"no op graph: {traced[i].error}"
                    d.copy, d.measure, d.ref = True, "syntactic", alt.ref
                    d.reason = f"AST similarity {alt.similarity:.3f} > {self.threshold} to {alt.ref} ({why})"[:500]
            out.append(d)
        return out
