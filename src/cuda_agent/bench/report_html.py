"""The main page of a bench report (report.html): one self-contained file, no network.

Contract: `html_page(report)` returns the page: the header (suite, GPU, driver, torch, CUDA,
dates, commit, evaluator settings), notes (not scored, unfinished, harness errors), the
paper's metrics per level and overall, reward counts, KernelBench's fast_p curves against
eager and torch.compile (inline SVG, `svg.step_chart`) with a table of fast_p at fixed p per
level, per-task speedups (`svg.bar_chart`), and the task table: absolute times (ms) beside
the ratios, status, reward, links to each task's page (kernels, build log, findings) and
episode. The table sorts by any column (click its header) and filters by text, level and
status with plain inline JavaScript; the state lives in the URL's #fragment
(`#sort=vs_compile:desc&level=level1&status=ok&q=relu`), so a link reproduces a view, and
`<body data-ready>` is set once it is applied. Nothing is fetched: the machines that run
benches have no network, and the page opens from file:// as well as from `cuda-agent view`.

Not guaranteed: a layout to parse; read results.sqlite for data.
"""

from __future__ import annotations

from html import escape as e

from cuda_agent.bench.metrics import REWARD_KEYS, fast_p_points
from cuda_agent.bench.report import COLUMNS, FAST_P, Report, TaskRow, cells, fmt_pct, fmt_x, header_facts, notes
from cuda_agent.bench.svg import bar_chart, step_chart

REWARD_COLOUR = {3: "#1a9850", 2: "#91cf60", 1: "#fdae61", -1: "#d73027"}
NOT_SCORED_COLOUR = "#bbbbbb"
# (key, header, value of a row); the key is what #sort= names
TASK_COLUMNS = (
    "task",
    "level",
    "status",
    "reward",
    "ms",
    "eager_ms",
    "compile_ms",
    "vs_eager",
    "vs_compile",
    "cv",
    "evals",
)

CSS = """body{font-family:sans-serif;margin:1.5em 2em;color:#222}table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child,th:first-child{text-align:left}
th.sort{cursor:pointer;user-select:none;background:#f4f4f4}th.sort[data-dir=asc]::after{content:" \\25B2"}
th.sort[data-dir=desc]::after{content:" \\25BC"}.note{color:#a60}.facts td{text-align:left}.facts td:first-child{font-weight:bold}
tr.not_scored td{color:#888}tr.fail td.status{color:#c00}.controls{margin:.5em 0}.controls *{margin-right:1em}
.figs{display:flex;flex-wrap:wrap;gap:1em}code{background:#f4f4f4;padding:0 3px}#tasks td:last-child{text-align:left}"""

JS = """(function(){
const table=document.getElementById('tasks'),body=table.tBodies[0],rows=Array.from(body.rows);
const q=document.getElementById('q'),lv=document.getElementById('level'),st=document.getElementById('status');
let sort=null,dir='asc';
function val(tr,key){const td=tr.querySelector('td[data-k="'+key+'"]');const v=td?td.dataset.v:'';
  const n=parseFloat(v);return v!==''&&!isNaN(n)&&isFinite(v)?n:(v===''?null:v.toLowerCase());}
function apply(){
  const text=q.value.toLowerCase();let shown=0;
  rows.forEach(tr=>{const ok=(!text||tr.textContent.toLowerCase().includes(text))&&(!lv.value||tr.dataset.level===lv.value)
    &&(!st.value||tr.dataset.status===st.value);tr.hidden=!ok;if(ok)shown++;});
  if(sort){const s=dir==='asc'?1:-1;rows.sort((a,b)=>{const x=val(a,sort),y=val(b,sort);
    if(x===null&&y===null)return 0;if(x===null)return 1;if(y===null)return -1;
    return (typeof x==='number'&&typeof y==='number'?x-y:String(x).localeCompare(String(y)))*s;});
    rows.forEach(tr=>body.appendChild(tr));}
  table.querySelectorAll('th.sort').forEach(th=>{if(th.dataset.k===sort)th.dataset.dir=dir;else delete th.dataset.dir;});
  document.getElementById('shown').textContent=shown+' of '+rows.length+' tasks shown';
  const h=[];if(sort)h.push('sort='+sort+':'+dir);if(lv.value)h.push('level='+encodeURIComponent(lv.value));
  if(st.value)h.push('status='+encodeURIComponent(st.value));if(q.value)h.push('q='+encodeURIComponent(q.value));
  history.replaceState(null,'',h.length?'#'+h.join('&'):location.pathname+location.search);}
function load(){const h=new URLSearchParams(location.hash.slice(1));
  if(h.get('sort')){const p=h.get('sort').split(':');sort=p[0];dir=p[1]==='desc'?'desc':'asc';}
  if(h.get('level'))lv.value=h.get('level');if(h.get('status'))st.value=h.get('status');if(h.get('q'))q.value=h.get('q');}
table.querySelectorAll('th.sort').forEach(th=>th.addEventListener('click',()=>{
  if(sort===th.dataset.k)dir=dir==='asc'?'desc':'asc';else{sort=th.dataset.k;dir=th.dataset.num?'desc':'asc';}apply();}));
[q,lv,st].forEach(el=>el.addEventListener('input',apply));
load();apply();document.body.dataset.ready='1';})();"""


