"""What a Proton timeline says about a kernel (profctl.readers.proton_trace): per scope its count and cycles,
each warp's share of the kernel in each scope, the critical path through one CTA, and for each pair of scopes
how much of one runs while the other runs on another warp of the same CTA (whether the MMA of one warp group
hides behind the softmax of the other).

Definitions (docs/timelines.md):

* **total cycles** of a scope: the sum of its instances' durations, as the trace holds them (nested instances
  counted each); **mean**: total / count. With the SM clock known (profctl proton records it), also in µs.
* **CTA span**: from the first start to the last end of the CTA's events (cycles; one clock base per CTA).
* **warp share** of warp w in scope S: S's cycles on warp w over every CTA / the CTAs' spans summed.
* **overlap of A under B**: the cycles in which a warp is inside A while at least one *other* warp of the same
  CTA is inside B, over the cycles that warp is inside A (A's busy cycles: per warp, nested instances of A
  counted once). "pv under softmax 40 %" = 40 % of the P·V time runs while another warp does softmax.
* **critical path** of a CTA: from its last-ending scope instance back to its start, each step the
  latest-ending instance (any warp; same warp first on a tie) that ended before the step began, over the
  innermost instances (an instance holding another one of the same warp is left out); what lies between
  steps is cycles in no scope on the path.
* **per query tile** (one CTA of an attention forward = one query tile): the **KV blocks** it visited -- the
  instances per warp of the kernel's loop scope (the scope counted most often per warp, where some warp ran it
  more than once; the most of its warps where they differ) -- against its **span**; over the tiles a least-squares
  line span = fixed + per_block x blocks (at least 3 tiles and 2 block counts), and the tiles furthest above it
  (**stragglers**). A kernel without a loop scope has no per-tile view.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from profctl.errors import NothingMatched, UsageError

#: above this many (segment x channel) cells an overlap computation is cut into batches of CTAs
_CELLS = 8_000_000
#: how many tiles furthest above the per-tile fit are named
STRAGGLERS = 3


@dataclass
class ScopeStats:
    name: str
    count: int | None  # None: Proton's tree format does not count instances
    total_cycles: int
    mean_cycles: float | None  # per instance (trace); per recorded warp (tree: Proton's normalized cycles)
    min_cycles: int | None
    max_cycles: int | None
    warps: int | None  # distinct warps it ran on
    share: float | None  # of the summed warp lifetimes (CTA span x warps)
    busy_cycles: int = 0  # per warp, nested instances counted once
    clock_mhz: float | None = None

    @property
    def total_us(self) -> float | None:
        return self.total_cycles / self.clock_mhz if self.clock_mhz else None

    @property
    def mean_us(self) -> float | None:
        return self.mean_cycles / self.clock_mhz if self.clock_mhz and self.mean_cycles is not None else None


@dataclass
class Overlap:
    a: str
    b: str
    a_cycles: int  # A's busy cycles
    cycles: int  # of those, while B ran on another warp of the CTA
    fraction: float


@dataclass
class Step:
    scope: str
    warp: int
    start: int  # cycles from the CTA's first event
    end: int


@dataclass
class CriticalPath:
    cta: int  # CTA id
    sm: int
    span_cycles: int
    steps: list[Step]
    by_scope: dict[str, int]  # cycles of each scope on the path
    unscoped_cycles: int  # on the path, in no scope


@dataclass
class Tile:
    """One CTA (one query tile of an attention forward): how many KV blocks it visited and how long it took."""

    cta: int  # CTA id
    sm: int
    blocks: int  # instances of the loop scope per warp (the most of its warps)
    span_cycles: int  # its first start to its last end, over its warps
    excess_cycles: float | None = None  # span above the fit (None: no fit)


@dataclass
class TileFit:
    """span = fixed + per_block x blocks, least squares over the tiles of the trace."""

    per_block_cycles: float
    fixed_cycles: float
    r2: float


@dataclass
class TileView:
    """Per query tile: the KV blocks each CTA of the trace visited against its span, the line through them, and
    the tiles furthest above it -- whether the time goes where the blocks go (causal, windows, documents make
    tiles visit different numbers of blocks) or some tiles are slow for another reason."""

    scope: str  # the loop scope whose per-warp count is a tile's KV blocks
    tiles: list[Tile]  # every CTA the trace holds, by CTA id
    fit: TileFit | None = None
    no_fit: str | None = None  # why there is no fit
    stragglers: list[int] = field(default_factory=list)  # CTA ids furthest above the fit, furthest first
    uneven: int = 0  # CTAs whose warps ran the loop scope a different number of times (the most is taken)
    clock_mhz: float | None = None

    def us(self, cycles: float | None) -> float | None:
        return cycles / self.clock_mhz if self.clock_mhz and cycles is not None else None

    def tile(self, cta: int) -> Tile | None:
        return next((t for t in self.tiles if t.cta == cta), None)

    def to_dict(self) -> dict[str, Any]:
        """As :func:`dataclasses.asdict`, with each span and the fit also in µs (None without the clock)."""
        d = dataclasses.asdict(self)
        for t, td in zip(self.tiles, d["tiles"], strict=True):
            td["span_us"] = self.us(t.span_cycles)
        if self.fit is not None:
            d["fit"]["per_block_us"] = self.us(self.fit.per_block_cycles)
            d["fit"]["fixed_us"] = self.us(self.fit.fixed_cycles)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TileView:
        fit = d.get("fit")
        return cls(scope=str(d["scope"]),
                   tiles=[Tile(cta=int(t["cta"]), sm=int(t["sm"]), blocks=int(t["blocks"]),
                               span_cycles=int(t["span_cycles"]), excess_cycles=t.get("excess_cycles"))
                          for t in d.get("tiles", [])],
                   fit=None if fit is None else TileFit(per_block_cycles=float(fit["per_block_cycles"]),
                                                        fixed_cycles=float(fit["fixed_cycles"]), r2=float(fit["r2"])),
                   no_fit=d.get("no_fit"), stragglers=[int(x) for x in d.get("stragglers", [])],
                   uneven=int(d.get("uneven") or 0), clock_mhz=d.get("clock_mhz"))


@dataclass
class KernelTimeline:
    kernel: str
    call_stack: tuple[str, ...]
    ctas: int
    warps: int
    events: int
    mean_cta_span: float
    max_cta_span: int
    scopes: list[ScopeStats]
    warp_share: dict[int, dict[str, float]]  # warp -> scope -> share of the kernel
    overlaps: list[Overlap]
    path: CriticalPath | None
    timeline: list[tuple[str, int, int, int]] = field(default_factory=list)  # one CTA: (scope, warp, start, end)
    #: the launch's CTAs when the trace holds a sample of them (profctl proton --ctas N); None: the trace is all
    ctas_total: int | None = None
    #: which CTAs the trace holds and where the counts and totals come from (a sampled trace)
    sample: str | None = None
    #: per query tile (CTA): KV blocks visited against span; None for a kernel without a loop scope (or a tree)
    tiles: TileView | None = None

    def scope(self, name: str) -> ScopeStats | None:
        return next((s for s in self.scopes if s.name == name), None)

    def overlap(self, a: str, b: str) -> Overlap | None:
        return next((o for o in self.overlaps if o.a == a and o.b == b), None)


@dataclass
class TimelineReport:
    """Every kernel of one trace (or tree), with what the reader and the run said about it."""

    source: str
    kernels: list[KernelTimeline]
    clock_mhz: float | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    tree: bool = False  # from Proton's tree format: cycles per scope only, no count, no timeline

    def kernel(self, pattern: str | None) -> KernelTimeline:
        """The kernel whose name matches regex `pattern` (the only or longest-running one when None);
        NothingMatched naming the kernels there are."""

        if pattern is None:
            return max(self.kernels, key=lambda k: sum(s.total_cycles for s in k.scopes))
        try:
            rx = re.compile(pattern)
        except re.error as e:
            raise UsageError(f"--kernel {pattern!r} is not a regular expression: {e}") from None
        hits = [k for k in self.kernels if rx.search(k.kernel)]
        if not hits:
            names = ", ".join(sorted({k.kernel for k in self.kernels}))
            raise NothingMatched(f"--kernel {pattern!r}: no kernel of {self.source} matches; its kernels: {names}")
        return max(hits, key=lambda k: sum(s.total_cycles for s in k.scopes))

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON: ``schema`` profctl.proton/1; every scope of every kernel as a row (``scopes``)."""
        d = dataclasses.asdict(self)
        d["schema"] = SCHEMA
        for k, kd in zip(self.kernels, d["kernels"], strict=True):
            kd["call_stack"] = list(k.call_stack)
            for s, sd in zip(k.scopes, kd["scopes"], strict=True):
                sd["total_us"], sd["mean_us"] = s.total_us, s.mean_us
            kd["tiles"] = None if k.tiles is None else k.tiles.to_dict()
        d["scopes"] = [{"kernel": k["kernel"], **s} for k in d["kernels"] for s in k["scopes"]]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TimelineReport:
        """A report written by :meth:`to_dict` (profctl proton keeps one beside each trace)."""
        kernels = []
        for k in d.get("kernels", []):
            path = k.get("path")
            kernels.append(KernelTimeline(
                kernel=k["kernel"], call_stack=tuple(k.get("call_stack") or ()), ctas=k["ctas"], warps=k["warps"],
                events=k["events"], mean_cta_span=k["mean_cta_span"], max_cta_span=k["max_cta_span"],
                scopes=[ScopeStats(**{f: v for f, v in s.items() if f not in ("total_us", "mean_us")})
                        for s in k["scopes"]],
                warp_share={int(w): dict(v) for w, v in k.get("warp_share", {}).items()},
                overlaps=[Overlap(**o) for o in k.get("overlaps", [])],
                path=None if path is None else CriticalPath(
                    cta=path["cta"], sm=path["sm"], span_cycles=path["span_cycles"],
                    steps=[Step(**st) for st in path["steps"]], by_scope=dict(path["by_scope"]),
                    unscoped_cycles=path["unscoped_cycles"]),
                timeline=[(str(x[0]), int(x[1]), int(x[2]), int(x[3])) for x in k.get("timeline", [])],
                ctas_total=k.get("ctas_total"), sample=k.get("sample"),
                tiles=None if not k.get("tiles") else TileView.from_dict(k["tiles"])))
        return cls(source=d.get("source", ""), kernels=kernels, clock_mhz=d.get("clock_mhz"),
                   notes=list(d.get("notes", [])), warnings=list(d.get("warnings", [])),
                   meta=dict(d.get("meta", {})), tree=bool(d.get("tree")))


