"""The per-task pages of a bench report, and an agent episode rendered turn by turn.

Contract: `task_page(report, row)` returns report/<task>.html: the best evaluation's status,
reward, message, absolute times and speedups, timing statistics, phases, what came from a
cache, the findings (#findings), the correctness checks (#checks), the runtime defences in
force, the scored kernels with their source (#kernels: RUN_DIR/candidates/<task>/ or the
episode's best/), and the compiler or child log (#log). `episode_page(trajectory)` renders a
trajectory.jsonl (docs/trajectory.md): the header, then per turn the model's reply (reasoning
folded), its tool calls with arguments, each tool result (folded), evaluator results and
notes, and the end record. Both are self-contained HTML; text is escaped.

Not guaranteed: files over 200 kB are cut (the page says so); a trajectory still being written
shows up to its last complete line.
"""

from __future__ import annotations

import json
from html import escape as e
from pathlib import Path
from typing import Any

from cuda_agent.bench.report import Report, TaskRow, fmt_ms, fmt_x
from cuda_agent.task.workspace import SOURCE_SUFFIXES

MAX_FILE_CHARS = 200_000
CSS = """body{font-family:sans-serif;margin:1.5em 2em;color:#222;max-width:80em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}pre{background:#f6f6f6;padding:.6em;
overflow:auto;max-height:40em;white-space:pre-wrap}.reject{color:#c00}.warn{color:#a60}.turn{border-top:2px solid #ddd;
margin-top:1em;padding-top:.3em}.tool{margin-left:1.5em}.eval{background:#eef6ee;padding:.3em}.nudge{color:#06c}"""


def _page(title: str, body: str, back: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>{e(title)}</title><style>{CSS}</style></head><body>"
        f'<p><a href="{e(back)}">back</a></p><h1>{e(title)}</h1>{body}</body></html>\n'
    )


def _kv(rows: list[tuple[str, Any]], tid: str = "") -> str:
    return (
        f"<table{f' id={tid}' if tid else ''}>"
        + "".join(f"<tr><th>{e(k)}</th><td>{e(str(v))}</td></tr>" for k, v in rows)
        + "</table>"
    )


def _cut(text: str) -> str:
    return (
        text if len(text) <= MAX_FILE_CHARS else text[:MAX_FILE_CHARS] + f"\n[... cut: {len(text)} characters in all]"
    )


def kernel_files(d: Path | None) -> list[tuple[str, str]]:
    """(relative path, text) of the candidate's sources, model_new.py first."""
    if d is None or not d.is_dir():
        return []
    files = sorted(
        (p for p in d.rglob("*") if p.is_file() and p.suffix in (*SOURCE_SUFFIXES, ".py")),
        key=lambda p: (p.name != "model_new.py", str(p.relative_to(d))),
    )
    return [(str(p.relative_to(d)), _cut(p.read_text(errors="replace"))) for p in files]


