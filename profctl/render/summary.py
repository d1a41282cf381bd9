"""Render a Summary as a rich table (terminal), Markdown, CSV or JSON."""

from __future__ import annotations

import csv
import io
from typing import Any

from profctl.schema import Summary

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


def kernel_rows(s: Summary, limit: int | None = None) -> list[dict[str, Any]]:
    ks = sorted(s.kernels, key=lambda k: (-k.total_ns, k.name))
    total = sum(k.total_ns for k in ks) or 1.0
    rows = []
    for k in ks[:limit] if limit else ks:
        rows.append({
            "tool": k.tool, "class": k.kernel_class, "kernel": k.short_name, "range": k.nvtx_range or "",
            "count": k.count, "total": fmt_ns(k.total_ns), "share": f"{100 * k.total_ns / total:.1f}%",
            "avg": fmt_ns(k.avg_ns), "med": fmt_ns(k.med_ns), "min": fmt_ns(k.min_ns), "max": fmt_ns(k.max_ns),
        })
    return rows


def range_rows(s: Summary) -> list[dict[str, Any]]:
    rows = []
    for r in sorted(s.ranges, key=lambda r: (-(r.gpu_proj_total_ns or 0), r.name)):
        rows.append({
            "range": r.name, "domain": r.domain or "", "style": r.style, "count": r.count,
            "range time": fmt_ns(r.range_total_ns), "GPU projected": fmt_ns(r.gpu_proj_total_ns),
            "GPU ops": r.gpu_ops if r.gpu_ops is not None else "-",
        })
    return rows


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


def render(s: Summary, fmt: str, *, limit: int | None = None) -> str | None:
    """Text for `fmt` (markdown/csv/json); for 'table' print rich tables and return None."""
    if fmt == "json":
        return s.to_json()
    if fmt == "csv":
        return s.kernels_df().to_csv(index=False)
    krows, rrows = kernel_rows(s, limit), range_rows(s)
    if fmt == "markdown":
        out = "## Kernels\n\n" + markdown(krows)
        if rrows:
            out += "\n## NVTX ranges\n\n" + markdown(rrows)
        return out
    from rich.console import Console

    con = Console()
    srcs = ", ".join(f"{x.path} ({x.tool} {x.tool_version or ''})".strip() for x in s.sources)
    con.print(rich_table(f"Kernels — {srcs}", krows))
    if rrows:
        con.print(rich_table("NVTX ranges", rrows))
    return None
