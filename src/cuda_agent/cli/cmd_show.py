"""`cuda-agent show RUN_DIR`: a run's trajectory, readable in a terminal.

Contract: reads RUN_DIR/trajectory.jsonl (or a trajectory file) with
`load_trajectory` and prints, in order, the header, every assistant reply with
its tool calls, each tool result (cut unless --full), evaluator results in one
line each, notes (elisions, retries, tool-mode switches, the tools probe, budget
changes, harness errors) and the end record, with what an early end means and
the flag that sets its limit. Read-only; exit 2 with one line for a missing or
unreadable file (empty, a cut-off or non-object first line, another format); a
damaged line further on is skipped, and the lines skipped are listed last.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from cuda_agent.cli.argtypes import positive_int
from cuda_agent.cli.main import UsageError

HELP = "show a run (trajectory.jsonl) readably"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run directory (or its trajectory.jsonl)")
    p.add_argument("--full", action="store_true", help="do not cut long texts")
    p.add_argument("--lines", type=positive_int, default=12, help="lines kept of each long text (default 12)")


def _cut(text: str, lines: int, full: bool) -> str:
    rows = (text or "").splitlines()
    if full or len(rows) <= lines:
        return "\n".join(rows)
    half = max(1, lines // 2)
    return "\n".join(rows[:half] + [f"[... {len(rows) - 2 * half} lines ...]"] + rows[-half:])


def _call_summary(name: str, raw: str) -> str:
    try:
        a = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return f"{name}(<invalid JSON>)"
    if not isinstance(a, dict):
        return f"{name}({raw[:80]})"
    if name == "bash":
        return f"bash: {a.get('command', '')}"
    if name == "write":
        return f"write {a.get('path')} ({len(str(a.get('content', '')).splitlines())} lines)"
    if name in ("edit", "multi_edit"):
        return f"{name} {a.get('path')}"
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in a.items())[:120]})"


def _eval_line(r: dict[str, Any]) -> str:
    sp = [
        f"{v:.2f}x vs {k}"
        for k, v in (("eager", r.get("speedup_vs_eager")), ("compile", r.get("speedup_vs_compile")))
        if isinstance(v, int | float) and v
    ]
    return (
        f"status {r.get('status')}, reward {r.get('reward')}"
        + (", " + ", ".join(sp) if sp else "")
        + (f" - {r['message']}" if r.get("message") else "")
    )


def _num(v: Any, fmt: str = "{:.1f}") -> str:
    return fmt.format(v) if isinstance(v, int | float) else "?"


def ending(reason: Any, config: dict[str, Any]) -> str:
    """What an end reason means, for the early ends whose limit a flag sets."""
    if reason == "no_tool_call":
        return f"{config.get('max_no_tool', '?')} replies in a row without a tool call (--max-no-tool)"
    if reason == "malformed_calls":
        return f"{config.get('max_malformed', '?')} replies in a row with only malformed tool calls (--max-malformed)"
    return ""


def _budget_line(h: dict[str, Any]) -> str:
    b, c = h.get("budget") or {}, h.get("config") or {}
    parts = []
    if b:
        parts.append(
            f"context {b.get('context_tokens')} tokens ({b.get('source')}), {b.get('reserve_tokens')} kept for replies, "
            f"first prompt about {b.get('first_prompt_tokens')}"
            + (f", each reply asked for at most {b['reply_cap']}" if b.get("reply_cap") else "")
        )
    if c:
        parts.append(
            f"ends after {c.get('max_no_tool', '?')} replies without a tool call or {c.get('max_malformed', '?')} "
            f"with only malformed calls, {c.get('max_turns', '?')} turns at most"
        )
    return "\n".join(parts)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.panel import Panel

    from cuda_agent.agent.trajectory import load_trajectory

    try:
        t = load_trajectory(args.run)
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read {args.run}: {' '.join(str(e).split())}") from None
    con = Console()
    h = t.header
    task = h.get("task") or {}
    extra = _budget_line(h)
    con.print(
        Panel(
            f"task [bold]{escape(str(task.get('name')))}[/] ({task.get('hash')})\nmodel {escape(str(h.get('model')))} at "
            f"{escape(str(h.get('base_url') or 'default endpoint'))}, tool mode {h.get('tool_mode')}\n"
            f"created {h.get('created')}, sandbox {h.get('sandbox')}, format {h.get('format')}"
            + (f"\n{escape(extra)}" if extra else ""),
            title="run",
        )
    )
    for r in t.records:
        kind = r.get("type")
        if kind == "message":
            m = r["message"]
            role = m["role"]
            if role == "system":
                con.print(
                    Panel(escape(_cut(m.get("content") or "", args.lines, args.full)), title="system", style="dim")
                )
            elif role == "user":
                title = "nudge" if r.get("nudge") else "user"
                con.print(Panel(escape(_cut(m.get("content") or "", args.lines, args.full)), title=title, style="cyan"))
            elif role == "assistant":
                u = r.get("usage") if isinstance(r.get("usage"), dict) else {}
                con.rule(
                    f"turn {r.get('turn', '?')}  ({u.get('prompt_tokens', '?')} + {u.get('completion_tokens', '?')} tokens, "
                    f"{_num(r.get('latency_s', 0))}s)"
                )
                if isinstance(r.get("reasoning"), str) and r["reasoning"]:
                    con.print(escape(_cut(r["reasoning"], args.lines, args.full)), style="dim italic")
                if m.get("content"):
                    con.print(escape(_cut(m["content"], args.lines, args.full)))
                for c in m.get("tool_calls") or []:
                    con.print(
                        f"[bold magenta]>[/] {escape(_call_summary(c['function']['name'], c['function'].get('arguments', '')))}"
                    )
            elif role == "tool":
                style = "green" if r.get("ok") else "red"
                bad = ", malformed" if r.get("malformed") else ""
                con.print(
                    Panel(
                        escape(_cut(m.get("content") or "", args.lines, args.full)),
                        title=f"{escape(str(r.get('name', 'tool')))} ({_num(r.get('elapsed_s', 0), '{:.2f}')}s{bad})",
                        style=style,
                        title_align="left",
                    )
                )
        elif kind == "eval":
            star = " [bold yellow]new best[/]" if r.get("best") else ""
            con.print(f"[bold]{escape(str(r.get('phase')))}[/]: {escape(_eval_line(r['result']))}{star}")
        elif kind == "note":
            detail = {k: v for k, v in r.items() if k not in ("type", "kind", "turn", "traceback")}
            con.print(f"[yellow]note {escape(r['kind'])}[/] {escape(json.dumps(detail, default=str)[:200])}")
    if t.damaged:
        con.print(
            f"[red]{len(t.damaged)} damaged line{'s' if len(t.damaged) != 1 else ''} skipped:[/] "
            + escape("; ".join(t.damaged[:5]) + ("; ..." if len(t.damaged) > 5 else ""))
        )
    e = t.end
    if e is None:
        con.print(
            "[red]no end record: the run is in progress or crashed[/]" + (" (last line cut)" if t.truncated else "")
        )
        return 0
    u = e.get("usage") or {}
    why = ending(e.get("reason"), h.get("config") or {})
    con.print(
        Panel(
            f"ended: {escape(str(e.get('reason')))}"
            + (f" ({escape(str(e['error']))})" if e.get("error") else "")
            + (f"\n{escape(why)}" if why else "")
            + f"\nturns {e.get('turns')}, tokens {u.get('total_tokens')} (prompt {u.get('prompt_tokens')}, completion "
            f"{u.get('completion_tokens')}), wall {e.get('wall_s')} s\nbest: "
            + (escape(_eval_line(t.best.result.to_dict())) + f" (turn {t.best.turn})" if t.best else "none")
            + f"\nreward {e.get('reward')}",
            title="end",
            style="bold",
        )
    )
    return 0