def _num(v: float | None, fmt: str) -> tuple[str, str]:
    return ("", "-") if v is None else (f"{v:.6g}", format(v, fmt))


def _task_cells(r: TaskRow) -> dict[str, tuple[str, str]]:
    """column key -> (sort value, shown text)."""
    o, res = r.outcome, r.result or {}
    timing = res.get("timing") or {}
    status = o.status or r.state
    return {
        "task": (r.task_id, r.task_id),
        "level": (r.group, r.group),
        "status": (status, status),
        "reward": ("" if o.reward is None else str(o.reward), "-" if o.reward is None else str(o.reward)),
        "ms": _num(r.ms("time_ms"), ".4g"),
        "eager_ms": _num(r.ms("eager_ms"), ".4g"),
        "compile_ms": _num(r.ms("compile_ms"), ".4g"),
        "vs_eager": ("" if o.speedup_vs_eager is None else f"{o.speedup_vs_eager:.6g}", fmt_x(o.speedup_vs_eager)),
        "vs_compile": (
            "" if o.speedup_vs_compile is None else f"{o.speedup_vs_compile:.6g}",
            fmt_x(o.speedup_vs_compile),
        ),
        "cv": _num(timing["spread"] if timing.get("spread") is not None else timing.get("cv"), ".1%"),
        "evals": (str(r.n_evaluations), str(r.n_evaluations)),
    }


def _links(r: TaskRow) -> str:
    page = e(r.page)
    out = [
        f'<a href="{page}#kernels">kernels</a>',
        f'<a href="{page}#log">build log</a>',
        f'<a href="{page}#findings">findings ({len((r.result or {}).get("findings") or [])})</a>',
    ]
    if r.episode is not None:
        out.append(f'<a href="{e(r.page.replace(".html", ".episode.html"))}">trajectory</a>')
    return " · ".join(out)


def task_table(rep: Report) -> str:
    heads = {
        "task": "task",
        "level": "level",
        "status": "status",
        "reward": "reward",
        "ms": "ms",
        "eager_ms": "eager ms",
        "compile_ms": "compile ms",
        "vs_eager": "vs eager",
        "vs_compile": "vs compile",
        "cv": "spread",
        "evals": "evaluations",
    }
    numeric = {"reward", "ms", "eager_ms", "compile_ms", "vs_eager", "vs_compile", "cv", "evals"}
    th = "".join(
        f'<th class="sort" data-k="{k}"{" data-num=1" if k in numeric else ""}>{e(heads[k])}</th>' for k in TASK_COLUMNS
    )
    body = []
    for r in rep.tasks.values():
        c = _task_cells(r)
        cls = "not_scored" if not r.scored else ("" if r.outcome.correct else "fail")
        tds = "".join(
            f'<td data-k="{k}" data-v="{e(c[k][0])}"{" class=status" if k == "status" else ""}>{e(c[k][1])}</td>'
            for k in TASK_COLUMNS
        )
        body.append(
            f'<tr class="{cls}" data-level="{e(r.group)}" data-status="{e(c["status"][0])}">{tds}<td>{_links(r)}</td></tr>'
        )
    levels = "".join(f'<option value="{e(g)}">{e(g)}</option>' for g in sorted({r.group for r in rep.tasks.values()}))
    statuses = "".join(
        f'<option value="{e(s)}">{e(s)}</option>'
        for s in sorted({_task_cells(r)["status"][0] for r in rep.tasks.values()})
    )
    return (
        f'<div class="controls"><input id="q" type="search" placeholder="filter tasks (text)">'
        f'<select id="level"><option value="">all levels</option>{levels}</select>'
        f'<select id="status"><option value="">all statuses</option>{statuses}</select><span id="shown"></span></div>'
        f'<table id="tasks"><thead><tr>{th}<th>details</th></tr></thead><tbody>{"".join(body)}</tbody></table>'
    )


