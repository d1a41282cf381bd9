"""The "why and where" views of ncu reports: per kernel, the warp-stall breakdown (``--view stalls``) and the hot
source lines or instructions with ncu's findings beside them (``--view source``), as a terminal table, Markdown,
JSON or one self-contained HTML page whose source excerpts are shaded by each line's share of the samples.
"""

from __future__ import annotations

import html as _html
import json
import re
from collections.abc import Sequence
from typing import Any

from profctl.analysis import explanation
from profctl.analysis.source import Finding, HotLine, SourceView, hot_lines, short_path, site_sentence
from profctl.analysis.stalls import reason
from profctl.render import tables
from profctl.render.html import page, table

VIEWS = ("source", "stalls")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def fact_rows(v: SourceView) -> list[dict[str, Any]]:
    """The kernel's figures as ncu's Details page would give them (profctl.analysis.explanation's rows, one column),
    and its speed-of-light headroom when the NVTX range names its shape."""
    rows = [{"": r.quantity, "value": r.a, "unit": r.unit} for r in explanation.side_by_side(v.profile, v.profile)
            if not r.quantity.startswith("stall:")]
    roofs = explanation.kernel_roofs(v.profile)
    if roofs is not None and v.profile.duration_ns:
        rows.append({"": "speed of light", "value": roofs.against(v.profile.duration_ns * 1e-9).sentence(),
                     "unit": f"roofs on {roofs.device}: " + ", ".join(f"{r.name} {r.seconds * 1e6:.1f} us"
                                                                    for r in roofs.roofs)})
    return rows


def _title(v: SourceView) -> str:
    p = v.profile
    dur = f", {p.duration_ns / 1e3:.1f} us" if p.duration_ns else ""
    rng = f" in {p.nvtx_path}" if p.nvtx_path else ""
    return f"{p.base_name}{rng}{dur}, {v.total_samples} warp samples"


# ------------------------------------------------------------ display rows
def stall_rows(v: SourceView, limit: int | None = None) -> list[dict[str, Any]]:
    rows = []
    for s in v.stalls[: limit or None]:
        r = reason(s.reason)
        rows.append({"stall reason": r.label, "share": _pct(s.share), "samples": s.samples,
                     "cycles/inst": f"{s.cycles_per_issue:.2f}" if s.cycles_per_issue is not None else "-",
                     "where most of it sits": site_sentence(v.profile, s.reason) or "-",
                     "what it means": r.means, "what usually fixes it": r.fix})
    return rows


def _stalls_cell(h: HotLine, n: int = 2) -> str:
    return ", ".join(f"{reason(k).label} {100 * x:.0f}%" for k, x in h.top_stalls(n)) or "-"


def _first_sentence(text: str, width: int = 160) -> str:
    """The sentence of an ncu finding that says what it found: ncu often opens with a definition ("A wave of thread
    blocks is defined as ..."), so the first sentence with a number in it, else the first."""

    sentences = [x.strip() for x in re.split(r"(?<=[.!?])\s+", text) if x.strip()]
    if not sentences:
        return text
    definition = re.compile(r"\bis defined as\b|\bare defined as\b|\bmeasures\b|\brefers to\b", re.I)
    found = next((x for x in sentences if re.search(r"\d", x) and not definition.search(x)), sentences[0])
    return found if len(found) <= width else found[: width - 1] + "…"


def line_rows(v: SourceView, limit: int | None = None, *, terse: bool = False) -> list[dict[str, Any]]:
    """Hot source lines; when the kernel has none, its hottest instructions. `terse` (the terminal) names ncu's
    rules on a line instead of quoting them."""
    if not v.lines:
        return instruction_rows(v, limit)
    rows = []
    for i, h in enumerate(v.lines[: limit or None], 1):
        mem = []
        if h.memory.get("smem_nway", 0) > 1:
            mem.append(f"{h.memory['smem_nway']:.0f}-way bank conflict")
        if h.memory.get("excessive_sectors"):
            mem.append(f"{h.memory['excessive_sectors'] / 1e6:.1f}M excess sectors")
        rules = [n.split(":", 1)[0] for n in h.notes]
        notes = [f"ncu: {', '.join(dict.fromkeys(rules))}"] if terse and rules else h.notes
        note = "; ".join([*mem, *(f"via {k}" for k in h.via), *notes])
        rows.append({"#": i, "line": h.where, "share": _pct(h.share), "samples": h.samples,
                     "stalls": _stalls_cell(h), "executed": h.executed, "source": h.text or "-", "notes": note or "-"})
    return rows


