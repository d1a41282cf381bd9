"""Causes, not mechanisms: what to change in a kernel, where, and how much time it would save.

``profctl explain`` used to say *how* a kernel spends its time (stall reasons, instruction counts, the gap split
into parts). A kernel engineer needs the *cause*: "loads 33 floats apart across a warp at transpose.cu:42: 8x the
sectors of a coalesced load; coalescing them saves about 2.9 ms of the 3.2 ms gap". This module holds

* :data:`CATALOG`: every cause profctl names, with a stable id, what in a report detects it, the evidence it shows,
  the fix, and the model of what fixing it saves (docs/diagnosis.md, "Causes", is the same catalog in prose);
* :class:`Cause`: one cause found in one kernel, with its lines, its predicted saving and ncu's own estimate;
* :func:`kernel_causes` / :func:`diagnose_one` (one kernel against its own figures, floor and roofs) and
  :func:`gap_causes` (kernel A against kernel B: the causes that explain the gap, each's saving in A less what the
  same cause costs B);
* :func:`bound`: no predicted saving takes a kernel below its floor (profctl.analysis.floor: the least time the work
  a fix leaves needs on each unit), and in a pair none exceeds the gap (issue 43).

The detectors themselves live in :mod:`profctl.analysis.cause_rules`; the figures they read in
:mod:`profctl.analysis.figures`. How often the first cause is the right one is measured on planted pairs
(benchmarks/explain_accuracy/score.py, benchmarks/RESULTS.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profctl.analysis import cause_rules
from profctl.analysis.cause_catalog import CATALOG, Cause, CauseDef, unit_relief
from profctl.analysis.floor import Floor, floor_of
from profctl.analysis.thresholds import THRESHOLDS, value
from profctl.analysis.time_model import ROOF, Effect, Joint, TimeModel, joint

#: the binding unit of a kernel at its roof -> the catalog's roof cause its verdict stands for
_ROOF_CAUSE = {"dram": "dram-bound", "l2": "dram-bound", "tensor": "compute-bound", "fma": "compute-bound",
               "alu": "compute-bound", "fp64": "compute-bound", "xu": "sfu-bound"}


@dataclass
class KernelCauses:
    """One kernel alone: its floor and verdict, its causes ranked, those left within the roof's slack (at the
    roof, a cause that does not reduce the binding unit's work can save no more than the distance to the roof),
    and what the named fixes give together (the model of its time, profctl.analysis.time_model)."""

    floor: Floor | None
    causes: list[Cause]
    slack: list[Cause] = field(default_factory=list)
    together: Joint | None = None

    @property
    def healthy(self) -> bool:
        """At the roof of its binding unit with no cause that removes work from that unit."""
        return bool(self.floor is not None and self.floor.at_roof and not self.causes)

    def roof_cause(self) -> str | None:
        """At a roof: the catalog's cause the verdict stands for (dram-bound, compute-bound, sfu-bound), which
        the accuracy scorers count as advice ("nothing to fix but moving fewer bytes: fuse passes")."""
        fl = self.floor
        if fl is None or not fl.at_roof or fl.binding is None:
            return None
        return _ROOF_CAUSE.get(fl.binding.key)

    def verdict(self) -> str | None:
        if self.floor is None or not self.floor.units:
            return None
        return self.floor.verdict([c.id for c in self.causes[:3]] if self.floor.at_roof else None)


def effect_of(c: Cause, pair: bool = False) -> Effect:
    """What fixing `c` changes in the model: its catalog's kind, its share of the time, the units it relieves (in a
    pair also those it brings down to B's work)."""
    d = c.definition
    t = c.kernel_us or 0.0
    share = c.share if c.share is not None else (c.saving_us / t if t else 0.0)
    relieves = unit_relief(c)
    if pair:
        relieves.update({k: 0.0 for k in d.pair_relieves if k not in relieves})
    return Effect(c.id, d.effect, min(max(share, 0.0), 1.0), relieves, d.spreads)


