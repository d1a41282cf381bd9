"""Two Proton timelines side by side (``profctl explain`` of two Proton runs: one kernel before and after a
change, or two kernels): which scope grew, which overlap was lost.

Scopes are matched by name. A scope's size is its cycles per CTA (its total over every warp and instance / the
CTAs), so a kernel that runs more or fewer CTAs still compares; its share of the warps' time says what part of
the kernel it is. An overlap (A runs while B runs on another warp of the CTA, profctl.analysis.timeline) is
*lost* when its share of A's time fell by at least :data:`LOST` (in points), *gained* when it rose as much.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from profctl.analysis.timeline import KernelTimeline

#: a change of an overlap's share of A (0..1) that counts as lost or gained
LOST = 0.05


@dataclass
class ScopeChange:
    name: str
    a_cycles_per_cta: float | None
    b_cycles_per_cta: float | None
    a_mean: float | None
    b_mean: float | None
    a_share: float | None
    b_share: float | None

    @property
    def delta(self) -> float:
        return (self.b_cycles_per_cta or 0.0) - (self.a_cycles_per_cta or 0.0)

    @property
    def ratio(self) -> float | None:
        if self.a_cycles_per_cta and self.b_cycles_per_cta is not None:
            return self.b_cycles_per_cta / self.a_cycles_per_cta
        return None


@dataclass
class OverlapChange:
    a: str
    b: str
    before: float
    after: float

    @property
    def delta(self) -> float:
        return self.after - self.before


@dataclass
class TimelineDiff:
    a_label: str
    b_label: str
    kernel_a: str
    kernel_b: str
    span_a: float
    span_b: float
    scopes: list[ScopeChange]
    overlaps: list[OverlapChange]
    path_a: dict[str, int] = field(default_factory=dict)
    path_b: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: the CTAs' warp counts differ: scope sizes are per CTA and warp (the sentence saying so, first)
    per_warp: bool = False
    per_warp_words: str = ""

    @property
    def lost(self) -> list[OverlapChange]:
        return sorted((o for o in self.overlaps if o.delta <= -LOST), key=lambda o: o.delta)

    @property
    def gained(self) -> list[OverlapChange]:
        return sorted((o for o in self.overlaps if o.delta >= LOST), key=lambda o: -o.delta)

    def summary(self) -> list[str]:
        """The answer in a few lines: the CTA span, the scope that grew most (and shrank most), overlaps lost."""
        out = []
        if self.per_warp:
            out.append(self.per_warp_words)
        if self.span_a and self.span_b:
            out.append(f"CTA span: {self.span_a:,.0f} -> {self.span_b:,.0f} cycles "
                       f"({(self.span_b / self.span_a - 1) * 100:+.1f} %)")
        grew = [s for s in self.scopes if s.delta > 0]
        shrank = [s for s in self.scopes if s.delta < 0]
        if grew:
            g = max(grew, key=lambda s: s.delta)
            out.append(f"grew most: {g.name} {_change(g, self.per_warp)}")
        if shrank:
            s_ = min(shrank, key=lambda s: s.delta)
            out.append(f"shrank most: {s_.name} {_change(s_, self.per_warp)}")
        for o in self.lost[:3]:
            out.append(f"overlap lost: {o.a} while {o.b} runs on another warp {o.before * 100:.0f} % -> "
                       f"{o.after * 100:.0f} % of {o.a}'s time")
        for o in self.gained[:3]:
            out.append(f"overlap gained: {o.a} while {o.b} runs on another warp {o.before * 100:.0f} % -> "
                       f"{o.after * 100:.0f} %")
        if not self.lost:
            out.append(f"no overlap lost (none fell by {LOST * 100:.0f} points or more)")
        return out

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for s, sd in zip(self.scopes, d["scopes"], strict=True):
            sd["delta_cycles_per_cta"], sd["ratio"] = s.delta, s.ratio
        for o, od in zip(self.overlaps, d["overlaps"], strict=True):
            od["delta"] = o.delta
        d["lost"] = [{"a": o.a, "b": o.b, "before": o.before, "after": o.after} for o in self.lost]
        d["gained"] = [{"a": o.a, "b": o.b, "before": o.before, "after": o.after} for o in self.gained]
        d["summary"] = self.summary()
        return d


def _change(s: ScopeChange, per_warp: bool = False) -> str:
    r = s.ratio
    pct = f" ({(r - 1) * 100:+.1f} %)" if r is not None else " (new)"
    unit = "cycles per CTA and warp" if per_warp else "cycles per CTA"
    return f"{s.a_cycles_per_cta or 0:,.0f} -> {s.b_cycles_per_cta or 0:,.0f} {unit}{pct}"


def _per_cta(k: KernelTimeline, name: str, per_warp: bool = False) -> float | None:
    """A scope's cycles per CTA (its total over the CTAs); `per_warp`: per CTA and warp, for kernels whose CTAs
    have different warp counts (8 warps doing a softmax take twice the warp-cycles of 4 doing the same)."""
    s = k.scope(name)
    if s is None:
        return None
    per = s.total_cycles / k.ctas if k.ctas else float(s.total_cycles)
    return per / k.warps if per_warp and k.warps else per


def compare(a: KernelTimeline, b: KernelTimeline, *, a_label: str = "A", b_label: str = "B") -> TimelineDiff:
    """B against A, scope by scope and overlap by overlap."""
    names = [s.name for s in a.scopes] + [s.name for s in b.scopes if a.scope(s.name) is None]
    per_warp = bool(a.warps and b.warps and a.warps != b.warps)
    scopes = []
    for n in names:
        sa, sb = a.scope(n), b.scope(n)
        scopes.append(ScopeChange(n, _per_cta(a, n, per_warp), _per_cta(b, n, per_warp), sa.mean_cycles if sa else None,
                                  sb.mean_cycles if sb else None, sa.share if sa else None,
                                  sb.share if sb else None))
    scopes.sort(key=lambda s: -abs(s.delta))
    ov_a = {(o.a, o.b): o.fraction for o in a.overlaps}
    ov_b = {(o.a, o.b): o.fraction for o in b.overlaps}
    pairs = [p for p in ov_a if p in ov_b and p[0] != p[1]]
    overlaps = sorted((OverlapChange(x, y, ov_a[(x, y)], ov_b[(x, y)]) for x, y in pairs), key=lambda o: o.delta)
    d = TimelineDiff(a_label=a_label, b_label=b_label, kernel_a=a.kernel, kernel_b=b.kernel,
                     span_a=a.mean_cta_span, span_b=b.mean_cta_span, scopes=scopes, overlaps=overlaps,
                     path_a=dict(a.path.by_scope) if a.path else {}, path_b=dict(b.path.by_scope) if b.path else {})
    only_a = [n for n in names if b.scope(n) is None]
    only_b = [n for n in names if a.scope(n) is None]
    if only_a or only_b:
        d.notes.append(f"scopes in one timeline only: {', '.join(only_a + only_b)} (A: {a.kernel}, B: {b.kernel})")
    if per_warp:
        d.per_warp = True
        d.per_warp_words = (f"A's CTAs have {a.warps} warps and B's {b.warps}: scopes compare per CTA and warp (the "
                            "cycles a warp spends in each), not per CTA, where halving the warps would halve every "
                            "scope")
    elif a.ctas != b.ctas:
        d.notes.append(f"A ran {a.ctas} CTAs x {a.warps} warps, B {b.ctas} x {b.warps}: scopes compare per CTA")
    if not a.overlaps or not b.overlaps:
        d.notes.append("one side has no overlaps (Proton's tree format has no timeline): only cycles compare")
    return d