def task_page(rep: Report, r: TaskRow) -> str:
    res, o = r.result or {}, r.outcome
    t = res.get("timing") or {}
    summary = [
        ("level", r.group),
        ("state", r.state),
        ("status", o.status or r.state),
        ("reward", "-" if o.reward is None else o.reward),
        ("message", res.get("message", "")),
        ("candidate ms", fmt_ms(res.get("time_ms"))),
        ("eager ms", fmt_ms(res.get("eager_ms"))),
        ("torch.compile ms", fmt_ms(res.get("compile_ms"))),
        ("vs eager", fmt_x(o.speedup_vs_eager)),
        ("vs torch.compile", fmt_x(o.speedup_vs_compile)),
    ]
    if t:
        robust = f"p10-p90 spread {t['spread']:.1%}, " if t.get("spread") is not None else ""  # what bounds the rounds
        summary.append(
            (
                "timing",
                f"median {t.get('median_ms'):.4g} ms, mean {t.get('mean_ms'):.4g}, min {t.get('min_ms'):.4g}, "
                f"{robust}cv {t.get('cv', 0):.1%}, n={t.get('n')}, rounds {t.get('rounds')}, host enqueue "
                f"{_g(t.get('enqueue_ms'))} ms, stream hold {_g(t.get('hold_ms'))} ms (device time counts)",
            )
        )
    summary += [
        ("GPU", res.get("gpu")),
        ("torch", res.get("torch")),
        ("precision", res.get("precision")),
        ("phases (s)", ", ".join(f"{k} {v}" for k, v in (res.get("phases_s") or {}).items() if "." not in k) or "-"),
        ("from a cache", ", ".join(k for k, v in (res.get("cache") or {}).items() if v) or "nothing"),
        ("task hash", res.get("task_hash")),
        ("candidate hash", res.get("candidate_hash")),
        ("evaluations of this task", r.n_evaluations),
    ]
    findings = res.get("findings") or []
    ftable = (
        (
            "<table><tr><th>severity</th><th>rule</th><th>where</th><th>message</th></tr>"
            + "".join(
                f'<tr class="{e(f.get("severity", ""))}"><td>{e(f.get("severity", ""))}</td><td>{e(f.get("rule", ""))}</td>'
                f"<td>{e((f.get('file') or '-') + (':' + str(f['line']) if f.get('line') else ''))}</td><td>{e(f.get('message', ''))}</td></tr>"
                for f in findings
            )
            + "</table>"
        )
        if findings
        else "<p>none</p>"
    )
    checks = res.get("checks") or []
    ctable = (
        (
            "<table><tr><th>input set</th><th>passed</th><th>max abs error</th><th>relative L2</th><th>worst / tolerance</th>"
            "<th>mismatched</th><th>message</th></tr>"
            + "".join(
                f"<tr><td>{e(c.get('label', ''))}</td><td>{c.get('passed')}</td><td>{_g(c.get('max_abs_err'))}</td>"
                f"<td>{_g(c.get('rel_l2_err'))}</td><td>{_g(c.get('tol_ratio'))}</td><td>{_g(c.get('mismatch_frac'))}</td>"
                f"<td>{e(c.get('message', ''))}</td></tr>"
                for c in checks
            )
            + "</table>"
        )
        if checks
        else "<p>none ran</p>"
    )
    files = kernel_files(r.candidate_dir)
    kernels = (
        "".join(f"<h3>{e(name)}</h3><pre>{e(text)}</pre>" for name, text in files)
        or "<p>The candidate's files were not kept with this run (runs made before issue 17, or no solution).</p>"
    )
    log = res.get("log") or ""
    episode = (
        f'<p><a href="{e(Path(r.page).name.replace(".html", ".episode.html"))}">the agent\'s episode, turn by turn</a></p>'
        if r.episode is not None
        else ""
    )
    body = (
        _kv(summary, "summary")
        + episode
        + f'<h2 id="findings">Findings</h2>{ftable}<h2 id="checks">Checks</h2>{ctable}'
        f'<h2 id="defences">Defences</h2>{_kv(sorted((res.get("defences") or {}).items()))}'
        f'<h2 id="kernels">Kernels</h2>{kernels}<h2 id="log">Build and run log</h2>'
        f"<pre>{e(_cut(log)) if log.strip() else '(empty: nothing failed, or nothing was logged)'}</pre>"
    )
    return _page(f"{r.task_id} ({rep.run_dir.name})", body, "../report.html")


def _g(v: Any) -> str:
    return "-" if v is None else (f"{v:.3g}" if isinstance(v, float) else e(str(v)))