SCHEMA = "profctl.proton/1"


def from_tree(tree: Any, *, clock_mhz: float | None = None) -> TimelineReport:
    """A report from Proton's tree format (profctl.readers.proton_tree): per kernel and scope its total cycles
    and Proton's normalized (per recorded warp) cycles; no counts, shares, overlaps or path -- the tree has no
    timeline."""
    clock = clock_mhz or tree.clock_mhz
    rep = TimelineReport(source=tree.path, kernels=[], clock_mhz=clock, tree=True)
    by_kernel: dict[str, list[Any]] = {}
    for s in tree.scopes:
        by_kernel.setdefault(s.kernel, []).append(s)
    for name, scopes in by_kernel.items():
        stats = [ScopeStats(name="/".join(s.path), count=None, total_cycles=s.cycles, mean_cycles=s.normalized_cycles,
                            min_cycles=None, max_cycles=None, warps=None, share=None, busy_cycles=s.cycles,
                            clock_mhz=clock) for s in scopes]
        stats.sort(key=lambda x: -x.total_cycles)
        rep.kernels.append(KernelTimeline(kernel=name, call_stack=(), ctas=0, warps=0, events=0, mean_cta_span=0.0,
                                          max_cta_span=0, scopes=stats, warp_share={}, overlaps=[], path=None))
    rep.notes.append("Proton's tree format: cycles per scope only (summed over every warp and CTA; the mean is "
                     "Proton's per-warp figure); no counts, no timeline, so no shares, overlaps or critical path: "
                     "record with --data trace for those")
    if tree.clock_mhz and not clock_mhz:
        rep.notes.append(f"times use the clock Proton recorded for the device ({tree.clock_mhz:g} MHz)")
    return rep


