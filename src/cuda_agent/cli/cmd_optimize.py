"""`cuda-agent optimize TASK.py --model NAME`: run the agent on one task.

Contract: creates RUN_DIR (default runs/<task>-<time>) with workspace/,
trajectory.jsonl (appended every step) and best/ (the best correct candidate),
then prints a summary table. The endpoint comes from --base-url / --api-key or
OPENAI_BASE_URL / OPENAI_API_KEY; any OpenAI-compatible server works (vLLM,
SGLang, hosted APIs). Exit 0 when the episode ran to a clean end (whatever the
reward), 2 with one line on stderr for bad input, a context budget that cannot
hold the first prompt plus a reply (the line names the numbers and the flag),
or an endpoint that cannot be used (unreachable, wrong key, unknown model)
after retries. Retries (attempt, wait, reason) and a switch to text tool calls
(`--tool-mode auto` found that the server rejects or ignores the tools field)
are said on stderr as they happen, also with --quiet.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from cuda_agent.cli.argtypes import at_least, positive_float, positive_int, temperature
from cuda_agent.cli.main import UsageError

HELP = "run the agent on a task: write, verify and profile CUDA kernels with an LLM"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", help="task file (KernelBench format: Model, get_inputs, get_init_inputs)")
    p.add_argument(
        "--model", default=os.environ.get("OPENAI_MODEL"), help="model name as the server knows it (env OPENAI_MODEL)"
    )
    p.add_argument(
        "--base-url",
        default=None,
        help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (env OPENAI_BASE_URL)",
    )
    p.add_argument("--api-key", default=None, help="API key (env OPENAI_API_KEY; a local server needs none)")
    p.add_argument("-o", "--output", metavar="RUN_DIR", default=None, help="run directory (default runs/<task>-<time>)")
    p.add_argument("--max-turns", type=positive_int, default=200, help="model replies at most (default 200)")
    p.add_argument(
        "--max-tokens", type=positive_int, default=None, help="total tokens (prompt + completion, all turns) at most"
    )
    p.add_argument(
        "--max-wall",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="wall time at most (checked between turns)",
    )
    p.add_argument(
        "--context",
        type=positive_int,
        default=None,
        help="context budget in tokens (default: the window the server reports, else 131072)",
    )
    p.add_argument(
        "--reply-tokens",
        type=positive_int,
        default=None,
        help="max tokens per reply, kept free in the context (default 8192, at most a quarter of the "
        "budget; a hosted API without --base-url keeps its own limit)",
    )
    p.add_argument(
        "--temperature", type=temperature, default=None, help="sampling temperature, 0 to 2 (default: the server's)"
    )
    p.add_argument(
        "--tool-mode",
        choices=("auto", "native", "text"),
        default="auto",
        help="native tool calling, <tool_call> blocks in text, or auto-detect (default)",
    )
    p.add_argument(
        "--max-no-tool",
        type=positive_int,
        default=3,
        metavar="N",
        help="end the run after N replies in a row without a tool call (default 3)",
    )
    p.add_argument(
        "--max-malformed",
        type=positive_int,
        default=3,
        metavar="N",
        help="end the run after N replies in a row holding only malformed tool calls (default 3)",
    )
    p.add_argument(
        "--extra-body",
        type=_json_object,
        default=None,
        metavar="JSON",
        help="extra request fields for the server, a JSON object (vLLM's {\"top_k\": 20}, llama.cpp's grammar)",
    )
    p.add_argument(
        "--retries", type=at_least(0), default=5, help="retries of a failed request (429, 5xx, connection), default 5"
    )
    p.add_argument("--bash-timeout", type=positive_float, default=180.0, help="seconds per shell command (default 180)")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-turn progress lines")


def _json_object(text: str) -> dict[str, Any]:
    try:
        v = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e}") from None
    if not isinstance(v, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {type(v).__name__}")
    return v


def _say(line: str) -> None:
    print(f"cuda-agent optimize: {line}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from cuda_agent.agent.context import BudgetError
    from cuda_agent.agent.loop import AgentConfig, run_episode
    from cuda_agent.llm.client import ChatClient, ClientConfig, LLMError
    from cuda_agent.task.taskfile import Task

    task = Task.from_file(args.task)
    base_url = args.base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = args.api_key or os.environ.get("OPENAI_API_KEY") or None
    if not args.model:
        raise UsageError("no model: pass --model NAME (or set OPENAI_MODEL)")
    if base_url and not base_url.startswith(("http://", "https://")):
        raise UsageError(f"--base-url must start with http:// or https://, got {base_url!r}")
    if not base_url and not api_key:
        raise UsageError(
            "no endpoint: pass --base-url for a local server, or --api-key / OPENAI_API_KEY for a hosted API"
        )
    run_dir = Path(args.output or Path("runs") / f"{task.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    if (run_dir / "trajectory.jsonl").exists():
        raise UsageError(f"{run_dir} already holds a run; choose another -o RUN_DIR")
    try:
        client = ChatClient(
            ClientConfig(
                model=args.model,
                base_url=base_url,
                api_key=api_key,
                tool_mode=args.tool_mode,
                max_retries=args.retries,
                temperature=args.temperature,
                max_tokens=args.reply_tokens,
                extra_body=args.extra_body,
            ),
            notify=_say,
        )
    except LLMError as e:
        raise UsageError(f"cannot set up the model client: {e}") from None
    cfg = AgentConfig(
        max_turns=args.max_turns,
        max_total_tokens=args.max_tokens,
        max_wall_s=args.max_wall,
        context_tokens=args.context,
        reply_reserve_tokens=args.reply_tokens,
        max_no_tool=args.max_no_tool,
        max_malformed=args.max_malformed,
        bash_timeout_s=args.bash_timeout,
    )
    console = Console()
    if not args.quiet:
        console.print(f"task {task.name}: {task.describe_precision()}", highlight=False, markup=False)
    progress = None if args.quiet else (lambda info: console.print(_progress_line(info), highlight=False))
    try:
        summary = run_episode(task, run_dir, client, cfg, progress=progress)
    except BudgetError as e:
        raise UsageError(str(e)) from None
    if summary.reason == "llm_error" and summary.turns == 0:
        print(f"cuda-agent optimize: model endpoint {base_url or 'api.openai.com'}: {summary.error}", file=sys.stderr)
        return 2
    console.print(summary_table(summary, args.model))
    for n in summary.notes:
        console.print(f"[yellow]note:[/] {n}")
    if summary.reason == "llm_error":
        print(
            f"cuda-agent optimize: model endpoint failed at turn {summary.turns + 1}: {summary.error}", file=sys.stderr
        )
        return 2
    return 0


def _fmt_tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 10000 else str(n)


def _progress_line(info: dict[str, Any]) -> str:
    b = info["best"]
    best = (
        "none yet"
        if b is None
        else f"reward {b.reward}" + (f", {b.speedup_vs_compile:.2f}x vs compile" if b.speedup_vs_compile else "")
    )
    calls = ", ".join(info["calls"])
    return f"[dim]turn {info['turn']:>3}[/]  {calls:<40.40}  tokens {_fmt_tokens(info['usage']['total_tokens']):>7}  best: {best}"


def summary_table(s: Any, model: str) -> Any:
    from rich.table import Table

    from cuda_agent.cli.cmd_show import ending

    t = Table(title=f"cuda-agent optimize: {model}", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    r = s.best.result if s.best else None
    x = lambda v: f"{v:.2f}x" if v else "-"  # noqa: E731
    t.add_row("run", str(s.run_dir))
    why = ending(s.reason, s.limits)
    t.add_row("ended", s.reason + (f" ({s.error})" if s.error else "") + (f": {why}" if why else ""))
    t.add_row("turns", str(s.turns))
    t.add_row(
        "tokens",
        f"{s.usage['total_tokens']} (prompt {s.usage['prompt_tokens']}, completion {s.usage['completion_tokens']})",
    )
    t.add_row("wall time", f"{s.wall_s:.1f} s")
    t.add_row(
        "best candidate",
        f"turn {s.best.turn}, {r.time_ms:.4g} ms"
        if s.best and r and r.time_ms
        else (f"turn {s.best.turn} (not timed)" if s.best else "none"),
    )
    t.add_row("speedup vs eager", x(r.speedup_vs_eager) if r else "-")
    t.add_row("speedup vs torch.compile", x(r.speedup_vs_compile) if r else "-")
    t.add_row("reward", str(s.reward))
    return t
