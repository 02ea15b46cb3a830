"""Rejection fine-tuning data (`cuda-agent rl rft`) and value-pretraining rows (`rl vp`)
from agent trajectories.

The paper's filter keeps a trajectory only if its reward is positive, it has no
loop of repeated calls and no malformed tool call. Both later stages train on the
kept ones: the actor by SFT (loss on assistant turns), the critic by replaying
them through the PPO trainer with the actor frozen (rl.verl_loop.ReplayAgentLoop).

Contract:
- `find_runs(paths)`: every trajectory.jsonl under the given run directories
  (a run, a bench output, or a folder of either), sorted.
- `judge(traj)` -> `Verdict(keep, reasons)`. Rejected: incomplete runs, damaged
  ones (lines the loader skipped), reward None or <= 0, no reply of the model,
  any malformed call (a tool message marked `malformed`; logs written before
  that mark existed are read by the text of their argument-check errors), and
  loops: a run of the same turn (the same calls with the same arguments)
  `LOOP_REPEATS` times in a row, or of the same two turns alternating.
- `sft_row(traj)` / `vp_row(traj)`: messages (template form: tool-call arguments
  as objects, trailing non-assistant messages dropped) and tools kept as JSON
  text, because parquet would merge the struct types of all rows' tool
  arguments and hand back keys a call never had; rl.sft_data reads them back.
Not guaranteed: that a kept trajectory is a good demonstration beyond these
rules (e.g. a reward-1 run that never beat eager is kept, as in the paper).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.agent.trajectory import Trajectory, load_trajectory
from cuda_agent.rl.replay import openai_to_template

LOOP_REPEATS = 3
# argument-check and parse errors of logs that predate the `malformed` mark (env.toolbox wording)
_MALFORMED_TEXT = (
    "error: unknown tool",
    "error: bad arguments for",
    "error: arguments of",
    "error: argument ",
    "error: the <tool_call> block",
    "error: the <function=",
)


@dataclass
class Verdict:
    path: Path
    keep: bool
    reasons: list[str] = field(default_factory=list)
    reward: int | None = None


def find_runs(paths: list[str | Path]) -> list[Path]:
    found: set[Path] = set()
    for p in map(Path, paths):
        if p.is_file() and p.name.endswith(".jsonl"):
            found.add(p)
        elif p.is_dir():
            found.update(p.rglob("trajectory.jsonl"))
        else:
            raise FileNotFoundError(f"{p}: no run directory or trajectory file there")
    return sorted(found)


def _turn_signature(m: dict[str, Any]) -> str:
    return (
        json.dumps(
            [(c["function"]["name"], c["function"].get("arguments")) for c in m.get("tool_calls") or []], sort_keys=True
        )
        + "|"
        + (m.get("content") or "" if not m.get("tool_calls") else "")
    )


def has_loop(messages: list[dict[str, Any]], repeats: int = LOOP_REPEATS) -> bool:
    sig = [_turn_signature(m) for m in messages if m["role"] == "assistant"]
    for period in (1, 2):
        need = period * repeats
        for i in range(len(sig) - need + 1):
            w = sig[i : i + need]
            if all(w[j] == w[j % period] for j in range(need)) and (period == 1 or w[0] != w[1]):
                return True
    return False


def malformed_calls(t: Trajectory) -> int:
    n = 0
    for m, meta in zip(t.messages, t.message_meta, strict=True):
        if m["role"] != "tool":
            continue
        text = m.get("content") or ""
        if meta.get("malformed") or ("malformed" not in meta and text.startswith(_MALFORMED_TEXT)):
            n += 1
    return n


def judge(t: Trajectory, path: Path | None = None) -> Verdict:
    reasons = []
    if not t.complete:
        reasons.append("incomplete")
    if t.damaged:  # lines the loader had to skip: the conversation is not the one the model saw
        reasons.append(f"{len(t.damaged)} damaged line(s)")
    if t.reward is None or t.reward <= 0:
        reasons.append(f"reward {t.reward}")
    if not any(m["role"] == "assistant" for m in t.messages):
        reasons.append("no reply of the model")
    if n := malformed_calls(t):
        reasons.append(f"{n} malformed call(s)")
    if has_loop(t.messages):
        reasons.append("loop of repeated calls")
    return Verdict(path or Path(), not reasons, reasons, t.reward)


def _conversation(t: Trajectory) -> list[dict[str, Any]]:
    msgs = [openai_to_template(m) for m in t.messages]
    last = max((i for i, m in enumerate(msgs) if m["role"] == "assistant"), default=-1)
    return msgs[: last + 1]


def sft_row(t: Trajectory, path: Path) -> dict[str, Any]:
    return {
        "messages": json.dumps(_conversation(t), ensure_ascii=False),
        "tools": json.dumps(t.header.get("tools") or []),
        "task_name": (t.header.get("task") or {}).get("name"),
        "reward": int(t.reward or 0),
        "run": str(path),
    }


def vp_row(t: Trajectory, path: Path, index: int) -> dict[str, Any]:
    conv = _conversation(t)
    first = next(i for i, m in enumerate(conv) if m["role"] == "assistant")
    return {
        "data_source": "cuda_agent/replay",
        "prompt": [{"role": m["role"], "content": m["content"]} for m in conv[:first]],
        "ability": "cuda",
        "reward_model": {"style": "rule", "ground_truth": (t.header.get("task") or {}).get("hash", "")},
        "extra_info": {
            "index": index,
            "messages": json.dumps(conv, ensure_ascii=False),
            "tools": json.dumps(t.header.get("tools") or []),
            "reward": int(t.reward or 0),
            "run": str(path),
        },
        "agent_name": "cuda_agent_replay",
    }


def filter_runs(paths: list[str | Path]) -> tuple[list[tuple[Path, Trajectory]], list[Verdict]]:
    """(kept (path, trajectory) pairs, every verdict) over all runs found under `paths`."""
    kept, verdicts = [], []
    for p in find_runs(paths):
        try:
            t = load_trajectory(p)
        except (OSError, ValueError) as e:
            verdicts.append(Verdict(p, False, [f"unreadable: {e}"]))
            continue
        v = judge(t, p)
        verdicts.append(v)
        if v.keep:
            kept.append((p, t))
    return kept, verdicts
