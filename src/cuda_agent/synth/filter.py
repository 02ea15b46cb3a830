"""The filter: candidates.jsonl -> tasks (parquet + jsonl), every rejection kept with its stage and reason.

Contract of `run_filter(candidates, out, config, pool)`:
- Stages, in order (`STAGES`): `parse` (a KernelBench task per the task loader),
  `dedup` (normalised source, first one kept), `decontam` (not a copy of a
  task of `config.against`: its op graph does not contain a reference's, and,
  where a graph is missing, its normalised AST similarity does not exceed
  `config.threshold`; `decontam.Decontaminator`; skipped without references),
  then the device stages of
  `device_job` (runs, timing, deterministic, anti_hack, compile), one
  `TaskCheckJob` per candidate through `pool.submit_call` (local GPUs, the
  CPU, or Ray). The CPU stages run first because they are cheap.
- Resumable through `<out>.work/`: `cpu.jsonl` holds each candidate's CPU
  verdicts, `device.jsonl` one `DeviceReport` per candidate, appended as each
  lands. A rerun skips every candidate already there, so no candidate is
  evaluated twice to completion (one in flight when the run was killed is run
  again). A harness failure (worker died) is not recorded: the next run retries.
- Outputs: `out` (+ `<out>.jsonl` beside a parquet; `dataset.write_tasks`), with
  the final re-shaped code, and `<out>.rejections.jsonl` (id, stage, reason).
  `FilterSummary.counts` is the yield table: per stage, candidates that
  entered it and passed it.
Not guaranteed: that a kept task is a good benchmark beyond these checks; times
depend on the device that ran them (recorded per row).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from concurrent.futures import Future, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.synth import records
from cuda_agent.synth.dataset import write_tasks
from cuda_agent.synth.decontam import Decontaminator, normalized_key
from cuda_agent.synth.device_job import DEVICE_STAGES, DeviceReport, FilterSettings, TaskCheckJob
from cuda_agent.synth.records import PIPELINE_VERSION, Candidate, Verdict
from cuda_agent.task.taskfile import Task, TaskError

CPU_STAGES = ("parse", "dedup", "decontam")
STAGES = CPU_STAGES + DEVICE_STAGES


@dataclass
class FilterConfig:
    settings: FilterSettings = field(default_factory=FilterSettings)
    against: list[tuple[str, str]] | None = None  # reference tasks (name, code), e.g. KernelBench L1-L3
    threshold: float = 0.9  # the syntactic measure's, where an op graph is missing (see decontam)
    trace_workers: int = 2  # tracing children at once (decontamination)
    limit: int | None = None  # only the first N candidates
    deadline_s: float | None = None  # stop waiting for device jobs after this long; the rest stay to do


@dataclass
class FilterSummary:
    candidates: int
    kept: int
    counts: dict[str, list[int]]  # stage -> [entered, passed]
    evaluated_now: int = 0  # device jobs run by this invocation
    harness_errors: list[tuple[str, str]] = field(default_factory=list)
    outputs: list[Path] = field(default_factory=list)
    device_s: float = 0.0  # wall time of this invocation's device part
    timed_out: bool = False  # the deadline cut the device part short
    wall_s: float = 0.0
    # decontamination: candidates removed by each measure, and candidates without an op graph
    decontam: dict[str, int] = field(default_factory=dict)


def work_dir(out: Path) -> Path:
    return Path(str(out) + ".work")


def _verdicts(d: dict[str, Any]) -> list[Verdict]:
    return [records.from_json(Verdict, v) for v in d.get("verdicts", [])]


def cpu_stages(cands: list[Candidate], done: dict[str, dict[str, Any]], cfg: FilterConfig) -> list[dict[str, Any]]:
    """CPU verdicts of the candidates not in `done` (dedup keys of `done` count as seen)."""
    seen = {
        d["key"]
        for d in done.values()
        if d.get("key") and any(v["stage"] == "dedup" and v["passed"] for v in d["verdicts"])
    }
    new, need_sim = [], []
    for c in cands:
        if c.id in done:
            continue
        rec: dict[str, Any] = {"id": c.id, "verdicts": [], "key": None, "similarity": None, "ref": ""}
        new.append(rec)
        try:
            task = Task.from_source(c.code, name=c.id)
        except TaskError as e:
            rec["verdicts"].append(Verdict(c.id, "parse", False, str(e)))
            continue
        rec["verdicts"].append(
            Verdict(c.id, "parse", True, data={"atol": task.atol, "rtol": task.rtol, "precision": task.precision})
        )
        key = normalized_key(c.code)
        rec["key"] = key
        if key in seen:
            rec["verdicts"].append(Verdict(c.id, "dedup", False, "same normalised source as an earlier candidate"))
            continue
        seen.add(key)
        rec["verdicts"].append(Verdict(c.id, "dedup", True))
        need_sim.append((rec, c))
    if cfg.against and need_sim:
        index = Decontaminator.build(
            cfg.against, threshold=cfg.threshold, workers=cfg.trace_workers, sandbox=cfg.settings.sandbox
        )
        for (rec, _), d in zip(need_sim, index.check([c.code for _, c in need_sim]), strict=True):
            rec["similarity"], rec["ref"] = d.syntactic, d.syntactic_ref
            rec["semantic"], rec["semantic_ref"] = d.semantic, d.semantic_ref
            rec["verdicts"].append(Verdict(rec["id"], "decontam", not d.copy, d.reason, d.data()))
    else:
        for rec, _ in need_sim:
            rec["verdicts"].append(Verdict(rec["id"], "decontam", True, "no reference suite given"))
    for rec in new:
        rec["verdicts"] = [dataclasses.asdict(v) for v in rec["verdicts"]]
    return new


def tally(ids: list[str], cpu: dict[str, dict[str, Any]], dev: dict[str, dict[str, Any]]) -> dict[str, list[int]]:
    counts = {s: [0, 0] for s in STAGES}
    for cid in ids:
        for v in cpu.get(cid, {}).get("verdicts", []) + dev.get(cid, {}).get("verdicts", []):
            counts[v["stage"]][0] += 1
            counts[v["stage"]][1] += bool(v["passed"])
    return counts


def _cpu_passed(rec: dict[str, Any] | None) -> bool:
    return bool(rec) and len(rec["verdicts"]) == len(CPU_STAGES) and all(v["passed"] for v in rec["verdicts"])


def run_filter(
    candidates: Path,
    out: Path,
    cfg: FilterConfig,
    pool: Any,
    progress: Callable[[dict[str, list[int]], int, int], None] | None = None,
) -> FilterSummary:
    t0 = time.monotonic()
    work = work_dir(out)
    work.mkdir(parents=True, exist_ok=True)
    cands = records.read(Path(candidates), Candidate)[: cfg.limit]
    ids = [c.id for c in cands]
    cpu_file, dev_file = work / "cpu.jsonl", work / "device.jsonl"
    cpu = {d["id"]: d for d in records.read_dicts(cpu_file)}
    for rec in cpu_stages(cands, cpu, cfg):
        records.append(cpu_file, rec)
        cpu[rec["id"]] = rec
    dev = {d["id"]: d for d in records.read_dicts(dev_file)}
    decontam = {"removed by graph containment": 0, "removed by AST similarity": 0, "without an op graph": 0}
    for cid in ids:
        for v in cpu.get(cid, {}).get("verdicts", []):
            if v["stage"] == "decontam" and v.get("data"):
                m = v["data"].get("measure")
                if not v["passed"]:
                    decontam["removed by graph containment" if m == "semantic" else "removed by AST similarity"] += 1
                decontam["without an op graph"] += bool(v["data"].get("trace_error"))
    todo = [c for c in cands if _cpu_passed(cpu.get(c.id)) and c.id not in dev]
    summary = FilterSummary(len(cands), 0, tally(ids, cpu, dev))
    summary.decontam = decontam if cfg.against else {}
    n_dev = sum(1 for c in cands if _cpu_passed(cpu.get(c.id)))
    if progress is not None:
        progress(summary.counts, n_dev - len(todo), n_dev)
    t_dev = time.monotonic()
    futures: dict[Future[Any], Candidate] = {}
    for c in todo:
        tol = cpu[c.id]["verdicts"][0]["data"]
        futures[
            pool.submit_call(TaskCheckJob(c.id, c.code, cfg.settings, tol["atol"], tol["rtol"], tol["precision"]))
        ] = c
    try:
        for f in as_completed(futures, timeout=cfg.deadline_s):
            _landed(f, futures[f], summary, dev, dev_file, ids, cpu)
            if progress is not None:
                progress(summary.counts, n_dev - len(todo) + summary.evaluated_now, n_dev)
    except TimeoutError:
        for f in futures:
            f.cancel()  # not recorded: a rerun does them
        summary.timed_out = True
    summary.device_s = time.monotonic() - t_dev
    rows, rejections = _assemble(cands, cpu, dev)
    summary.kept = len(rows)
    summary.counts = tally(ids, cpu, dev)
    summary.outputs = write_tasks(rows, out)
    rej = Path(str(out) + ".rejections.jsonl")
    rej.write_text("".join(json.dumps(r) + "\n" for r in rejections))
    summary.outputs.append(rej)
    summary.wall_s = time.monotonic() - t0
    return summary


def _landed(
    f: Future[Any],
    c: Candidate,
    summary: FilterSummary,
    dev: dict[str, dict[str, Any]],
    dev_file: Path,
    ids: list[str],
    cpu: dict[str, dict[str, Any]],
) -> None:
    try:
        report: DeviceReport = f.result()
    except Exception as e:  # noqa: BLE001 - a harness failure: not recorded, the next run retries it
        summary.harness_errors.append((c.id, f"{type(e).__name__}: {e}"[:300]))
        return
    d = dataclasses.asdict(report)
    records.append(dev_file, d)
    dev[c.id] = d
    summary.evaluated_now += 1
    summary.counts = tally(ids, cpu, dev)


def _assemble(
    cands: list[Candidate], cpu: dict[str, dict[str, Any]], dev: dict[str, dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows, rejections = [], []
    for c in cands:
        vs = _verdicts(cpu.get(c.id, {})) + _verdicts(dev.get(c.id, {}))
        bad = next((v for v in vs if not v.passed), None)
        if bad is not None:
            rej = {"id": c.id, "stage": bad.stage, "reason": bad.reason, "data_source": c.data_source}
            if bad.stage == "decontam":
                rej.update({k: bad.data.get(k) for k in ("measure", "ref", "semantic", "similarity")})
            rejections.append(rej)
            continue
        d = dev.get(c.id)
        if d is None or not d.get("complete"):
            continue  # not evaluated yet (a harness failure): neither kept nor rejected
        rows.append(
            {
                "ops": c.ops,
                "data_source": c.data_source,
                "code": d["code"],
                "id": c.id,
                "seed_ids": c.seed_ids,
                "composer": c.composer,
                "eager_ms": d.get("eager_ms"),
                "compile_ms": d.get("compile_ms"),
                "max_similarity": cpu[c.id].get("similarity"),
                "nearest_ref": cpu[c.id].get("ref") or "",
                "semantic_similarity": cpu[c.id].get("semantic"),
                "semantic_ref": cpu[c.id].get("semantic_ref") or "",
                "reshapes": d.get("reshapes") or [],
                "pipeline_version": PIPELINE_VERSION,
            }
        )
    return rows, rejections
