"""The backend table's pictures (profctl.analysis.backend_table), drawn with profctl.render.plots and returned as
PNG bytes: time and TFLOP/s against sequence length per backend, speedup against the baseline, peak memory, a
roofline with each ncu-measured kernel placed on it, and the baseline's time per kernel class. With a single
sequence length (a profile of one shape) the against-seqlen figures become bar charts per backend.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from profctl.analysis.backend_table import BREAKDOWN_CLASSES, BackendRow, BackendTable, baseline_breakdown
from profctl.render.plots import BACKEND_ORDER, CLASS_COLORS, MARKERS, color, log_axis, png_bytes, require
from profctl.render.tables import kernel_cell
from profctl.shapes import Shape, label_of_key

_LINE_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_LINE_STYLES = ("-", "--", "-.", ":")


def _backends(rows: list[BackendRow]) -> list[str]:
    bs = {r.backend for r in rows}
    return [b for b in BACKEND_ORDER if b in bs] + sorted(bs - set(BACKEND_ORDER))


def _panels(rows: list[BackendRow]) -> list[tuple[str, bool | None]]:
    ps = sorted({(r.pass_, r.causal) for r in rows}, key=lambda p: (p[0], bool(p[1])))
    return ps


#: what a line of an against-seqlen figure holds fixed besides its backend and panel (pass, mask): a point of
#: another batch, head count, head dim, dtype, layout or key length is another line, never joined into this one
_SERIES = (("batch", "b"), ("heads", "h"), ("kv_heads", "kv"), ("head_dim", "d"), ("dtype", ""), ("layout", ""),
           ("skv", "skv"))


def _case(r: BackendRow) -> tuple[Any, ...]:
    """The shape fields of _SERIES of a row (None where its shape key does not say); `kv` and `skv` are None when
    they follow the query's heads and length."""
    s = Shape.try_parse(r.shape_key)
    if s is None:
        return (None,) * len(_SERIES)
    return (s.batch, s.heads, None if s.kv_heads == s.heads else s.kv_heads, s.head_dim, s.dtype, s.layout,
            None if s.seqlen_kv == s.seqlen_q else s.seqlen_kv)


def series(rows: list[BackendRow]) -> list[tuple[str, str, list[BackendRow]]]:
    """(backend, label, rows) per line of a panel: one per backend and case (_SERIES). The label is the backend,
    followed by the fields that differ between the panel's cases (`sdpa-math h4 d32`), so a line joins only
    points of one case."""
    cases = {(r.backend, _case(r)) for r in rows}
    varying = [i for i in range(len(_SERIES)) if len({c[i] for _, c in cases}) > 1]
    out = []
    for b in _backends(rows):
        for case in sorted({c for bb, c in cases if bb == b}, key=lambda c: tuple((x is None, str(x)) for x in c)):
            words = [f"{_SERIES[i][1]}{case[i]}" for i in varying if case[i] is not None]
            out.append((b, " ".join([b, *words]), [r for r in rows if r.backend == b and _case(r) == case]))
    return out


def _panel_title(pass_: str, causal: bool | None) -> str:
    c = "" if causal is None else (", causal" if causal else ", non-causal")
    return f"{pass_}{c}"


#: a value axis goes logarithmic only when its values span at least this ratio (a decade): on a log axis a 2x
#: difference looks like a small one, so bars and narrow ranges stay linear


def _plotted(c: BackendTable, value: Callable[[BackendRow], float | None],
             skip: Callable[[BackendRow], bool] | None = None) -> list[BackendRow]:
    """The rows a by_seqlen figure draws: ok, with a value, not skipped."""
    return [r for r in c.rows if r.status == "ok" and value(r) is not None and not (skip and skip(r))]


def x_axis(c: BackendTable, value: Callable[[BackendRow], float | None],
           skip: Callable[[BackendRow], bool] | None = None) -> str:
    """What a by_seqlen figure plots against, for its caption: "against sequence length" when every panel has
    lines (two lengths or more), "per backend at sequence length N" when every panel is bars (one length), both
    said when the panels differ; "" when nothing is drawn."""
    rows = _plotted(c, value, skip)
    lengths = [sorted({r.seqlen for r in rows if (r.pass_, r.causal) == p and r.seqlen is not None})
               for p in _panels(rows)]
    if not lengths:
        return ""
    one = sorted({ls[0] for ls in lengths if len(ls) == 1})  # the lengths of the panels drawn as bars
    at = f" {one[0]}" if len(one) == 1 else ""
    if all(len(ls) >= 2 for ls in lengths):
        return "against sequence length"
    if all(len(ls) < 2 for ls in lengths):
        return (f"per backend at sequence length{at}" if at else
                "per backend, at one sequence length per panel" if one else "per backend")
    return f"against sequence length (a panel of one length{at}: bars per backend)"


