"""The warps of a warp-specialized launch that wait with no work: explain leaves them out of a kernel's warp time.

A warp-specialized launch (Gluon/Triton ``warp_specialize``, CUTLASS; it reallocates registers between its
partitions: ``USETMAXREG``) parks the warps that have no partition (the padding of a warpgroup) and the partitions
that are done at a block-wide barrier without a thread count that only some of the block's warps execute (fewer
executions per block than the block has warps): ncu books ``barrier`` on the instruction after it. Apart from
profctl.analysis.mbarriers (which reads the waits that do cost) so that the source attribution can use it without an
import loop.
"""

from __future__ import annotations

from typing import Any

#: what a barrier stall at the partition barrier means (:func:`parked`)
PARKED = ("warps parked at the warp-specialized launch's partition barrier (padding warps of a warpgroup, partitions "
          "that are done): no work waits on them, not a cost")


def operands(sass: str) -> list[str]:
    """The instruction's words after its predicate: opcode first, then the operands."""
    toks = sass.split()
    return toks[1:] if toks and toks[0].startswith("@") else toks


def opcode(sass: str) -> str:
    """``LDG.E.128`` of ``@!P0 LDG.E.128 R16, desc[UR8][R50.64]`` (predicate dropped)."""
    toks = operands(sass)
    return toks[0] if toks else "?"


def warp_specialized(p: Any) -> bool:
    """The kernel reallocates registers between warps of different roles (setmaxnreg: USETMAXREG)."""
    return any(opcode(x.sass).startswith("USETMAXREG") for x in p.pcs) or \
        any(k.startswith("USETMAXREG") for k in (getattr(p, "opcodes", None) or {}))


def _cta_wide(sass: str) -> bool:
    """BAR.SYNC with a barrier id and no thread count: every warp of the block takes part."""
    toks = operands(sass)
    return bool(toks) and toks[0].startswith("BAR.SYNC") and "," not in " ".join(toks[1:])


def parked(p: Any) -> set[int]:
    """Offsets of the instructions where a warp-specialized kernel's warps with no work wait (the partition
    barrier and the instruction after it, where ncu books the wait): empty for any other kernel."""
    if not warp_specialized(p):
        return set()
    grid, block = p.metrics.get("launch__grid_size"), p.metrics.get("launch__block_size")
    if not grid or not block:
        return set()
    warps = -(-int(block) // 32)
    pcs = sorted(p.pcs, key=lambda x: x.offset)
    out: set[int] = set()
    for i, x in enumerate(pcs):
        if _cta_wide(x.sass) and x.executed is not None and x.executed < grid * warps:
            out.add(x.offset)
            if i + 1 < len(pcs):
                out.add(pcs[i + 1].offset)
    return out
