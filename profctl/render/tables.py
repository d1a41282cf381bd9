"""Table building blocks every renderer shares: number formats, a rich table, Markdown, CSV, and the console
(full width when the output is not a terminal, so a pipe or a file gets whole lines)."""

from __future__ import annotations

import csv
import io
from typing import Any

FORMATS = ("table", "markdown", "csv", "json")


def fmt_ns(ns: float | None) -> str:
    if ns is None:
        return "-"
    if ns >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} us"
    return f"{ns:.0f} ns"


def rich_table(title: str, rows: list[dict[str, Any]]) -> Any:
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=escape(title), show_lines=False, header_style="bold")
    if not rows:
        t.add_column("(none)")
        return t
    for c in rows[0]:
        t.add_column(c, justify="right" if c not in ("kernel", "range", "class", "tool", "domain", "style",
                                                     "backend", "status", "reason", "shape") else "left",
                     overflow="fold")
    for r in rows:
        t.add_row(*[escape(str(v)) for v in r.values()])
    return t


def markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "_(none)_\n"
    cols = list(rows[0])
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(r[c]).replace("|", "\\|") for c in cols) + " |")
    return "\n".join(out) + "\n"


def to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return buf.getvalue()


def console(width: int = 200, *, stderr: bool = False) -> Any:
    """A rich Console: the terminal's width on a terminal, `width` columns in a pipe or a file."""
    from rich.console import Console

    con = Console(stderr=stderr)
    return con if con.is_terminal else Console(width=width, stderr=stderr)