def figures(rep: Report) -> str:
    scored = rep.scored_outcomes
    if not scored:
        return "<p class=note>No task was scored, so there is no fast_p curve or speedup to draw.</p>"
    curves = [
        ("vs eager", "#4575b4", fast_p_points(scored, "speedup_vs_eager")),
        ("vs torch.compile", "#d73027", fast_p_points(scored, "speedup_vs_compile")),
    ]
    if rep.has_best:  # issue 32: against each task's fastest measured baseline
        curves.append(("vs best baseline", "#1a9850", fast_p_points(scored, "speedup_vs_best")))
    fp = step_chart(
        curves, title=f"fast_p: correct and more than p x faster ({len(scored)} scored tasks)", fid="fast-p"
    )
    items = []
    for r in sorted(rep.tasks.values(), key=lambda r: (r.outcome.speedup_vs_compile or 0, r.task_id), reverse=True):
        o = r.outcome
        colour = (
            NOT_SCORED_COLOUR
            if not r.scored
            else REWARD_COLOUR.get(o.reward if o.reward is not None else -1, "#d73027")
        )
        tip = f"{r.task_id}: {o.status or r.state}, reward {o.reward}, {fmt_x(o.speedup_vs_compile)} vs compile"
        items.append((r.task_id, o.speedup_vs_compile if r.scored and o.correct else None, colour, tip))
    bars = bar_chart(
        items,
        title="speedup vs torch.compile per task (colour: reward 3 / 2 / 1 / -1, grey: not scored)",
        fid="per-task",
        y_label="t_compile / t (log scale)",
    )
    return f'<div class="figs">{fp}{bars}</div>'


def _table(head: list[str], rows: list[list[str]], tid: str) -> str:
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    return (
        f'<table id="{tid}"><tr>{th}</tr>'
        + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows)
        + "</table>"
    )


def html_page(rep: Report) -> str:
    facts = "".join(f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in header_facts(rep))
    metrics = _table(list(COLUMNS), [cells(g) for g in rep.rows], "metrics")
    keys = [*REWARD_KEYS, "not scored", "unfinished"]
    rewards = _table(
        ["level", *keys], [[g, *(str(c[k]) for k in keys)] for g, c in rep.reward_counts().items()], "rewards"
    )
    fastp = "".join(
        f"<h3>fast_p vs {name}</h3>"
        + _table(
            ["level", *(f"p = {p:g}" for p in FAST_P)],
            [[g, *map(fmt_pct, vals)] for g, vals in rep.fast_p_table(attr).items()],
            f"fast-p-{key}",
        )
        for attr, name, key in (
            ("speedup_vs_eager", "eager", "eager"),
            ("speedup_vs_compile", "torch.compile", "compile"),
            *([("speedup_vs_best", "the best baseline", "best")] if rep.has_best else []),
        )
    )
    if rep.has_best:
        gm = rep.best_geomeans()
        fastp += (
            "<p>Geomean vs the best baseline (event times; not the reward): "
            + ", ".join(f"{e(g)} {fmt_x(v)}" for g, v in gm.items())
            + "</p>"
        )
    note = "".join(f"<p class=note>{e(n)}</p>" for n in notes(rep))
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>cuda-agent report {e(rep.run_dir.name)}</title>"
        f"<style>{CSS}</style></head><body>"
        f"<h1>Benchmark report: {e(rep.run_dir.name)}</h1><table class=facts id=header>{facts}</table>{note}"
        f"<h2>Paper metrics per level</h2><p>Pass = compiled and correct; faster = correct and strictly faster; geomean "
        f"over correct tasks; overall weighted by task count; per task the best evaluation; tasks not scored are left "
        f"out.</p>{metrics}<h2>Rewards</h2><p>Tasks per reward value of their best evaluation.</p>{rewards}"
        f"<h2>fast_p</h2><p>KernelBench's fast_p: the share of scored tasks that are correct and more than p times "
        f"faster than the baseline; p = 0 is correct and timed, p = 1 the faster-than rate.</p>{figures(rep)}{fastp}"
        f"<h2>Tasks</h2>{task_table(rep)}<script>{JS}</script></body></html>\n"
    )
