"""The table of backends (profctl.analysis.backend_table) as display rows: a rich table, Markdown, CSV, JSON."""

from __future__ import annotations

import csv
import html as _html
import io
import json
from typing import Any

from rich.markup import escape

from profctl.analysis.backend_table import (
    BOUND_PCT,
    LAUNCH_BOUND_GAP,
    BackendRow,
    BackendTable,
    baseline_breakdown,
    dram_bytes,
    metric,
)
from profctl.analysis.crosstool import CrossToolView, is_dedup_note
from profctl.render.backend_table_plots import all_plots, roofline_rows
from profctl.render.html import img, note_list, page
from profctl.render.html import table as html_table
from profctl.render.plots import BACKEND_ORDER
from profctl.render.tables import console, display_path, kernel_cell, limited, markdown
from profctl.render.tables import print_table as table
from profctl.shapes import Shape, label_of_key, sort_key

FORMATS = ("table", "markdown", "csv", "json", "html")
#: CSV columns, in order (raw numbers, base units)
CSV_COLUMNS = (
    "shape_key", "seqlen", "causal", "pass", "backend", "status", "time_ms", "time_source", "flops", "tflops",
    "pct_peak", "pct_measured_peak", "speedup", "peak_mem_bytes", "kernel_ms", "kernels_per_iter",
    "launch_overhead", "main_kernel", "tensor_pct", "dram_pct", "sm_pct", "occupancy_pct", "dram_bytes", "dram_bps",
    "arithmetic_intensity", "bound", "tools", "reason",
)


def _f(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def _rate(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.1f}" if v >= 1 else f"{v:.3f}"


def _mib(v: float | None, where: str | None = None) -> str:
    return "-" if not v else f"{v / 2**20:,.0f} MiB" + (f" ({where})" if where else "")


def shape_label(r: BackendRow) -> str:
    return compact_shape(r.shape_key)


def compact_shape(key: str | None) -> str:
    """``b1,sq4096,skv4096,h32,kv32,d128,bf16,causal,bhsd`` -> ``b1 s4096 h32 d128 bf16 causal``."""
    return label_of_key(key)


def display_rows(c: BackendTable) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in c.rows:
        ok = r.status == "ok"
        main, main_full = kernel_cell(r.main_kernel_name, r.main_kernel)
        out.append({
            "shape": shape_label(r),
            "pass": r.pass_,
            "backend": r.backend,
            "status": r.status if ok else f"{r.status}: {(r.reason or '')[:60]}",
            "ms": _f(r.time_ms, ".4f"),
            "TFLOP/s": _rate(r.tflops),
            "% peak": _f(r.pct_peak, ".0f"),
            "speedup": f"{r.speedup:.2f}x" if r.speedup else "-",
            "peak mem": _mib(r.peak_mem_bytes, r.peak_mem_where),
            "kernels/it": _f(r.kernels_per_iter, ".3g"),
            "launch gap": f"{100 * r.launch_overhead:.0f}%" if r.launch_overhead is not None else "-",
            "main kernel": main,
            "tensor %": _f(r.tensor_pct, ".0f"),
            "DRAM %": _f(r.dram_pct, ".0f"),
            "SM %": _f(r.sm_pct, ".0f"),
            "occ %": _f(r.occupancy_pct, ".0f"),
            "FLOP/B": _f(r.arithmetic_intensity, ".0f"),
            "bound": r.bound or "-",
            "time from": r.time_source or "-",
            **({"_full": {"main kernel": main_full}} if main_full else {}),
        })
    return out


def breakdown_rows(c: BackendTable) -> list[dict[str, str]]:
    out = []
    for b in baseline_breakdown(c):
        row = {"shape": compact_shape(b["shape"]), "pass": b["pass"], "kernel ms": f"{b['total_ms']:.3f}"}
        for cls in ("gemm", "softmax", "elementwise", "reduce", "other", "flash_fwd", "flash_bwd"):
            if f"{cls}_ms" in b:
                row[cls] = f"{b[f'{cls}_ms']:.3f} ms ({100 * b[f'{cls}_share']:.0f}%)"
            else:
                row[cls] = "-"
        out.append(row)
    return out


def kernel_rows(view: CrossToolView, limit: int | None = None) -> list[dict[str, str]]:
    """The merged kernels: per tool per-iteration time, and the ncu figures."""
    tools = [t for t in ("nsys", "torch", "ncu") if any(t in k.tools for k in view.kernels)]

    ks = sorted(view.kernels, key=lambda k: (sort_key(k.shape_key), k.pass_, k.backend, -(k.time_ns() or 0.0)))
    out = []
    for k in ks:
        ms = k.metrics
        shown, full = kernel_cell(k.name, k.short_name)
        row: dict[str, Any] = {"shape": compact_shape(k.shape_key), "pass": k.pass_, "backend": k.backend,
                               "class": k.kernel_class, "kernel": shown, "match": k.match,
                               "launches/it": _f(k.launches(), ".3g")}
        if full:
            row["_full"] = {"kernel": full}
        for t in tools:
            tk = k.tools.get(t)
            row[f"{t} us/it"] = _f(tk.per_iter_ns / 1e3 if tk else None, ",.1f")
        if "ncu" in tools:
            row["tensor %"] = _f(metric(ms, "tensor_pct"), ".0f")
            row["DRAM %"] = _f(metric(ms, "dram_pct"), ".0f")
            row["SM %"] = _f(metric(ms, "sm_pct"), ".0f")
            row["occ %"] = _f(metric(ms, "occupancy_pct"), ".0f")
            nb = dram_bytes(ms)
            row["DRAM MB"] = _f(nb / 1e6 if nb is not None else None, ",.1f")
        out.append(row)
    return out[:limit] if limit else out


def to_json(c: BackendTable, view: CrossToolView) -> str:
    d = c.to_dict()
    d["kernels"] = [{
        "backend": k.backend, "pass": k.pass_, "shape_key": k.shape_key, "name": k.name, "short_name": k.short_name,
        "kernel_class": k.kernel_class, "match": k.match,
        "tools": {t: {"per_iter_ns": tk.per_iter_ns, "launches_per_iter": tk.launches_per_iter, "avg_ns": tk.avg_ns,
                      **({"metrics": tk.metrics} if tk.metrics else {})} for t, tk in k.tools.items()},
    } for k in view.kernels]
    return json.dumps(d, indent=1, allow_nan=False, default=_nan_safe) + "\n"


def _nan_safe(o: Any) -> Any:
    return str(o)


def to_csv(c: BackendTable) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), extrasaction="ignore")
    w.writeheader()
    for row in c.to_dict()["rows"]:
        row["tools"] = " ".join(row.get("tools") or [])
        w.writerow({k: row.get(k) for k in CSV_COLUMNS})
    return buf.getvalue()