def episode_page(path: Path, back: str) -> str:
    from cuda_agent.agent.trajectory import load_trajectory

    try:
        t = load_trajectory(path)
    except (OSError, ValueError) as err:
        return _page(f"episode {path}", f"<p>cannot read the trajectory: {e(str(err))}</p>", back)
    h = t.header
    task = h.get("task") or {}
    parts = [
        _kv(
            [
                ("task", f"{task.get('name')} ({task.get('hash')})"),
                ("model", h.get("model")),
                ("endpoint", h.get("base_url") or "default"),
                ("tool mode", h.get("tool_mode")),
                ("created", h.get("created")),
                ("sandbox", h.get("sandbox")),
            ],
            "episode-header",
        )
    ]
    for r in t.records:
        parts.append(_record(r))
    if t.damaged:
        parts.append(f"<p class=warn>{len(t.damaged)} damaged line(s) skipped: {e('; '.join(t.damaged[:5]))}</p>")
    end = t.end
    parts.append(
        "<h2 id=end>End</h2>"
        + (
            _kv(
                [
                    ("reason", end.get("reason")),
                    ("error", end.get("error") or "-"),
                    ("turns", end.get("turns")),
                    ("reward", end.get("reward")),
                    ("best turn", end.get("best_turn")),
                    ("wall s", end.get("wall_s")),
                    ("tokens", (end.get("usage") or {}).get("total_tokens")),
                ]
            )
            if end
            else "<p>no end record: the run is in progress or died</p>"
        )
    )
    return _page(f"episode: {task.get('name')}", "".join(parts), back)


def _record(r: dict[str, Any]) -> str:
    kind = r.get("type")
    if kind == "message":
        m = r.get("message") or {}
        role, content = m.get("role"), m.get("content") or ""
        if role == "assistant":
            u = r.get("usage") if isinstance(r.get("usage"), dict) else {}
            calls = "".join(
                f'<div class="tool">&#9656; <b>{e(c["function"]["name"])}</b><pre>{e(_args(c["function"].get("arguments", "")))}</pre></div>'
                for c in m.get("tool_calls") or []
            )
            reasoning = (
                f"<details><summary>reasoning</summary><pre>{e(str(r['reasoning']))}</pre></details>"
                if r.get("reasoning")
                else ""
            )
            return (
                f'<div class="turn" id="turn-{r.get("turn")}"><b>turn {r.get("turn")}</b> ({u.get("prompt_tokens", "?")} + '
                f"{u.get('completion_tokens', '?')} tokens, {_sec(r.get('latency_s', 0), '.1f')} s){reasoning}"
                f"{f'<pre>{e(content)}</pre>' if content else ''}{calls}</div>"
            )
        if role == "tool":
            ok = "ok" if r.get("ok") else "failed"
            return (
                f'<details class="tool"><summary>{e(str(r.get("name", "tool")))} result ({ok}, {_sec(r.get("elapsed_s", 0), ".2f")} s)'
                f"</summary><pre>{e(_cut(str(content)))}</pre></details>"
            )
        label = "nudge" if r.get("nudge") else role
        return f'<details class="{e(str(label))}"><summary>{e(str(label))} message</summary><pre>{e(_cut(str(content)))}</pre></details>'
    if kind == "eval":
        res = r.get("result") or {}
        sp = ", ".join(
            f"{fmt_x(res.get(k))} vs {n}"
            for k, n in (("speedup_vs_eager", "eager"), ("speedup_vs_compile", "compile"))
            if isinstance(res.get(k), int | float) and res.get(k)
        )
        return (
            f'<div class="eval">{e(str(r.get("phase")))}: status {e(str(res.get("status")))}, reward {res.get("reward")}'
            f"{', ' + e(sp) if sp else ''}{' <b>new best</b>' if r.get('best') else ''} - {e(str(res.get('message', '')))}</div>"
        )
    if kind == "note":
        detail = {k: v for k, v in r.items() if k not in ("type", "kind", "turn", "traceback")}
        return f"<p class=warn>note {e(str(r.get('kind')))}: {e(json.dumps(detail)[:300])}</p>"
    return ""


def _sec(v: Any, fmt: str) -> str:
    """A number of seconds from a record, "?" when a damaged record holds something else."""
    return format(v, fmt) if isinstance(v, int | float) else "?"


def _args(raw: str) -> str:
    try:
        a = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return raw
    if isinstance(a, dict) and set(a) == {"command"}:
        return str(a["command"])
    return json.dumps(a, indent=1, ensure_ascii=False)
