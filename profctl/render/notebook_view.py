"""profctl in a notebook: the rich display (``_repr_html_``) of what the Python API returns -- an explanation, a
comparison, an A/B, a summary, bench rows, a Proton timeline -- and progress as one line that rewrites itself.

An explanation is drawn from the dict ``profctl explain -f json`` prints (profctl.explain/4), so the notebook shows
what the command says: the verdict first, then the causes with their savings as bars against the kernel's time
(the bar's length) and its floor (the blue mark), each with its evidence as data (metric, value, what it was judged
by), the fix; the floor per unit, the hot lines with their source, A and B side by side. Every block fits a
notebook cell: the tables take the cell's width and wrap their text (no sideways scrolling at 1280 px)."""

from __future__ import annotations

import html
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from profctl.render.tables import columns

#: units of each kernel's floor drawn (the busiest)
FLOOR_UNITS = 4
#: scoped to the display's own box (a notebook's page has its own styles)
CSS = """<style>
.pn{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;font-size:13px;color:#222;
max-width:100%;box-sizing:border-box;overflow-wrap:anywhere}
.pn *{box-sizing:border-box}
.pn h3{font-size:14px;margin:12px 0 4px;border-bottom:1px solid #ddd}
.pn .verdict{font-size:15px;font-weight:600;margin:4px 0}
.pn table{border-collapse:collapse;width:100%;table-layout:fixed;margin:4px 0}
.pn th,.pn td{border:1px solid #ddd;padding:2px 5px;text-align:left;vertical-align:top;overflow-wrap:anywhere;
word-break:break-word;white-space:normal}
.pn th{background:#f3f3f3}
.pn .cause{border:1px solid #e3e3e3;border-radius:4px;padding:4px 8px;margin:6px 0}
.pn .bar{position:relative;height:10px;background:#e8eef5;margin:3px 0;max-width:100%}
.pn .bar>i{position:absolute;top:0;bottom:0;background:#d9534f}
.pn .bar>b{position:absolute;top:-3px;bottom:-3px;width:2px;background:#1f5fbf}
.pn .fig{font-family:ui-monospace,Menlo,monospace;font-size:12px;background:#f4f4f4;padding:0 3px}
.pn .muted{color:#666} .pn .slower,.pn .failed{color:#b00} .pn .faster{color:#070}
.pn pre,.pn code{white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px}
.pn svg{max-width:100%;height:auto}
.pn details summary{cursor:pointer}
</style>"""


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _box(parts: list[str]) -> str:
    return CSS + '<div class="pn">' + "".join(parts) + "</div>"


def grid(rows: list[dict[str, Any]], *, limit: int | None = None) -> str:
    """Rows as a table that takes the cell's width and wraps its cells (keys starting with ``_`` left out)."""
    if not rows:
        return '<p class="muted">(none)</p>'
    shown = rows[:limit] if limit else rows
    cols = [c for c in columns(shown) if not c.startswith("_")]
    head = "".join(f"<th>{_e(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f'<td class="{_e(r.get(c)) if c == "verdict" else ""}">{_e(r.get(c, ""))}'
                                    "</td>" for c in cols) + "</tr>" for r in shown)
    more = f'<p class="muted">{len(rows) - len(shown)} more rows (the frame has them all)</p>' \
        if len(rows) > len(shown) else ""
    return f"<table><tr>{head}</tr>{body}</table>{more}"


def _listed(title: str, lines: list[str]) -> str:
    if not lines:
        return ""
    items = "".join(f"<li>{_e(x)}</li>" for x in lines)
    return f"<details><summary>{_e(title)} ({len(lines)})</summary><ul>{items}</ul></details>"


def bar(saving: float, total: float | None, floor: float | None, *, part: bool = False) -> str:
    """A track as long as the kernel's time: the saving in red at its end (`part`: a part of the time, from the
    start, in blue), the floor as a blue mark."""
    if not total or total <= 0:
        return ""
    s = max(0.0, min(saving / total, 1.0))
    mark = f'<b style="left:{100 * min(floor / total, 1.0):.1f}%" title="the floor: {floor:,.1f} us"></b>' \
        if floor else ""
    at = "left:0;background:#7fa7d9" if part else f"left:{100 * (1 - s):.1f}%"
    return (f'<div class="bar" title="{saving:,.1f} us of {total:,.1f} us"><i style="{at};'
            f'width:{100 * s:.1f}%"></i>{mark}</div>')


