"""Self-contained HTML pages, shared by every view's ``to_html``: the stylesheet, tables, inline PNG images and the
page around them.

No script, no stylesheet or image from elsewhere: the file can be mailed, attached to an issue or opened
offline. Numbers in the tables are the same display rows the terminal table and Markdown show.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
from collections.abc import Callable
from typing import Any

from profctl.render.tables import NAME_COLUMNS, columns, elide, full_text, numeric_columns

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
details.notes summary{cursor:pointer} details.notes li{color:#444;overflow-wrap:anywhere}
"""

LEFT = {"shape", "pass", "backend", "status", "main kernel", "bound", "time from", "class", "kernel", "match",
        "tool", "path", "version", "#", "Sequence", "Best", "precision", "op", "range", "domain", "style", "model",
        "mode"}
#: characters of a kernel name in a table cell (the whole name is the cell's tooltip)
HTML_NAME_WIDTH = 36
#: columns whose text may be long: they wrap inside the cell
WRAP = {"status", "reason", "note", "path", "notes", "range"}


def _cell(r: dict[str, Any], c: str) -> str:
    text = str(r.get(c, ""))
    full = full_text(r, c)
    cls = ("l" if c in LEFT else "") + (" w" if c in WRAP else "")
    shown = elide(text, HTML_NAME_WIDTH) if c in NAME_COLUMNS else text
    title = f' title="{html.escape(full)}"' if full != shown else ""
    return f'<td class="{cls.strip()}"{title}>{html.escape(shown)}</td>'


def table(rows: list[dict[str, Any]], *, cls: str = "", row_class: list[str] | None = None,
          numbers: bool = False) -> str:
    """The rows as a table: columns left- or right-aligned by name (LEFT), or with `numbers`, right-aligned where
    every cell reads as a number and wrapped otherwise (a table of prose: findings, stall reasons, source)."""
    if not rows:
        return "<p><em>(none)</em></p>"
    cols = columns(rows)
    if numbers:
        nums = numeric_columns(rows)
        head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
        body = "".join("<tr>" + "".join(
            f'<td class="{"n" if c in nums else "w"}">{html.escape(str(r.get(c, "")))}</td>' for c in cols) + "</tr>"
            for r in rows)
        return f'<div class="tbl"><table class="{html.escape(cls)}"><tr>{head}</tr>{body}</table></div>'
    out = [f'<div class="tbl"><table class="{html.escape(cls)}"><thead><tr>']
    out += [f'<th class="{"l" if c in LEFT else ""}">{html.escape(c)}</th>' for c in cols]
    out.append("</tr></thead><tbody>")
    for i, r in enumerate(rows):
        rc_ = row_class[i] if row_class else ""
        out.append(f'<tr class="{rc_}">' + "".join(_cell(r, c) for c in cols) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def note_list(notes: list[str], *, fold: Callable[[str], bool] | None = None, folded: str = "") -> str:
    """The notes as a list (empty: ""). Those `fold` picks, when there are several, are one line saying how many
    and `folded` (what they are), the notes themselves in a <details> under it: a page opens on what matters, not
    on a screenful of alike notes."""
    if not notes:
        return ""
    picked = [n for n in notes if fold and fold(n)]
    if len(picked) < 2:
        picked = []
    items: list[str] = []
    said = False
    for n in notes:
        if n not in picked:
            items.append(f'<li class="note">{html.escape(n)}</li>')
        elif not said:  # the folded line stands where its first note stood
            said = True
            inner = "".join(f"<li>{html.escape(p)}</li>" for p in picked)
            items.append(f'<li class="note"><details class="notes"><summary>{len(picked)} {html.escape(folded)}'
                         f"</summary><ul>{inner}</ul></details></li>")
    return "<ul>" + "".join(items) + "</ul>"


def img(png: bytes, alt: str) -> str:
    return (f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">')


def page(title: str, body: list[str], meta: list[str] | None = None, *, css: str = "") -> str:
    """A whole self-contained page: `title`, the `meta` lines under it, then `body` (HTML fragments); `css`: a
    view's own rules after the shared stylesheet."""
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{CSS}{css}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        '<div class="meta">' + "".join(f"{html.escape(x)}<br>" for x in meta or []) + f"generated {now}</div>",
        *body, "</body></html>\n"])
