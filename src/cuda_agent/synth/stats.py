"""Statistics of a synthesized task set: op-count mix against the paper, op frequency, times, similarity.

Contract: `compute(rows, rejections)` returns a `Stats` from the rows of a
tasks file (`dataset.read_tasks`): the share per data source next to the
paper's table (`compose.PAPER_MIX`), the most frequent ops, eager-time and
similarity histograms (the paper's figure 7 is the similarity one) with the
maximum similarity and the share above 0.5; with the filter's rejections
(`rejections_path`), how many candidates each decontamination measure removed;
and the kept tasks nearest to the reference suite by graph Dice (then AST
similarity) with their nearest references, so a reader can audit what was kept. `write(stats, out_dir)` writes `stats.md`
and, when matplotlib is installed, `stats.png` (four panels); it returns the
paths written.
Not guaranteed: that rows without times or similarities (a filter run without
references or on the CPU) say anything about a GPU; such values are shown as
they are.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.synth.compose import PAPER_MIX

SIM_BINS = [i / 20 for i in range(21)]
TIME_BINS = [10 ** (e / 4) for e in range(-8, 13)]  # 0.01 ms .. 1000 ms, four bins a decade


@dataclass
class Stats:
    n: int
    mix: dict[str, tuple[int, float, float]]  # source -> (count, share %, paper share %)
    ops: list[tuple[str, int]]
    eager_ms: list[float] = field(default_factory=list)
    similarity: list[float] = field(default_factory=list)
    # decontamination: candidates removed per measure (from the rejections file; None without it), and
    # the kept tasks closest to the reference suite: (id, graph Dice, its reference, AST similarity, its reference)
    removed: dict[str, int] | None = None
    closest: list[tuple[str, float | None, str, float | None, str]] = field(default_factory=list)

    @property
    def sim_max(self) -> float | None:
        return max(self.similarity) if self.similarity else None

    @property
    def sim_share_above_half(self) -> float | None:
        return sum(s > 0.5 for s in self.similarity) / len(self.similarity) if self.similarity else None


def _key(source: str) -> str:
    return source.split("#", 1)[1] if source.startswith("torch#") else source


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def compute(rows: list[dict[str, Any]], rejections: list[dict[str, Any]] | None = None, closest: int = 10) -> Stats:
    n = len(rows)
    counts = Counter(_key(str(r.get("data_source", ""))) for r in rows)
    paper_total = sum(PAPER_MIX.values())
    keys = list(PAPER_MIX) + sorted(k for k in counts if k not in PAPER_MIX)
    mix = {
        k: (counts.get(k, 0), 100 * counts.get(k, 0) / n if n else 0.0, 100 * PAPER_MIX.get(k, 0.0) / paper_total)
        for k in keys
    }
    ops: Counter[str] = Counter()
    for r in rows:
        v = r.get("ops")
        ops.update(json.loads(v) if isinstance(v, str) else (v or []))

    def nums(col: str) -> list[float]:
        return [float(r[col]) for r in rows if isinstance(r.get(col), (int, float)) and math.isfinite(r[col])]

    removed = None
    if rejections is not None:
        removed = {m: 0 for m in ("semantic", "syntactic")}
        for r in rejections:
            if r.get("stage") == "decontam":
                m = str(r.get("measure") or "syntactic")  # records before op graphs: the AST measure
                removed[m] = removed.get(m, 0) + 1
    near = [
        (
            str(r.get("id", "")),
            _num(r.get("semantic_similarity")),
            str(r.get("semantic_ref") or ""),
            _num(r.get("max_similarity")),
            str(r.get("nearest_ref") or ""),
        )
        for r in rows
    ]
    near.sort(key=lambda t: (-(t[1] if t[1] is not None else -1.0), -(t[3] if t[3] is not None else -1.0)))
    return Stats(n, mix, ops.most_common(25), nums("eager_ms"), nums("max_similarity"), removed, near[:closest])


def _hist(values: list[float], bins: list[float]) -> list[int]:
    out = [0] * (len(bins) - 1)
    for v in values:
        for i in range(len(out)):
            if bins[i] <= v < bins[i + 1] or (i == len(out) - 1 and v == bins[-1]):
                out[i] += 1
                break
    return out


def markdown(s: Stats) -> str:
    lines = [
        f"# Synthesized tasks: {s.n}",
        "",
        "## Op-count mix",
        "",
        "| source | tasks | share | paper (Ops-6K) |",
        "|---|---:|---:|---:|",
    ]
    for k, (c, share, paper) in s.mix.items():
        label = "transformers" if k == "transformers" else f"torch#{k}"
        lines.append(f"| {label} | {c} | {share:.2f} % | {paper:.2f} % |")
    lines += ["", "## Most frequent ops", "", "| op | tasks |", "|---|---:|"]
    lines += [f"| {op} | {c} |" for op, c in s.ops]
    lines += ["", "## Eager time (ms)", ""]
    if s.eager_ms:
        ordered = sorted(s.eager_ms)
        lines.append(f"median {ordered[len(ordered) // 2]:.3g} ms, min {ordered[0]:.3g}, max {ordered[-1]:.3g}")
    else:
        lines.append("no times recorded")
    lines += ["", "## AST similarity to the reference suite (max per task)", ""]
    if s.similarity:
        lines.append(f"maximum {s.sim_max:.3f}; share above 0.5: {100 * (s.sim_share_above_half or 0):.1f} %")
        lines += ["", "| similarity | tasks |", "|---|---:|"]
        for i, c in enumerate(_hist(s.similarity, SIM_BINS)):
            lines.append(f"| {SIM_BINS[i]:.2f}-{SIM_BINS[i + 1]:.2f} | {c} |")
    else:
        lines.append("no similarities recorded (filter without --against)")
    lines += ["", "## Decontamination", ""]
    if s.removed is not None:
        lines += ["| measure | candidates removed |", "|---|---:|"]
        lines += [f"| {m} | {c} |" for m, c in s.removed.items()]
    else:
        lines.append("no rejections file beside the tasks: removals unknown")
    if any(c[1] is not None or c[3] is not None for c in s.closest):

        def f(v: float | None) -> str:
            return "-" if v is None else f"{v:.3f}"

        lines += [
            "",
            "Kept tasks closest to the reference suite (graph Dice, then AST similarity):",
            "",
            "| task | graph Dice | nearest by graph | AST similarity | nearest by AST |",
            "|---|---:|---|---:|---|",
        ]
        lines += [f"| {i} | {f(d)} | {dr or '-'} | {f(a)} | {ar or '-'} |" for i, d, dr, a, ar in s.closest]
    return "\n".join(lines) + "\n"


def write(s: Stats, out_dir: Path) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md = out_dir / "stats.md"
    md.write_text(markdown(s))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [md]
    fig, ax = plt.subplots(2, 2, figsize=(12, 8))
    keys = list(s.mix)
    xs = range(len(keys))
    ax[0][0].bar([x - 0.2 for x in xs], [s.mix[k][1] for k in keys], 0.4, label="synthesized")
    ax[0][0].bar([x + 0.2 for x in xs], [s.mix[k][2] for k in keys], 0.4, label="paper (Ops-6K)")
    ax[0][0].set_xticks(list(xs), [k if k == "transformers" else f"{k} ops" for k in keys])
    ax[0][0].set_ylabel("% of tasks")
    ax[0][0].legend()
    ax[0][0].set_title("op-count mix")
    top = s.ops[:15]
    ax[0][1].barh([o for o, _ in top][::-1], [c for _, c in top][::-1])
    ax[0][1].set_title("most frequent ops")
    ax[1][0].hist(s.eager_ms or [0], bins=TIME_BINS)
    ax[1][0].set_xscale("log")
    ax[1][0].set_xlabel("eager time (ms)")
    ax[1][0].set_title("eager time")
    ax[1][1].hist(s.similarity or [0], bins=SIM_BINS)
    ax[1][1].set_xlabel("max AST similarity to the reference suite")
    ax[1][1].set_title("similarity (cf. the paper's figure 7)")
    fig.tight_layout()
    png = out_dir / "stats.png"
    fig.savefig(png, dpi=90)
    plt.close(fig)
    return [md, png]


def rejections_path(tasks: Path) -> Path | None:
    """The filter's rejections file for a tasks file (beside `tasks.parquet`, also for its .jsonl twin)."""
    tasks = Path(tasks)
    for p in (Path(str(tasks) + ".rejections.jsonl"), Path(str(tasks.with_suffix(".parquet")) + ".rejections.jsonl")):
        if p.is_file():
            return p
    return None