def evidence_html(items: list[dict[str, Any]]) -> str:
    """Each evidence item: its sentence, and as data (where the item has it) the metric, value, unit and what it
    was judged by."""
    out = []
    for it in items:
        fig = ""
        if it.get("metric") or it.get("value") is not None:
            judged = f" {_e(it.get('judged'))} {_num(it.get('threshold'))}" if it.get("threshold") is not None \
                else (f" ({_e(it.get('judged'))})" if it.get("judged") else "")
            fig = (f' <span class="fig">{_e(it.get("metric") or "")} = {_num(it.get("value"))} '
                   f'{_e(it.get("unit") or "")}{judged}</span>')
        out.append(f"<li>{_e(it.get('sentence'))}{fig}</li>")
    return "<ul>" + "".join(out) + "</ul>" if out else ""


def _num(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.4g}"
    return _e(v)


def _where(lines: list[dict[str, Any]]) -> str:
    return ", ".join(f"{Path(str(x.get('file'))).name}:{x.get('line')}" for x in lines[:3])


def cause_html(i: int, c: dict[str, Any], total: float | None, floor: float | None, out_of: str,
               a_us: float | None = None) -> str:
    """One cause: where, what fixing it saves (a share of `total`, `out_of`), its bar against A's time `a_us` with
    the floor marked, the evidence, the fix."""
    saving = float(c.get("saving_us") or 0.0)
    share = f" ({100 * saving / total:.0f} % of {out_of})" if total else ""
    fixed = f"; fixed, about {c['fixed_us']:,.1f} us" if c.get("fixed_us") is not None else ""
    where = f" at {_e(_where(c['lines']))}" if c.get("lines") else " (the kernel as a whole)"
    ncu = f"; ncu's {_e(c.get('ncu_rule'))} estimates {c['ncu_saving_us']:,.1f} us" \
        if c.get("ncu_saving_us") is not None else ""
    items = c.get("evidence_items") or [{"sentence": s} for s in c.get("evidence") or []]
    return (f'<div class="cause"><b>{i}. {_e(c.get("id"))}</b>: {_e(c.get("title"))}{where}<br>'
            f"saves about {saving:,.1f} us{share}{fixed}{ncu}{bar(saving, a_us or total, floor)}"
            f"{evidence_html(items)}<div><b>fix</b>: {_e(c.get('fix'))}</div></div>")


def explanation_html(d: dict[str, Any]) -> str:
    """An explanation (the dict of ``profctl explain -f json``): verdict, causes with bars, floor, hot lines, A and
    B side by side, the parts of the gap."""
    fa = (d.get("floor") or {}).get("a") or {}
    a = d.get("a") or {}
    a_us = fa.get("duration_us") or (a.get("duration_ns") or 0) / 1e3 or None
    floor = fa.get("attainable_us")
    parts = [f'<p class="verdict">{_e(d.get("verdict") or d.get("headline"))}</p>',
             f"<p>{_e(d.get('headline'))}</p>" if d.get("verdict") else "",
             _listed("how A and B were chosen", d.get("chosen") or []),
             _listed("premises", d.get("premises") or [])]
    out_of = (d.get("saving_out_of") or {}).get("what") or "A's time"
    total = (d.get("saving_out_of") or {}).get("us") or a_us
    groups = [("causes", d.get("causes")), ("at the roof: what is left", d.get("slack")),
              ("A and B share these (not causes of the gap)", d.get("shared")),
              ("A's own causes (out of A's time)", d.get("a_own")), ("B's own causes", d.get("b_causes"))]
    for title, cs in groups:
        if cs:
            tot = total if title == "causes" else a_us
            parts.append(f"<h3>{_e(title)}</h3>")
            parts += [cause_html(i, c, tot, floor, out_of if title == "causes" else "A's time", a_us)
                      for i, c in enumerate(cs, 1)]
    if not d.get("causes"):
        parts.append('<p class="muted">no cause named</p>')
    parts += [floor_html(d), lines_html(d), side_by_side_html(d), _listed("notes", d.get("notes") or [])]
    return _box(parts)