def header_lines(c: BackendTable) -> list[str]:
    lines = [f"device: {c.device or 'unknown'}" + (f" ({c.peak.model})" if c.peak.model else "")]
    if c.peak.tflops:
        dram = f", {c.peak.dram_bps / 1e12:.2f} TB/s DRAM" if c.peak.dram_bps else ""
        lines.append(f"peak: {c.peak.tflops:.0f} TFLOP/s {c.dtype or 'bf16'} dense{dram} — {c.peak.source}")
    if c.peak.measured_tflops:
        lines.append(f"measured peak: {c.peak.measured_tflops:.0f} TFLOP/s — {c.peak.measured_source}")
    if c.baseline:
        lines.append(f"speedup against: {c.baseline}")
    return lines


def to_markdown(c: BackendTable, view: CrossToolView, limit: int | None = None) -> str:
    out = ["# profctl comparison", ""] + [f"- {ln}" for ln in header_lines(c)] + [""]
    out += ["## Backends", "", markdown(display_rows(c))]
    br = breakdown_rows(c)
    if br:
        out += [f"## {c.baseline}: time by kernel class", "", markdown(br)]
    if view.kernels:
        krows, more = limited(kernel_rows(view), limit)
        out += ["## Kernels (joined across tools)", "", markdown(krows, more=more)]
    if c.notes:
        out += ["## Notes", ""] + [f"- {n}" for n in c.notes] + [""]
    return "\n".join(out)


def to_console(c: BackendTable, view: CrossToolView, limit: int | None = None, con: Any = None) -> None:
    con = con or console(240)
    for ln in header_lines(c):
        con.print(escape(ln))
    table(con, "Backends", display_rows(c))
    br = breakdown_rows(c)
    if br:
        table(con, f"{c.baseline}: time by kernel class", br)
    if view.kernels:
        krows, more = limited(kernel_rows(view), limit)
        table(con, "Kernels (joined across tools)", krows, more=more)
    for n in c.notes:
        con.print(f"[yellow]note:[/] {escape(n)}")


#: --pivot fields: (column suffix, BackendRow attribute, format)
PIVOT_FIELDS: dict[str, tuple[str, str, str]] = {
    "ms": ("ms", "time_ms", ".4f"),
    "tflops": ("TFLOP/s", "tflops", ",.1f"),
    "speedup": ("speedup", "speedup", ".2f"),
    "memory": ("MiB", "peak_mem_bytes", ",.0f"),
    "pct_peak": ("% peak", "pct_peak", ".0f"),
}


