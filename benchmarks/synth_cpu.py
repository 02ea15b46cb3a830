"""Wall times of task synthesis's CPU stages: crawl, compose 10,000 candidates, decontaminate them.

    PYTHONPATH=src python benchmarks/synth_cpu.py [--against KERNELBENCH_DIR] [-n 10000]

Crawl: every torch op (and transformers block when installed) probed on the CPU.
Compose: N deterministic candidates (paper mix). Decontaminate: dedup by
normalised source, then `decontam.Decontaminator`: every reference traced into
its op graph (sandboxed children; timed cold, into a fresh cache, then read
back from it), every candidate traced, graph containment against every
reference, and the exact maximum normalised AST similarity (branch and bound
over a vectorised bound). References: `--against` (a KernelBench checkout: levels 1-3, 250
tasks), else a bundled KernelBench-style set (examples/*/task.py,
tests/redteam/tasks, tests/fixtures/weak_tasks; written for this project)
padded to 250 with stand-ins composed under another planner seed and restyled
the way KernelBench writes tasks (docstrings, annotations, one returned
expression), so the search does the work of a KernelBench-sized reference set.
Its similarity figures then describe these stand-ins, not KernelBench. Prints figures; it
asserts nothing (a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.synth import records  # noqa: E402
from cuda_agent.synth.compose import DeterministicComposer, Planner, run_compose  # noqa: E402
from cuda_agent.synth.crawl import crawl, torch_ops  # noqa: E402
from cuda_agent.synth.crawl_hf import hf_targets  # noqa: E402
from cuda_agent.synth.decontam import Decontaminator, normalized_key  # noqa: E402
from cuda_agent.synth.records import Candidate, Seed  # noqa: E402


def kernelbench_style(code: str) -> str:
    """A composed task restyled the way KernelBench writes its tasks, so stand-ins are not structural
    twins of the candidates: docstrings, annotations, super(Model, self), and the forward's chain of
    assignments folded into one returned expression."""
    tree = ast.parse(code)
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    model.body.insert(0, ast.Expr(ast.Constant("Stand-in reference task.")))
    for fn in (n for n in model.body if isinstance(n, ast.FunctionDef)):
        fn.body.insert(0, ast.Expr(ast.Constant(f"{fn.name} of the stand-in.")))
        if fn.name == "forward":
            fn.args.args[1].annotation = ast.Attribute(ast.Name("torch"), "Tensor")
            fn.returns = ast.Attribute(ast.Name("torch"), "Tensor")
            expr: ast.expr = ast.Name("x")
            for st in fn.body:
                if isinstance(st, ast.Assign):
                    expr = _substitute(st.value, expr)
            fn.body = [fn.body[0], ast.Return(expr)]
        for st in ast.walk(fn):
            if isinstance(st, ast.Call) and isinstance(st.func, ast.Attribute) and st.func.attr == "__init__":
                st.func.value.args = [ast.Name("Model"), ast.Name("self")]
    return ast.unparse(ast.fix_missing_locations(tree))


def _substitute(node: ast.expr, x: ast.expr) -> ast.expr:
    class Sub(ast.NodeTransformer):
        def visit_Name(self, n: ast.Name) -> ast.expr:
            return x if n.id == "x" else n

    return Sub().visit(node)


def bundled_refs() -> list[tuple[str, str]]:
    files = sorted(ROOT.glob("examples/*/task.py")) + sorted((ROOT / "tests/redteam/tasks").glob("*.py"))
    files += sorted((ROOT / "tests/fixtures/weak_tasks").glob("*.py"))
    return [(f"{p.parent.name}/{p.stem}", p.read_text()) for p in files]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", help="a KernelBench checkout (levels 1-3) or any suite")
    ap.add_argument("-n", type=int, default=10_000)
    ap.add_argument("--work", type=Path, help="keep the files here (default: a temp dir)")
    ap.add_argument("--workers", type=int, default=2, help="tracing children at once")
    ap.add_argument("--skip-crawl", action="store_true", help="reuse WORK/seeds.jsonl and WORK/candidates.jsonl")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="synth-cpu-"))
    work.mkdir(parents=True, exist_ok=True)
    figures: list[tuple[str, str]] = []

    t = time.perf_counter()
    if a.skip_crawl:
        seeds = records.read(work / "seeds.jsonl", Seed)
    else:
        targets = [(x, "torch") for x in torch_ops()] + [(x, "transformers") for x in hf_targets()]
        seeds = crawl(work / "seeds.jsonl", targets)
    crawl_s = time.perf_counter() - t
    torch_ok = sum(s.runs for s in seeds if s.source == "torch")
    hf_ok = sum(s.runs for s in seeds if s.source == "transformers")
    figures.append(
        (
            "crawl",
            f"{crawl_s:.1f} s: {len(seeds)} ops probed, {torch_ok} torch and {hf_ok} "
            f"transformers seeds run, {sum(s.composable for s in seeds)} composable",
        )
    )

    t = time.perf_counter()
    ok, bad = run_compose(DeterministicComposer(Planner(seeds, seed=0)), a.n, work / "candidates.jsonl")
    compose_s = time.perf_counter() - t
    figures.append((f"compose {a.n}", f"{compose_s:.1f} s ({ok} candidates, {bad} attempts rejected)"))

    if a.against:
        from cuda_agent.task.suites import load_suite

        refs = [(i.task_id, i.task.source) for i in load_suite(a.against)]
        ref_note = f"{len(refs)} tasks of {a.against}"
    else:
        refs = bundled_refs()
        own = len(refs)
        stand_in = DeterministicComposer(Planner(seeds, seed=10_007))
        i = 0
        while len(refs) < 250:
            c = stand_in.compose(i)
            i += 1
            if isinstance(c, Candidate):
                refs.append((f"stand-in/{c.id}", kernelbench_style(c.code)))
        ref_note = f"{own} bundled KernelBench-style tasks + {len(refs) - own} composed stand-ins (no KernelBench)"
    cands = records.read(work / "candidates.jsonl", Candidate)
    t = time.perf_counter()
    seen: set[str | None] = set()
    unique = []
    for c in cands:
        k = normalized_key(c.code)
        if k not in seen:
            seen.add(k)
            unique.append(c)
    dedup_s = time.perf_counter() - t
    cache = work / "opgraph-cache"  # fresh: the first build traces every reference, the second reads the cache
    index = Decontaminator.build(refs, workers=a.workers, cache=cache)
    cold = dict(index.seconds)
    t = time.perf_counter()
    index = Decontaminator.build(refs, workers=a.workers, cache=cache)
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    decisions = index.check([c.code for c in unique])
    check_s = time.perf_counter() - t
    sp = index.seconds
    figures.append(
        (
            "references",
            f"{len(refs)} ({ref_note}); traced in {cold['trace_refs']:.1f} s cold, "
            f"index built in {build_s:.1f} s from the cache ({int(sp['refs_cached'])} cached); "
            f"{len(index.untraced)} without an op graph",
        )
    )
    traced = sum(d.semantic is not None for d in decisions)
    figures.append(
        (
            "decontaminate",
            f"{dedup_s + check_s:.1f} s for {len(unique)} unique of {len(cands)} (dedup "
            f"{dedup_s:.1f} s; trace {sp['trace']:.1f} s with {a.workers} sandboxed "
            f"children, {traced} traced; graph match {sp['semantic']:.1f} s; AST similarity "
            f"{sp['syntactic']:.1f} s)",
        )
    )
    sims = [d.syntactic for d in decisions]
    dice = [d.semantic for d in decisions if d.semantic is not None]
    by = {m: sum(d.copy and d.measure == m for d in decisions) for m in ("semantic", "syntactic")}
    figures.append(
        ("removed", f"{by['semantic']} by graph containment, {by['syntactic']} by AST similarity (of {len(decisions)})")
    )
    figures.append(
        (
            "graph Dice",
            f"max {max(dice, default=0):.3f}, median {statistics.median(dice or [0]):.3f} to the nearest reference",
        )
    )
    figures.append(
        (
            "AST similarity",
            f"max {max(sims):.3f}, median {statistics.median(sims):.3f}, share > 0.5 "
            f"{100 * sum(s > 0.5 for s in sims) / len(sims):.1f} % (normalised)",
        )
    )
    sim_s = check_s
    total = crawl_s + compose_s + dedup_s + sim_s
    figures.append(("total", f"{total:.1f} s"))
    width = max(len(k) for k, _ in figures)
    for k, v in figures:
        print(f"{k:<{width}}  {v}")
    print(f"files: {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
