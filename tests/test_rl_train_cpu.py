"""Real verl PPO steps on the CPU (`rl config --device cpu`, `rl train`): the transformers rollout,
the project's agent loop with its tools, the evaluator's CPU lane as the reward, GAE, an actor and a
critic update, a checkpoint, and a second run that resumes from it.

The policy is the tiny windowed model (rl.tiny), taught before training to answer every task with
the same four tool calls: read and write model_new.py, write a C++ kernel computing relu(x) * 2,
verify. Two
of the four tasks are relu(x) * 2 (the candidate is right: a positive milestone reward) and two are
relu(x) * 3 (it is wrong: -1), so the rewards verl trains on can be traced to the evaluator task by
task. Minutes on a 2-core machine, hence `slow`; skipped without verl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytest.importorskip("ray")
# heavy (left out of CI): about nine minutes on a 2-core machine (547 s, 2026-12-08, 6165f4e), more than CI's
# hour has room for. Its every-reward -1 failure of 2026-12-07 was the candidates' builds running at once past
# the compile budget (build/workspace.py now waits for a unit another build is compiling), not the clock.
pytestmark = [pytest.mark.slow, pytest.mark.heavy]

import yaml  # noqa: E402
from rl_helpers import ANSWER, SCALE_TASK, rl_train, teach  # noqa: E402
from rl_helpers import changed as _changed  # noqa: E402
from rl_helpers import weights_of as _weights  # noqa: E402

from cuda_agent.cli.main import main  # noqa: E402

TASKS = {f"relu_x{k}_{n}": (k, n) for k in (2, 3) for n in (64, 96)}


def _taught_model(tmp: Path, tasks: Path) -> Path:
    from cuda_agent.env.toolbox import tool_schemas
    from cuda_agent.rl.prompts import messages_for
    from cuda_agent.rl.tiny import save_tiny_model
    from cuda_agent.rl.tokens import TemplateTokens
    from cuda_agent.task.taskfile import Task

    model = save_tiny_model(tmp / "model", window=64)
    from transformers import AutoTokenizer

    tt = TemplateTokens(AutoTokenizer.from_pretrained(model))
    contexts = [
        tt.render(
            messages_for(Task.from_source(p.read_text(), p.stem), "agent"), tool_schemas(), generation_prompt=True
        )[-130:]
        for p in sorted(tasks.glob("*.py"))
    ]
    teach(model, contexts, ANSWER)
    return model


def _config(tmp: Path, model: Path, steps: int) -> Path:
    out = tmp / "ppo.yaml"
    assert (
        main(
            [
                "rl",
                "config",
                "--stage",
                "ppo",
                "--device",
                "cpu",
                "--model",
                str(model),
                "--train",
                str(tmp / "train.parquet"),
                "--batch",
                "4",
                "--steps",
                str(steps),
                "-o",
                str(out),
                f"trainer.default_local_dir={tmp / 'ckpt'}",
                f"trainer.rollout_data_dir={tmp / 'rollouts'}",
                "data.max_response_length=1024",
                "actor_rollout_ref.rollout.max_model_len=9216",
                "actor_rollout_ref.rollout.temperature=0.3",
            ]
        )
        == 0
    )
    loops = out.with_name("ppo.agent_loops.yaml")
    entries = yaml.safe_load(loops.read_text())
    entries[0].update(max_turns=1, max_tokens_per_turn=400, workdir_root=str(tmp / "work"), keep_workdirs=True)
    loops.write_text(yaml.safe_dump(entries))
    return out


def test_two_ppo_steps_with_the_evaluators_reward_and_a_resume(tmp_path, cache_env):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for name, (k, n) in TASKS.items():
        (tasks / f"{name}.py").write_text(SCALE_TASK.format(k=k, n=n))
    assert main(["rl", "prompts", str(tasks), "-o", str(tmp_path / "train.parquet")]) == 0
    model = _taught_model(tmp_path, tasks)

    first = rl_train("ppo", _config(tmp_path, model, steps=1), cache_env, "train1.log")
    ck = tmp_path / "ckpt"
    assert (ck / "global_step_1" / "actor" / "huggingface").is_dir() and (ck / "global_step_1" / "critic").is_dir()
    assert "hf rollout 0: " in first  # verl synced the actor's weights into the transformers rollout
    second = rl_train("ppo", _config(tmp_path, model, steps=2), cache_env, "train2.log")
    assert "global_step_1" in second and (ck / "global_step_2" / "critic" / "huggingface").is_dir()
    assert "step:2 " in second and "step:1 " not in second  # resumed at step 2, not restarted

    # the rewards verl used (its rollout dump: the score on each trajectory's tokens) are the evaluator's
    scores: dict[str, list[float]] = {name: [] for name in TASKS}
    for step in (1, 2):
        for line in (tmp_path / "rollouts" / f"{step}.jsonl").read_text().splitlines():
            row = json.loads(line)
            name = next(
                nm for nm, (k, n) in TASKS.items() if f"* {k}.0" in row["input"] and f"({n}, 257)" in row["input"]
            )
            scores[name].append(row["score"])
    assert all(len(v) == 2 for v in scores.values()), scores
    for name, (k, _) in TASKS.items():
        runs = sorted((tmp_path / "work").glob(f"{name}-*"))
        assert len(runs) == 2, runs
        kept = [json.loads((r / "best" / "result.json").read_text()) for r in runs if (r / "best").is_dir()]
        if k == 2:  # the kernel is right: the evaluator kept it as the best candidate, with a milestone reward
            assert len(kept) == 2 and all(r["correct"] for r in kept), kept
            assert sorted(scores[name]) == sorted(float(r["reward"]) for r in kept) and min(scores[name]) >= 1, scores
        else:  # wrong for relu(x) * 3: no correct candidate, reward -1
            assert kept == [] and scores[name] == [-1.0, -1.0], (name, scores)

    # one actor and one critic update per step changed both models
    start = _weights(model)
    actor, critic = (_weights(ck / "global_step_2" / role / "huggingface") for role in ("actor", "critic"))
    assert _changed(start, actor) and _changed(start, critic)
    assert _changed(_weights(ck / "global_step_1" / "actor" / "huggingface"), actor)