def predict(found: list[Cause], fl: Floor | None, t: float, gap: float | None = None,
            other: Floor | None = None) -> Joint | None:
    """Every saving from the one model of the kernel's time: each cause's alone (``saving_us``, the time then
    ``floor_after_us``, what then binds), its part with the others fixed (``with_others_us``), and the named fixes
    together (returned). Against B, a relieved unit keeps B's work there and no saving passes the gap. A roof cause
    (the verdict of a kernel at a roof) keeps its distance to the roof."""
    if not t:
        return None
    model = TimeModel(t, fl, [effect_of(c, other is not None) for c in found if c.definition.effect != ROOF], other)
    cap = max(gap, 0.0) if gap is not None else None
    for c in found:
        if c.definition.effect == ROOF:
            if cap is not None:
                c.saving_us = min(c.saving_us, cap)
            continue
        own = c.saving_us
        p = model.predict([c.id])
        alone = t - p.time_us
        if cap is not None and alone > cap:
            alone = cap
        c.saving_us, c.floor_after_us, c.then_binds = max(alone, 0.0), t - alone, p.label
        if own > alone + max(0.05 * own, 0.5):
            c.uncapped_us = own
            c.evidence.append(_bound_sentence(c, own, p.binds, p.label, cap))
    ids = [c.id for c in found if c.definition.effect != ROOF]
    if not ids:
        return None
    j = joint(model, ids, cap)
    for c in found:
        if c.id in j.marginal:
            c.with_others_us = j.marginal[c.id]
    _masked(found, j, t)
    return j


def _bound_sentence(c: Cause, own: float, binds: str, label: str, cap: float | None) -> str:
    if cap is not None and c.saving_us >= cap - 1e-6:
        return (f"{own:.1f} us by its own measure, bounded at {c.saving_us:.1f} us: no fix of A saves more than its "
                "gap to B")
    if binds.startswith("hold:"):
        return (f"{own:.1f} us by its own measure, {c.saving_us:.1f} us alone: fixed alone, {label} then holds the "
                f"kernel at {c.floor_after_us:.1f} us")
    if binds.startswith("unit:"):
        return (f"{own:.1f} us by its own measure, {c.saving_us:.1f} us alone: fixed, the kernel still needs "
                f"{c.floor_after_us:.1f} us for the work left on {label} (at the share of its peak kernels reach)")
    return f"{own:.1f} us by its own measure, {c.saving_us:.1f} us alone"


def _masked(found: list[Cause], j: Joint, t: float) -> None:
    """Say where a fault saves little alone because another then binds, and what the two give together."""
    by = {c.id: c for c in found}
    masked = THRESHOLDS["masked"].value
    for c in found:
        part = c.with_others_us or 0.0
        if c.id not in j.marginal or part < THRESHOLDS["noise"].value * t or c.saving_us >= masked * part:
            continue
        binder = (c.then_binds or "")
        other = by.get(binder)
        with_ = f" and {other.id}" if other is not None else ""
        c.note = ((c.note + "; ") if c.note else "") + (
            f"fixing {c.id} alone: ~{100 * c.saving_us / t:.0f} % ({binder} then binds); {c.id}{with_} together"
            f"{' with the other named faults' if other is None else ''}: {100 * j.saving_us / t:.0f} %")


def diagnose_one(p: Any, roofs: Any = None, floor: Floor | None = None) -> KernelCauses:
    """One kernel: its floor, the causes ranked by what each saves (alone, or its part in the named fixes
    together where another fault masks it), noise dropped, and at the roof the causes that cannot move it set
    apart; the catch-all ``latency-bound`` only when nothing specific was found and the kernel is not at a roof."""
    ctx = cause_rules.Context.of(p, roofs)
    fl = floor if floor is not None else floor_of(p)
    found = [c for c in cause_rules.detect(ctx) if c.saving_us > 0 or c.id in cause_rules.AT_THE_ROOF]
    t = ctx.duration_us or 0.0
    _same_latency(found)
    if fl is not None and fl.units:
        # the floor's verdict says what the roof causes said alone ("at the DRAM roof", "x us above the practical
        # best"): a roof cause that removes no work is the verdict again, not a fault
        found = [c for c in found if c.id not in cause_rules.AT_THE_ROOF or unit_relief(c)]
    together = predict(found, fl, t)
    slack: list[Cause] = []
    if fl is not None and fl.units:
        if fl.at_roof and fl.binding is not None:
            key = fl.binding.key
            slack = [c for c in found if key not in unit_relief(c) and c.saving_us > 0]
            found = [c for c in found if key in unit_relief(c)]
        found = [c for c in found if rank_key(c) >= THRESHOLDS["noise"].value * t]
    found.sort(key=lambda c: -rank_key(c))
    slack.sort(key=lambda c: -c.saving_us)
    if not found and not slack and t and not (fl is not None and fl.at_roof):
        fallback = cause_rules.latency_bound(ctx)
        if fallback is not None:
            if fl is not None and fl.units and fl.binding is not None:
                # nothing specific: what removing the latency could give back is the distance to the practical best
                fallback.saving_us = max(t - fl.attainable_us, 0.0)
                fallback.floor_after_us = fl.attainable_us
                fallback.evidence.append(f"the {fl.binding.label}'s practical best is {fl.attainable_us:.1f} us: "
                                         "hiding the latency could give back at most the rest")
            found.append(fallback)
    return KernelCauses(fl, found, slack, together)


