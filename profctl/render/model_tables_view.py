"""The model tables (profctl.analysis.model_tables) in the terminal, Markdown, CSV and a self-contained HTML page
with plots (step time per backend, memory and tokens/s against context)."""

from __future__ import annotations

import csv
import html as _html
import io
from typing import Any

from profctl.analysis import model_tables
from profctl.render.html import img, page, table
from profctl.render.plots import color, png_bytes, require
from profctl.render.tables import console, markdown, rich_table
from profctl.schema.bench import BenchRow


def to_markdown(rows: list[BenchRow]) -> str:
    parts = ["# profctl report: models", ""]
    for title, t in model_tables.tables(rows):
        parts += [f"## {title}", "", markdown(t)]
    return "\n".join(parts)


def to_csv(rows: list[BenchRow]) -> str:
    """All tables, one after the other, each with its title line."""
    buf = io.StringIO()
    for title, t in model_tables.tables(rows):
        buf.write(f"# {title}\n")
        w = csv.DictWriter(buf, fieldnames=list(t[0]))
        w.writeheader()
        w.writerows(t)
        buf.write("\n")
    return buf.getvalue()


def to_console(rows: list[BenchRow], con: Any = None) -> None:
    con = con or console(220)
    for title, t in model_tables.tables(rows):
        con.print(rich_table(title, t))


def _plot(rows: list[BenchRow], x: str, y: str, ylabel: str, title: str, modes: tuple[str, ...]) -> bytes | None:
    """`y` against `x` (row fields) per backend and mode (linear axes; log x when x spans decades)."""
    pts = [r for r in rows if r.is_model and r.ok and r.get(y) is not None and r.mode in modes]
    if not pts:
        return None
    plt = require()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for (b, mode) in sorted({(r.name, r.mode) for r in pts}):
        xs = sorted((r[x], r[y]) for r in pts if r.name == b and r.mode == mode)
        ax.plot([p[0] for p in xs], [p[1] for p in xs], marker="o", color=color(b), label=f"{b} {mode}")
    vals = [r[x] for r in pts]
    if max(vals) / max(min(vals), 1) >= 8:
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"{x} (log scale)")
    else:
        ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return png_bytes(fig)


def to_html(rows: list[BenchRow], title: str | None = None) -> str:
    return page(title or "profctl report: models", [html_section(rows, heading=False)])


def html_section(rows: list[BenchRow], *, heading: bool = True) -> str:
    """The model tables and their plots as a section of a page (step time, tokens/s and memory against
    context)."""
    parts = ['<h2 id="models">Models</h2>'] if heading else []
    gib = [BenchRow(r, peak_gib=(r.peak_mem_bytes / 2**30) if r.peak_mem_bytes else None) for r in rows]
    plots = [
        ("step", _plot(rows, "seqlen", "median_ms", "step time (ms)", "Step time against context", ("train",))),
        ("tokens", _plot(rows, "seqlen", "tokens_per_s", "tokens/s", "Tokens/s against context",
                         ("prefill", "decode"))),
        ("memory", _plot(gib, "seqlen", "peak_gib", "peak memory (GiB)", "Peak memory against context",
                         ("train", "prefill", "decode"))),
    ]
    for pid, png in plots:
        if png:
            parts.append(f'<figure id="plot-{pid}">{img(png, pid)}</figure>')
    for t_title, t in model_tables.tables(rows):
        parts += [f"<{'h3' if heading else 'h2'}>{_html.escape(t_title)}</{'h3' if heading else 'h2'}>", table(t)]
    return "\n".join(parts)
