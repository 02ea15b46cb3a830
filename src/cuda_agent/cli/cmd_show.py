"""`cuda-agent show RUN_DIR`: a run's trajectory, readable in a terminal.

Contract: reads RUN_DIR/trajectory.jsonl (or a trajectory file) with
`load_trajectory` and prints, in order, the header, every assistant reply with
its tool calls, each tool result (cut unless --full), evaluator results in one
line each, notes (elisions, retries, tool-mode switches, harness errors) and the
end record. Read-only; exit 2 for a missing or unreadable file.
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
    sp = [f"{v:.2f}x vs {k}" for k, v in (("eager", r.get("speedup_vs_eager")), ("compile", r.get("speedup_vs_compile"))) if v]
    return f"status {r['status']}, reward {r['reward']}" + (", " + ", ".join(sp) if sp else "") + (f" - {r['message']}" if r.get("message") else "")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.panel import Panel

    from cuda_agent.agent.trajectory import load_trajectory

    try:
        t = load_trajectory(args.run)
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read {args.run}: {e}") from None
    con = Console()
    h = t.header
    task = h.get("task", {})
    con.print(Panel(f"task [bold]{escape(str(task.get('name')))}[/] ({task.get('hash')})\nmodel {escape(str(h.get('model')))} at "
                    f"{escape(str(h.get('base_url') or 'default endpoint'))}, tool mode {h.get('tool_mode')}\n"
                    f"created {h.get('created')}, sandbox {h.get('sandbox')}, format {h.get('format')}", title="run"))
    for r in t.records:
        kind = r.get("type")
        if kind == "message":
            m = r["message"]
            role = m["role"]
            if role == "system":
                con.print(Panel(escape(_cut(m.get("content") or "", args.lines, args.full)), title="system", style="dim"))
            elif role == "user":
                title = "nudge" if r.get("nudge") else "user"
                con.print(Panel(escape(_cut(m.get("content") or "", args.lines, args.full)), title=title, style="cyan"))
            elif role == "assistant":
                u = r.get("usage") or {}
                con.rule(f"turn {r['turn']}  ({u.get('prompt_tokens', '?')} + {u.get('completion_tokens', '?')} tokens, "
                         f"{r.get('latency_s', 0):.1f}s)")
                if r.get("reasoning"):
                    con.print(escape(_cut(r["reasoning"], args.lines, args.full)), style="dim italic")
                if m.get("content"):
                    con.print(escape(_cut(m["content"], args.lines, args.full)))
                for c in m.get("tool_calls") or []:
                    con.print(f"[bold magenta]>[/] {escape(_call_summary(c['function']['name'], c['function'].get('arguments', '')))}")
            elif role == "tool":
                style = "green" if r.get("ok") else "red"
                con.print(Panel(escape(_cut(m.get("content") or "", args.lines, args.full)),
                                title=f"{r.get('name', 'tool')} ({r.get('elapsed_s', 0):.2f}s)", style=style, title_align="left"))
        elif kind == "eval":
            star = " [bold yellow]new best[/]" if r.get("best") else ""
            con.print(f"[bold]{r['phase']}[/]: {escape(_eval_line(r['result']))}{star}")
        elif kind == "note":
            detail = {k: v for k, v in r.items() if k not in ("type", "kind", "turn", "traceback")}
            con.print(f"[yellow]note {r['kind']}[/] {escape(json.dumps(detail)[:200])}")
    e = t.end
    if e is None:
        con.print("[red]no end record: the run is in progress or crashed[/]" + (" (last line cut)" if t.truncated else ""))
        return 0
    u = e.get("usage", {})
    con.print(Panel(f"ended: {e.get('reason')}" + (f" ({escape(str(e['error']))})" if e.get("error") else "") +
                    f"\nturns {e.get('turns')}, tokens {u.get('total_tokens')} (prompt {u.get('prompt_tokens')}, completion "
                    f"{u.get('completion_tokens')}), wall {e.get('wall_s')} s\nbest: " +
                    (_eval_line(t.best.result.to_dict()) + f" (turn {t.best.turn})" if t.best else "none") +
                    f"\nreward {e.get('reward')}", title="end", style="bold"))
    return 0
