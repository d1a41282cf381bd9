"""One self-contained HTML page: the comparison's plots (PNG, base64 inline), its tables and where it came from.

No script, no stylesheet or image from elsewhere: the file can be mailed, attached to an issue or opened
offline. Numbers in the tables are the same display rows the terminal table and Markdown show.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
from typing import Any

from profctl.analysis.backend_table import BOUND_PCT, LAUNCH_BOUND_GAP, BackendTable
from profctl.analysis.crosstool import CrossToolView
from profctl.render import backend_table_view

#: the page fits a laptop screen: the text column is at most 1280 px wide, a table wider than that scrolls inside
#: its own box (the page does not), long text cells wrap, kernel names are elided in the middle with the full
#: name in a tooltip
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;padding:0 16px;
color:#222;max-width:1280px}
h1{font-size:22px;margin-bottom:4px} h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
.tbl{max-width:100%;overflow-x:auto;margin:8px 0;border:1px solid #eee}
table{border-collapse:collapse;font-size:12px}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:right;white-space:nowrap}
th{background:#f3f3f3;white-space:normal;vertical-align:bottom} td.l,th.l{text-align:left}
td{background:#fff} tr>:first-child{position:sticky;left:0;z-index:1}
td.w{white-space:normal;min-width:14em;max-width:28em;overflow-wrap:anywhere}
td[title]{text-decoration:underline dotted #999;cursor:help}
tr.base td{background:#fafae8} tr.fail td{color:#999}
figure{display:inline-block;margin:8px 12px 8px 0;vertical-align:top;max-width:100%}
figcaption{font-size:12px;color:#555;max-width:60em}
img{max-width:100%;height:auto;border:1px solid #eee}
.meta{font-size:13px;color:#444;max-width:60em} .note{color:#8a5a00}
"""

LEFT = {"shape", "pass", "backend", "status", "main kernel", "bound", "time from", "class", "kernel", "match",
        "tool", "path", "version", "#", "Sequence", "Best", "precision", "op", "range", "domain", "style", "model",
        "mode"}
#: characters of a kernel name in a table cell (the whole name is the cell's tooltip)
HTML_NAME_WIDTH = 36
#: columns whose text may be long: they wrap inside the cell
WRAP = {"status", "reason", "note", "path", "notes"}


def _cell(r: dict[str, Any], c: str) -> str:
    from profctl.render.tables import NAME_COLUMNS, elide, full_text

    text = str(r.get(c, ""))
    full = full_text(r, c)
    cls = ("l" if c in LEFT else "") + (" w" if c in WRAP else "")
    shown = elide(text, HTML_NAME_WIDTH) if c in NAME_COLUMNS else text
    title = f' title="{html.escape(full)}"' if full != shown else ""
    return f'<td class="{cls.strip()}"{title}>{html.escape(shown)}</td>'


def table(rows: list[dict[str, Any]], *, cls: str = "", row_class: list[str] | None = None) -> str:
    from profctl.render.tables import columns

    if not rows:
        return "<p><em>(none)</em></p>"
    cols = columns(rows)
    out = [f'<div class="tbl"><table class="{html.escape(cls)}"><thead><tr>']
    out += [f'<th class="{"l" if c in LEFT else ""}">{html.escape(c)}</th>' for c in cols]
    out.append("</tr></thead><tbody>")
    for i, r in enumerate(rows):
        rc_ = row_class[i] if row_class else ""
        out.append(f'<tr class="{rc_}">' + "".join(_cell(r, c) for c in cols) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def img(png: bytes, alt: str) -> str:
    return (f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">')


def page(title: str, body: list[str], meta: list[str] | None = None) -> str:
    """A whole self-contained page: `title`, the `meta` lines under it, then `body` (HTML fragments)."""
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        '<div class="meta">' + "".join(f"{html.escape(x)}<br>" for x in meta or []) + f"generated {now}</div>",
        *body, "</body></html>\n"])