def apply_sample(rep: TimelineReport, sampled: dict[str, Any], tree: Any = None) -> None:
    """A trace of a sample of CTAs (profctl proton --ctas N) made whole where it can be: each scope's count from
    the records of every CTA (tallied in the workload child), its total cycles from those records too (the same
    launch) or, where they cannot give them (a warp's buffer overflowed, a 32-bit clock), from Proton's tree of
    another launch of the same kernel; what is neither is scaled from the sample by the CTAs' ratio, and said.
    Shares, overlaps and the critical path stay the sample's, and say how many CTAs they stand on."""
    per_kernel = sampled.get("kernels") or {}
    tree_cycles: dict[tuple[str, str], int] = {}
    if tree is not None:
        for ts in tree.scopes:
            tree_cycles[(ts.kernel, ts.path[-1])] = tree_cycles.get((ts.kernel, ts.path[-1]), 0) + ts.cycles
    for kt in rep.kernels:
        got = per_kernel.get(kt.kernel)
        if not got:
            continue
        total, kept = int(got.get("ctas_total") or 0), kt.ctas
        if not total or total <= kept:
            continue
        scale = total / kept
        counts, cycles = got.get("counts"), got.get("cycles")
        sources: dict[str, set[str]] = {"count": set(), "total": set()}
        for st in kt.scopes:
            if counts is not None and st.name in counts:
                st.count, how_n = int(counts[st.name]), "count"
            else:
                st.count, how_n = round((st.count or 0) * scale), "scaled"
            sources["count"].add(how_n)
            if cycles is not None and st.name in cycles:  # the very launch whose sample is drawn
                st.total_cycles, how_c = int(cycles[st.name]), "records"
            elif (kt.kernel, st.name) in tree_cycles:
                st.total_cycles, how_c = tree_cycles[(kt.kernel, st.name)], "tree"
            else:
                st.total_cycles, how_c = round(st.total_cycles * scale), "scaled"
            sources["total"].add(how_c)
            st.mean_cycles = st.total_cycles / st.count if st.count else None
        kt.scopes.sort(key=lambda x: -x.total_cycles)
        kt.ctas_total = total
        said = {"count": "the records of every CTA (counted as the launch ended)", "tree": "Proton's tree of "
                "every CTA (one more launch)", "records": "the records of every CTA", "scaled": f"the sample "
                f"scaled by {total}/{kept} CTAs"}
        kt.sample = (f"timeline of {kept} of {total} CTAs ({sampled.get('how') or 'a sample'}): warp shares, "
                     f"overlaps and the critical path stand on those {kept}; counts from "
                     f"{' and '.join(said[x] for x in sorted(sources['count']))}, total cycles from "
                     f"{' and '.join(said[x] for x in sorted(sources['total']))}; min and max per instance are "
                     "the sample's")
        rep.notes.append(f"{kt.kernel}: {kt.sample}")
        if "scaled" in sources["count"] or "scaled" in sources["total"]:
            rep.warnings.append(f"{kt.kernel}: some counts or totals are scaled from {kept} of {total} CTAs, not "
                                "counted: --ctas all records every CTA")