def instruction_rows(v: SourceView, limit: int | None = None) -> list[dict[str, Any]]:
    rows = []
    for i, h in enumerate(v.sass[: limit or None], 1):
        rows.append({"#": i, "offset": h.where, "share": _pct(h.share), "samples": h.samples,
                     "stalls": _stalls_cell(h), "executed": h.executed, "instruction": h.text,
                     "line": f"{short_path(h.file)}:{h.line}" if h.file else "-"})
    return rows


def finding_rows(v: SourceView, limit: int | None = None, *, terse: bool = False) -> list[dict[str, Any]]:
    rows = []
    for f in v.findings[: limit or None]:
        rows.append({"finding": f.title, "est. speedup": _speedup(f), "kind": f.kind,
                     "lines": ", ".join(f.where) or "-",
                     "what ncu says": _first_sentence(f.message) if terse else f.message})
    return rows


def _speedup(f: Finding) -> str:
    if f.speedup is None:
        return "-"
    return f"{f.speedup:.0f}%" + (" (local)" if f.speedup_type == "local" else "")


# ------------------------------------------------------------ terminal, Markdown, JSON
def to_console(views: Sequence[SourceView], which: str, con: Any, limit: int | None = 10) -> None:
    for v in views:
        con.print()
        con.print(_title(v), style="bold", markup=False)
        for w in v.warnings:
            con.print(f"  note: {w}", style="yellow", markup=False)
        if which == "stalls":
            tables.print_table(con, "the kernel", fact_rows(v))
            tables.print_table(con, "warp stalls (share of samples; cycles per issued instruction)",
                               stall_rows(v, limit))
        else:
            what = "hot source lines" if v.lines else "hot instructions (no source lines in this report)"
            tables.print_table(con, what, line_rows(v, limit, terse=True))
            if v.attribution:
                con.print(f"  {v.attribution}", style="dim", markup=False)
        rows = finding_rows(v, 5 if which == "source" else limit, terse=True)
        if rows:
            tables.print_table(con, "ncu's findings, by estimated speedup (first sentence; -f markdown or json "
                               "for all)", rows)


def to_markdown(views: Sequence[SourceView], which: str, limit: int | None = 10) -> str:
    out = []
    for v in views:
        out.append(f"### {_title(v)}\n")
        out += [f"> note: {w}\n" for w in v.warnings]
        if which == "stalls":
            out.append(tables.markdown(fact_rows(v)))
            out.append(tables.markdown(stall_rows(v, limit)))
        else:
            out.append(tables.markdown(line_rows(v, limit)))
            if v.attribution:
                out.append(f"_{v.attribution}_\n")
        rows = finding_rows(v, 5 if which == "source" else limit)
        if rows:
            out.append("\nncu's findings, by estimated speedup:\n\n" + tables.markdown(rows))
        out.append("")
    return "\n".join(out)


def to_dict(v: SourceView, limit: int | None = None) -> dict[str, Any]:
    p = v.profile
    return {
        "kernel": p.name, "base_name": p.base_name, "nvtx": p.nvtx_path, "report": p.report, "device": p.device,
        "duration_ns": p.duration_ns, "samples": v.total_samples, "has_source": v.has_source,
        "stalls": [{"reason": s.reason, "label": s.label, "samples": s.samples, "share": s.share,
                    "cycles_per_issue": s.cycles_per_issue} for s in v.stalls],
        "lines": [_line_dict(h) for h in v.lines[: limit or None]],
        "instructions": [_line_dict(h) for h in v.sass[: limit or None]],
        "findings": [f.__dict__ for f in v.findings],
        "attribution": v.attribution, "warnings": v.warnings,
        "facts": fact_rows(v),
    }


def _line_dict(h: HotLine) -> dict[str, Any]:
    return {"file": h.file, "line": h.line, "offset": h.offset, "text": h.text, "samples": h.samples,
            "share": h.share, "stalls": h.stalls, "executed": h.executed, "via": h.via, "opcodes": h.opcodes,
            "memory": h.memory, "notes": h.notes}


