"""`profctl report` over inputs of every kind at once, in every format: the comparison of backends (bench rows and
profiles of the attention workload), the model tables (bench --model rows) and the per-kernel summary of each
report that names no backend of profctl's (a user's own program: its kernels or CPU ops, ranges and plots).

Each part is rendered by its own module (render.backend_table and render.html, render.models, render.summary);
here they are put one after the other. A report of one part is that part's output as before (the comparison's
``profctl.comparison/1`` JSON, a summary's ``profctl.summary/1``); several parts in JSON are the comparison's
object with ``models`` and ``summaries`` beside its rows; in CSV, blocks each under a ``# title`` line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rich.markup import escape

from profctl.analysis.backend_table import BackendTable
from profctl.analysis.crosstool import CrossToolView
from profctl.analysis.model_tables import tables
from profctl.render import backend_table_view, model_tables_view, summary_view
from profctl.render.backend_table_view import to_console as comparison_table
from profctl.render.backend_table_view import to_csv as comparison_csv
from profctl.render.backend_table_view import to_json as comparison_json
from profctl.render.backend_table_view import to_markdown as comparison_markdown
from profctl.render.html import page
from profctl.render.summary_view import html_section
from profctl.render.tables import rich_table
from profctl.schema import Summary
from profctl.schema.bench import BenchRow


@dataclass
class ReportParts:
    """What one `profctl report` shows: the comparison (None when no backend of profctl's workload is in the
    inputs), model rows, and the summaries of reports that are not of the workload, each with its title."""

    table: BackendTable | None = None
    view: CrossToolView | None = None
    models: list[BenchRow] = field(default_factory=list)
    summaries: list[tuple[str, Summary]] = field(default_factory=list)

    def count(self) -> int:
        return (self.table is not None) + bool(self.models) + len(self.summaries)


def to_json(p: ReportParts) -> str:
    models = [{"title": t, "rows": r} for t, r in tables(p.models)]
    sums = [json.loads(s.to_json()) | {"title": title} for title, s in p.summaries]
    if p.count() == 1 and p.table is None:
        if sums:
            return json.dumps({k: v for k, v in sums[0].items() if k != "title"}, indent=1) + "\n"
        return json.dumps(models, indent=1) + "\n"
    if p.table is not None and p.view is not None:
        d = json.loads(comparison_json(p.table, p.view))
    else:
        d = {"schema": "profctl.comparison/1", "rows": [], "notes": ["no backend of profctl's workload in these "
                                                                     "inputs: see models and summaries"]}
    if models:
        d["models"] = models
    if sums:
        d["summaries"] = sums
    return json.dumps(d, indent=1, default=str) + "\n"


def to_csv(p: ReportParts) -> str:
    """One block per part; with several, each under a ``# title`` line and a blank line between them."""
    blocks: list[tuple[str, str]] = []
    if p.table is not None:
        blocks.append(("backends", comparison_csv(p.table)))
    if p.models:
        blocks.append(("", model_tables_view.to_csv(p.models)))  # titled per table already
    for title, s in p.summaries:
        blocks.append((title, summary_view.to_csv(s)))
    if len(blocks) == 1:
        return blocks[0][1]
    return "\n".join((f"# {t}\n" if t else "") + text for t, text in blocks)


def to_markdown(p: ReportParts, limit: int | None = None) -> str:
    out = []
    if p.table is not None and p.view is not None:
        out.append(comparison_markdown(p.table, p.view, limit))
    if p.models:
        out.append(model_tables_view.to_markdown(p.models))
    for title, s in p.summaries:
        out.append(f"# {title}\n\n" + summary_view.to_markdown(s, limit))
    return "\n".join(out)


def to_console(p: ReportParts, con: Any, limit: int | None = None) -> None:
    if p.table is not None and p.view is not None:
        comparison_table(p.table, p.view, limit, con=con)
    if p.models:
        for title, t in tables(p.models):
            con.print(rich_table(title, t))
    for title, s in p.summaries:
        con.print(f"[bold]{escape(title)}[/]")
        summary_view.to_console(s, con, limit)


def to_html(p: ReportParts, title: str | None = None, limit: int | None = None) -> str:
    """One self-contained page: the comparison's sections, the models', each summary's."""
    extra = [model_tables_view.html_section(p.models)] if p.models else []
    extra += [html_section(s, title=t, limit=limit or 200, anchor=f"summary-{i}")
              for i, (t, s) in enumerate(p.summaries)]
    if p.table is not None and p.view is not None:
        return backend_table_view.to_html(p.table, p.view, title=title, kernel_limit=limit or None, extra=extra)
    return page(title or "profctl report", extra)