def overhead_note(plain_us: float | None, scoped_us: float | None, threshold: float = 0.10) -> str | None:
    """The cost of looking in one line when the scoped kernel is slower than the plain one by more than
    `threshold` (None otherwise, or when either time is missing)."""
    if not plain_us or not scoped_us:
        return None
    extra = scoped_us / plain_us - 1.0
    if extra <= threshold:
        return None
    return (f"the scopes cost {extra * 100:.0f} % (the kernel took {scoped_us:.1f} us with them, {plain_us:.1f} "
            "us without): the timeline is of a slower kernel; fewer scopes, --warps or --clock 32 look cheaper")


def analyze(trace: Any, *, clock_mhz: float | None = None, cta: int | None = None) -> TimelineReport:
    """The figures of every kernel in `trace` (a profctl.readers.proton_trace.ProtonTrace). `cta`: the CTA id
    whose critical path and timeline to show (default: the kernel's longest CTA)."""
    import numpy as np

    rep = TimelineReport(source=trace.path, kernels=[], clock_mhz=clock_mhz)
    kidx = trace.kernel_of_event()
    for k, kern in enumerate(trace.kernels):
        sel = np.nonzero(kidx == k)[0]
        if len(sel):
            rep.kernels.append(_kernel(trace, kern, sel, clock_mhz, cta))
    if trace.skipped:
        rep.notes.append(f"{trace.skipped} event(s) of the file were not scope instances of a kernel: left out")
    if abs(trace.freq_mhz - 1000.0) > 1e-6:
        rep.notes.append(f"the trace's timestamps assume {trace.freq_mhz:g} MHz; read back into cycles with it")
    said = trace.drops.describe()
    if said:
        rep.warnings.append(said)
    if cta is not None and not any(kt.path and kt.path.cta == cta for kt in rep.kernels):
        rep.warnings.append(f"--cta {cta}: no kernel of this trace has a CTA {cta}; its longest CTA is shown")
    return rep


