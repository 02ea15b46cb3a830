"""Two small inline-SVG charts for the HTML report: step curves and per-item bars.

Contract: `step_chart` and `bar_chart` return one `<svg>` element as text, with no script, no
external reference and no font download, so a report opens offline and a test can read the
figure from the DOM: every series is a `<path class="series" data-label=... data-n=...>` and
every bar a `<rect class="bar" data-label=... data-value=...>` with a `<title>` tooltip.
Scales: p on a log(1 + p) axis (0 stays visible, large speedups do not squash the region
around 1); speedups on a log2 axis around 1. Labels are escaped.

Not guaranteed: good looks beyond a few hundred bars (they become thin, not overlapped).
"""

from __future__ import annotations

import math
from html import escape

W, H, L, R, T, B = 720, 300, 56, 16, 28, 44  # size and margins
_TICKS_P = (0, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


def _frame(title: str, x_label: str, y_label: str, fid: str, body: list[str], height: int = H) -> str:
    return (
        f'<svg class="figure" id="{escape(fid)}" viewBox="0 0 {W} {height}" width="{W}" height="{height}" '
        f'role="img" aria-label="{escape(title)}" font-family="sans-serif" font-size="11">'
        f'<text x="{W / 2}" y="16" text-anchor="middle" font-size="13">{escape(title)}</text>'
        f'<text x="{W / 2}" y="{height - 6}" text-anchor="middle">{escape(x_label)}</text>'
        f'<text transform="translate(14 {height / 2}) rotate(-90)" text-anchor="middle">{escape(y_label)}</text>'
        + "".join(body)
        + "</svg>"
    )


def step_chart(
    series: list[tuple[str, str, list[tuple[float, float]]]],
    *,
    title: str,
    fid: str,
    x_label: str = "p (log(1 + p) scale)",
    y_label: str = "share of tasks",
) -> str:
    """`series`: (label, colour, corners (p, share) of a right-continuous step function, shares in 0..1)."""
    p_max = max([2.0, *(p for _, _, pts in series for p, _ in pts)]) * 1.15
    fx = lambda p: L + (W - L - R) * math.log1p(p) / math.log1p(p_max)  # noqa: E731
    fy = lambda v: T + (H - T - B) * (1 - v)  # noqa: E731
    body = [f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="none" stroke="#999"/>']
    for v in (0, 0.25, 0.5, 0.75, 1):
        body.append(
            f'<line x1="{L}" x2="{W - R}" y1="{fy(v):.1f}" y2="{fy(v):.1f}" stroke="#eee"/>'
            f'<text x="{L - 4}" y="{fy(v) + 4:.1f}" text-anchor="end">{int(v * 100)} %</text>'
        )
    for p in (t for t in _TICKS_P if t <= p_max):
        body.append(
            f'<line x1="{fx(p):.1f}" x2="{fx(p):.1f}" y1="{T}" y2="{H - B}" stroke="#eee"/>'
            f'<text x="{fx(p):.1f}" y="{H - B + 14}" text-anchor="middle">{p:g}</text>'
        )
    body.append(f'<line x1="{fx(1):.1f}" x2="{fx(1):.1f}" y1="{T}" y2="{H - B}" stroke="#888" stroke-dasharray="4 3"/>')
    for i, (label, colour, pts) in enumerate(series):
        if not pts:
            continue
        d = [f"M{fx(pts[0][0]):.1f},{fy(pts[0][1]):.1f}"]
        for p1, v1 in pts[1:]:  # horizontal to the next corner, then down to its share
            d.append(f"H{fx(p1):.1f}V{fy(v1):.1f}")
        d.append(f"H{fx(p_max):.1f}")
        body.append(
            f'<path class="series" data-label="{escape(label)}" data-n="{len(pts)}" data-first="{pts[0][1]:.6g}" '
            f'd="{"".join(d)}" fill="none" stroke="{colour}" stroke-width="2"><title>{escape(label)}</title></path>'
        )
        body.append(
            f'<rect x="{W - R - 150}" y="{T + 8 + 16 * i}" width="12" height="3" fill="{colour}"/>'
            f'<text x="{W - R - 134}" y="{T + 12 + 16 * i}">{escape(label)}</text>'
        )
    return _frame(title, x_label, y_label, fid, body)


def bar_chart(items: list[tuple[str, float | None, str, str]], *, title: str, fid: str, y_label: str) -> str:
    """`items`: (label, value > 0 or None for no value, colour, tooltip); log2 y-axis around 1."""
    vals = [v for _, v, _, _ in items if v]
    top = math.ceil(math.log2(max([2.0, *vals]))) if vals else 1
    bottom = math.floor(math.log2(min([0.5, *vals]))) if vals else -1
    height = H + 60
    plot_b = height - B - 60
    fy = lambda v: T + (plot_b - T) * (top - math.log2(v)) / (top - bottom)  # noqa: E731
    n = max(1, len(items))
    bw = (W - L - R) / n
    body = [f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{plot_b - T}" fill="none" stroke="#999"/>']
    for e in range(bottom, top + 1):
        body.append(
            f'<line x1="{L}" x2="{W - R}" y1="{fy(2.0**e):.1f}" y2="{fy(2.0**e):.1f}" stroke="#eee"/>'
            f'<text x="{L - 4}" y="{fy(2.0**e) + 4:.1f}" text-anchor="end">{2.0**e:g}x</text>'
        )
    body.append(f'<line x1="{L}" x2="{W - R}" y1="{fy(1):.1f}" y2="{fy(1):.1f}" stroke="#888" stroke-dasharray="4 3"/>')
    for i, (label, v, colour, tip) in enumerate(items):
        x = L + i * bw + bw * 0.1
        if v:
            y0, y1 = sorted((fy(1), fy(v)))
            rect = f'x="{x:.1f}" y="{y0:.1f}" width="{bw * 0.8:.1f}" height="{max(y1 - y0, 1):.1f}"'
        else:  # no speedup (failed, not scored): a marker on the axis
            rect = f'x="{x:.1f}" y="{plot_b - 6:.1f}" width="{bw * 0.8:.1f}" height="6"'
        body.append(
            f'<rect class="bar" data-label="{escape(label)}" data-value="{v if v else ""}" {rect} fill="{colour}">'
            f"<title>{escape(tip)}</title></rect>"
        )
        if n <= 60:
            body.append(
                f'<text transform="translate({x + bw * 0.4:.1f} {plot_b + 6}) rotate(60)" font-size="9">'
                f"{escape(label[:28])}</text>"
            )
    return _frame(title, "task", y_label, fid, body, height)
