"""Precision and recall of the decontamination measures on our calibration corpus.

    PYTHONPATH=src python benchmarks/decontam_calibrate.py --against KERNELBENCH_DIR
    PYTHONPATH=src python benchmarks/decontam_calibrate.py --against KERNELBENCH_DIR --write-graphs \\
        tests/fixtures/decontam/kernelbench_graphs.jsonl

The corpus (tests/fixtures/decontam/corpus, written for this project) holds
restatements of KernelBench tasks (first line `# corpus: copy <task id> | kinds`)
and new compositions, near neighbours among them (`# corpus: new | ...`). Every
corpus task and every reference is traced in the sandboxed tracing children
(references cached). A measure flags a corpus task when it calls it a copy of
any reference (KernelBench repeats some tasks under other names, so which one
does not matter). Prints one Markdown table row per measure and
setting (precision = flagged restatements / flagged, recall = flagged
restatements / restatements) and the corpus tasks each one gets wrong.
`--write-graphs` also writes the references' op graphs (labels and edges only:
no KernelBench code) for the tests that run without a checkout.
Prints figures; asserts nothing (tests/test_decontam.py holds the chosen setting to them).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.synth.astsim import Program, model_class, parse_model, similarity  # noqa: E402
from cuda_agent.synth.semantic import ALLOWANCE, SemIndex  # noqa: E402
from cuda_agent.synth.semantic import similarity as graph_dice  # noqa: E402
from cuda_agent.synth.tracing import reference_cache, trace_many  # noqa: E402

HEAD = re.compile(r"# corpus: (?:copy (\S+)|new)")


def corpus(folder: Path) -> list[tuple[str, str, str | None]]:
    out = []
    for p in sorted(folder.glob("*.py")):
        code = p.read_text()
        m = HEAD.match(code)
        if m is None:
            raise SystemExit(f"{p}: the first line must be '# corpus: copy <task id> | ...' or '# corpus: new | ...'")
        out.append((p.stem, code, m.group(1)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", required=True, help="a KernelBench checkout (levels 1-3)")
    ap.add_argument("--corpus", type=Path, default=ROOT / "tests/fixtures/decontam/corpus")
    ap.add_argument("--write-graphs", type=Path, help="write the references' op graphs here (JSON lines)")
    a = ap.parse_args()
    from cuda_agent.task.suites import load_suite

    refs = [(i.task_id, i.task.source) for i in load_suite(a.against)]
    t = time.perf_counter()
    ref_traced = trace_many([c for _, c in refs], names=[n for n, _ in refs], cache=reference_cache())
    ref_s = time.perf_counter() - t
    graphs = {n: tr.graph for (n, _), tr in zip(refs, ref_traced, strict=True) if tr.graph is not None}
    if a.write_graphs:
        lines = []
        for (n, _), tr in zip(refs, ref_traced, strict=True):
            if tr.graph is None:
                lines.append({"id": n, "error": tr.error})
            else:
                g = tr.graph
                lines.append(
                    {
                        "id": n,
                        "graph": {
                            "nodes": [[lab, [list(e) for e in ins]] for lab, ins in zip(g.labels, g.ins, strict=True)],
                            "outputs": [list(o) for o in g.outputs],
                        },
                    }
                )
        a.write_graphs.write_text("".join(json.dumps(x, separators=(",", ":")) + "\n" for x in lines))
    items = corpus(a.corpus)
    traced = trace_many([c for _, c, _ in items], names=[n for n, _, _ in items])
    bad = [n for (n, _, _), tr in zip(items, traced, strict=True) if tr.graph is None]
    if bad:
        raise SystemExit(f"corpus tasks that do not trace: {bad}")
    cgraphs = [tr.graph for tr in traced]
    raw_refs = [(n, Program.parse(model_class(c))) for n, c in refs if model_class(c) is not None]
    norm_refs = [(n, p) for n, p in ((n, parse_model(c)) for n, c in refs) if p is not None]

    def table_row(name: str, flagged: list[str | None]) -> str:
        """flagged[i]: the reference the measure names for corpus task i, or None."""
        tp = fp = 0
        wrong = []
        for (stem, _, want), got in zip(items, flagged, strict=True):
            if got is None:
                if want:
                    wrong.append(f"missed {stem}")
                continue
            if want:
                tp += 1  # a copy, whichever reference it names (KernelBench repeats tasks)
            else:
                fp += 1
                wrong.append(f"lost {stem} (to {got})")
        pos = sum(1 for *_, w in items if w)
        prec = tp / (tp + fp) if tp + fp else 1.0
        row = f"| {name} | {tp}/{pos} | {fp}/{len(items) - pos} | {prec:.3f} | {tp / pos:.3f} |"
        return row + ("  <!-- " + "; ".join(wrong[:6]) + (" ..." if len(wrong) > 6 else "") + " -->" if wrong else "")

    def ast_flags(ref_progs: list[tuple[str, Program]], parse, threshold: float = 0.9) -> list[str | None]:
        out = []
        for _, code, _ in items:
            p = parse(code)  # None: no `class Model` (e.g. `Model = OtherName`): the AST measures see nothing
            best = max(((similarity(p, q), n) for n, q in ref_progs), default=(0.0, "")) if p else (0.0, "")
            out.append(best[1] if best[0] > threshold else None)
        return out

    rows = [
        "| measure | restatements caught | new compositions lost | precision | recall |",
        "|---|---:|---:|---:|---:|",
    ]
    rows.append(
        table_row(
            "AST similarity > 0.9 (the paper's, as before)",
            ast_flags(raw_refs, lambda c: (lambda t: Program.parse(t) if t else None)(model_class(c))),
        )
    )
    rows.append(table_row("normalised AST similarity > 0.9", ast_flags(norm_refs, parse_model)))
    for t in (0.8, 0.9, 1.0):
        flags = []
        for g in cgraphs:
            best = max(((graph_dice(g, r), n) for n, r in graphs.items()), default=(0.0, ""))
            flags.append(best[1] if best[0] >= t else None)
        rows.append(table_row(f"graph Dice >= {t}", flags))
    for alpha in (0.0, ALLOWANCE, 0.25, 0.5):
        index = SemIndex.build(list(graphs.items()), alpha=alpha)
        got = index.check(cgraphs)
        mark = " (chosen)" if alpha == ALLOWANCE else ""
        rows.append(
            table_row(
                f"graph containment, {alpha:g} added ops per reference op{mark}", [m.copy_of or None for m in got]
            )
        )
    pos = sum(1 for *_, w in items if w)
    print(
        f"corpus: {len(items)} tasks ({pos} restatements of {len({w for *_, w in items if w})} KernelBench "
        f"tasks, {len(items) - pos} new compositions); references: {len(refs)} ({len(graphs)} traced, "
        f"{ref_s:.1f} s)\n"
    )
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
