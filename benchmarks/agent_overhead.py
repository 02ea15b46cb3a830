"""Per-turn overhead of the agent loop outside the LLM and the evaluator.

Runs a scripted episode of N turns against a real local HTTP server speaking
the OpenAI API (tests/fake_openai_server.py), each turn one cheap tool call
(read or glob) and a fake evaluator, then reports
(wall time - LLM latency - tool time) / turns from the trajectory.
CPU only. Usage: python benchmarks/agent_overhead.py [--turns 100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from fake_openai_server import call, reply, serving  # noqa: E402

from cuda_agent.agent.loop import AgentConfig, run_episode  # noqa: E402
from cuda_agent.agent.trajectory import load_trajectory  # noqa: E402
from cuda_agent.llm.client import ChatClient, ClientConfig  # noqa: E402
from cuda_agent.task import Task  # noqa: E402


def episode(turns: int, tool: str) -> dict[str, float]:
    args = {"path": "model.py"} if tool == "read" else {"pattern": "**/*"}
    script = [reply(None, [call(tool, args)]) for _ in range(turns - 1)] + [reply(None, [call("finish")])]
    with tempfile.TemporaryDirectory() as tmp, serving(script) as srv:
        client = ChatClient(ClientConfig(model="scripted", base_url=srv.base_url), sleep=lambda s: None)
        t0 = time.monotonic()
        s = run_episode(
            Task.from_file(ROOT / "examples/diag_matmul/task.py"),
            Path(tmp) / "run",
            client,
            AgentConfig(max_turns=turns + 5, bash_timeout_s=10),
            evaluator=lambda ws, phase: None,
        )
        wall = time.monotonic() - t0
        traj = load_trajectory(Path(tmp) / "run")
    llm = sum(m.get("latency_s", 0.0) for m in traj.message_meta if m)
    tools = sum(m.get("elapsed_s", 0.0) for m in traj.message_meta if m)
    return {
        "turns": s.turns,
        "wall_s": wall,
        "llm_s": llm,
        "tool_s": tools,
        "overhead_ms_per_turn": 1e3 * (wall - llm - tools) / s.turns,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=100)
    a = ap.parse_args()
    rows = {tool: [episode(a.turns, tool) for _ in range(3)] for tool in ("read", "glob")}
    print(f"{'tool':6} {'turns':>5} {'wall s':>7} {'llm s':>6} {'tool s':>6} {'overhead ms/turn (median of 3)':>32}")
    for tool, rs in rows.items():
        r = rs[0]
        med = statistics.median(x["overhead_ms_per_turn"] for x in rs)
        print(f"{tool:6} {r['turns']:5d} {r['wall_s']:7.2f} {r['llm_s']:6.2f} {r['tool_s']:6.2f} {med:32.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