def pivot_rows(c: BackendTable, fields: list[str]) -> list[dict[str, str]]:
    """The published-table layout: one row per shape and pass (batch, seqlen_q, seqlen_kv, heads, kv_heads,
    causal, pass), a column per backend and field (e.g. ``fa4 TFLOP/s``, ``fa4 ms``)."""
    present = {r.backend for r in c.rows}
    backends = [b for b in BACKEND_ORDER if b in present] + sorted(present - set(BACKEND_ORDER))
    table: dict[tuple[Any, ...], dict[str, str]] = {}
    for r in c.rows:
        sh = Shape.try_parse(r.shape_key)
        s: dict[str, Any] = vars(sh) if sh else {}
        key = (s.get("batch"), s.get("seqlen_q"), s.get("seqlen_kv"), s.get("heads"), s.get("kv_heads"),
               s.get("head_dim"), s.get("dtype"), s.get("causal"), r.pass_)
        row = table.setdefault(key, {
            "batch": str(s.get("batch", "?")), "seqlen_q": str(s.get("seqlen_q", "?")),
            "seqlen_kv": str(s.get("seqlen_kv", "?")), "heads": str(s.get("heads", "?")),
            "kv_heads": str(s.get("kv_heads", "?")), "head_dim": str(s.get("head_dim", "?")),
            "dtype": str(s.get("dtype", "?")), "causal": "yes" if s.get("causal") else "no", "pass": r.pass_,
            **{f"{b} {PIVOT_FIELDS[f][0]}": "-" for b in backends for f in fields}})
        for f in fields:
            label, attr, fmt = PIVOT_FIELDS[f]
            v = getattr(r, attr)
            if attr == "peak_mem_bytes" and v:
                v = v / 2**20
            row[f"{r.backend} {label}"] = "-" if v is None or r.status != "ok" else format(v, fmt)
    return [table[k] for k in sorted(table, key=lambda k: tuple((x is None, x) for x in k))]


def pivot_csv(rows: list[dict[str, str]]) -> str:
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return buf.getvalue()


# ------------------------------------------------------------ HTML
def to_html(c: BackendTable, view: CrossToolView, *, title: str | None = None, kernel_limit: int | None = 200,
           extra: list[str] | None = None) -> str:
    """The comparison as one self-contained page (profctl.render.html; plots drawn here, matplotlib needed); `extra`:
    more sections (HTML fragments) after the comparison's (a model's tables, a program's summary)."""
    parts = html_sections(c, view, kernel_limit=kernel_limit)
    meta = [*header_lines(c), f"tools: {', '.join(view.tools()) or '-'}"]
    return page(title or "profctl report", parts + list(extra or []), meta)


def html_sections(c: BackendTable, view: CrossToolView, *, kernel_limit: int | None = 200) -> list[str]:
    """The comparison's part of a page: notes, plots, the backend table, the baseline's breakdown, the joined
    kernels, the sources and the peak figures' source."""

    plots = all_plots(c)
    parts: list[str] = []
    if c.notes:  # the de-duplication notes (one per pair of inputs holding the same cases) folded into one line
        parts.append(note_list(c.notes, fold=is_dedup_note,
                               folded="de-duplication notes: cases held by several inputs, the later input used "
                                      "for each (click for which)"))
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
        parts.append(f'<figure id="plot-{pid}">{img(png, ptitle)}<figcaption>{_html.escape(cap)}</figcaption>'
                     "</figure>")
    if c.roofline and any(pid == "roofline" for pid, _, _ in plots):
        parts += ['<h3 id="roofline-points">Roofline points</h3>', html_table(roofline_rows(c), cls="roofline")]
    rows = display_rows(c)
    classes = [("base" if r.backend == c.baseline else "") + (" fail" if r.status != "ok" else "") for r in c.rows]
    parts += ['<h2 id="backends">Backends</h2>',
              "<p class=\"meta\">time: bench median (CUDA events) where a bench row exists, else the GPU span of "
              "one iteration's NVTX range, else the sum of its kernels; TFLOP/s from useful FLOPs; launch gap = "
              "1 - kernel time / time; tensor/DRAM/SM/occupancy: the main kernel's ncu figures; bound: "
              f"launch-bound when the launch gap is over {LAUNCH_BOUND_GAP:.0%} (the kernels are not what limits "
              f"the iteration), else tensor, DRAM or SM when that figure reaches {BOUND_PCT:.0f}% of peak, else "
              "latency.</p>",
              html_table(rows, cls="backends", row_class=classes)]
    br = breakdown_rows(c)
    if br:
        parts += [f'<h2 id="breakdown">{_html.escape(str(c.baseline))}: time by kernel class</h2>',
                  html_table(br, cls="breakdown")]
    if view.kernels:
        kr = kernel_rows(view, kernel_limit)
        more = len(view.kernels) - len(kr)
        parts += ['<h2 id="kernels">Kernels, joined across tools</h2>',
                  "<p class=\"meta\">per-iteration time per tool; match: exact (same name), loose (same up to a "
                  "lambda signature), base (same base name, nearest duration), only (one tool saw it)</p>",
                  html_table(kr, cls="kernels")]
        if more > 0:
            parts.append(f"<p><em>{more} more kernel rows left out (use --limit 0 for all)</em></p>")
    if view.sources:
        srows = [{"tool": s.get("tool"), "version": s.get("version") or "", "path": display_path(s.get("path")),
                  "kernels placed / rows": s.get("kernels_placed")} for s in view.sources]
        parts += ['<h2 id="sources">Sources</h2>', html_table(srows, cls="sources")]
    if c.peak.source:
        parts.append(f'<p class="meta">Peak figures: {_html.escape(c.peak.source)}'
                     + (f"; measured: {_html.escape(c.peak.measured_source)}" if c.peak.measured_source else "")
                     + "</p>")
    return parts