def _kernel(trace: Any, kern: Any, sel: Any, clock_mhz: float | None, want_cta: int | None) -> KernelTimeline:
    import numpy as np

    cta = trace.cta[sel]
    warp = trace.warp[sel]
    scope = trace.scope[sel]
    start = trace.start[sel]
    end = start + trace.dur[sel]
    dur = trace.dur[sel]
    ctas = np.unique(cta)
    # per CTA: its first start and its span
    order = np.argsort(cta, kind="stable")
    c_sorted = cta[order]
    bounds = np.searchsorted(c_sorted, ctas, side="left")
    first = np.minimum.reduceat(start[order], bounds)
    last = np.maximum.reduceat(end[order], bounds)
    spans = last - first
    warps = np.unique(warp)
    names = [trace.scopes[i] for i in np.unique(scope)]
    sid = {trace.scopes.index(n): n for n in names}
    busy = _busy(cta, warp, scope, start, end)
    lifetime = float(spans.sum()) * len(warps)
    stats = []
    for s, name in sid.items():
        m = scope == s
        d = dur[m]
        stats.append(ScopeStats(name=name, count=int(m.sum()), total_cycles=int(d.sum()),
                                mean_cycles=float(d.mean()), min_cycles=int(d.min()), max_cycles=int(d.max()),
                                warps=len(np.unique(warp[m])), share=float(d.sum()) / lifetime if lifetime else 0.0,
                                busy_cycles=int(busy.get(s, 0)), clock_mhz=clock_mhz))
    stats.sort(key=lambda x: -x.total_cycles)
    span_sum = float(spans.sum())
    share: dict[int, dict[str, float]] = {}
    for w in warps:
        mw = warp == w
        share[int(w)] = {name: float(dur[mw & (scope == s)].sum()) / span_sum if span_sum else 0.0
                         for s, name in sid.items()}
    overlaps = _overlaps(cta, warp, scope, start, end, list(sid), sid, busy)
    pick = _pick_cta(trace, ctas, spans, want_cta)
    path, timeline = _critical_path(trace, pick, cta, warp, scope, start, end,
                                    int(first[np.searchsorted(ctas, pick)]))
    return KernelTimeline(kernel=kern.name, call_stack=kern.call_stack, ctas=len(ctas), warps=len(warps),
                          events=len(sel), mean_cta_span=float(spans.mean()), max_cta_span=int(spans.max()),
                          scopes=stats, warp_share=share, overlaps=overlaps, path=path, timeline=timeline,
                          tiles=_tiles(trace, ctas, spans, first, cta, warp, scope, start, clock_mhz))