def by_seqlen(c: BackendTable, value: Callable[[BackendRow], float | None], *, ylabel: str, title: str,
              logy: bool = False, hlines: list[tuple[float, str]] | None = None,
              skip: Callable[[BackendRow], bool] | None = None) -> bytes | None:
    """by_seqlen_figure as PNG bytes (None: nothing to draw)."""
    fig = by_seqlen_figure(c, value, ylabel=ylabel, title=title, logy=logy, hlines=hlines, skip=skip)
    return None if fig is None else png_bytes(fig)


def by_seqlen_figure(c: BackendTable, value: Callable[[BackendRow], float | None], *, ylabel: str, title: str,
                     logy: bool = False, hlines: list[tuple[float, str]] | None = None,
                     skip: Callable[[BackendRow], bool] | None = None) -> Any:
    """One panel per (pass, causal): `value` per backend against sequence length (bars for one length). With
    `logy`, a line panel whose values span a decade or more gets a log axis (and says so in its label); bars and
    narrower ranges are always linear, so a 2x difference looks like one."""
    plt = require()
    rows = _plotted(c, value, skip)
    if not rows:
        return None
    panels = _panels(rows)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.8), squeeze=False)
    for ax, (p, causal) in zip(axes[0], panels, strict=False):
        pr = [r for r in rows if r.pass_ == p and r.causal == causal]
        seqlens = sorted({r.seqlen for r in pr if r.seqlen is not None})
        lines = series(pr)
        if len(seqlens) >= 2:
            seen: dict[str, int] = {}
            for b, label, rs in lines:
                pts = sorted((r.seqlen, value(r)) for r in rs if r.seqlen is not None)
                n = seen[b] = seen.get(b, -1) + 1  # the backend's n-th case: its colour, another marker and dash
                if pts:
                    ax.plot([x for x, _ in pts], [y for _, y in pts], marker=_LINE_MARKERS[n % len(_LINE_MARKERS)],
                            label=label, color=color(b), linestyle=_LINE_STYLES[n % len(_LINE_STYLES)])
            ax.set_xscale("log", base=2)
            ax.set_xticks(seqlens)
            ax.set_xticklabels([str(s) for s in seqlens], rotation=0)
            ax.set_xlabel("sequence length")
        else:
            vals = [next((value(r) for r in rs), None) or 0.0 for _, _, rs in lines]
            ax.bar(range(len(lines)), vals, color=[color(b) for b, _, _ in lines])
            ax.set_xticks(range(len(lines)))
            ax.set_xticklabels([label for _, label, _ in lines], rotation=30, ha="right")
            for i, v in enumerate(vals):
                ax.annotate(f"{v:.3g}", (i, v), ha="center", va="bottom", fontsize=8)
            if seqlens:
                ax.set_xlabel(f"backend (sequence length {seqlens[0]})")
        for y, label in hlines or []:
            ax.axhline(y, linestyle="--", color="black", linewidth=0.8)
            ax.annotate(label, (0.01, y), xycoords=("axes fraction", "data"), fontsize=7, va="bottom")
        vals_here = [val for r in pr if (val := value(r)) is not None]
        if logy and len(seqlens) >= 2 and log_axis(vals_here):
            ax.set_yscale("log")
            ax.set_ylabel(f"{ylabel}, log scale")
        else:
            ax.set_ylim(bottom=0)
            ax.set_ylabel(ylabel)
        ax.set_title(_panel_title(p, causal))
        ax.grid(True, which="major", alpha=0.3)
        if len(seqlens) >= 2 and len(lines) <= 4:
            ax.legend(fontsize=7)
        elif len(seqlens) >= 2:  # many lines: the legend under the panel, not over the points
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    fig.suptitle(title)
    return fig


def _time(r: BackendRow) -> float | None:
    return r.time_ms


def _tflops(r: BackendRow) -> float | None:
    return r.tflops


def _speedup(r: BackendRow) -> float | None:
    return r.speedup


def _memory_gib(r: BackendRow) -> float | None:
    return (r.peak_mem_bytes / 2**30) if r.peak_mem_bytes else None


def _not_baseline(c: BackendTable) -> Callable[[BackendRow], bool]:
    return lambda r: r.backend == c.baseline