def rank_key(c: Cause) -> float:
    """What a cause is ranked by: its saving alone, or its part in the named fixes together where another fault
    masks it (two faults that each save 3 % alone and 36 % together are both named)."""
    return max(c.saving_us, c.with_others_us or 0.0)


def _same_latency(found: list[Cause]) -> None:
    """Loads issued too late and too few warps to hide them are one latency: prefetching hides it without the
    registers more warps need, so the occupancy cause keeps only what it saves beyond the prefetch (Triton's
    num_stages 1 -> 3 realized 335 us where 'more warps' was predicted to save 436: tests/data/fixes)."""
    loads = next((c for c in found if c.id == "loads-not-pipelined"), None)
    if loads is None:
        return
    for c in found:
        if c.id.startswith("occupancy-") and c.saving_us > 0:
            left = max(c.saving_us - loads.saving_us, 0.0)
            c.evidence.append(f"the latency more warps would hide is the one prefetching hides (loads-not-pipelined, "
                              f"{loads.saving_us:.1f} us): {left:.1f} us beyond it")
            c.saving_us = left
            c.share = left / c.kernel_us if c.kernel_us else 0.0


def kernel_causes(p: Any, roofs: Any = None, *, top: int | None = None) -> list[Cause]:
    """The causes of one kernel (a KernelProfile), ranked by predicted saving (largest first), each bounded by the
    kernel's floor (:func:`diagnose_one`)."""
    found = diagnose_one(p, roofs).causes
    return found[:top] if top else found


@dataclass
class GapCauses:
    """A's gap to B: the causes that explain it (ranked), the faults both kernels have to the same degree (not
    causes of the gap), and what the named fixes give A together."""

    causes: list[Cause]
    shared: list[Cause] = field(default_factory=list)
    together: Joint | None = None