def _tiles(trace: Any, ctas: Any, spans: Any, first: Any, cta: Any, warp: Any, scope: Any, start: Any,
           clock_mhz: float | None) -> TileView | None:
    """The per-tile view (module docstring): instances counted per (CTA, warp, scope) at once (one np.unique
    over a combined key), the loop scope picked from those counts, each CTA's blocks the most of its warps';
    None when no scope runs more than once on a warp (no loop). Among loop scopes run as often (load_k, qk,
    softmax, pv in profctl's forward: any of them counts the blocks) the one a CTA opens first, then by name,
    so the choice does not depend on the file's order."""
    import numpy as np

    w_ids, w_idx = np.unique(warp, return_inverse=True)
    s_ids, s_idx = np.unique(scope, return_inverse=True)
    W, S = len(w_ids), len(s_ids)
    c_idx = np.searchsorted(ctas, cta)
    keys, counts = np.unique((c_idx.astype(np.int64) * W + w_idx) * S + s_idx, return_counts=True)
    k_scope, k_cta = keys % S, keys // (W * S)
    most = np.zeros(S, dtype=np.int64)
    np.maximum.at(most, k_scope, counts)
    per_warp = np.bincount(k_scope, weights=counts, minlength=S) / np.maximum(np.bincount(k_scope, minlength=S), 1)
    loops = np.nonzero(most > 1)[0]
    if not len(loops):
        return None
    earliest = np.full(S, np.iinfo(np.int64).max)
    np.minimum.at(earliest, s_idx, start - first[c_idx])  # cycles from its CTA's first event
    loop = int(min(loops, key=lambda i: (-per_warp[i], int(earliest[i]), trace.scopes[int(s_ids[i])])))
    m = k_scope == loop
    hi = np.zeros(len(ctas), dtype=np.int64)
    np.maximum.at(hi, k_cta[m], counts[m])
    lo = np.full(len(ctas), np.iinfo(np.int64).max)
    np.minimum.at(lo, k_cta[m], counts[m])
    uneven = int(((lo != hi) & (hi > 0)).sum())
    ids = [trace.ctas[int(c)] for c in ctas]
    order = sorted(range(len(ctas)), key=lambda i: (ids[i][2], ids[i][1]))
    tiles = [Tile(cta=ids[i][2], sm=ids[i][1], blocks=int(hi[i]), span_cycles=int(spans[i])) for i in order]
    view = TileView(scope=trace.scopes[int(s_ids[loop])], tiles=tiles, uneven=uneven, clock_mhz=clock_mhz)
    _fit_tiles(view)
    return view


def _fit_tiles(view: TileView) -> None:
    """span = fixed + per_block x blocks by least squares, each tile's excess over it and the stragglers; or why
    there is no fit (too few tiles, or every tile visited as many blocks: nothing to tell blocks from the rest)."""
    import numpy as np

    x = np.array([t.blocks for t in view.tiles], dtype=np.float64)
    y = np.array([t.span_cycles for t in view.tiles], dtype=np.float64)
    distinct = np.unique(x)
    if len(x) < 3:
        view.no_fit = f"{len(x)} tile(s) in the trace: a fit needs at least 3"
        return
    if len(distinct) < 2:
        view.no_fit = (f"every tile visited {int(distinct[0])} KV block(s): the blocks cannot tell their cost from "
                       "the rest of the span")
        return
    dx = x - x.mean()
    slope = float((dx * (y - y.mean())).sum() / (dx * dx).sum())
    fixed = float(y.mean() - slope * x.mean())
    excess = y - (fixed + slope * x)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((excess ** 2).sum()) / ss_tot if ss_tot > 0 else 1.0
    view.fit = TileFit(per_block_cycles=slope, fixed_cycles=fixed, r2=r2)
    for t, e in zip(view.tiles, excess, strict=True):
        t.excess_cycles = float(e)
    above = [i for i in np.argsort(-excess, kind="stable")[:STRAGGLERS] if excess[i] > 0]
    view.stragglers = [view.tiles[int(i)].cta for i in above]


