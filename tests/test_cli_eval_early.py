"""`cuda-agent eval` starts the evaluation's children before it imports torch (cli/cmd_eval).

On a GPU machine a one-shot evaluation otherwise paid its parent's torch import and CUDA start-up
and then its children's, one after the other. Here the GPU is a stand-in (`_gpu_node`, `detect`)
and the pair a fake: what is checked is that the pair is started before the evaluation begins, for
the task's precision, only where the evaluation would use one, and that the evaluation takes it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.cli import cmd_eval
from cuda_agent.cli.main import main
from cuda_agent.eval import api
from cuda_agent.eval import gpu as gpu_mod
from cuda_agent.eval.channel import children as warm
from cuda_agent.eval.config import EvalConfig
from cuda_agent.task.taskfile import Task

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "examples/diag_matmul/task.py"
SOL = ROOT / "examples/diag_matmul/solution_inline.py"


class FakePair:
    def __init__(self, key):
        self.key = key
        self.closed = False

    def alive(self) -> bool:
        return not self.closed

    def ready(self) -> bool:
        return self.alive()

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def events(monkeypatch):
    log: list[tuple[str, object]] = []

    def spawn(cfg, precision, gpu_key=None):
        log.append(("spawn", FakePair(warm.spec(cfg, precision))))
        return log[-1][1]

    monkeypatch.setattr(warm, "spawn", spawn)
    warm.discard()
    yield log
    warm.discard()


def test_a_single_file_evaluation_gets_the_pair_started_before_it_began(monkeypatch, events):
    monkeypatch.setattr(cmd_eval, "_gpu_node", lambda: True)
    monkeypatch.setattr(gpu_mod, "detect", lambda: gpu_mod.GPU("Stand-in", "9.0", "GPU-0"))
    real_eval, real_pair_for = api.evaluate_single_file, warm.pair_for

    def evaluate_single_file(*a, **k):
        events.append(("evaluate", None))
        return real_eval(*a, **k)

    def pair_for(cfg, precision):
        events.append(("taken", real_pair_for(cfg, precision)))
        raise SystemExit(0)  # the rest needs a GPU; what matters is which pair the evaluation got

    monkeypatch.setattr(api, "evaluate_single_file", evaluate_single_file)
    monkeypatch.setattr(warm, "pair_for", pair_for)
    with pytest.raises(SystemExit):
        main(["eval", "--task", str(TASK), "--solution", str(SOL), "--json", "--fresh", "--no-cache"])
    assert [e for e, _ in events] == ["spawn", "evaluate", "taken"]
    assert events[2][1] is events[0][1], "the evaluation took the pair started early, not a new one"


def test_no_early_pair_without_a_gpu_node_or_for_a_workspace_compile(monkeypatch, events):
    task = Task.from_file(TASK)
    monkeypatch.setattr(cmd_eval, "_gpu_node", lambda: False)
    cmd_eval._start_children_early(EvalConfig(), task, "profile", single_file=True)
    assert events == []
    monkeypatch.setattr(cmd_eval, "_gpu_node", lambda: True)
    cmd_eval._start_children_early(EvalConfig(), task, "compile", single_file=False)
    assert events == []  # a workspace's compile phase uses no children
    cmd_eval._start_children_early(EvalConfig(), task, "profile", single_file=False)
    assert [e for e, _ in events] == ["spawn"]
    assert events[0][1].key == warm.spec(EvalConfig(), task.precision)
