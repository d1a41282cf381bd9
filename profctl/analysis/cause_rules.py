"""The detectors of :mod:`profctl.analysis.causes`, run in one place: one function per cause of the catalog, each
reading a kernel's :class:`~profctl.analysis.cause_context.Context` (its figures, its warp samples folded onto
source lines, its GPU) and returning a :class:`~profctl.analysis.cause_catalog.Cause` with its lines, its evidence
and its predicted saving, or None. They live by what they look at: ``cause_memory``, ``cause_launch``,
``cause_compute``, ``cause_waits``; here, the list of them and the causes that fold into another.

The savings are physical models, not fits: a fault that multiplies the traffic of a resource by ``f`` costs
``time x (share of the time that resource sets) x (1 - 1/f)``; a launch that leaves SMs idle costs the idle share;
a unit at its limit leaves only the distance to its peak. Shares come from ncu's warp-state samples (where warps
spend their time) and from unit utilisation (which unit sets the pace). Thresholds are deliberately conservative:
a cause is named only where its evidence is in the report, and every number shown is one ncu measured.
"""

from __future__ import annotations

from collections.abc import Callable

from profctl.analysis.cause_catalog import Cause, unit_relief
from profctl.analysis.cause_compute import mma_paths, pipes, register_shuffle, warp_divergence, wasted_work
from profctl.analysis.cause_context import AT_THE_ROOF, MEMORY_WAITS, Context, Line
from profctl.analysis.cause_launch import launch_shape
from profctl.analysis.cause_memory import (
    floor_after,
    l2_dram,
    local_memory,
    memory_bound,
    smem_bank_conflict,
    uncoalesced_global,
)
from profctl.analysis.cause_waits import heavy_atomics, latency_bound, same_mma_efficiency_gap, waits

DETECTORS: tuple[Callable[[Context], Cause | list[Cause] | None], ...] = (
    uncoalesced_global, smem_bank_conflict, local_memory, l2_dram, launch_shape, warp_divergence, mma_paths, pipes,
    register_shuffle, wasted_work, waits,
)


def detect(ctx: Context, other: Context | None = None) -> list[Cause]:
    """Every cause whose evidence is in the kernel (against `other` where given), unranked."""
    ctx.other = other
    out: list[Cause] = []
    if not ctx.duration_us:
        return out
    for fn in DETECTORS:
        r = fn(ctx)
        if isinstance(r, list):
            out += r
        elif r is not None:
            out.append(r)
    return consequences(ctx, out)


#: causes that follow from another at the same lines: fixing the root removes them
ROOTS = {"no-tensor-cores": ("local-memory", "smem-bank-conflict")}


def consequences(ctx: Context, found: list[Cause]) -> list[Cause]:
    """Fold a cause into the one it follows from (an FP32 matmul's register tile spilling and its shared-memory
    operand reads conflicting, at the matmul's own line, go away with the tensor cores), adding its saving and
    evidence, so the root is named once with what fixing it buys."""
    out = list(found)
    for root_id, followers in ROOTS.items():
        root = next((c for c in out if c.id == root_id), None)
        if root is None:
            continue
        for c in [c for c in out if c.id in followers and set(c.lines) & set(root.lines)]:
            t = ctx.duration_us or 0.0
            root.saving_us = min(root.saving_us + c.saving_us, 0.98 * t)
            mine = root.share if root.share is not None else (root.saving_us - c.saving_us) / t if t else 0.0
            theirs = c.share if c.share is not None else c.saving_us / t if t else 0.0
            root.share = min(mine + theirs, 1.0)
            relieves = unit_relief(root)
            for k, v in unit_relief(c).items():
                relieves[k] = min(relieves.get(k, 1.0), v)
            root.relieves = relieves
            root.evidence.append(f"{c.title} at the same line follows from it: " + (c.evidence[0] if c.evidence
                                                                                     else ""))
            out.remove(c)
    return out


__all__ = ["AT_THE_ROOF", "MEMORY_WAITS", "ROOTS", "Context", "Line", "consequences", "detect", "floor_after",
           "heavy_atomics", "latency_bound", "memory_bound", "same_mma_efficiency_gap"]
