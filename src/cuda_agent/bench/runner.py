"""`bench`: evaluate stored solutions, or run the agent, over a suite; resumable.

Contract of `run_bench`:
- Every task of the suite not yet "done" in RUN_DIR/results.sqlite is
  evaluated through the pool; each result is written (and committed) the
  moment it lands, then the task is marked done, so an interrupted or crashed
  bench keeps everything finished and a rerun does only the rest. A harness
  failure of one job (worker died, bug) marks only that task "error"; a rerun
  retries it. A result that says nothing about the candidate (no_gpu on a
  machine without a GPU, env_error) is kept but marks the task "not_scored",
  so a rerun where it can be scored evaluates it. A task without a solution is
  recorded as a failed task ("no_solution"), because the paper's rates are
  over all tasks.
- The run's meta keeps `environment` (bench.environment: GPU, driver, torch,
  CUDA, commit, settings; a list, one entry per session), and
  RUN_DIR/candidates/<task_id>/ a copy of each stored solution's files, so a
  report can show the kernels that were scored even after the folder changes.
- Solutions (`solutions=DIR`), looked up per task in this order:
  1. DIR/<task_id>/model_new.py (+ kernels/): workspace form;
  2. DIR/<task_id>/solution/model_new.py: the bundled examples' layout;
  3. DIR/<task_id>.py: single file (ModelNew built with load_inline);
  4. KernelBench tasks only (task id `L<level>-<stem>`, problem number = the
     stem's leading digits): DIR/level<L>/<stem>/ (workspace),
     DIR/level<L>/<stem>.py, then DIR/level_<L>_problem_<P>_sample_0_kernel.py
     and any other DIR/level_<L>_problem_<P>_*.py (first by name).
- Agent (`agent=AgentSpec`): per task `run_episode` in RUN_DIR/episodes/<id>/,
  its compile/verify/profile calls go through the pool and every result is a
  row (attempt = call index); the metrics take the best of the trajectory.
  A correct best candidate that was never timed is profiled once at the end.
  An episode cut short by a crash is moved aside and rerun from scratch.
Not guaranteed: the order in which tasks finish; a candidate's result is the
evaluator's, cached results included (row column `cached`).
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.bench.environment import describe
from cuda_agent.bench.store import ResultStore, safe_name
from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.judge.result import NOT_SCORED, EvalResult
from cuda_agent.pool.jobs import EvalJob
from cuda_agent.pool.local import LocalPool, Pool
from cuda_agent.task.suites import Suite, SuiteItem
from cuda_agent.task.workspace import SOURCE_SUFFIXES


@dataclass
class AgentSpec:
    client_factory: Callable[[], Any]  # -> cuda_agent.llm.client.ChatClient, one per episode
    model: str
    config: Any = None  # cuda_agent.agent.loop.AgentConfig
    parallel: int = 1  # episodes at once (each waits mostly on the model server)


@dataclass
class BenchSummary:
    run_dir: Path
    planned: int
    skipped: int  # already done before this run
    finished: int
    errors: list[tuple[str, str]] = field(default_factory=list)  # (task_id, message)
    missing: list[str] = field(default_factory=list)
    not_scored: list[tuple[str, str]] = field(default_factory=list)  # (task_id, status): no_gpu, env_error
    wall_s: float = 0.0


def find_solution(item: SuiteItem, d: Path) -> tuple[str, Path] | None:
    """("workspace" | "single_file", path) for a task, or None (see the module docstring)."""
    tid = item.task_id
    ws = [d / tid, d / tid / "solution"]
    files = [d / f"{tid}.py"]
    if item.level is not None:
        stem = tid.split("-", 1)[1]
        ws.append(d / f"level{item.level}" / stem)
        files.append(d / f"level{item.level}" / f"{stem}.py")
        if item.problem is not None:
            files.append(d / f"level_{item.level}_problem_{item.problem}_sample_0_kernel.py")
            files += sorted(d.glob(f"level_{item.level}_problem_{item.problem}_*.py"))
    for w in ws:
        if (w / "model_new.py").is_file():
            return "workspace", w
    for f in files:
        if f.is_file():
            return "single_file", f
    return None


def snapshot_candidate(kind: str, path: Path, dest: Path) -> None:
    """Copy what is scored (model_new.py and kernels/ sources, or the single file) into the run dir."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    if kind == "single_file":
        shutil.copy(path, dest / path.name)
        return
    shutil.copy(path / "model_new.py", dest / "model_new.py")
    if (path / "kernels").is_dir():
        shutil.copytree(
            path / "kernels",
            dest / "kernels",
            ignore=lambda d, names: [
                n for n in names if not (Path(d, n).is_dir() or n.endswith(SOURCE_SUFFIXES + (".py",)))
            ],
        )


def _job(item: SuiteItem, kind: str, path: Path, cfg: EvalConfig) -> EvalJob:
    if kind == "workspace":
        return EvalJob(task=item.task, workdir=path, phase="profile", config=cfg, label=item.task_id)
    return EvalJob(task=item.task, solution=path, phase="profile", config=cfg, label=item.task_id)


