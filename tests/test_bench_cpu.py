"""`bench` end to end on the CPU lane: a small folder suite built from the CPU-lane
fixture, stored workspace solutions, the real local pool (worker process plus
compile farm) and the real parent/child evaluator. A crashing candidate, a
harness failure of one job and a missing solution each stay confined to their
task; a rerun skips finished tasks and retries the failed one; the report
writes its files and prints the paper's table."""

from __future__ import annotations

import shutil
import sqlite3
from concurrent.futures import Future
from pathlib import Path

import pytest
from conftest import FIXTURES, cpu_cfg

from cuda_agent.bench.report import build_report
from cuda_agent.bench.report_files import write_report
from cuda_agent.bench.runner import find_solution, run_bench
from cuda_agent.cli.main import main
from cuda_agent.pool.local import EvalJob, HarnessError, LocalPool
from cuda_agent.task.suites import load_suite

pytestmark = pytest.mark.slow
LANE = FIXTURES / "cpu_lane"
# task id -> (input width, behaviour of the stored solution or None for no solution)
TASKS = {"t1_good": (257, "good"), "t2_flaky": (129, "good"), "t3_segfault": (65, "segfault"), "t4_nosol": (33, None)}


def make_suite(root: Path) -> tuple[Path, Path]:
    suite, sols = root / "suite", root / "solutions"
    suite.mkdir()
    src = (LANE / "task.py").read_text()
    for tid, (width, behaviour) in TASKS.items():
        (suite / f"{tid}.py").write_text(src.replace("torch.randn(64, 257)", f"torch.randn(64, {width})"))
        if behaviour is None:
            continue
        d = sols / tid
        shutil.copytree(LANE / "kernels", d / "kernels")
        text = (LANE / "model_new.py").read_text().replace("cuda_extension.good(", f"cuda_extension.{behaviour}(")
        (d / "model_new.py").write_text(text)
    return suite, sols


class FlakyPool:
    """Delegates to a real pool, but one task's job fails as a harness error."""

    def __init__(self, inner: LocalPool, fail: str):
        self.inner, self.fail, self.submitted = inner, fail, []

    def submit(self, job: EvalJob) -> Future:
        self.submitted.append(job.label)
        if job.label == self.fail:
            f: Future = Future()
            f.set_exception(HarnessError("evaluation worker process died (simulated)"))
            return f
        return self.inner.submit(job)

    def close(self, cancel: bool = False) -> None:
        self.inner.close(cancel)


