"""A seed's table layout (profctl.analysis.seed_tables) in the terminal, Markdown, CSV, JSON and one
self-contained HTML page: each panel a table with the seed's columns, the notes that say which backend stands in
for which of the seed's columns under every output."""

from __future__ import annotations

import csv
import html as _html
import io
import json
from typing import Any

from rich.markup import escape

from profctl.analysis.seed_tables import MISSING, Panel, SeedTable
from profctl.render.html import page, table
from profctl.render.tables import console, limited, markdown, print_table

FORMATS = ("table", "markdown", "csv", "json", "html")
SCHEMA_ID = "profctl.seed-table/1"


def display(p: Panel, limit: int | None = None) -> tuple[list[dict[str, str]], int]:
    """The panel's rows as text (the first `limit`), and how many were left out."""
    rows = [{c: r.get(c, MISSING).text for c in p.columns} for r in p.rows]
    return limited(rows, limit)


def to_markdown(t: SeedTable, limit: int | None = None) -> str:
    out = [f"# {t.title}", "", f"_Layout of {t.seed} (`profctl report --table {t.name}`)_", ""]
    for p in t.panels:
        rows, more = display(p, limit)
        out += [f"## {p.title}", "", markdown(rows, more=more)]
    out += ["Notes:", ""] + [f"- {n}" for n in t.notes] + [""]
    return "\n".join(out)


def to_csv(t: SeedTable) -> str:
    """Every panel in one CSV: the case fields the panel holds fixed, then its columns; numbers unrounded
    (speedups as the ratio, efficiencies in percent, without their 'x' or '%'), OOM and N/A as words, no value
    empty but a `gpu` that nothing names (the notes say so: no prose in a data column)."""
    ctx_cols: list[str] = []
    cols: list[str] = []
    for p in t.panels:
        ctx_cols += [k for k in p.context if k not in ctx_cols]
        cols += [c for c in p.columns if c not in cols and c not in ctx_cols]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=ctx_cols + cols)
    w.writeheader()
    for p in t.panels:
        for r in p.rows:
            out: dict[str, Any] = {k: p.context.get(k, "") for k in ctx_cols}
            for c in p.columns:
                cell = r.get(c, MISSING)
                out[c] = cell.value if cell.value is not None else ("" if cell is MISSING else cell.text)
            w.writerow(out)
    return buf.getvalue()


def to_json(t: SeedTable) -> str:
    doc = {"schema": SCHEMA_ID, "table": t.name, "title": t.title, "seed": t.seed, "notes": t.notes,
           "panels": [{"title": p.title, "context": p.context, "columns": p.columns,
                       "rows": [{c: {"value": r.get(c, MISSING).value, "text": r.get(c, MISSING).text}
                                 for c in p.columns} for r in p.rows]} for p in t.panels]}
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"


def to_console(t: SeedTable, con: Any = None, limit: int | None = None) -> None:
    con = con or console(240)
    con.print(escape(f"{t.title} — layout of {t.seed}"))
    for p in t.panels:
        rows, more = display(p, limit)
        print_table(con, p.title, rows, more=more)
    for n in t.notes:
        con.print(f"[yellow]note:[/] {escape(n)}")


def to_html(t: SeedTable, title: str | None = None, limit: int | None = None) -> str:
    """One page (profctl.render.html), no script and nothing fetched: the panels' tables and the notes."""
    parts = [f'<p class="meta">Layout of {_html.escape(t.seed)} (<code>profctl report --table '
             f"{_html.escape(t.name)}</code>)</p>"]
    for i, p in enumerate(t.panels):
        rows, more = display(p, limit)
        parts += [f'<h2 id="panel-{i}">{_html.escape(p.title)}</h2>', table(rows, cls="seed")]
        if more:
            parts.append(f"<p><em>{more} more row(s) left out (use --limit 0 for all)</em></p>")
    parts.append('<h2 id="notes">Notes</h2><ul>' +
                 "".join(f'<li class="note">{_html.escape(n)}</li>' for n in t.notes) + "</ul>")
    return page(title or f"profctl report: {t.title}", parts)