def time_plot(c: BackendTable) -> bytes | None:
    return by_seqlen(c, _time, ylabel="time per iteration (ms)", title="Time", logy=True)


def tflops_plot(c: BackendTable) -> bytes | None:
    lines = []
    if c.peak.tflops:
        lines.append((c.peak.tflops, f"{c.peak.model or 'peak'} datasheet {c.peak.tflops:.0f}"))
    if c.peak.measured_tflops:
        lines.append((c.peak.measured_tflops, f"measured matmul {c.peak.measured_tflops:.0f}"))
    return by_seqlen(c, _tflops, ylabel="TFLOP/s (useful FLOPs)", title="Throughput", hlines=lines)


def speedup_plot(c: BackendTable) -> bytes | None:
    if not c.baseline:
        return None
    return by_seqlen(c, _speedup, ylabel=f"speedup over {c.baseline} (x)",
                     title=f"Speedup over {c.baseline}", skip=_not_baseline(c), hlines=[(1.0, c.baseline)])


def memory_plot(c: BackendTable) -> bytes | None:
    return by_seqlen(c, _memory_gib, ylabel="peak memory (GiB)",
                     title="Peak memory (torch.cuda.max_memory_allocated)", logy=True)


def roofline_plot(c: BackendTable) -> bytes | None:
    """Kernels at (FLOP per DRAM byte, TFLOP/s) under the roofs min(peak, AI x DRAM bandwidth)."""
    plt = require()
    pts = c.roofline
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    ais = [p.ai for p in pts]
    lo, hi = min(ais) / 4, max(ais) * 4
    if c.peak.tflops and c.peak.dram_bps:
        import numpy as np

        xs = np.logspace(np.log10(min(lo, 1.0)), np.log10(max(hi, 1e4)), 200)
        bw = c.peak.dram_bps / 1e12
        ax.plot(xs, np.minimum(c.peak.tflops, xs * bw), color="black", linewidth=1.2,
                label=f"{c.peak.model}: {c.peak.tflops:.0f} TFLOP/s, {bw:.2f} TB/s (datasheet)")
        if c.peak.measured_tflops:
            ax.plot(xs, np.minimum(c.peak.measured_tflops, xs * bw), color="black", linestyle=":", linewidth=1,
                    label=f"measured matmul {c.peak.measured_tflops:.0f} TFLOP/s")
    seen = set()
    for p in pts:
        lab = f"{p.backend} {p.pass_}"
        ax.scatter([p.ai], [p.tflops], color=color(p.backend), marker=MARKERS.get(p.kernel_class, "o"), s=45,
                   edgecolors="black", linewidths=0.4, label=lab if lab not in seen else None, zorder=3)
        seen.add(lab)
    _number_points(ax, roofline_order(c))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte, ncu), log scale")
    ax.set_ylabel("TFLOP/s (ncu duration), log scale")
    ax.set_title("Roofline: kernels placed from ncu DRAM bytes and duration")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="lower right")
    return png_bytes(fig)


def roofline_order(c: BackendTable) -> list[Any]:
    """The roofline points in the order they are numbered (plot labels and the table under it)."""
    return sorted(c.roofline, key=lambda p: (p.shape_key or "", p.pass_, BACKEND_ORDER.index(p.backend)
                                             if p.backend in BACKEND_ORDER else len(BACKEND_ORDER), p.kernel))


def _number_points(ax: Any, ordered: list[Any]) -> None:
    """Every point gets its number (its row in the table under the plot). Points drawn on top of each other
    share one label listing their numbers; each label goes at the first spot around its point (in screen
    pixels) where it covers no other label and no other point."""
    fig = ax.figure
    ax.set_xscale("log")
    ax.set_yscale("log")
    fig.canvas.draw()  # fixes the axes' limits, so data -> pixel transforms hold
    to_px = ax.transData.transform
    order = {id(p): i + 1 for i, p in enumerate(ordered)}
    pix = {id(p): tuple(to_px((p.ai, p.tflops))) for p in ordered}
    clusters: list[list[Any]] = []
    for p in ordered:
        for cl in clusters:
            if math.dist(pix[id(cl[0])], pix[id(p)]) < 5:
                cl.append(p)
                break
        else:
            clusters.append([p])
    scale = fig.dpi / 72.0
    boxes: list[tuple[float, float, float, float]] = [(x - 4, y - 4, x + 4, y + 4) for x, y in pix.values()]
    for cl in clusters:
        text = ",".join(str(order[id(p)]) for p in cl)
        w, h = (4.3 * len(text) + 2) * scale, 8 * scale
        x0, y0 = pix[id(cl[0])]
        spots = [(dx, dy) for r in (5, 14, 24, 34, 46) for dx, dy in
                 ((r, r * 0.3), (r, -r * 0.3 - 6), (-r - w / scale, r * 0.3), (-r - w / scale, -r * 0.3 - 6),
                  (0, r), (0, -r - 8))]
        for dx, dy in spots:
            bx, by = x0 + dx * scale, y0 + dy * scale
            box = (bx, by, bx + w, by + h)
            if not any(box[0] < o[2] and o[0] < box[2] and box[1] < o[3] and o[1] < box[3] for o in boxes):
                break
        boxes.append(box)
        ax.annotate(text, (cl[0].ai, cl[0].tflops), xytext=(dx, dy), textcoords="offset points", fontsize=7,
                    arrowprops={"arrowstyle": "-", "lw": 0.4, "color": "#777"} if abs(dx) + abs(dy) > 12 else None)


