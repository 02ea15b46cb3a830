"""The framework-free rollout (rl.rollout + rl.tokens.TemplateTokens) with a tiny
tokenizer built here and a scripted server: sampled ids kept as generated, masks,
the stream ending on a sampled token, the prompt budget, and the replay of stored
trajectories for value pretraining. Needs transformers (the `rl` extra)."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from rl_helpers import TASK, ScriptedPool, ScriptedServer, hermes, timed  # noqa: E402

from cuda_agent.env.core import EnvConfig, Environment  # noqa: E402
from cuda_agent.eval.judge.result import EvalResult, Status  # noqa: E402
from cuda_agent.rl.replay import replay_stream  # noqa: E402
from cuda_agent.rl.rollout import METRIC_KEYS, PromptTooLong, RolloutConfig, roll_out  # noqa: E402
from cuda_agent.rl.scoring import pool_evaluator  # noqa: E402
from cuda_agent.rl.tiny import tiny_tokenizer  # noqa: E402
from cuda_agent.rl.tokens import Stream, TemplateTokens  # noqa: E402
from cuda_agent.sandbox.shell import BashSession  # noqa: E402
from cuda_agent.task.taskfile import Task  # noqa: E402


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def run(tok, replies, pool=None, tmp_path=None, **cfg):
    task = Task.from_source(TASK, "relu2")
    pool = pool or ScriptedPool({"profile": [timed(3)]})
    rc = RolloutConfig(**{"prompt_length": 8192, "response_length": 4096, "max_tokens_per_turn": 512, **cfg})
    env = Environment(
        EnvConfig(max_turns=rc.max_turns, bash_timeout_s=10),
        evaluator=pool_evaluator(pool, task),
        shell_factory=BashSession,
    )
    server = ScriptedServer(tok, replies)
    try:
        r = asyncio.run(
            roll_out(
                env,
                task,
                tmp_path / "run",
                server,
                TemplateTokens(tok),
                lambda ids: tok.decode(ids, skip_special_tokens=True),
                rc,
                {"temperature": 1.0},
            )
        )
    finally:
        env.close()
    return r, server, pool


GOOD = [
    "Look first.\n" + hermes("read", {"path": "model.py"}),
    hermes("write", {"path": "kernels/k.cu", "content": "// kernel\n"}) + hermes("profile"),
    "Done. " + hermes("finish", {"summary": "fused"}),
]


def test_sampled_ids_are_kept_and_observations_masked(tok, tmp_path):
    r, server, pool = run(tok, GOOD, tmp_path=tmp_path)
    assert r.reason == "finished" and r.reward == 3 and r.metrics["profile_calls"] == 1
    assert tuple(r.metrics) == METRIC_KEYS and r.metrics["turns"] == 3
    # every sampled id is in the response, unchanged and in order, with mask 1; nothing else has mask 1
    model = [t for t, m in zip(r.response_ids, r.response_mask, strict=True) if m]
    assert model == [t for ids in server.sampled for t in ids]
    assert r.response_logprobs is not None and len(r.response_logprobs) == len(r.response_ids)
    assert all(lp == -0.25 for lp, m in zip(r.response_logprobs, r.response_mask, strict=True) if m)
    # token in, token out: each prompt extends the previous prompt by that turn's sampled ids, then context
    for before, ids, after in zip(server.prompts, server.sampled, server.prompts[1:], strict=False):
        assert after[: len(before) + len(ids)] == before + ids
    context = tok.decode([t for t, m in zip(r.response_ids, r.response_mask, strict=True) if not m])
    assert "<tool_response>" in context and "torch.relu" in context and "new best" in context
    assert r.response_mask[-1] == 1 and r.response_ids[-1] == server.eot  # ends on a sampled token
    assert r.prompt_ids == server.prompts[0] and pool.jobs[0].sources["kernels/k.cu"] == "// kernel\n"


def test_length_budget_drops_the_last_observation(tok, tmp_path):
    big = hermes("bash", {"command": "seq 1 3000"})
    r, server, _ = run(tok, [big] * 5, tmp_path=tmp_path, response_length=600)
    assert r.reason == "max_response" and len(r.response_ids) <= 600 and r.response_mask[-1] == 1
    assert r.reward == -1 and len(server.sampled) >= 1


def test_prompt_that_does_not_fit_raises(tok, tmp_path):
    with pytest.raises(PromptTooLong, match="prompt_length"):
        run(tok, GOOD, tmp_path=tmp_path, prompt_length=100)


def test_prompt_of_the_real_environment_fits_the_default_budget(tok, tmp_path):
    r, server, _ = run(tok, GOOD, tmp_path=tmp_path)
    assert len(server.prompts[0]) < RolloutConfig().prompt_length // 2  # system prompt, task, 11 tool schemas


def test_stream_helpers():
    s = Stream([1, 2])
    s.add([3, 4], 1, [-1.0, -2.0])
    s.add([5], 0)
    assert s.prompt_ids == [1, 2] and s.response_ids == [3, 4, 5] and s.logprobs == [-1.0, -2.0, 0.0]
    snap = s.snapshot()
    s.add([6, 7], 0)
    s.restore(snap)
    s.end_on_model_token()
    assert s.ids == [1, 2, 3, 4] and s.mask == [1, 1] and s.logprobs == [-1.0, -2.0]
    with pytest.raises(ValueError, match="log-probs"):
        s.add([8], 1, [0.0, 0.0])


def test_replay_renders_stored_messages_with_assistant_turns_unmasked(tok):
    msgs = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": "reading",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "read", "arguments": '{"path": "model.py"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "class Model"},
        {"role": "assistant", "content": "all done"},
        {"role": "tool", "tool_call_id": "b", "content": "trailing"},
    ]
    s = replay_stream(TemplateTokens(tok), msgs, [])
    model = tok.decode([t for t, m in zip(s.response_ids, s.mask, strict=True) if m])
    assert "reading" in model and '"path": "model.py"' in model and "all done" in model and "class Model" not in model
    assert s.mask[-1] == 1 and "trailing" not in tok.decode(s.ids)
    # the whole stream is what the chat template renders for the conversation up to the last model turn
    full = TemplateTokens(tok).render(
        [
            {
                "role": m["role"],
                "content": m["content"],
                **(
                    {
                        "tool_calls": [
                            {"type": "function", "function": {"name": "read", "arguments": {"path": "model.py"}}}
                        ]
                    }
                    if m.get("tool_calls")
                    else {}
                ),
            }
            for m in msgs[:5]
        ]
    )
    assert full[: len(s.ids)] == s.ids and tok.decode(full[len(s.ids) :]).strip() == ""


@pytest.mark.parametrize(
    "replies,ended",
    [([hermes("frobnicate")] * 5, "ended_malformed_calls"), (["I will think about it."] * 5, "ended_no_tool_call")],
)
def test_the_early_ends_are_in_the_per_trajectory_metrics(tok, tmp_path, replies, ended):
    r, server, _ = run(tok, replies, tmp_path=tmp_path)
    assert r.reason == ended.removeprefix("ended_") and r.metrics["turns"] == 3 == len(server.sampled)
    assert r.metrics[ended] == 1.0 and sum(r.metrics[k] for k in ("ended_malformed_calls", "ended_no_tool_call")) == 1.0
    assert r.metrics["malformed_calls"] == (3 if ended == "ended_malformed_calls" else 0)


def test_the_tool_results_of_the_last_turn_are_kept_for_the_record(tok, tmp_path):
    """An episode that ends on a turn (max_turns) never tokenizes that turn's tool results; the rollout
    still carries them (verl_loop writes them to a kept workdir's episode.json), so a failed verify's
    message can be read after a training run."""
    why = "the output is wrong: max abs diff 0.73 at [0, 5]"
    pool = ScriptedPool({"verify": [EvalResult(Status.INCORRECT, -1, False, message=why)]})
    one = hermes("write", {"path": "kernels/k.cu", "content": "// kernel\n"}) + hermes("verify")
    r, _, _ = run(tok, [one], pool=pool, tmp_path=tmp_path, max_turns=1)
    assert r.reason == "max_turns" and r.reward == -1 and r.metrics["verify_calls"] == 1
    assert why in json.dumps(r.final_observation) and why not in tok.decode(r.response_ids)
    assert [m["role"] for m in r.messages].count("assistant") == 1  # the record adds nothing to the stream's messages