def render(c: BackendTable, view: CrossToolView, *, title: str | None = None, kernel_limit: int | None = 200,
           extra: list[str] | None = None) -> str:
    """The page as text (plots drawn here; matplotlib needed); `extra`: more sections (HTML fragments) after the
    comparison's (a model's tables, a program's summary)."""
    parts = comparison_sections(c, view, kernel_limit=kernel_limit)
    meta = [*backend_table_view.header_lines(c), f"tools: {', '.join(view.tools()) or '-'}"]
    return page(title or "profctl report", parts + list(extra or []), meta)


def comparison_sections(c: BackendTable, view: CrossToolView, *, kernel_limit: int | None = 200) -> list[str]:
    """The comparison's part of a page: notes, plots, the backend table, the baseline's breakdown, the joined
    kernels, the sources and the peak figures' source."""
    from profctl.render.plots import all_plots

    plots = all_plots(c)
    parts: list[str] = []
    if c.notes:
        parts.append("<ul>" + "".join(f'<li class="note">{html.escape(n)}</li>' for n in c.notes) + "</ul>")
    parts.append('<h2 id="plots">Plots</h2>')
    if not plots:
        parts.append("<p><em>nothing to plot</em></p>")
    for pid, ptitle, png in plots:
        cap = ptitle
        if pid == "roofline":
            cap += " — each point is numbered; the table under the plots names its kernel"
            if c.unplaced:
                cap += f"; {len(c.unplaced)} ncu kernel(s) without a FLOP count of their own are not placed " \
                       "(softmax, elementwise, small flash helpers): see the kernel table"
        parts.append(f'<figure id="plot-{pid}">{img(png, ptitle)}<figcaption>{html.escape(cap)}</figcaption></figure>')
    if c.roofline and any(pid == "roofline" for pid, _, _ in plots):
        from profctl.render.plots import roofline_rows

        parts += ['<h3 id="roofline-points">Roofline points</h3>', table(roofline_rows(c), cls="roofline")]
    rows = backend_table_view.display_rows(c)
    classes = [("base" if r.backend == c.baseline else "") + (" fail" if r.status != "ok" else "") for r in c.rows]
    parts += ['<h2 id="backends">Backends</h2>',
              "<p class=\"meta\">time: bench median (CUDA events) where a bench row exists, else the GPU span of "
              "one iteration's NVTX range, else the sum of its kernels; TFLOP/s from useful FLOPs; launch gap = "
              "1 - kernel time / time; tensor/DRAM/SM/occupancy: the main kernel's ncu figures; bound: "
              f"launch-bound when the launch gap is over {LAUNCH_BOUND_GAP:.0%} (the kernels are not what limits "
              f"the iteration), else tensor, DRAM or SM when that figure reaches {BOUND_PCT:.0f}% of peak, else "
              "latency.</p>",
              table(rows, cls="backends", row_class=classes)]
    br = backend_table_view.breakdown_rows(c)
    if br:
        parts += [f'<h2 id="breakdown">{html.escape(str(c.baseline))}: time by kernel class</h2>',
                  table(br, cls="breakdown")]
    if view.kernels:
        kr = backend_table_view.kernel_rows(view, kernel_limit)
        more = len(view.kernels) - len(kr)
        parts += ['<h2 id="kernels">Kernels, joined across tools</h2>',
                  "<p class=\"meta\">per-iteration time per tool; match: exact (same name), loose (same up to a "
                  "lambda signature), base (same base name, nearest duration), only (one tool saw it)</p>",
                  table(kr, cls="kernels")]
        if more > 0:
            parts.append(f"<p><em>{more} more kernel rows left out (use --limit 0 for all)</em></p>")
    if view.sources:
        from profctl.render.tables import display_path

        srows = [{"tool": s.get("tool"), "version": s.get("version") or "", "path": display_path(s.get("path")),
                  "kernels placed / rows": s.get("kernels_placed")} for s in view.sources]
        parts += ['<h2 id="sources">Sources</h2>', table(srows, cls="sources")]
    if c.peak.source:
        parts.append(f'<p class="meta">Peak figures: {html.escape(c.peak.source)}'
                     + (f"; measured: {html.escape(c.peak.measured_source)}" if c.peak.measured_source else "")
                     + "</p>")
    return parts
