"""The transformers rollout's generate loop and weight hook, without Ray: greedy decoding is the
model's arg-max path and stops after the end-of-turn id, max_tokens and the model length cap it,
log-probs follow rollout.logprobs_mode, update_weights loads by name (refusing unknown names), and a
server given a GPU id picks that GPU among the node's visible ones."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

pytest.importorskip("verl")
torch = pytest.importorskip("torch")

from cuda_agent.rl.hf_rollout import HFServer, device_for, sample_next  # noqa: E402
from cuda_agent.rl.tiny import save_tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("hf") / "m")


def server(model_dir, mode="processed_logprobs", max_model_len=None):
    cfg = SimpleNamespace(max_model_len=max_model_len, prompt_length=64, response_length=24, seed=0, logprobs_mode=mode)
    return HFServer(cfg, SimpleNamespace(local_path=str(model_dir)))


def test_greedy_follows_the_argmax_and_logprobs_follow_the_mode(model_dir):
    s = server(model_dir)
    prompt = list(range(5, 25))
    out = asyncio.run(s.generate("r", prompt_ids=prompt, sampling_params={"temperature": 0, "max_tokens": 12}))
    ids = out.token_ids
    assert 1 <= len(ids) <= 12 and out.stop_reason == "completed" and len(out.log_probs) == len(ids)
    with torch.no_grad():
        logits = s.model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1]
    assert ids == logits.argmax(-1).tolist()  # each token the arg-max after the ones before it
    raw = torch.log_softmax(logits, -1).gather(1, torch.tensor(ids)[:, None])[:, 0]
    assert torch.allclose(torch.tensor(out.log_probs), raw, atol=1e-4)  # temperature 0: nothing to scale
    hot = asyncio.run(s.generate("r", prompt_ids=prompt, sampling_params={"temperature": 0.5, "max_tokens": 6}))
    with torch.no_grad():
        lg = s.model(torch.tensor([prompt + hot.token_ids])).logits[0, len(prompt) - 1 : -1]
    processed = torch.log_softmax(lg / 0.5, -1).gather(1, torch.tensor(hot.token_ids)[:, None])[:, 0]
    assert torch.allclose(torch.tensor(hot.log_probs), processed, atol=1e-4)
    s_raw = server(model_dir, mode="raw_logprobs")
    again = asyncio.run(s_raw.generate("r", prompt_ids=prompt, sampling_params={"temperature": 0.5, "max_tokens": 6}))
    with torch.no_grad():
        lg = s_raw.model(torch.tensor([prompt + again.token_ids])).logits[0, len(prompt) - 1 : -1]
    rawlp = torch.log_softmax(lg, -1).gather(1, torch.tensor(again.token_ids)[:, None])[:, 0]
    assert torch.allclose(torch.tensor(again.log_probs), rawlp, atol=1e-4)


def test_the_model_length_caps_generation_and_the_end_of_turn_stops_it(model_dir):
    s = server(model_dir, max_model_len=30)
    out = asyncio.run(
        s.generate("r", prompt_ids=list(range(5, 25)), sampling_params={"temperature": 0, "max_tokens": 99})
    )
    assert len(out.token_ids) <= 10
    first = out.token_ids[0]
    s.eos = {first}  # the end-of-turn id as the server sees it: generation stops right after it, keeping it
    out = asyncio.run(
        s.generate("r", prompt_ids=list(range(5, 25)), sampling_params={"temperature": 0, "max_tokens": 8})
    )
    assert out.token_ids == [first]


def test_update_weights_loads_by_name_and_refuses_unknown_names(model_dir, capsys):
    s = server(model_dir)
    name = "model.layers.0.mlp.up_proj.weight"
    new = torch.randn_like(s.model.state_dict()[name])
    out = asyncio.run(s.generate("r", prompt_ids=[5, 6, 7], sampling_params={"max_tokens": 4, "temperature": 0}))
    assert s.update_weights({name: new}, global_steps=3) == 1
    # the line a run reads its step's generation time from: the requests since the previous load
    assert f"since the last load 1 requests, {len(out.token_ids)} tokens, " in capsys.readouterr().out
    assert torch.equal(s.model.state_dict()[name], new) and s.global_steps == 3
    with pytest.raises(KeyError, match="does not have"):
        s.update_weights({"no.such.weight": new})


def test_sampling_filters():
    logits = torch.tensor([0.0, 3.0, 1.0, 2.9])
    assert sample_next(logits, 0, -1, 1.0) == 1
    assert all(sample_next(logits, 1.0, 1, 1.0) == 1 for _ in range(20))  # top_k 1 is the arg-max
    g = torch.Generator().manual_seed(0)
    picks = {sample_next(logits, 1.0, -1, 0.5, g) for _ in range(50)}
    assert picks <= {1, 3} and picks  # top_p 0.5 keeps the two near-equal leaders only


def test_the_server_device_is_the_training_workers_gpu():
    # Ray's GPU ids are members of the node's CUDA_VISIBLE_DEVICES; torch numbers the visible ones from 0
    assert device_for(None, "0,1") == torch.device("cpu")
    assert device_for("3", "2,3") == torch.device("cuda", 1)
    assert device_for("1", None) == torch.device("cuda", 1) == device_for("1", "")
    with pytest.raises(ValueError):
        device_for("5", "2,3")  # not a GPU of this node: refuse rather than take someone else's