def floor_rows(d: dict[str, Any]) -> list[dict[str, Any]]:
    """Each kernel's floor per unit (the rows ``floor_df`` has)."""
    out = []
    for who, f in (d.get("floor") or {}).items():
        for u in (f or {}).get("units") or []:
            out.append({"kernel": who.upper(), "unit": u.get("unit"), "label": u.get("label"),
                        "pct_of_peak": u.get("pct_of_peak"), "floor_us": u.get("floor_us"),
                        "attainable_us": u.get("attainable_us"), "duration_us": f.get("duration_us"),
                        "binding": u.get("unit") == f.get("binding"), "work": u.get("work")})
    return out


def floor_html(d: dict[str, Any]) -> str:
    rows = floor_rows(d)
    if not rows:
        return ""
    out = ["<h3>the floor: each unit's least time (the busiest units; floor_df has them all)</h3><table><tr>"
           "<th>kernel</th><th>unit</th><th>% of peak</th><th>floor us</th><th>against the kernel's time</th></tr>"]
    shown = [r for who in dict.fromkeys(r["kernel"] for r in rows)
             for r in sorted((x for x in rows if x["kernel"] == who),
                             key=lambda x: -(x["floor_us"] or 0))[:FLOOR_UNITS]]
    for r in shown:
        b = " (binds)" if r["binding"] else ""
        out.append(f"<tr><td>{_e(r['kernel'])}</td><td>{_e(r['label'])}{b}</td><td>{_num(r['pct_of_peak'])}</td>"
                   f"<td>{_num(r['floor_us'])}</td>"
                   f"<td>{bar(r['attainable_us'] or 0, r['duration_us'], None, part=True)}</td></tr>")
    return "".join(out) + "</table>"


def line_rows(d: dict[str, Any], top: int = 5) -> list[dict[str, Any]]:
    """Each kernel's hottest source lines (the rows ``lines_df`` has): file, line, share of samples, top stall,
    the source text."""
    out = []
    for who in ("a", "b"):
        side = d.get(who) or {}
        for x in (side.get("lines") or [])[:top]:
            stalls = x.get("stalls") or {}
            worst = max(stalls.items(), key=lambda kv: kv[1])[0] if stalls else None
            out.append({"kernel": who.upper(), "file": x.get("file"), "line": x.get("line"),
                        "share": x.get("share"), "samples": x.get("samples"), "top_stall": worst,
                        "source": x.get("text")})
    return out


def lines_html(d: dict[str, Any]) -> str:
    rows = line_rows(d)
    if not rows:
        return ""
    out = ["<h3>hot lines</h3><table><tr><th style='width:6%'>kernel</th><th style='width:20%'>where</th>"
           "<th style='width:10%'>share</th><th style='width:16%'>top stall</th><th>source</th></tr>"]
    for r in rows:
        share = f"{100 * r['share']:.0f} %" if isinstance(r["share"], float) else ""
        out.append(f"<tr><td>{_e(r['kernel'])}</td><td>{_e(Path(str(r['file'])).name)}:{_e(r['line'])}</td>"
                   f"<td>{share}</td><td>{_e(r['top_stall'])}</td><td><code>{_e(r['source'])}</code></td></tr>")
    return "".join(out) + "</table>"


def side_by_side_html(d: dict[str, Any]) -> str:
    rows = [{"": r.get("quantity"), "A": r.get("a"), **({"B": r.get("b")} if d.get("b") else {}),
             "unit": r.get("unit")} for r in d.get("rows") or []]
    factors = [{"part of the gap": f.get("name"), "us": f"{f.get('us', 0):+.1f}",
                "share": f"{100 * f.get('share', 0):+.0f} %", "why": f.get("says")} for f in d.get("factors") or []]
    out = ""
    if rows:
        out += "<details><summary>A and B side by side</summary>" + grid(rows) + "</details>"
    if factors:
        out += "<details><summary>where the gap comes from</summary>" + grid(factors) + "</details>"
    return out