def roofline_rows(c: BackendTable) -> list[dict[str, Any]]:
    """The table keyed to the roofline's numbers: which kernel each point is and where it sits."""
    out: list[dict[str, Any]] = []
    for i, p in enumerate(roofline_order(c), 1):
        shown, full = kernel_cell(p.name, p.kernel)
        out.append({"#": str(i), "backend": p.backend, "pass": p.pass_, "shape": label_of_key(p.shape_key),
                    "kernel": shown, "class": p.kernel_class, "FLOP/B": f"{p.ai:,.0f}",
                    "TFLOP/s": f"{p.tflops:,.1f}", "us": f"{p.time_ns / 1e3:,.1f}",
                    **({"_full": {"kernel": full}} if full else {})})
    return out


def breakdown_plot(c: BackendTable) -> bytes | None:
    """The baseline's kernel time per class, stacked, per shape and pass."""
    plt = require()
    rows = baseline_breakdown(c)
    if not rows:
        return None
    rows.sort(key=lambda r: (r["pass"], bool(r["causal"]), r["seqlen"] or 0))
    labels = [f"{r['seqlen'] or ''}{' c' if r['causal'] else ''} {r['pass']}".strip() for r in rows]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.7 * len(rows) + 2), 4.2))
    bottom = [0.0] * len(rows)
    for cls in BREAKDOWN_CLASSES:
        vals = [100.0 * r.get(f"{cls}_share", 0.0) for r in rows]
        if not any(vals):
            continue
        ax.bar(range(len(rows)), vals, bottom=bottom, label=cls, color=CLASS_COLORS.get(cls))
        bottom = [b + v for b, v in zip(bottom, vals, strict=False)]
    for i, r in enumerate(rows):
        ax.annotate(f"{r['total_ms']:.3g} ms", (i, 101), ha="center", fontsize=7)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, rotation=30, ha="right")
    ax.set_ylim(0, 110)
    ax.set_ylabel("share of kernel time (%)")
    ax.set_xlabel("sequence length (c = causal), pass")
    ax.set_title(f"{c.baseline}: where its time goes (GEMM, softmax, elementwise)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return png_bytes(fig)


#: (id, title, plot, what it plots against): the caption is the title followed by its x axis, read from the data
#: the plot draws (a by_seqlen figure of one sequence length is bars per backend, not a line against length)
PLOTS: tuple[tuple[str, str, Callable[[BackendTable], bytes | None], Callable[[BackendTable], str]], ...] = (
    ("time", "Time per iteration", time_plot, lambda c: x_axis(c, _time)),
    ("tflops", "TFLOP/s", tflops_plot, lambda c: x_axis(c, _tflops)),
    ("speedup", "Speedup over the baseline", speedup_plot, lambda c: x_axis(c, _speedup, _not_baseline(c))),
    ("memory", "Peak memory", memory_plot, lambda c: x_axis(c, _memory_gib)),
    ("roofline", "Roofline (ncu):", roofline_plot,
     lambda c: "kernels' TFLOP/s against arithmetic intensity (FLOP per DRAM byte)"),
    ("breakdown", "The baseline's time by kernel class", breakdown_plot,
     lambda c: "per sequence length and pass"),
)


def all_plots(c: BackendTable) -> list[tuple[str, str, bytes]]:
    """(id, caption, PNG) for every plot the data allows; the caption says what the plot is against (PLOTS)."""
    require()
    out = []
    for pid, title, fn, axis in PLOTS:
        png = fn(c)
        if png:
            against = axis(c)
            out.append((pid, f"{title} {against}" if against else title, png))
    return out
