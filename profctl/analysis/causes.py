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

#: a cause whose bounded saving is under this share of the kernel's time is noise, not a fault
NOISE = 0.03
#: the binding unit of a kernel at its roof -> the catalog's roof cause the verdict stands for
ROOF_IDS = {"dram": "dram-bound", "l2": "dram-bound", "tensor": "compute-bound", "fma": "compute-bound",
            "alu": "compute-bound", "fp64": "compute-bound", "xu": "sfu-bound"}


@dataclass
class Diagnosis:
    """One kernel alone: its floor and verdict, its causes ranked, and those left within the roof's slack (at the
    roof, a cause that does not reduce the binding unit's work can save no more than the distance to the roof)."""

    floor: Floor | None
    causes: list[Cause]
    slack: list[Cause] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """At the roof of its binding unit with no cause that removes work from that unit."""
        return bool(self.floor is not None and self.floor.at_roof and not self.causes)

    @property
    def roof(self) -> str | None:
        """At a roof: the catalog's id for it (dram-bound, compute-bound, sfu-bound), which the verdict names."""
        if self.floor is None or not self.floor.at_roof or self.floor.binding is None:
            return None
        return ROOF_IDS.get(self.floor.binding.key)

    def verdict(self) -> str | None:
        if self.floor is None or not self.floor.units:
            return None
        return self.floor.verdict([c.id for c in self.causes[:3]] if self.floor.at_roof else None)


#: against B, units whose work a fix may also change beyond the catalog's (A fixed does B's work there)
PAIR_RELIEVES = {"no-tensor-cores": ("l1", "l2", "lsu")}


def bound(found: list[Cause], fl: Floor | None, gap: float | None = None, other: Floor | None = None
          ) -> list[Cause]:
    """Bound every saving: the fixed kernel takes at least the time the work the fix leaves needs on its busiest
    unit (:meth:`Floor.after` over the units the cause does not relieve), and against B at most the gap; against
    B, a relieved unit keeps at least B's work there (A fixed does what B does). Each cut is said in the cause's
    evidence; the bound is kept on the cause (``floor_after_us``)."""
    for c in found:
        cap = None
        why = ""
        if fl is not None and fl.units:
            relief = unit_relief(c)
            if other is not None and other.units:
                for key in set(relief) | set(PAIR_RELIEVES.get(c.id, ())):
                    mine, theirs = fl.get(key), other.get(key)
                    if mine is not None and theirs is not None and mine.floor_us > 0:
                        relief[key] = max(relief.get(key, 0.0), min(theirs.floor_us / mine.floor_us, 1.0))
            after, unit = fl.after_unit(relief)
            c.floor_after_us = after
            cap = max(fl.duration_us - after, 0.0)
            if unit is not None:
                why = (f"fixed, the kernel still needs {after:.1f} us: the work left on the {unit.label} "
                       f"({unit.floor_us:.1f} us at its peak, {100 * max(unit.ceiling, unit.pct / 100):.0f} % of it "
                       "in practice)")
        if gap is not None and (cap is None or max(gap, 0.0) < cap):
            cap = max(gap, 0.0)
            why = f"no fix of A saves more than its gap to B ({gap:.1f} us)"
        if cap is not None and c.saving_us > cap + 1e-6:
            c.uncapped_us = c.saving_us
            c.evidence.append(f"bounded at {cap:.1f} us (the model alone says {c.saving_us:.1f} us): {why}")
            c.saving_us = cap
    return found


def diagnose_one(p: Any, roofs: Any = None, floor: Floor | None = None) -> Diagnosis:
    """One kernel: its floor, the causes ranked by bounded saving (noise dropped), and at the roof the causes
    that cannot move it set apart; the catch-all ``latency-bound`` only when nothing specific was found and the
    kernel is not at a roof."""
    ctx = cause_rules.Context.of(p, roofs)
    fl = floor if floor is not None else floor_of(p)
    found = [c for c in cause_rules.detect(ctx) if c.saving_us > 0 or c.id in cause_rules.AT_THE_ROOF]
    bound(found, fl)
    t = ctx.duration_us or 0.0
    slack: list[Cause] = []
    _same_latency(found)
    if fl is not None and fl.units:
        # the floor's verdict says what the roof causes said alone ("at the DRAM roof", "x us above the practical
        # best"): a roof cause that removes no work is the verdict again, not a fault
        found = [c for c in found if c.id not in cause_rules.AT_THE_ROOF or unit_relief(c)]
        if fl.at_roof and fl.binding is not None:
            key = fl.binding.key
            slack = [c for c in found if key not in unit_relief(c)]
            found = [c for c in found if key in unit_relief(c)]
        slack = [c for c in slack if c.saving_us > 0]
        found = [c for c in found if c.saving_us >= NOISE * t]
    found.sort(key=lambda c: -c.saving_us)
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
    return Diagnosis(fl, found, slack)


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


def kernel_causes(p: Any, roofs: Any = None, *, top: int | None = None) -> list[Cause]:
    """The causes of one kernel (a KernelProfile), ranked by predicted saving (largest first), each bounded by the
    kernel's floor (:func:`diagnose_one`)."""
    found = diagnose_one(p, roofs).causes
    return found[:top] if top else found


def gap_causes(a: Any, b: Any, roofs_a: Any = None, roofs_b: Any = None) -> list[Cause]:
    """The causes of A's gap to B, ranked by the time each is predicted to save A beyond what the same cause costs
    B (a fault both share does not explain their difference), with the causes only a comparison can show (A does
    more of the same work than B: more DRAM bytes, more MMA instructions, more L2 misses for the same loads). No
    saving exceeds the gap or takes A below its floor (:func:`bound`)."""
    ca, cb = cause_rules.Context.of(a, roofs_a), cause_rules.Context.of(b, roofs_b)
    if not ca.duration_us or not cb.duration_us:
        return []
    gap = ca.duration_us - cb.duration_us
    on_b = {c.id: c for c in cause_rules.detect(cb)}
    out = []
    for c in cause_rules.detect(ca, other=cb):
        shared = on_b.get(c.id)
        if shared is not None and not c.differential:
            c.saving_us -= shared.saving_us
            c.evidence.append(f"B has it too: it would save B {shared.saving_us:.1f} us (taken off)")
        if c.saving_us > 0.01 * max(abs(gap), 1e-9):
            out.append(c)
    eff = cause_rules.same_mma_efficiency_gap(ca)
    if eff is not None:  # the same matrix work: no wait can save A more than reaching B's tensor efficiency
        for c in out:
            if c.id in WAITS and c.saving_us > eff:
                c.evidence.append(f"capped at {eff:.1f} us: B does the same matrix work with its tensor pipe busier, "
                                  "and reaching B's efficiency is all a wait can give back")
                c.saving_us = eff
    bound(out, floor_of(a), gap=gap, other=floor_of(b))
    out = [c for c in out if c.saving_us > 0.01 * max(abs(gap), 1e-9)]
    out.sort(key=lambda c: -c.saving_us)
    return out


#: causes whose cost is time warps spend waiting
WAITS = frozenset({"loads-not-pipelined", "mma-not-overlapped", "barrier-sync", "atomic-contention",
                   "occupancy-registers", "occupancy-shared-memory", "occupancy-block-size"})


__all__ = ["CATALOG", "NOISE", "Cause", "CauseDef", "Diagnosis", "bound", "diagnose_one", "gap_causes",
           "kernel_causes"]
