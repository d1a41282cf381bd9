"""Render a Summary as a rich table (terminal), Markdown, CSV or JSON."""

from __future__ import annotations

import html
import re
from typing import Any

from profctl.render.html import img, page, table
from profctl.render.plots import CLASS_COLORS, bars
from profctl.render.tables import (
    FORMATS,
    console,
    display_path,
    fmt_ns,
    kernel_cell,
    limited,
    markdown,
    print_table,
    rich_table,
)
from profctl.schema import RangeRow, Summary

__all__ = ["AUTOGRAD_MARK", "FORMATS", "autograd_note", "cpu_op_rows", "fmt_ns", "html_section", "kernel_rows",
           "range_rows", "rich_table", "shorten_ranges", "to_console", "to_csv", "to_html", "to_json", "to_markdown"]


def kernel_rows(s: Summary, limit: int | None = None) -> list[dict[str, Any]]:
    ks = sorted(s.kernels, key=lambda k: (-k.total_ns, k.name))
    total = sum(k.total_ns for k in ks) or 1.0

    rows = []
    for k in ks[:limit] if limit else ks:
        shown, full = kernel_cell(k.name, k.short_name)
        rows.append({
            "tool": k.tool, "class": k.kernel_class, "kernel": shown, "range": k.nvtx_range or "",
            "count": k.count, "total": fmt_ns(k.total_ns), "share": f"{100 * k.total_ns / total:.1f}%",
            "avg": fmt_ns(k.avg_ns), "med": fmt_ns(k.med_ns), "min": fmt_ns(k.min_ns), "max": fmt_ns(k.max_ns),
            **({"_full": {"kernel": full}} if full else {}),
        })
    return rows


def cpu_op_rows(s: Summary) -> list[dict[str, Any]]:
    """CPU ops by self time (a CPU-only torch trace: where the time went, there being no kernel)."""
    ops = sorted(s.cpu_ops, key=lambda c: (-c.total_ns, c.name))
    total = sum(c.total_ns for c in ops) or 1.0
    return [{"tool": c.tool, "class": c.op_class, "op": c.name, "range": c.nvtx_range or "", "count": c.count,
             "self total": fmt_ns(c.total_ns), "share": f"{100 * c.total_ns / total:.1f}%",
             "self avg": fmt_ns(c.avg_ns), "self med": fmt_ns(c.med_ns), "incl. total": fmt_ns(c.cpu_total_ns or None)}
            for c in ops]


#: the mark on the "GPU projected" cell of a backward range that none of its thread's CUDA calls launched a kernel
#: in (autograd_note says why under the table)
AUTOGRAD_MARK = "†"


#: a range named for a backward pass: ``<backend>.bwd`` (profctl's), ``naive.bwd.it0``, ``loss.backward``
_BACKWARD = re.compile(r"(^|[^a-z])(bwd|backward)([^a-z]|$)")


def _backward(name: str) -> bool:
    return bool(_BACKWARD.search(name.rsplit("/", 1)[-1].lower()))


def _autograd_thread(s: Summary, r: RangeRow) -> bool:
    """A backward range whose kernels autograd's worker thread launched: projected 0 ns (no GPU op on its thread)
    while the trace has kernels, or with kernels the by-range reading placed under it from that thread. A range is
    projected onto the GPU (and its busy share taken) only through its own thread's CUDA calls."""
    if not s.kernels or not _backward(r.name):
        return False
    if r.gpu_proj_total_ns == 0 and not r.gpu_ops:
        return True
    return any(k.nvtx_range == r.name and (k.extra or {}).get("borrowed_launches") for k in s.kernels)


def range_rows(s: Summary) -> list[dict[str, Any]]:
    rows = []
    for r in sorted(s.ranges, key=lambda r: (-(r.gpu_proj_total_ns or 0), r.name)):
        mark = f" {AUTOGRAD_MARK}" if _autograd_thread(s, r) else ""
        rows.append({
            "range": r.name, "domain": r.domain or "", "style": r.style, "count": r.count,
            "range time": fmt_ns(r.range_total_ns), "GPU projected": fmt_ns(r.gpu_proj_total_ns) + mark,
            "GPU ops": r.gpu_ops if r.gpu_ops is not None else "-",
            "GPU busy": _share(r.extra.get("gpu_busy_share")) + mark,
        })
    return rows


