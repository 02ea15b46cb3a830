"""The RFT filter on crafted trajectories (reward, malformed calls old and new,
loops, incomplete runs), the SFT rows' round trip through parquet and the chat
template (tool arguments intact, loss on assistant turns only), the value-
pretraining rows, and why rows keep messages as JSON text."""

from __future__ import annotations

import json

import pytest

from cuda_agent.agent.trajectory import FORMAT, TrajectoryWriter, load_trajectory
from cuda_agent.env.toolbox import tool_schemas
from cuda_agent.rl.rft import filter_runs, has_loop, sft_row, vp_row

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def call(cid, name, **args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def write_run(d, turns, reward=3, complete=True):
    """turns: list of (assistant message, [(tool message, meta)])"""
    d.mkdir(parents=True)
    w = TrajectoryWriter(d / "trajectory.jsonl", {"task": {"name": d.name, "hash": "h"}, "tools": tool_schemas()})
    w.message({"role": "system", "content": "sys"}, 0)
    w.message({"role": "user", "content": "task"}, 0)
    for i, (a, tools) in enumerate(turns, 1):
        w.message(a, i)
        for m, meta in tools:
            w.message(m, i, **meta)
    if complete:
        w.end(reason="finished", reward=reward, turns=len(turns))
    w.close()
    return d


def good_turns():
    return [
        (
            {
                "role": "assistant",
                "content": "edit it",
                "tool_calls": [call("a", "edit", path="k.cu", old_string="x", new_string="y")],
            },
            [({"role": "tool", "tool_call_id": "a", "content": "edited k.cu"}, {"name": "edit", "ok": True})],
        ),
        (
            {
                "role": "assistant",
                "content": "write and profile",
                "tool_calls": [call("b", "write", path="m.py", content="M"), call("c", "profile")],
            },
            [
                ({"role": "tool", "tool_call_id": "b", "content": "created"}, {"ok": True}),
                ({"role": "tool", "tool_call_id": "c", "content": "reward: 3"}, {"ok": True}),
            ],
        ),
        (
            {"role": "assistant", "content": "done", "tool_calls": [call("d", "finish")]},
            [({"role": "tool", "tool_call_id": "d", "content": "episode finished"}, {"ok": True})],
        ),
    ]


@pytest.fixture
def runs(tmp_path):
    write_run(tmp_path / "good", good_turns())
    write_run(tmp_path / "negative", good_turns(), reward=-1)
    write_run(tmp_path / "zero_incomplete", good_turns(), complete=False)
    bad = good_turns()
    bad[0][1][0] = (
        {"role": "tool", "tool_call_id": "a", "content": "error: unknown tool 'edt'"},
        {"ok": False, "malformed": True},
    )
    write_run(tmp_path / "malformed", bad)
    old = good_turns()
    old[0][1][0] = (
        {"role": "tool", "tool_call_id": "a", "content": "error: bad arguments for edit: missing path"},
        {"ok": False},
    )
    write_run(tmp_path / "malformed_old_log", old)
    failing_tool = good_turns()  # a tool that failed is not a malformed call
    failing_tool[0][1][0] = (
        {"role": "tool", "tool_call_id": "a", "content": "error: k.cu does not exist"},
        {"ok": False},
    )
    write_run(tmp_path / "tool_failed", failing_tool)
    same = (
        {"role": "assistant", "content": "", "tool_calls": [call("z", "bash", command="make")]},
        [({"role": "tool", "tool_call_id": "z", "content": "ok"}, {"ok": True})],
    )
    write_run(tmp_path / "loop", [same] * 3 + good_turns())
    return tmp_path


def test_filter_keeps_only_positive_clean_runs(runs):
    kept, verdicts = filter_runs([runs])
    assert sorted(p.parent.name for p, _ in kept) == ["good", "tool_failed"]
    why = {v.path.parent.name: v.reasons for v in verdicts}
    assert why["negative"] == ["reward -1"] and "incomplete" in why["zero_incomplete"]
    assert why["malformed"] == ["1 malformed call(s)"] and why["malformed_old_log"] == ["1 malformed call(s)"]
    assert why["loop"] == ["loop of repeated calls"]


def test_loop_detection():
    a = {"role": "assistant", "content": "", "tool_calls": [call("1", "bash", command="make")]}
    b = {"role": "assistant", "content": "", "tool_calls": [call("2", "read", path="k.cu")]}
    c = {"role": "assistant", "content": "", "tool_calls": [call("3", "bash", command="make clean")]}
    assert has_loop([a, a, a]) and has_loop([a, b, a, b, a, b]) and not has_loop([a, a, b, a, a, c])
    assert not has_loop([a, b, a, b, c])


def test_sft_rows_round_trip_through_parquet_and_the_chat_template(runs, tmp_path):
    pytest.importorskip("transformers")
    from cuda_agent.rl.sft_data import JsonChatSFTDataset
    from cuda_agent.rl.tiny import tiny_tokenizer
    from cuda_agent.rl.tokens import TemplateTokens

    kept, _ = filter_runs([runs / "good"])
    rows = [sft_row(t, p) for p, t in kept]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "sft.parquet")
    tok = tiny_tokenizer()
    ds = JsonChatSFTDataset([str(tmp_path / "sft.parquet")], tok, {"pad_mode": "no_padding", "max_length": 8192})
    item = ds[0]
    ids, loss = item["input_ids"].tolist(), item["loss_mask"].tolist()
    conv = json.loads(rows[0]["messages"])
    assert conv[-1]["role"] == "assistant" and conv[-1]["content"] == "done"  # the trailing tool result dropped
    edit_args = conv[2]["tool_calls"][0]["function"]["arguments"]
    assert edit_args == {"path": "k.cu", "old_string": "x", "new_string": "y"}  # objects, exactly the call's keys
    full = TemplateTokens(tok).render(conv, json.loads(rows[0]["tools"]))
    assert full[: len(ids)] == ids and tok.decode(full[len(ids) :]).strip() == ""  # the template's rendering
    learned = tok.decode([t for t, m in zip(ids, loss, strict=True) if m])
    assert "edit it" in learned and '"old_string": "x"' in learned and "done" in learned
    assert "edited k.cu" not in learned and "task" not in learned and "reward: 3" not in learned
    right = JsonChatSFTDataset(str(tmp_path / "sft.parquet"), tok, {"pad_mode": "right", "max_length": len(ids) + 5})[0]
    assert right["input_ids"].shape[0] == len(ids) + 5 and right["attention_mask"].sum().item() == len(ids)
    with pytest.raises(ValueError, match="max_length"):
        JsonChatSFTDataset(str(tmp_path / "sft.parquet"), tok, {"max_length": 10})[0]


def test_parquet_structs_would_corrupt_tool_arguments():
    # the reason rows keep messages as JSON text: struct columns merge every row's argument keys
    rows = [{"args": {"path": "k.cu", "old_string": "x", "new_string": "y"}}, {"args": {"command": "ls"}}]
    back = pa.Table.from_pylist(rows).to_pylist()
    assert back[1]["args"] != {"command": "ls"} and back[1]["args"]["path"] is None


def test_vp_rows_carry_the_whole_trajectory(runs):
    kept, _ = filter_runs([runs / "good"])
    p, t = kept[0]
    row = vp_row(t, p, 0)
    info = row["extra_info"]
    assert row["agent_name"] == "cuda_agent_replay" and info["reward"] == 3
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert json.loads(info["messages"])[-1]["content"] == "done" and len(json.loads(info["tools"])) == 11
    assert load_trajectory(p).header["format"] == FORMAT