def comparison_html(head: list[str], rows: list[dict[str, Any]], foot: list[str], *,
                    answers: list[str] | None = None) -> str:
    """A comparison: its result line first (or the A/B's answers), then the rows, then the header and the rest."""
    first = answers or [x for x in foot if x.startswith("result")]
    rest = [x for x in foot if x not in first]
    order = {"failed": 0, "slower": 1, "faster": 2, "inconclusive": 3, "unchanged": 4}
    ranked = sorted(rows, key=lambda r: order.get(str(r.get("verdict")), 5))
    return _box([*(f'<p class="verdict">{_e(x)}</p>' for x in first), grid(ranked, limit=40),
                 *(f'<p class="muted">{_e(x)}</p>' for x in head + rest)])


def table_html(lead: list[str], rows: list[dict[str, Any]], notes: list[str], *, limit: int = 30) -> str:
    """A summary or bench rows: what it is first, the rows, the warnings folded."""
    return _box([*(f'<p class="verdict">{_e(x)}</p>' for x in lead[:1]),
                 *(f'<p class="muted">{_e(x)}</p>' for x in lead[1:]), grid(rows, limit=limit),
                 _listed("notes and warnings", notes)])


def timeline_html(reps: list[Any], limit: int = 20) -> str:
    """Proton timelines (profctl.analysis.timeline.TimelineReport): per kernel its headline, findings, one CTA's
    scopes warp by warp, the scopes table."""
    from profctl.render import timeline_view

    parts = []
    for rep in reps:
        parts.append(f'<p class="muted">{_e(rep.source)}</p>')
        for k in rep.kernels:
            parts.append(f'<p class="verdict">{_e(timeline_view.headline(k, rep.clock_mhz))}</p>')
            parts += [f"<p>{_e(x)}</p>" for x in timeline_view.findings(k)]
            svg = timeline_view.svg_timeline(k, width=1000)
            if svg:  # scales with the cell: the picture's own size as its viewBox
                w, h = svg.split('width="', 1)[1].split('"', 1)[0], svg.split('height="', 1)[1].split('"', 1)[0]
                svg = svg.replace("<svg ", f'<svg viewBox="0 0 {w} {h}" ', 1)
                parts.append(f"<h3>CTA {_e(k.path.cta if k.path else '')}: its scopes, warp by warp</h3>{svg}")
            parts += ["<h3>scopes</h3>", grid(timeline_view.scope_rows(k), limit=limit)]
        parts.append(_listed("notes and warnings", [*rep.notes, *rep.warnings]))
    return _box(parts)


class LineProgress:
    """Progress as one line that rewrites itself: in a notebook a display updated in place, in a terminal a
    carriage return on stderr. Called with whatever a pipeline reports (its Progress, NcuProgress or event
    dict); `close()` leaves the last line standing."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.handle: Any = None
        self.width = 0
        self.notebook = _in_notebook()

    def __call__(self, ev: Any) -> None:
        self.show(f"{self.what}: {progress_line(ev)}")

    def show(self, line: str) -> None:
        if self.notebook:
            from IPython.display import display

            if self.handle is None:
                self.handle = display({"text/plain": line}, raw=True, display_id=True)
            else:
                self.handle.update({"text/plain": line}, raw=True)
            return
        sys.stderr.write("\r" + line.ljust(self.width))
        sys.stderr.flush()
        self.width = len(line)

    def close(self) -> None:
        if not self.notebook and self.width:
            sys.stderr.write("\n")


def progress_line(ev: Any) -> str:
    """One line for a pipeline's progress report."""
    if isinstance(ev, dict):  # profctl proton's steps
        what = f" ({ev['what']})" if ev.get("what") else ""
        secs = f" {float(ev['seconds']):.1f} s" if ev.get("seconds") is not None else ""
        return f"{ev.get('name') or ''} {ev.get('phase') or ''}{secs}{what}".strip()
    done, total = getattr(ev, "done", None), getattr(ev, "total", None)
    count = f"{done}/{total} " if done is not None and total else ""
    describe: Callable[[], str] | None = getattr(ev, "describe", None)
    return count + (describe() if describe is not None else str(ev))


def _in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (where a display can be updated in place)."""
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        return False
    return shell is not None and shell.__class__.__name__ == "ZMQInteractiveShell"
