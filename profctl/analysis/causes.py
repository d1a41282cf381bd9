"""Causes, not mechanisms: what to change in a kernel, where, and how much time it would save.

``profctl explain`` used to say *how* a kernel spends its time (stall reasons, instruction counts, the gap split
into parts). A kernel engineer needs the *cause*: "loads 33 floats apart across a warp at transpose.cu:42: 8x the
sectors of a coalesced load; coalescing them saves about 2.9 ms of the 3.2 ms gap". This module holds

* :data:`CATALOG`: every cause profctl names, with a stable id, what in a report detects it, the evidence it shows,
  the fix, and the model of what fixing it saves (docs/diagnosis.md, "Causes", is the same catalog in prose);
* :class:`Cause`: one cause found in one kernel, with its lines, its predicted saving and ncu's own estimate;
* :func:`kernel_causes` (one kernel against its own figures and roofs) and :func:`gap_causes` (kernel A against
  kernel B: the causes that explain the gap, each's saving in A less what the same cause costs B).

The detectors themselves live in :mod:`profctl.analysis.cause_rules`; the figures they read in
:mod:`profctl.analysis.figures`. How often the first cause is the right one is measured on planted pairs
(benchmarks/explain_accuracy/score.py, benchmarks/RESULTS.md).
"""

from __future__ import annotations

from typing import Any

from profctl.analysis import cause_rules
from profctl.analysis.cause_catalog import CATALOG, Cause, CauseDef


def kernel_causes(p: Any, roofs: Any = None, *, top: int | None = None) -> list[Cause]:
    """The causes of one kernel (a KernelProfile), ranked by predicted saving (largest first); the catch-all
    ``latency-bound`` only when nothing specific was found."""
    ctx = cause_rules.Context.of(p, roofs)
    found = [c for c in cause_rules.detect(ctx) if c.saving_us > 0 or c.id in cause_rules.AT_THE_ROOF]
    found.sort(key=lambda c: -c.saving_us)
    if not found and ctx.duration_us:
        fallback = cause_rules.latency_bound(ctx)
        if fallback is not None:
            found.append(fallback)
    return found[:top] if top else found


def gap_causes(a: Any, b: Any, roofs_a: Any = None, roofs_b: Any = None) -> list[Cause]:
    """The causes of A's gap to B, ranked by the time each is predicted to save A beyond what the same cause costs
    B (a fault both share does not explain their difference), with the causes only a comparison can show (A does
    more of the same work than B: more DRAM bytes, more MMA instructions, more L2 misses for the same loads)."""
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
    out.sort(key=lambda c: -c.saving_us)
    return out


#: causes whose cost is time warps spend waiting
WAITS = frozenset({"loads-not-pipelined", "mma-not-overlapped", "barrier-sync", "atomic-contention",
                   "occupancy-registers", "occupancy-shared-memory", "occupancy-block-size"})


__all__ = ["CATALOG", "Cause", "CauseDef", "gap_causes", "kernel_causes"]