def run_bench(
    suite: Suite,
    run_dir: str | Path,
    *,
    solutions: str | Path | None = None,
    agent: AgentSpec | None = None,
    pool: Pool | None = None,
    config: EvalConfig | None = None,
    slots: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> BenchSummary:
    """`progress(task_id, finished, total)` is called after each task; `pool` defaults to a LocalPool."""
    if (solutions is None) == (agent is None):
        raise ValueError("give either solutions or an agent")
    cfg = config or EvalConfig()
    store = ResultStore(run_dir)
    mode = f"solutions:{Path(solutions).resolve()}" if solutions is not None else f"model:{agent.model}"  # type: ignore[union-attr]
    if solutions is not None and not Path(solutions).is_dir():
        raise FileNotFoundError(f"solutions directory not found: {solutions}")
    store.check_meta(suite=str(suite.root.resolve() if suite.root else suite.name), suite_kind=suite.kind, mode=mode)
    planned = dict(store.meta().get("planned", {}))
    planned.update({i.task_id: i.group for i in suite})
    sessions = store.meta().get("environment", [])
    store.set_meta(planned=planned, device=cfg.device, environment=[*sessions, describe(cfg)])
    done = store.done_ids()
    todo = [i for i in suite if i.task_id not in done]
    summary = BenchSummary(Path(run_dir), len(suite), len(suite) - len(todo), 0)
    t0 = time.monotonic()
    own = pool is None
    pool = pool or LocalPool(slots, device=cfg.device)
    lock = threading.Lock()

    def landed(tid: str) -> None:
        with lock:
            summary.finished += 1
            if progress:
                progress(tid, summary.finished, len(todo))

    try:
        if solutions is not None:
            _solutions(todo, Path(solutions), pool, cfg, store, summary, landed)
        else:
            _agent(todo, agent, pool, cfg, store, summary, landed)  # type: ignore[arg-type]
    except BaseException:
        if own:
            pool.close(cancel=True)
            own = False
        raise
    finally:
        if own:
            pool.close()
        summary.wall_s = time.monotonic() - t0
    return summary


def _solutions(
    todo: list[SuiteItem],
    d: Path,
    pool: Pool,
    cfg: EvalConfig,
    store: ResultStore,
    summary: BenchSummary,
    landed: Callable[[str], None],
) -> None:
    pending: dict[Future[EvalResult], tuple[SuiteItem, float]] = {}
    for item in todo:
        found = find_solution(item, d)
        if found is None:
            store.record_missing(item.task_id, item.group, f"no solution for {item.task_id} in {d}")
            summary.missing.append(item.task_id)
            landed(item.task_id)
            continue
        snapshot_candidate(*found, store.run_dir / "candidates" / safe_name(item.task_id))
        pending[pool.submit(_job(item, *found, cfg))] = (item, time.time())
    while pending:
        finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
        for fut in finished:
            item, started = pending.pop(fut)
            try:
                res = fut.result()
            except Exception as e:  # a harness failure: this task only, retried by a rerun
                msg = f"{type(e).__name__}: {e}"[:1000]
                store.finish(item.task_id, item.group, "error", msg)
                summary.errors.append((item.task_id, msg))
            else:
                store.record(item.task_id, item.group, res, phase="profile", source="solution", started=started)
                if res.status in NOT_SCORED:
                    store.finish(item.task_id, item.group, "not_scored", f"{res.status.value}: {res.message}"[:1000])
                    summary.not_scored.append((item.task_id, res.status.value))
                else:
                    store.finish(item.task_id, item.group, "done", res.status.value)
            landed(item.task_id)


def _agent(
    todo: list[SuiteItem],
    spec: AgentSpec,
    pool: Pool,
    cfg: EvalConfig,
    store: ResultStore,
    summary: BenchSummary,
    landed: Callable[[str], None],
) -> None:
    from cuda_agent.agent.loop import run_episode

    def one(item: SuiteItem) -> None:
        ep = store.run_dir / "episodes" / item.task_id
        if ep.exists():  # left by an interrupted run: keep it aside, start again
            shutil.move(str(ep), str(ep.with_name(f"{ep.name}.stale-{int(time.time())}")))
        attempt = 0

        def evaluator(ws: Path, phase: str) -> EvalResult:
            nonlocal attempt
            started = time.time()
            res = pool.submit(EvalJob(task=item.task, workdir=ws, phase=phase, config=cfg)).result()  # type: ignore[arg-type]
            attempt += 1
            store.record(item.task_id, item.group, res, phase=phase, attempt=attempt, source="agent", started=started)
            return res

        s = run_episode(
            item.task,
            ep,
            spec.client_factory(),
            spec.config,
            evaluator=evaluator,
            header_extra={"bench": {"task_id": item.task_id, "group": item.group}},
        )
        if s.best is not None and s.best.result.time_ms is None:
            started = time.time()
            res = pool.submit(EvalJob(task=item.task, workdir=ep / "best", phase="profile", config=cfg)).result()
            store.record(
                item.task_id,
                item.group,
                res,
                phase="profile",
                attempt=attempt + 1,
                source="best-profile",
                started=started,
            )
        if s.reason == "llm_error" and s.turns == 0:
            raise RuntimeError(f"model endpoint failed: {s.error}")
        statuses = {r["status"] for r in store.rows(item.task_id)}
        if statuses and statuses <= {st.value for st in NOT_SCORED}:  # e.g. an agent run on a machine without a GPU
            store.finish(
                item.task_id, item.group, "not_scored", f"{s.reason}; every evaluation {', '.join(sorted(statuses))}"
            )
            summary.not_scored.append((item.task_id, ", ".join(sorted(statuses))))  # list.append: atomic
        else:
            store.finish(item.task_id, item.group, "done", f"{s.reason}; reward {s.reward}")

    with ThreadPoolExecutor(max_workers=max(1, spec.parallel), thread_name_prefix="episode") as ex:
        futs = {ex.submit(one, item): item for item in todo}
        for fut in as_completed(futs):
            item = futs[fut]
            try:
                fut.result()
            except Exception as e:
                msg = f"{type(e).__name__}: {e}"[:1000]
                store.finish(item.task_id, item.group, "error", msg)
                summary.errors.append((item.task_id, msg))
            landed(item.task_id)