def _pick_cta(trace: Any, ctas: Any, spans: Any, want: int | None) -> int:
    """The CTA (its index in trace.ctas) to follow: the one with CTA id `want`, else the longest."""
    if want is not None:
        for c in ctas:
            if trace.ctas[int(c)][2] == want:
                return int(c)
    return int(ctas[int(spans.argmax())])


def _busy(cta: Any, warp: Any, scope: Any, start: Any, end: Any) -> dict[int, int]:
    """Per scope, the cycles some warp is inside it, per warp counted once (nested instances merged): the
    instances of one (CTA, warp, scope) sorted by start and merged where they touch, every group at once (each
    group shifted past the previous one on a common axis, so one running maximum serves them all)."""
    import numpy as np

    if not len(start):
        return {}
    key = (cta.astype(np.int64) << 32) | (warp.astype(np.int64) << 16) | scope.astype(np.int64)
    order = np.lexsort((start, key))
    k, s, e = key[order], start[order], end[order]
    g = np.cumsum(np.r_[True, k[1:] != k[:-1]]) - 1
    base = int(s.min())
    rng = int(e.max()) - base + 1
    s2 = (s - base) + g * rng
    run_end = np.maximum.accumulate((e - base) + g * rng)
    new = np.r_[True, s2[1:] > run_end[:-1]]
    first = np.nonzero(new)[0]
    ends = run_end[np.r_[first[1:] - 1, len(s2) - 1]]
    lengths = ends - s2[first]
    sc = (k[first] & 0xFFFF).astype(np.int64)
    sums = np.bincount(sc, weights=lengths.astype(np.float64))
    return {int(i): round(float(v)) for i, v in enumerate(sums) if v}


