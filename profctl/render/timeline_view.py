"""Proton timelines drawn (profctl.analysis.timeline): per kernel its scopes (count, cycles, time, share), each
warp's share in each scope, what overlaps what across the warps of a CTA, and the critical path through one CTA;
as a terminal table, Markdown, JSON (every scope a row), an HTML page with a picture of one CTA's timeline, or
a Trace Event Format file for Perfetto (every scope instance, on a track per warp of a process per CTA).
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import IO, Any

from profctl.analysis.timeline import KernelTimeline, TimelineReport
from profctl.render.html import page, table
from profctl.render.perfetto import GPU_PID, TraceWriter, Tracks
from profctl.render.tables import markdown as md
from profctl.render.tables import print_table

#: an overlap below this share of A's time is left out of the tables (JSON keeps every pair)
MIN_OVERLAP = 0.01
#: scope colours of the HTML picture (cycled)
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac")


def fmt_num(x: float | None, digits: int = 0) -> str:
    return "" if x is None else f"{x:,.{digits}f}"


def fmt_pct(x: float | None) -> str:
    return "" if x is None else f"{x * 100:.1f}"


def scope_rows(k: KernelTimeline, limit: int | None = None) -> list[dict[str, Any]]:
    clock = any(s.clock_mhz for s in k.scopes)
    rows = []
    for s in k.scopes[:limit]:
        r: dict[str, Any] = {"scope": s.name, "count": "" if s.count is None else f"{s.count:,}",
                             "total cycles": fmt_num(s.total_cycles), "mean cycles": fmt_num(s.mean_cycles, 1)}
        if s.min_cycles is not None:
            r["min"], r["max"] = fmt_num(s.min_cycles), fmt_num(s.max_cycles)
        if clock:
            r["total us"], r["mean us"] = fmt_num(s.total_us, 2), fmt_num(s.mean_us, 3)
        if s.share is not None:
            r["% of warp time"] = fmt_pct(s.share)
        rows.append(r)
    return rows


def warp_rows(k: KernelTimeline) -> list[dict[str, Any]]:
    names = [s.name for s in k.scopes]
    return [{"warp": str(w), **{n: fmt_pct(share.get(n)) for n in names},
             "in no scope": fmt_pct(max(0.0, 1.0 - sum(share.values())))} for w, share in sorted(k.warp_share.items())]


def overlap_rows(k: KernelTimeline) -> list[dict[str, Any]]:
    rows = [o for o in k.overlaps if o.a != o.b and o.fraction >= MIN_OVERLAP]
    rows.sort(key=lambda o: -o.fraction)
    return [{"scope": o.a, "while another warp runs": o.b, "% of its time": f"{o.fraction * 100:.1f}",
             "cycles": fmt_num(o.cycles), "of its busy cycles": fmt_num(o.a_cycles)} for o in rows]


def path_rows(k: KernelTimeline) -> list[dict[str, Any]]:
    p = k.path
    if p is None or not p.span_cycles:
        return []
    rows = [{"on the path": name, "cycles": fmt_num(c), "% of the CTA": fmt_pct(c / p.span_cycles),
             "steps": sum(1 for s in p.steps if s.scope == name)} for name, c in
            sorted(p.by_scope.items(), key=lambda x: -x[1])]
    rows.append({"on the path": "(in no scope)", "cycles": fmt_num(p.unscoped_cycles),
                 "% of the CTA": fmt_pct(p.unscoped_cycles / p.span_cycles), "steps": ""})
    return rows


def tile_lines(k: KernelTimeline) -> list[str]:
    """The per-tile view in a few lines: how many tiles it stands on, what a block is, the fit or why none."""
    v = k.tiles
    if v is None or not v.tiles:
        return []
    blocks = [t.blocks for t in v.tiles]
    n = len(v.tiles)
    of = f" of the launch's {k.ctas_total:,} (a sample: every CTA of a few SMs, and the longest)" \
        if k.ctas_total and k.ctas_total > n else ""
    spread = f"{min(blocks):,} each" if min(blocks) == max(blocks) else f"{min(blocks):,} to {max(blocks):,}"
    out = [f"{n:,} tile(s) (CTAs) in the trace{of}; KV blocks = instances of {v.scope} per warp, {spread}"]
    if v.fit is not None:
        f = v.fit
        line = f"{f.per_block_cycles:,.0f} cycles per KV block + {f.fixed_cycles:,.0f} fixed (R^2 {f.r2:.3f})"
        per_block, fixed = v.us(f.per_block_cycles), v.us(f.fixed_cycles)
        if per_block is not None and fixed is not None:
            line += f"; {per_block:.3f} us per block + {fixed:.2f} us fixed at {v.clock_mhz:g} MHz"
        out.append(line)
    else:
        out.append(f"no fit: {v.no_fit}")
    if v.uneven:
        out.append(f"{v.uneven} CTA(s) whose warps ran {v.scope} unequally often: the most is taken (did a warp's "
                   "buffer overflow?)")
    return out


def tile_rows(k: KernelTimeline) -> list[dict[str, Any]]:
    """A few tiles: the two with fewest KV blocks and the two with most (the two shortest and two longest when
    every tile visited as many), then the stragglers (furthest above the fit)."""
    v = k.tiles
    if v is None or not v.tiles:
        return []
    same = len({t.blocks for t in v.tiles}) == 1
    order = sorted(range(len(v.tiles)), key=lambda i: (v.tiles[i].span_cycles if same else v.tiles[i].blocks,
                                                        v.tiles[i].cta))
    low, high = ("shortest", "longest") if same else ("fewest blocks", "most blocks")
    picked: dict[int, str] = {}
    for i in order[:2]:
        picked.setdefault(i, low)
    for i in reversed(order[-2:]):
        picked.setdefault(i, high)
    for c in v.stragglers:
        i = next(j for j, t in enumerate(v.tiles) if t.cta == c)
        picked[i] = f"{picked[i]}, straggler" if i in picked else "straggler"
    rows = []
    for i, why in picked.items():
        t = v.tiles[i]
        r: dict[str, Any] = {"CTA": str(t.cta), "SM": str(t.sm), "KV blocks": f"{t.blocks:,}",
                             "span cycles": fmt_num(t.span_cycles)}
        if v.clock_mhz:
            r["span us"] = fmt_num(v.us(t.span_cycles), 2)
        if v.fit is not None and t.excess_cycles is not None:
            predicted = t.span_cycles - t.excess_cycles
            r["above fit"] = f"{t.excess_cycles:+,.0f}"
            r["% above"] = f"{t.excess_cycles / predicted * 100:+.1f}" if predicted > 0 else ""
        r["which"] = why
        rows.append(r)
    return rows


def headline(k: KernelTimeline, clock: float | None) -> str:
    if not k.ctas:  # from the tree format
        return f"{k.kernel}"
    span = f"{k.mean_cta_span:,.0f} cycles mean, {k.max_cta_span:,} max"
    if clock:
        span += f" ({k.mean_cta_span / clock:.1f} / {k.max_cta_span / clock:.1f} us at {clock:g} MHz)"
    return f"{k.kernel}: {k.ctas:,} CTAs x {k.warps} warps, {k.events:,} scope instances; CTA span {span}"


def findings(k: KernelTimeline) -> list[str]:
    """The lines a reader wants first: the longest scope, and for the two longest scopes how much of each runs
    while the other runs on another warp (is the MMA hidden behind the softmax?)."""
    if not k.scopes or k.scopes[0].share is None:
        return []
    out = []
    top = k.scopes[0]
    out.append(f"longest scope: {top.name}, {fmt_pct(top.share)} % of the warps' time")
    if len(k.scopes) > 1:
        a, b = k.scopes[0].name, k.scopes[1].name
        ab, ba = k.overlap(a, b), k.overlap(b, a)
        if ab and ba:
            out.append(f"{b} runs while another warp is in {a} {ba.fraction * 100:.0f} % of its time; {a} while "
                       f"another is in {b} {ab.fraction * 100:.0f} %")
    if k.path and k.path.span_cycles:
        p = k.path
        top_path = max(p.by_scope.items(), key=lambda x: x[1], default=None)
        if top_path:
            out.append(f"critical path of CTA {p.cta} (SM {p.sm}, {p.span_cycles:,} cycles): {top_path[0]} "
                       f"{fmt_pct(top_path[1] / p.span_cycles)} %, in no scope "
                       f"{fmt_pct(p.unscoped_cycles / p.span_cycles)} %")
    return out


def to_console(rep: TimelineReport, con: Any, limit: int | None = None) -> None:
    for k in rep.kernels:
        con.print(headline(k, rep.clock_mhz), style="bold", soft_wrap=True)
        for line in findings(k):
            con.print(f"  {line}", soft_wrap=True)
        rows = scope_rows(k)
        print_table(con, "scopes", rows[:limit] if limit else rows, more=len(rows) - limit if limit else 0)
        if k.warp_share:
            print_table(con, "share of each warp's time in each scope (%)", warp_rows(k))
        ov = overlap_rows(k)
        if ov:
            print_table(con, "overlap: A runs while B runs on another warp of the same CTA",
                        ov[:limit] if limit else ov, more=len(ov) - limit if limit else 0)
        elif k.overlaps:
            con.print(f"  no scope runs while another runs on another warp of its CTA (none above "
                      f"{MIN_OVERLAP * 100:.0f} % of its time)", soft_wrap=True)
        if k.path:
            print_table(con, f"critical path through CTA {k.path.cta} (SM {k.path.sm}): "
                             f"{k.path.span_cycles:,} cycles, {len(k.path.steps)} steps", path_rows(k))
        if k.tiles:
            con.print("per query tile: KV blocks visited against the tile's span", style="bold", soft_wrap=True)
            for line in tile_lines(k):
                con.print(f"  {line}", soft_wrap=True)
            tr = tile_rows(k)
            which = "shortest and longest" if len({t.blocks for t in k.tiles.tiles}) == 1 else \
                "fewest and most KV blocks, stragglers"
            print_table(con, f"tiles: {which}", tr[:limit] if limit else tr,
                        more=len(tr) - limit if limit else 0)


def to_markdown(rep: TimelineReport, limit: int | None = None) -> str:
    out = [f"# Proton timeline: {rep.source}", ""]
    for k in rep.kernels:
        out += [f"## {headline(k, rep.clock_mhz)}", ""]
        out += [f"- {line}" for line in findings(k)] + [""]
        out += ["### Scopes", "", md(scope_rows(k, limit)), ""]
        if k.warp_share:
            out += ["### Share of each warp's time (%)", "", md(warp_rows(k)), ""]
        ov = overlap_rows(k)
        if k.overlaps:
            out += ["### Overlap: A runs while B runs on another warp of the CTA", "",
                    md(ov[:limit] if limit else ov) if ov else "(none above 1 %)", ""]
        if k.path:
            out += [f"### Critical path through CTA {k.path.cta} ({k.path.span_cycles:,} cycles)", "",
                    md(path_rows(k)), ""]
        if k.tiles:
            out += ["### Per query tile: KV blocks against span", ""]
            tr = tile_rows(k)
            out += [f"- {line}" for line in tile_lines(k)]
            out += ["", md(tr[:limit] if limit else tr, more=len(tr) - limit if limit else 0), ""]
    out += [f"> note: {n}" for n in rep.notes] + [f"> warning: {w}" for w in rep.warnings]
    return "\n".join(out).rstrip() + "\n"


def to_json(rep: TimelineReport) -> str:
    return json.dumps(rep.to_dict(), indent=1) + "\n"


def svg_timeline(k: KernelTimeline, width: int = 1100, row: int = 16) -> str:
    """One CTA's scopes as a picture: a row per warp, a bar per scope instance (x: cycles from the CTA's start),
    a colour per scope; the tooltip of a bar says its scope, warp and cycles."""
    if not k.timeline:
        return ""
    warps = sorted({w for _, w, _, _ in k.timeline})
    end = max(e for _, _, _, e in k.timeline) or 1
    names = [s.name for s in k.scopes]
    colour = {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}
    left, top = 60, 18
    h = top + row * len(warps) + 24
    sx = (width - left - 10) / end
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" font-size="11" '
             'font-family="system-ui,sans-serif">']
    for i, w in enumerate(warps):
        y = top + i * row
        parts.append(f'<text x="4" y="{y + row - 4}">warp {w}</text>')
    for name, w, s, e in k.timeline:
        y = top + warps.index(w) * row
        parts.append(f'<rect x="{left + s * sx:.2f}" y="{y + 1}" width="{max(0.5, (e - s) * sx):.2f}" '
                     f'height="{row - 3}" fill="{colour.get(name, "#999")}"><title>{html.escape(name)}: warp {w}, '
                     f'{s:,}-{e:,} ({e - s:,} cycles)</title></rect>')
    x = left
    for n in names:
        parts.append(f'<rect x="{x}" y="2" width="10" height="10" fill="{colour[n]}"/>'
                     f'<text x="{x + 13}" y="11">{html.escape(n)}</text>')
        x += 20 + 7 * len(n)
    parts.append(f'<text x="{left}" y="{h - 6}">0</text><text x="{width - 10}" y="{h - 6}" text-anchor="end">'
                 f'{end:,} cycles</text></svg>')
    return "".join(parts)


def to_html(rep: TimelineReport, title: str | None = None, limit: int | None = None) -> str:
    body = []
    for k in rep.kernels:
        body.append(f"<h2>{html.escape(headline(k, rep.clock_mhz))}</h2>")
        body += [f'<p class="meta">{html.escape(line)}</p>' for line in findings(k)]
        if k.timeline and k.path:
            body.append(f"<h3>CTA {k.path.cta} (SM {k.path.sm}): its scopes, warp by warp</h3>")
            body.append(f'<div class="tbl">{svg_timeline(k)}</div>')
        body += ["<h3>Scopes</h3>", table(scope_rows(k, limit))]
        if k.warp_share:
            body += ["<h3>Share of each warp's time (%)</h3>", table(warp_rows(k))]
        if k.overlaps:
            ov = overlap_rows(k)
            body += ["<h3>Overlap: A runs while B runs on another warp of the CTA</h3>",
                     table(ov[:limit] if limit else ov)]
        if k.path:
            body += [f"<h3>Critical path through CTA {k.path.cta}</h3>", table(path_rows(k))]
        if k.tiles:
            body.append("<h3>Per query tile: KV blocks against span</h3>")
            body += [f'<p class="meta">{html.escape(line)}</p>' for line in tile_lines(k)]
            tr = tile_rows(k)
            body.append(table(tr[:limit] if limit else tr))
    meta = [f"source: {rep.source}"] + [f"note: {n}" for n in rep.notes] + [f"warning: {w}" for w in rep.warnings]
    return page(title or "profctl report: Proton timeline", body, meta)


def write_perfetto(trace: Any, sink: Callable[[], AbstractContextManager[IO[str]]], *,
                   clock_mhz: float | None = None) -> str:
    """Every scope instance of a Proton trace (profctl.readers.proton_trace.ProtonTrace) as Trace Event Format:
    a process per CTA (named kernel, CTA and SM), a thread per warp; times in us at the SM clock when it is known,
    else Proton's own cycles / 1000. Returns what was written, in one line."""
    tracks = Tracks()
    per_us = clock_mhz or 1000.0
    with sink() as f:
        w = TraceWriter(f)
        for c, (kidx, sm, cta) in enumerate(trace.ctas):
            tracks.process(GPU_PID + c, f"{trace.kernels[kidx].name} CTA {cta} (SM {sm})", c)
        for i in range(trace.n_events):
            pid = GPU_PID + int(trace.cta[i])
            warp = int(trace.warp[i])
            tracks.thread(pid, warp, f"warp {warp}")
            w.add({"ph": "X", "name": trace.scopes[int(trace.scope[i])], "pid": pid, "tid": warp,
                   "ts": round(int(trace.start[i]) / per_us, 4), "dur": round(int(trace.dur[i]) / per_us, 4),
                   "cat": "proton"})
        tracks.write(w)
        w.finish({"source": trace.path, "clock_mhz": clock_mhz,
                  "time": "us at the SM clock" if clock_mhz else "cycles / 1000 (Proton's 1 GHz)"})
    unit = f"{clock_mhz:g} MHz" if clock_mhz else "Proton's assumed 1 GHz"
    return f"{trace.n_events:,} scope instances of {len(trace.ctas):,} CTAs (times at {unit})"