def test_bench_resume_crash_isolation_and_report(tmp_path, cache_env, capsys):
    suite_dir, sols = make_suite(tmp_path)
    suite = load_suite(suite_dir)
    run_dir = tmp_path / "run"
    seen = []
    with LocalPool(1, device="cpu", compile_workers=1) as inner:
        pool = FlakyPool(inner, "t2_flaky")
        s = run_bench(
            suite,
            run_dir,
            solutions=sols,
            pool=pool,
            config=cpu_cfg(),
            progress=lambda tid, done, total: seen.append((tid, done, total)),
        )
    assert s.finished == 4 and s.skipped == 0 and s.missing == ["t4_nosol"]
    assert [t for t, _ in s.errors] == ["t2_flaky"]
    assert sorted(t for t, _, _ in seen) == sorted(TASKS) and seen[-1][1:] == (4, 4)
    db = sqlite3.connect(run_dir / "results.sqlite")
    status = dict(db.execute("SELECT task_id, status FROM evaluations"))
    assert status == {"t1_good": "ok", "t3_segfault": "runtime_error", "t4_nosol": "no_solution"}
    states = dict(db.execute("SELECT task_id, state FROM tasks"))
    assert states == {"t1_good": "done", "t2_flaky": "error", "t3_segfault": "done", "t4_nosol": "done"}
    row = db.execute(
        "SELECT correct, reward, time_ms, eager_ms, speedup_vs_eager, result_json, candidate_hash "
        "FROM evaluations WHERE task_id = 't1_good'"
    ).fetchone()
    assert (
        row[0] == 1 and row[1] in (1, 2, 3) and row[2] > 0 and row[3] > 0 and row[4] > 0 and '"status": "ok"' in row[5]
    )
    assert len(row[6]) == 16
    db.close()

    # rerun through the CLI: only the failed task runs again; done ones are skipped
    rc = main(
        [
            "bench",
            str(suite_dir),
            "--solutions",
            str(sols),
            "-o",
            str(run_dir),
            "--device",
            "cpu",
            "--gpus",
            "1",
            "--compile-workers",
            "1",
            "--timed-calls",
            "5",
            "-q",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "1 task(s) finished this run, 3 already done" in out
    db = sqlite3.connect(run_dir / "results.sqlite")
    counts = dict(db.execute("SELECT task_id, COUNT(*) FROM evaluations GROUP BY task_id"))
    assert counts == {"t1_good": 1, "t2_flaky": 1, "t3_segfault": 1, "t4_nosol": 1}
    assert db.execute("SELECT state FROM tasks WHERE task_id = 't2_flaky'").fetchone()[0] == "done"
    db.close()

    rep = build_report(run_dir)
    folder, overall = rep.rows
    assert (folder.n_tasks, folder.n_correct, folder.pass_rate) == (4, 2, 0.5)
    assert overall.pass_rate == 0.5 and overall.geomean_vs_eager is not None and not rep.unfinished
    md, page = write_report(rep)
    text = md.read_text()
    assert "| overall | 4 | 50.0 % |" in text and "t3_segfault" in text and "runtime_error" in text
    assert page.read_text().count('<svg class="figure"') == 2  # fast_p and per-task speedups, inline SVG
    assert main(["report", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "faster than compile" in out and "overall" in out and "50.0 %" in out and "CPU lane" in out
    assert main(["report", str(tmp_path / "nothing")]) == 2


def test_refuses_to_resume_a_different_run(tmp_path, cache_env, capsys):
    suite_dir, sols = make_suite(tmp_path)
    run_dir = tmp_path / "run"
    other = tmp_path / "other_solutions"
    other.mkdir()
    suite = load_suite(suite_dir)
    run_bench(suite, run_dir, solutions=other, pool=FlakyPool(None, ""), config=cpu_cfg())  # every task: no solution
    assert main(["bench", str(suite_dir), "--solutions", str(sols), "-o", str(run_dir), "--device", "cpu", "-q"]) == 2
    assert "holds a run with mode" in capsys.readouterr().err


def test_solution_layouts(tmp_path):
    kb = tmp_path / "kb" / "level2"
    kb.mkdir(parents=True)
    (kb / "7_Thing.py").write_text((LANE / "task.py").read_text())
    item = load_suite(kb).items[0]
    d = tmp_path / "sols"
    d.mkdir()
    assert find_solution(item, d) is None
    (d / "level_2_problem_7_sample_3_kernel.py").write_text("x")
    (d / "level_2_problem_70_sample_0_kernel.py").write_text("x")
    assert find_solution(item, d) == ("single_file", d / "level_2_problem_7_sample_3_kernel.py")
    (d / "level_2_problem_7_sample_0_kernel.py").write_text("x")
    assert find_solution(item, d)[1].name == "level_2_problem_7_sample_0_kernel.py"
    (d / "L2-7_Thing.py").write_text("x")
    assert find_solution(item, d) == ("single_file", d / "L2-7_Thing.py")
    (d / "level2" / "7_Thing").mkdir(parents=True)
    (d / "level2" / "7_Thing" / "model_new.py").write_text("x")
    assert find_solution(item, d) == ("workspace", d / "level2" / "7_Thing")
    (d / "L2-7_Thing" / "solution").mkdir(parents=True)
    (d / "L2-7_Thing" / "solution" / "model_new.py").write_text("x")
    assert find_solution(item, d) == ("workspace", d / "L2-7_Thing" / "solution")


def test_pool_gates_a_rejected_candidate_on_the_farm(tmp_path, cache_env):
    """A candidate that fails its static checks is settled by the compile farm and never takes a device slot."""
    from cuda_agent.task import Task
    from cuda_agent.task.workspace import init_workspace

    task = Task.from_file(LANE / "task.py")
    hack = init_workspace(task, tmp_path / "hack")
    (hack / "model_new.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        "    def forward(self, x):\n        return torch.relu(x) * 2.0\n"
    )
    with LocalPool(1, device="cpu", compile_workers=1) as pool:
        r = pool.submit(EvalJob(task=task, workdir=hack, config=cpu_cfg())).result(timeout=120)
        assert pool.stats == {"farm": 1, "slot": 0, "gated": 1}
    assert r.status.value == "rejected" and r.reward == -1


def test_two_pool_slots_share_one_device_and_both_evaluate(tmp_path, cache_env):
    """per_gpu: two slots on one device (the CPU lane's "cpu" lock key), evaluations in both at once,
    each correct and timed; the timed sections take turns (eval.timing.gpu_lock, tested there)."""
    from cuda_agent.task import Task
    from cuda_agent.task.workspace import init_workspace

    task = Task.from_file(LANE / "task.py")
    jobs = []
    for i in range(3):
        ws = init_workspace(task, tmp_path / f"ws{i}")
        shutil.copytree(LANE / "kernels", ws / "kernels", dirs_exist_ok=True)
        shutil.copy(LANE / "model_new.py", ws / "model_new.py")
        with (ws / "model_new.py").open("a") as f:
            f.write(f"# fresh {i}\n")  # no result-cache hit
        jobs.append(EvalJob(task=task, workdir=ws, config=cpu_cfg()))
    with LocalPool(1, device="cpu", compile_workers=1, per_gpu=2) as pool:
        assert pool.n_slots == 2
        results = [f.result(timeout=600) for f in [pool.submit(j) for j in jobs]]
        assert pool.stats["slot"] == 3
    assert all(r.status.value == "ok" and r.correct and r.time_ms for r in results), [r.message for r in results]
    with pytest.raises(ValueError, match="per_gpu"):
        LocalPool(1, device="cpu", per_gpu=0)