def _share(x: Any) -> str:
    """The GPU-busy share of a range (``extra.gpu_busy_share``): '-' where the reader could not tell."""
    return f"{100 * x:.0f} %" if isinstance(x, (int, float)) else "-"


def autograd_note(s: Summary, rows: list[dict[str, Any]]) -> str | None:
    """The footnote under a range table whose rows hold a backward range marked AUTOGRAD_MARK: why its GPU
    projection is 0 ns, and where its kernels are (issue 39 item 10)."""
    names = [str(r["range"]) for r in rows if str(r.get("GPU projected", "")).endswith(AUTOGRAD_MARK)]
    if not names:
        return None
    leaves = set(names)
    placed = any(k.nvtx_range and (k.nvtx_range in leaves or k.nvtx_range.rsplit("/", 1)[-1].split("@", 1)[-1]
                                   in leaves) for k in s.kernels)
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    where = ("the kernels table lists them under the range" if placed else
             "--by-range places them under the range")
    return (f"{AUTOGRAD_MARK} {shown}: GPU projected and GPU busy leave out the backward kernels: they are launched "
            "by autograd's worker thread, not the thread that pushed the range, and a range is projected onto the GPU "
            f"only through its own thread's CUDA calls; {where} (a launch outside any range on autograd's thread "
            "takes the ranges open on the thread that called backward()); `profctl explain RUN --range NAME` counts "
            "them")


def sources_line(s: Summary) -> str:
    return ", ".join(f"{display_path(x.path)} ({x.tool} {x.tool_version or ''})".replace(" )", ")")
                     for x in s.sources)


def to_json(s: Summary) -> str:
    return s.to_json()


def to_csv(s: Summary) -> str:
    """Every kernel (a CPU-only trace: every CPU op)."""
    cpu_only = not s.kernels and bool(s.cpu_ops)  # a CPU-only trace: its ops stand where kernels would
    return str((s.cpu_ops_df() if cpu_only else s.kernels_df()).to_csv(index=False))


def _tables(s: Summary, limit: int | None) -> tuple[str, tuple[list[dict[str, Any]], int],
                                                    tuple[list[dict[str, Any]], int]]:
    """(title, (kernel rows, how many left out), (range rows, how many left out))."""
    cpu_only = not s.kernels and bool(s.cpu_ops)
    title = "CPU ops (self time)" if cpu_only else "Kernels"
    return (title, limited(cpu_op_rows(s) if cpu_only else kernel_rows(s), limit),
            limited(range_rows(s), limit))


def to_markdown(s: Summary, limit: int | None = None) -> str:
    """`limit` shortens the tables, and a line says how many rows were left out."""
    title, (krows, more), (rrows, rmore) = _tables(s, limit)
    out = f"## {title}\n\nfrom {sources_line(s)}\n\n" + markdown(krows, more=more)
    if rrows:
        out += "\n## NVTX ranges\n\n" + markdown(rrows, more=rmore)
        if why := autograd_note(s, rrows):
            out += f"\n_{why}_\n"
    return out


#: a kernel table's range paths longer than this hold their cases' keys once, under the table (a key is 40-odd
#: characters, and every row of a case repeats it)
RANGE_MAX = 40
#: a case's key inside a range path: ``eager[b1,sq512,...,bhsd]/measure/eager.fwd``
_CASE_KEY = re.compile(r"\[([^\[\]]{8,})\]")


