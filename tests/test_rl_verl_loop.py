"""The verl agent loop (rl.verl_loop) driven by a scripted server manager and a
tokenizer built here: masks, the reward on the last sampled token (through verl's
own output conversion and GAE), turn and length limits, a malformed call, an
evaluation timeout giving -1, the replay loop, and our GAE against verl's.
Skipped without verl (pip install -e '.[rl]')."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("verl")

import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from rl_helpers import TASK, ScriptedPool, ScriptedServer, hermes, timed  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap  # noqa: E402
from verl.trainer.ppo.core_algos import compute_gae_advantage_return  # noqa: E402

from cuda_agent.rl import scoring  # noqa: E402
from cuda_agent.rl.gae import gae  # noqa: E402
from cuda_agent.rl.rollout import METRIC_KEYS  # noqa: E402
from cuda_agent.rl.tiny import tiny_tokenizer  # noqa: E402
from cuda_agent.rl.verl_loop import CudaAgentLoop, ReplayAgentLoop  # noqa: E402

ROW = {"raw_prompt": [], "extra_info": {"task_source": TASK, "task_name": "relu2"}}
GOOD = [
    "Look.\n" + hermes("read", {"path": "model.py"}),
    hermes("write", {"path": "kernels/k.cu", "content": "// kernel\n"}) + hermes("profile"),
    hermes("finish", {"summary": "fused"}),
]


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture
def pool(monkeypatch):
    p = ScriptedPool({"profile": [timed(3)]})
    scoring.use_pool(p)
    yield p
    scoring.use_pool(None)


def rollout(tok, replies, loop_cls=CudaAgentLoop, prompt_length=8192, response_length=4096, row=None, **kw):
    server = ScriptedServer(tok, replies)
    cfg = OmegaConf.create(
        {
            "actor_rollout_ref": {"rollout": {"prompt_length": prompt_length, "response_length": response_length}},
            "data": {},
        }
    )

    async def go():
        # built inside the coroutine: the base class keeps the running event loop (as verl's worker does)
        agent = loop_cls(
            trainer_config=DictConfigWrap(cfg),
            server_manager=server,
            tokenizer=tok,
            processor=None,
            dataset_cls=None,
            data_config=DictConfigWrap(cfg.data),
            hf_model_type="qwen2",
            **kw,
        )
        return await agent.run({"temperature": 1.0}, **(row or ROW))

    return asyncio.run(go()), server


def test_masks_and_the_reward_on_the_last_sampled_token(tok, pool):
    out, server = rollout(tok, GOOD, max_tokens_per_turn=512, bash_timeout_s=10)
    assert out.reward_score == 3.0
    model = [t for t, m in zip(out.response_ids, out.response_mask, strict=True) if m]
    assert model == [t for ids in server.sampled for t in ids]  # sampled ids, never re-tokenised
    assert out.prompt_ids == server.prompts[0]
    d = out.as_dict()  # verl's own conversion: rm_scores carries the reward on the last response token
    nz = torch.nonzero(d["rm_scores"]).flatten().tolist()
    assert nz == [len(out.response_ids) - 1] and d["response_mask"][nz[0]] == 1
    info = out.extra_fields["reward_extra_info"]
    assert tuple(info) == METRIC_KEYS and info["reward"] == 3.0 and info["profile_calls"] == 1
    assert info["best_speedup_vs_compile"] == 1.5
    # the reward reaches the gradient: verl's GAE gives every sampled token a non-zero advantage signal
    values = torch.zeros(1, len(out.response_ids))
    _, returns = compute_gae_advantage_return(
        d["rm_scores"][None], values, d["response_mask"][None].float(), torch.tensor(1.0), torch.tensor(0.95)
    )
    assert returns[0, nz[0]].item() == pytest.approx(3.0)
    assert all(returns[0, i].item() > 0 for i, m in enumerate(out.response_mask) if m)


def test_verl_builder_and_template_builder_agree(tok, pool, tmp_path):
    from rl_helpers import ScriptedPool as P

    from cuda_agent.env.core import EnvConfig, Environment
    from cuda_agent.rl.rollout import RolloutConfig, roll_out
    from cuda_agent.rl.tokens import TemplateTokens
    from cuda_agent.sandbox.shell import BashSession
    from cuda_agent.task.taskfile import Task

    out, _ = rollout(tok, GOOD, max_tokens_per_turn=512, bash_timeout_s=10)
    task = Task.from_source(TASK, "relu2")
    env = Environment(
        EnvConfig(bash_timeout_s=10),
        evaluator=scoring.pool_evaluator(P({"profile": [timed(3)]}), task),
        shell_factory=BashSession,
    )
    server = ScriptedServer(tok, GOOD)
    ours = asyncio.run(
        roll_out(
            env,
            task,
            tmp_path / "r",
            server,
            TemplateTokens(tok),
            lambda i: tok.decode(i, skip_special_tokens=True),
            RolloutConfig(prompt_length=8192, response_length=4096, max_tokens_per_turn=512),
            {},
        )
    )
    env.close()
    # workspace paths differ between the two runs; everything else is token for token the same
    ws = lambda ids: tok.decode(ids).split("Workspace: ")[1].split("\n", 1)[1]  # noqa: E731
    assert ws(ours.prompt_ids) == ws(out.prompt_ids)
    assert ours.response_ids == out.response_ids and ours.response_mask == out.response_mask


def test_turn_limit(tok, pool):
    out, server = rollout(tok, [hermes("glob", {"pattern": "*"})] * 10, max_turns=3, bash_timeout_s=10)
    info = out.extra_fields["reward_extra_info"]
    assert len(server.sampled) == 3 and info["turns"] == 3 and out.reward_score == -1.0
    assert out.response_mask[-1] == 1


def test_length_limit_ends_on_a_sampled_token(tok, pool):
    out, server = rollout(tok, [hermes("bash", {"command": "seq 1 4000"})] * 10, response_length=700, bash_timeout_s=10)
    assert len(out.response_ids) <= 700 and out.response_mask[-1] == 1
    assert out.as_dict()["rm_scores"][-1] == -1.0


def test_malformed_call_is_answered_and_counted(tok, pool):
    out, _ = rollout(tok, ["<tool_call>{not json</tool_call>", hermes("finish")], bash_timeout_s=10)
    context = tok.decode([t for t, m in zip(out.response_ids, out.response_mask, strict=True) if not m])
    assert "not valid JSON" in context and out.extra_fields["reward_extra_info"]["malformed_calls"] == 1


def test_evaluation_timeout_gives_minus_one(tok):
    slow = ScriptedPool({"profile": [timed(3)]}, delay_s=5.0)
    scoring.use_pool(slow)
    try:
        out, server = rollout(tok, [hermes("profile"), hermes("finish")], episode_timeout_s=1.0, bash_timeout_s=10)
    finally:
        scoring.use_pool(None)
    info = out.extra_fields["reward_extra_info"]
    assert out.reward_score == -1.0 and info["timed_out"] == 1.0 and len(server.sampled) == 1
    assert out.response_mask[-1] == 1  # the pending observation was never added


def test_prompt_is_never_cut(tok, pool):
    with pytest.raises(ValueError, match="prompt_length"):
        rollout(tok, GOOD, prompt_length=256)


def test_replay_loop_returns_the_stored_trajectory(tok):
    msgs = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": "go",
            "tool_calls": [{"id": "a", "type": "function", "function": {"name": "profile", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "a", "content": "reward: 2"},
        {"role": "assistant", "content": "done"},
    ]
    row = {"raw_prompt": [], "extra_info": {"messages": json.dumps(msgs), "tools": "[]", "reward": 2}}
    out, server = rollout(tok, [], loop_cls=ReplayAgentLoop, row=row)
    assert server.prompts == [] and out.reward_score == 2.0 and out.response_mask[-1] == 1
    assert "done" in tok.decode([t for t, m in zip(out.response_ids, out.response_mask, strict=True) if m])


def test_our_gae_matches_verls():
    g = torch.Generator().manual_seed(0)
    mask = [1, 1, 1, 0, 0, 0, 1, 1, 0, 1, 1, 1]
    rewards = [0.0] * len(mask)
    rewards[-1] = 3.0
    values = torch.randn(len(mask), generator=g).tolist()
    adv, ret = gae(rewards, values, mask, 1.0, 0.95)
    _, vret = compute_gae_advantage_return(
        torch.tensor([rewards]),
        torch.tensor([values]),
        torch.tensor([mask]).float(),
        torch.tensor(1.0),
        torch.tensor(0.95),
    )
    for i, m in enumerate(mask):
        if m:
            assert ret[i] == pytest.approx(vret[0, i].item(), abs=1e-5)
    assert ret[-1] == pytest.approx(3.0)
    # a reward placed on a masked token is lost, in verl's GAE and ours alike
    lost = [0.0] * len(mask)
    lost[4] = 3.0
    a2, _ = gae(lost, [0.0] * len(mask), mask)
    _, vr2 = compute_gae_advantage_return(
        torch.tensor([lost]),
        torch.zeros(1, len(mask)),
        torch.tensor([mask]).float(),
        torch.tensor(1.0),
        torch.tensor(0.95),
    )
    assert all(x == 0 for x in a2) and all(vr2[0, i].item() == 0 for i, m in enumerate(mask) if m)


def test_loops_are_built_from_the_registry_yaml_as_verl_does(tok, pool, tmp_path):
    import hydra
    import yaml

    from cuda_agent.rl.config import agent_loops

    (tmp_path / "loops.yaml").write_text(yaml.safe_dump(agent_loops(max_turns=2)))
    entry = OmegaConf.load(tmp_path / "loops.yaml")[0]
    assert entry.name == "cuda_agent"
    server = ScriptedServer(tok, [hermes("glob", {"pattern": "*"})] * 5)
    cfg = OmegaConf.create(
        {"actor_rollout_ref": {"rollout": {"prompt_length": 8192, "response_length": 4096}}, "data": {}}
    )

    async def go():
        agent = hydra.utils.instantiate(
            config=entry,
            trainer_config=DictConfigWrap(cfg),
            server_manager=server,
            tokenizer=tok,
            processor=None,
            hf_model_type="qwen2",
            dataset_cls=None,
            data_config=DictConfigWrap(cfg.data),
            tools=None,
        )
        return agent, await agent.run({}, **ROW)

    agent, out = asyncio.run(go())
    assert isinstance(agent, CudaAgentLoop) and agent.rollout.max_turns == 2  # the YAML's extra key arrived
    assert len(server.sampled) == 2 and out.extra_fields["reward_extra_info"]["turns"] == 2


def test_log_rollouts_prints_one_line_per_trajectory(tok, pool, capsys):
    # verl 0.9.1's v1 trainer shows none of reward_extra_info; this line is where a run sees its split
    rollout(tok, GOOD)
    assert "cuda_agent rollout:" not in capsys.readouterr().out  # off by default
    out, _ = rollout(tok, GOOD, log_rollouts=True)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("cuda_agent rollout: ")]
    assert len(lines) == 1
    rec = json.loads(lines[0].removeprefix("cuda_agent rollout: "))
    assert rec["task"] == "relu2" and rec["reward"] == 3.0 == out.reward_score and rec["profile_calls"] == 1
    assert rec["generate_s"] >= 0 and rec["env_s"] > 0 and set(METRIC_KEYS) <= set(rec)