def gap_causes(a: Any, b: Any, roofs_a: Any = None, roofs_b: Any = None) -> GapCauses:
    """The causes of A's gap to B, ranked by the time each is predicted to save A beyond what the same cause costs
    B, with the causes only a comparison can show (A does more of the same work than B: more DRAM bytes, more
    matrix work for the same result, more L2 misses for the same loads). A fault B has to the same degree is
    shared, not a cause of the gap. No saving exceeds the gap or takes A below its floor (:func:`predict`)."""
    ca, cb = cause_rules.Context.of(a, roofs_a), cause_rules.Context.of(b, roofs_b)
    if not ca.duration_us or not cb.duration_us:
        return GapCauses([])
    t, gap = ca.duration_us, ca.duration_us - cb.duration_us
    on_b = {c.id: c for c in cause_rules.detect(cb)}
    out: list[Cause] = []
    shared: list[Cause] = []
    for c in cause_rules.detect(ca, other=cb):
        theirs = on_b.get(c.id)
        why = same_launch(c, ca, cb)
        if why:
            c.evidence.append(why + ": shared, not a cause of the gap")
            shared.append(c)
            continue
        if theirs is not None and not c.differential:
            if _same_degree(c, theirs, t, cb.duration_us):
                c.evidence.append(f"B has it to the same degree ({_degree(theirs, cb.duration_us):.2f} against A's "
                                  f"{_degree(c, t):.2f}): shared, not a cause of the gap")
                shared.append(c)
                continue
            share = c.share if c.share is not None else c.saving_us / t
            c.saving_us -= theirs.saving_us
            c.share = max(share - theirs.saving_us / t, 0.0)
            c.evidence.append(f"B has it too: it would save B {theirs.saving_us:.1f} us (taken off)")
        if c.saving_us > 0.01 * max(abs(gap), 1e-9):
            out.append(c)
    eff = cause_rules.same_mma_efficiency_gap(ca)
    if eff is not None:  # the same matrix work: no wait can save A more than reaching B's tensor efficiency
        for c in out:
            if c.id in WAITS and c.saving_us > eff:
                c.evidence.append(f"capped at {eff:.1f} us: B does the same matrix work with its tensor pipe busier, "
                                  "and reaching B's efficiency is all a wait can give back")
                c.saving_us, c.share = eff, eff / t
    fa = floor_of(a)
    if not out and gap > value("same_time") * t:
        fallback = cause_rules.latency_bound(ca)
        if fallback is not None and fa is not None and fa.units:
            # nothing specific and A waits with no unit busy: B hides the same latency better; at most the gap, and
            # no further than A's practical best
            fallback.saving_us = min(gap, max(t - fa.attainable_us, 0.0))
            fallback.share = fallback.saving_us / t
            fallback.evidence.append(f"B takes {cb.duration_us:.1f} us for the same work: what hiding the latency "
                                     "gives back is the gap, at most")
            out.append(fallback)
    together = predict(out, fa, t, gap=gap, other=floor_of(b))
    out = [c for c in out if rank_key(c) > value("gap_noise") * max(abs(gap), 1e-9)]
    # causes that each close the whole gap alone are told apart by what their own measure gives beyond it
    out.sort(key=lambda c: (-round(rank_key(c), 1), -(c.uncapped_us or c.saving_us)))
    return GapCauses(out, shared, together if len(out) > 1 else None)


def same_launch(c: Cause, a: Any, b: Any) -> str:
    """A launch-shape cause B has as much of: B holds no more warps a SM (occupancy) or runs no larger a grid
    (too few blocks) than A; '' otherwise. The detectors judge B alone only where it is latency-bound, so
    its configuration is compared here directly."""
    fa, fb = a.f, b.f
    if c.id.startswith("occupancy-"):
        wa, wb = fa.get("theoretical_occupancy"), fb.get("theoretical_occupancy")
        if wa and wb and wb <= wa * 1.02:
            return f"B's theoretical occupancy is no higher ({wb:.1f} % against A's {wa:.1f} %)"
    if c.id == "too-few-blocks":  # (a tail is fixed by a grid of whole waves, larger or smaller: its degree tells)
        ga, gb = fa.get("grid_size"), fb.get("grid_size")
        ba, bb = fa.blocks_per_sm, fb.blocks_per_sm
        if ga and gb and gb <= ga and (not ba or not bb or bb <= ba):
            return f"B launches no more blocks ({gb:.0f} against A's {ga:.0f})"
    return ""


def _degree(c: Cause, t: float) -> float:
    return c.degree if c.degree is not None else (c.share if c.share is not None else c.saving_us / t if t else 0.0)


def _same_degree(a: Cause, b: Cause, ta: float, tb: float | None) -> bool:
    """B has the fault to at least THRESHOLDS['shared_degree'] of A's degree."""
    da, db = _degree(a, ta), _degree(b, tb or 0.0)
    return da > 0 and db >= THRESHOLDS["shared_degree"].value * da


#: causes whose cost is time warps spend waiting
WAITS = frozenset({"loads-not-pipelined", "mma-not-overlapped", "mma-serialized", "barrier-sync", "atomic-contention",
                   "occupancy-registers", "occupancy-shared-memory", "occupancy-block-size"})


__all__ = ["CATALOG", "Cause", "CauseDef", "GapCauses", "KernelCauses", "diagnose_one", "effect_of", "gap_causes",
           "kernel_causes", "predict", "rank_key"]
