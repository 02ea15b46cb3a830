"""Every reader of a trajectory on damaged files: `load_trajectory` refuses with one ValueError line what
holds nothing readable (a cut-off header, a first line that is JSON but not an object) and skips, naming
them, damaged lines further on; `cuda-agent show`, the report's episode page and the RFT filter then give
a one-line error or render what is readable, never a traceback (issue 31)."""

from __future__ import annotations

import json

import pytest

from cuda_agent.agent.trajectory import FORMAT, load_trajectory
from cuda_agent.bench.report_pages import episode_page
from cuda_agent.cli.main import main
from cuda_agent.rl.rft import filter_runs, sft_row, vp_row

HEADER = {
    "type": "header",
    "format": FORMAT,
    "task": {"name": "relu2", "hash": "abc"},
    "model": "m",
    "tools": [],
    "config": {"max_no_tool": 3, "max_malformed": 3},
}
RESULT = {"status": "ok", "reward": 3, "correct": True, "message": "timed", "speedup_vs_compile": 1.5}


def lines(*records) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def good_run() -> list:
    return [
        HEADER,
        {"type": "message", "turn": 0, "message": {"role": "system", "content": "sys"}},
        {"type": "message", "turn": 0, "message": {"role": "user", "content": "task"}},
        {
            "type": "message",
            "turn": 1,
            "message": {
                "role": "assistant",
                "content": "go",
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "profile", "arguments": "{}"}}],
            },
            "usage": {},
        },
        {"type": "message", "turn": 1, "message": {"role": "tool", "tool_call_id": "c1", "content": "ok"}, "ok": True},
        {"type": "eval", "turn": 1, "call_id": "c1", "phase": "profile", "best": True, "result": RESULT},
        {"type": "end", "reason": "finished", "turns": 1, "usage": {"total_tokens": 5}, "reward": 3},
    ]


UNREADABLE = {
    "cut_header": '{"type": "header", "format": "cuda-agent-traj',
    "list_first": lines([1, 2, 3], *good_run()[1:]),
    "string_first": lines('"header"'),
    "garbage_first": "not json at all\n" + lines(*good_run()[1:]),
    "blank": "\n\n  \n",
    "binary": "\x00\x01\xff\xfe garbage",
}


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_unreadable_files_are_one_line_errors_everywhere(tmp_path, capsys, name):
    run = tmp_path / "run"
    run.mkdir()
    (run / "trajectory.jsonl").write_text(UNREADABLE[name], encoding="utf-8", errors="surrogateescape")
    with pytest.raises(ValueError) as e:
        load_trajectory(run)
    assert "\n" not in str(e.value) and "trajectory.jsonl" in str(e.value)
    assert main(["show", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and err.startswith("cuda-agent")
    assert "cannot read the trajectory" in episode_page(run / "trajectory.jsonl", "../report.html")
    kept, verdicts = filter_runs([run])
    assert not kept and verdicts[0].reasons[0].startswith("unreadable:")


def test_the_two_crashes_of_issue_31_say_what_is_wrong():
    import tempfile
    from pathlib import Path

    d = Path(tempfile.mkdtemp())
    (d / "a.jsonl").write_text(UNREADABLE["cut_header"])
    with pytest.raises(ValueError, match="cut short"):
        load_trajectory(d / "a.jsonl")
    (d / "b.jsonl").write_text(UNREADABLE["list_first"])
    with pytest.raises(ValueError, match="first line is a JSON list, not an object"):
        load_trajectory(d / "b.jsonl")


def test_damaged_lines_in_the_middle_are_skipped_and_named(tmp_path, capsys):
    recs = good_run()
    damaged = [
        "{broken json",
        [1, 2],
        {"type": "message", "turn": 2, "message": "just text"},
        {"type": "message", "turn": 2, "message": {"role": "assistant", "content": ["parts"]}},
        {"type": "message", "turn": 2, "message": {"role": "assistant", "content": "", "tool_calls": "x"}},
        {"type": "eval", "turn": 2, "phase": "profile", "result": {"reward": 3}},
        {"type": "eval", "turn": 2, "phase": "profile", "result": "fast"},
        {"type": "note", "turn": 2},
        {"type": "end", "reason": "finished", "usage": "lots"},
    ]
    run = tmp_path / "run"
    run.mkdir()
    (run / "trajectory.jsonl").write_text(lines(*recs[:-1], *damaged, recs[-1]))
    t = load_trajectory(run)
    assert len(t.damaged) == len(damaged) and t.damaged[0] == "line 7: not a JSON line"
    assert [m["role"] for m in t.messages] == ["system", "user", "assistant", "tool"]
    assert len(t.evals) == 1 and t.complete and t.end["reason"] == "finished"
    assert main(["show", str(run)]) == 0
    out = capsys.readouterr().out
    assert f"{len(damaged)} damaged lines skipped" in out and "profile" in out and "ended: finished" in out
    page = episode_page(run / "trajectory.jsonl", "../report.html")
    assert "damaged line(s) skipped" in page and "profile" in page
    kept, verdicts = filter_runs([run])
    assert not kept and f"{len(damaged)} damaged line(s)" in verdicts[0].reasons


def test_a_header_with_fields_of_the_wrong_type_still_renders(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "trajectory.jsonl").write_text(lines({**HEADER, "task": "relu2", "config": [1]}, *good_run()[1:]))
    t = load_trajectory(run)
    assert "task" not in t.header and len(t.damaged) == 2
    assert main(["show", str(run)]) == 0
    assert "ended: finished" in capsys.readouterr().out


def test_a_cut_last_line_is_still_a_truncated_run_not_damage(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "trajectory.jsonl").write_text(lines(*good_run()[:-1]) + '{"type": "end", "rea')
    t = load_trajectory(run)
    assert t.truncated and not t.damaged and not t.complete


def _with(i: int, **fields) -> list:
    recs = good_run()
    recs[i] = {**recs[i], **fields}
    return recs


# records whose type and shape are right but a field the readers format is not: found by mutating every field
# of a good run (report page: AttributeError / ValueError; RFT: KeyError, StopIteration, TypeError)
ODD_FIELDS = {
    "usage_a_number": _with(3, usage=5),
    "latency_text": _with(3, latency_s="slow"),
    "reasoning_a_number": _with(3, reasoning=7),
    "elapsed_null": _with(4, elapsed_s=None),
    "speedup_text": _with(5, result={**RESULT, "speedup_vs_compile": "fast"}),
    "reward_text": _with(6, reward="high"),
    "no_task": [{k: v for k, v in HEADER.items() if k != "task"}, *good_run()[1:]],
    "no_assistant": [r for r in good_run() if r.get("message", {}).get("role") != "assistant"],
}


@pytest.mark.parametrize("name", sorted(ODD_FIELDS))
def test_fields_of_the_wrong_type_render_in_every_reader(tmp_path, capsys, name):
    run = tmp_path / "run"
    run.mkdir()
    (run / "trajectory.jsonl").write_text(lines(*ODD_FIELDS[name]))
    assert main(["show", str(run)]) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert "<h2 id=end>End</h2>" in episode_page(run / "trajectory.jsonl", "../report.html")
    kept, verdicts = filter_runs([run])
    if name in ("reward_text", "no_assistant"):  # an end record that cannot be read, or nothing the model said
        assert not kept, verdicts[0]
    for p, t in kept:
        assert sft_row(t, p)["messages"] and vp_row(t, p, 0)["prompt"]