def to_json(views: Sequence[SourceView], which: str, limit: int | None = None) -> str:
    return json.dumps({"schema": "profctl.source-view/1", "view": which,
                       "kernels": [to_dict(v, limit) for v in views]}, indent=1, default=str) + "\n"


# ------------------------------------------------------------ HTML
#: the hottest line's background is rgba(220,40,40, 0.08 + MAX_SHADE) over white: light enough that its line
#: number, share and source (#222, #333) keep a contrast ratio above 4.5 (WCAG AA); 0.6 made it dark red
MAX_SHADE = 0.37
#: the source view's rules after the shared stylesheet (profctl.render.html.CSS): prose tables read top-left,
#: excerpts of source one row per line
CSS = """
h3{font-size:15px}
th,td{text-align:left;vertical-align:top;white-space:normal}
td.n{text-align:right;white-space:nowrap} td.w{min-width:0;max-width:40em;overflow-wrap:anywhere}
pre.src{font-size:12px;line-height:1.35;border:1px solid #ddd;padding:4px 0;overflow-x:auto;margin:6px 0 16px}
pre.src>span{display:block;padding:0 8px;white-space:pre;color:#222} pre.src>span.hot{outline:1px solid #c33}
pre.src .ln{color:#333;display:inline-block;width:5em} pre.src .sh{color:#333;display:inline-block;width:6em;
text-align:right;margin-right:1em} pre.src>span.hot .ln{font-weight:bold} .note{color:#8a5a00;font-size:13px}
"""


def _excerpts(v: SourceView, limit: int, context: int = 4) -> str:
    """Each hot line's surroundings, every line shaded by its own share of the kernel's samples."""
    if not v.lines:
        return ""
    share: dict[tuple[str | None, int | None], float] = {(h.file, h.line): h.share for h in
                                                         hot_lines(v.profile, None)[0]}
    top = max(share.values(), default=0.0) or 1.0
    out = []
    for h in v.lines[:limit]:
        if h.file is None or h.line is None:
            continue
        text = v.profile.source_text.get(h.file, {})
        spans = []
        for n in range(h.line - context, h.line + context + 1):
            if n not in text:
                continue
            s = share.get((h.file, n), 0.0)
            alpha = 0.08 + MAX_SHADE * s / top if s else 0.0
            bg = f' style="background:rgba(220,40,40,{alpha:.2f})"' if s else ""
            cls = ' class="hot"' if n == h.line else ""
            spans.append(f'<span{cls}{bg}><span class="ln">{n}</span><span class="sh">'
                         f'{_pct(s) if s else ""}</span>{_html.escape(text[n])}</span>')
        out.append(f"<h3>{_html.escape(h.where)}: {_pct(h.share)} of samples; {_html.escape(_stalls_cell(h, 3))}</h3>"
                   f'<pre class="src">{"".join(spans)}</pre>')
    return "".join(out)


def to_html(views: Sequence[SourceView], which: str, title: str | None = None, limit: int | None = 10) -> str:
    """One self-contained page (profctl.render.html.page) with the view's own rules for the excerpts."""
    lim = limit or 10
    parts = []
    for v in views:
        parts.append(f"<h2>{_html.escape(_title(v))}</h2>")
        parts += [f'<p class="note">note: {_html.escape(w)}</p>' for w in v.warnings]
        parts.append("<h3>the kernel</h3>" + table(fact_rows(v), numbers=True))
        parts.append("<h3>warp stalls</h3>" + table(stall_rows(v, lim), numbers=True))
        if which == "source" or v.lines:
            parts.append("<h3>hot lines</h3>" if v.lines else "<h3>hot instructions</h3>")
            parts.append(table(line_rows(v, lim), numbers=True))
            if v.attribution:
                parts.append(f'<p class="note">{_html.escape(v.attribution)}</p>')
            parts.append(_excerpts(v, min(lim, 5)))
        parts.append("<h3>ncu's findings</h3>" + table(finding_rows(v, lim), numbers=True))
    return page(title or "profctl report --view " + which, parts, css=CSS)