def _overlaps(cta: Any, warp: Any, scope: Any, start: Any, end: Any, sids: list[int], names: dict[int, str],
              busy: dict[int, int]) -> list[Overlap]:
    """For every ordered pair (A, B) of scopes, the cycles a warp is in A while another warp of its CTA is in B.
    Elementary segments between all event boundaries of a CTA, and per segment which warps are inside which
    scope (coverage counts from cumulative sums), CTAs in batches."""
    import numpy as np

    wids = np.unique(warp)
    widx = np.searchsorted(wids, warp)
    sidx = np.searchsorted(np.array(sids), scope)
    S, W = len(sids), len(wids)
    acc = np.zeros((S, S), dtype=np.int64)
    ctas = np.unique(cta)
    per_cta = max(1, len(cta) // max(1, len(ctas)))
    batch = max(1, _CELLS // max(1, 2 * per_cta * S * W))
    order = np.argsort(cta, kind="stable")
    c_sorted = cta[order]
    for b0 in range(0, len(ctas), batch):
        lo = np.searchsorted(c_sorted, ctas[b0], side="left")
        hi = np.searchsorted(c_sorted, ctas[min(b0 + batch, len(ctas)) - 1], side="right")
        idx = order[lo:hi]
        _overlap_batch(acc, cta[idx], widx[idx], sidx[idx], start[idx], end[idx], S, W)
    out = []
    for i, a in enumerate(sids):
        for j, b in enumerate(sids):
            base = busy.get(a, 0)
            out.append(Overlap(a=names[a], b=names[b], a_cycles=base, cycles=int(acc[i, j]),
                               fraction=float(acc[i, j]) / base if base else 0.0))
    return out


def _overlap_batch(acc: Any, cta: Any, w: Any, s: Any, start: Any, end: Any, S: int, W: int) -> None:
    import numpy as np

    # CTAs laid end to end on one axis: each CTA's times shifted so no segment spans two CTAs
    ctas, inv = np.unique(cta, return_inverse=True)
    lo = np.full(len(ctas), np.iinfo(np.int64).max)
    np.minimum.at(lo, inv, start)
    hi = np.zeros(len(ctas), dtype=np.int64)
    np.maximum.at(hi, inv, end)
    offset = np.concatenate(([0], np.cumsum(hi - lo + 1)[:-1]))
    t0 = start - lo[inv] + offset[inv]
    t1 = end - lo[inv] + offset[inv]
    times = np.unique(np.concatenate((t0, t1)))
    if len(times) < 2:
        return
    ch = (s * W + w).astype(np.int64)
    cells = len(times) * S * W
    up = np.bincount(np.searchsorted(times, t0) * (S * W) + ch, minlength=cells)
    down = np.bincount(np.searchsorted(times, t1) * (S * W) + ch, minlength=cells)
    delta = (up - down).reshape(len(times), S * W)
    cover = np.cumsum(delta, axis=0)[:-1] > 0  # segment k = [times[k], times[k+1])
    seg = np.diff(times)
    active = cover.reshape(len(seg), S, W)
    count = active.sum(axis=2)  # warps inside each scope, per segment
    for j in range(S):
        nb = count[:, j][:, None]
        other = (nb - active[:, j, :]) > 0  # per warp: is B on another warp?
        for i in range(S):
            n = (active[:, i, :] & other).sum(axis=1)
            acc[i, j] += int((n * seg).sum())


def _critical_path(trace: Any, pick: int, cta: Any, warp: Any, scope: Any, start: Any, end: Any,
                   origin: int) -> tuple[CriticalPath, list[tuple[str, int, int, int]]]:
    import numpy as np

    m = np.nonzero(cta == pick)[0]
    ev = sorted(zip((int(x) - origin for x in start[m]), (int(x) - origin for x in end[m]),
                    (int(x) for x in warp[m]), (trace.scopes[int(x)] for x in scope[m]), strict=True))
    timeline = [(name, w, s, e) for s, e, w, name in ev]
    leaves = _leaves(ev)
    span = max(e for _, e, _, _ in ev) - min(s for s, _, _, _ in ev)
    steps = _chain(leaves)
    by_scope: dict[str, int] = {}
    for st in steps:
        by_scope[st.scope] = by_scope.get(st.scope, 0) + st.end - st.start
    on_path = sum(by_scope.values())
    _, sm, cta_id = trace.ctas[pick]
    return (CriticalPath(cta=cta_id, sm=sm, span_cycles=span, steps=steps, by_scope=by_scope,
                         unscoped_cycles=max(0, span - on_path)), timeline)


def _chain(leaves: list[tuple[int, int, int, str]]) -> list[Step]:
    """The critical path back from the last-ending instance: each step the latest-ending instance ending no
    later than the step starts (earlier in (end, start) order, so zero-length instances cannot loop), the same
    warp first among equals."""
    if not leaves:
        return []
    by_end = sorted(leaves, key=lambda x: (x[1], x[0], x[2]))
    ends = [x[1] for x in by_end]
    pos = len(by_end) - 1
    out = [by_end[pos]]
    while True:
        cur = by_end[pos]
        i = min(bisect.bisect_right(ends, cur[0]), pos) - 1
        if i < 0:
            break
        j = bisect.bisect_left(ends, ends[i], 0, i + 1)
        same = [q for q in range(j, i + 1) if by_end[q][2] == cur[2]]
        pos = same[-1] if same else i
        out.append(by_end[pos])
    return [Step(x[3], x[2], x[0], x[1]) for x in reversed(out)]


def _leaves(ev: list[tuple[int, int, int, str]]) -> list[tuple[int, int, int, str]]:
    """Instances holding no other instance of the same warp (the innermost scopes)."""
    out = []
    per_warp: dict[int, list[tuple[int, int, int, str]]] = {}
    for x in ev:
        per_warp.setdefault(x[2], []).append(x)
    for xs in per_warp.values():
        for i, x in enumerate(xs):
            holds = any(y is not x and x[0] <= y[0] and y[1] <= x[1] and (y[0], y[1]) != (x[0], x[1])
                        for y in xs[i + 1:] if y[0] <= x[1])
            if not holds:
                out.append(x)
    return out