def shorten_ranges(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """(rows whose long range paths show each case's key as a mark, the lines that say what each mark stands
    for): ``eager[…]/measure/eager.fwd`` and ``[…] in a range: b1,sq512,...`` for one case, ``[c1]``, ``[c2]``
    for several. Rows whose ranges are short enough come back as they are, with no line."""
    ranges = [str(r.get("range") or "") for r in rows]
    keys = list(dict.fromkeys(k for x in ranges for k in _CASE_KEY.findall(x)))
    if not keys or max(len(x) for x in ranges) <= RANGE_MAX:
        return rows, []
    marks = {k: "…" if len(keys) == 1 else f"c{i}" for i, k in enumerate(keys, 1)}
    out = [{**r, "range": _CASE_KEY.sub(lambda m: f"[{marks[m.group(1)]}]", x)} if x else r
           for r, x in zip(rows, ranges, strict=True)]
    return out, [f"[{m}] in a range: {k}" for k, m in marks.items()]


def to_console(s: Summary, con: Any = None, limit: int | None = None) -> None:
    title, (krows, more), (rrows, rmore) = _tables(s, limit)
    con = con or console()
    krows, legend = shorten_ranges(krows)
    print_table(con, f"{title} — {sources_line(s)}", krows, more=more)
    if legend:
        from rich.markup import escape

        for line in legend:
            con.print(escape(f"  {line}"), soft_wrap=True, style="dim")
    if rrows:
        print_table(con, "NVTX ranges", rrows, more=rmore)
        if why := autograd_note(s, rrows):
            from rich.markup import escape

            con.print(escape(f"  {why}"), soft_wrap=True, style="dim")


def to_html(s: Summary, title: str | None = None, limit: int | None = None) -> str:
    """A page of its own: its plots, kernels (or CPU ops) and ranges."""
    where = ", ".join(display_path(x.path) for x in s.sources)
    return page(title or "profctl report: summary", [html_section(s, title=f"Summary: {where}", limit=limit)])


#: kernels (or CPU ops) and ranges drawn in a summary's plots
PLOT_TOP = 15


def summary_plots(s: Summary) -> list[tuple[str, str, bytes]]:
    """(id, title, PNG): the kernels (a CPU-only trace: its CPU ops by self time) with most total time, and the
    ranges with most time (GPU projected where a timeline tool gives it, else their own span)."""
    cpu_only = not s.kernels and bool(s.cpu_ops)
    items: list[Any] = sorted(s.cpu_ops if cpu_only else s.kernels, key=lambda k: -k.total_ns)[:PLOT_TOP]
    names = [(k.name if cpu_only else (k.short_name or k.name)) + (f" [{k.nvtx_range}]" if k.nvtx_range else "")
             for k in items]
    classes = [str(getattr(k, "op_class", None) or getattr(k, "kernel_class", None) or "other") for k in items]
    out = []
    what = "CPU ops by self time" if cpu_only else "kernels by total time"
    png = bars(names, [k.total_ns / 1e6 for k in items], xlabel="ms", title=f"Where the time goes: {what}",
               colors=[CLASS_COLORS.get(c, "#bcbd22") for c in classes])
    if png:
        out.append(("top", f"The {len(items)} {what}", png))
    rs = sorted(s.ranges, key=lambda r: -(r.gpu_proj_total_ns or r.range_total_ns or 0))[:PLOT_TOP]
    gpu = any(r.gpu_proj_total_ns for r in rs)
    png = bars([r.name for r in rs], [((r.gpu_proj_total_ns if gpu else r.range_total_ns) or 0) / 1e6 for r in rs],
               xlabel="ms", title="Ranges: " + ("GPU time projected" if gpu else "time inside each range"))
    if png:
        out.append(("ranges", f"The {len(rs)} ranges with most time", png))
    return out


def html_section(s: Summary, *, title: str, limit: int | None = None, anchor: str = "summary") -> str:
    """One summary as a section of an HTML page: its plots, its kernels (or CPU ops) and its ranges."""

    cpu_only = not s.kernels and bool(s.cpu_ops)
    krows, more = limited(cpu_op_rows(s) if cpu_only else kernel_rows(s), limit)
    parts = [f'<h2 id="{html.escape(anchor)}">{html.escape(title)}</h2>',
             f'<p class="meta">from {html.escape(sources_line(s))}</p>']
    notes = [*s.meta.get("notes", []), *[w for w in s.warnings if w not in s.meta.get("notes", [])]]
    if notes:
        parts.append("<ul>" + "".join(f'<li class="note">{html.escape(str(n))}</li>' for n in notes) + "</ul>")
    for pid, ptitle, png in summary_plots(s):
        parts.append(f'<figure id="plot-{html.escape(anchor)}-{pid}">{img(png, ptitle)}'
                     f"<figcaption>{html.escape(ptitle)}</figcaption></figure>")
    parts += [f"<h3>{'CPU ops (self time)' if cpu_only else 'Kernels'}</h3>", table(krows)]
    if more:
        parts.append(f"<p><em>{more} more row(s) left out (--limit 0 shows all)</em></p>")
    if s.ranges:
        rrows = range_rows(s)
        parts += ["<h3>Ranges</h3>", table(rrows)]
        if why := autograd_note(s, rrows):
            parts.append(f'<p class="meta note">{html.escape(why)}</p>')
    if not krows and not s.ranges:
        parts.append("<p><em>this report holds no kernel, CPU op or range</em></p>")
    return "\n".join(parts)
