"""`bench --model` logic: one agent episode per task against a real local HTTP
server with scripted replies; evaluations go through a pool (a fake one here
that answers from a queue), every evaluation is a row, the report takes the
best of each trajectory, and a finished task is not rerun."""

from __future__ import annotations

from concurrent.futures import Future

from fake_openai_server import call, reply, serving
from test_suites import task_src

from cuda_agent.agent.loop import AgentConfig
from cuda_agent.bench.report import build_report
from cuda_agent.bench.runner import AgentSpec, run_bench
from cuda_agent.bench.store import ResultStore
from cuda_agent.eval.judge.result import EvalResult, Status
from cuda_agent.llm.client import ChatClient, ClientConfig
from cuda_agent.task.suites import load_suite


def timed(sc: float) -> EvalResult:
    return EvalResult(
        Status.OK,
        3 if sc > 1.06 else 1,
        True,
        time_ms=1 / sc,
        eager_ms=2.0,
        compile_ms=1.0,
        speedup_vs_eager=2.0 * sc,
        speedup_vs_compile=sc,
    )


class QueuePool:
    def __init__(self, results: list[EvalResult]):
        self.results, self.jobs = list(results), []

    def submit(self, job) -> Future:
        self.jobs.append((job.task.name, job.phase))
        f: Future = Future()
        f.set_result(self.results.pop(0))
        return f

    def close(self, cancel: bool = False) -> None:
        pass


def test_agent_bench_rows_best_of_trajectory_and_resume(tmp_path):
    for name in ("a_task", "b_task"):
        (tmp_path / f"{name}.py").write_text(task_src(f"torch.relu(x) + {len(name)}"))
    suite = load_suite(tmp_path)
    script = [
        reply(None, [call("profile")]),
        reply(None, [call("profile")]),
        reply(None, [call("profile")]),
        reply("done", [call("finish", {"summary": "a"})]),
        reply(None, [call("verify")]),
        reply("done", [call("finish", {"summary": "b"})]),
    ]
    bad = EvalResult(Status.INCORRECT, -1, False, message="wrong")
    pool = QueuePool([timed(0.8), timed(1.7), bad, EvalResult(Status.OK, None, True, message="verified"), timed(1.2)])
    with serving(script) as srv:
        spec = AgentSpec(
            lambda: ChatClient(ClientConfig(model="fake", base_url=srv.base_url, backoff_s=0.01), sleep=lambda s: None),
            "fake",
            AgentConfig(max_turns=10, bash_timeout_s=10),
            parallel=1,
        )
        run_dir = tmp_path / "run"
        s = run_bench(suite, run_dir, agent=spec, pool=pool)
        assert s.finished == 2 and not s.errors, s.errors
        # b's best was verified but never timed: profiled once at the end
        assert pool.jobs == [("a_task", "profile")] * 3 + [("b_task", "verify"), ("b_task", "profile")]
        store = ResultStore(run_dir)
        rows = store.rows()
        assert [(r["task_id"], r["attempt"], r["source"]) for r in rows] == [
            ("a_task", 1, "agent"),
            ("a_task", 2, "agent"),
            ("a_task", 3, "agent"),
            ("b_task", 1, "agent"),
            ("b_task", 2, "best-profile"),
        ]
        rep = build_report(run_dir)
        assert rep.best["a_task"].speedup_vs_compile == 1.7 and rep.best["b_task"].speedup_vs_compile == 1.2
        assert rep.rows[-1].pass_rate == 1.0 and rep.rows[-1].faster_than_compile == 1.0
        assert (run_dir / "episodes" / "a_task" / "trajectory.jsonl").is_file()
        again = run_bench(suite, run_dir, agent=spec, pool=QueuePool([]))
        assert again.skipped == 2 and again.finished == 0
