"""The waits of a pipeline synchronized by mbarriers (TMA loads into a ring of shared-memory slots; a producer warp
and consumer warpgroups, as in a warp-specialized attention kernel), told apart from block-wide barriers.

What explain sees in ncu's source counters (issue 50: explain read these waits as ``__syncthreads``):

* every mbarrier wait compiles to the same SASS, ``SYNCS.PHASECHK.TRANS64.TRYWAIT`` followed by a retry branch
  (``@!P0 BRA``); ncu books the wait as the stall ``barrier`` on the TRYWAIT and ``long_scoreboard`` on the branch
  (it reads the TRYWAIT's predicate). The SASS does not say which barrier it is; the source line does
  (``mbarrier.wait(ready.index(slot), ...)``): its name gives the role (:func:`role_of`). Without source text
  (a library kernel) the role is unknown and the wait stays what it was: a wait for loads.
* a warpgroup's arrive (``mbarrier.arrive(turn...)``) is a named barrier of its 128 threads (``BAR.SYNC 0x2,
  0x80``) and one thread's ``SYNCS.ARRIVE``: the warps wait for each other there, booked ``barrier`` on the
  SYNCS.ARRIVE.
* a warp-specialized launch (Gluon/Triton ``warp_specialize``, CUTLASS; it reallocates registers between its
  partitions: ``USETMAXREG``) parks the warps that have no partition (the padding of a warpgroup) and the
  partitions that are done at a block-wide barrier without a thread count that only some of the block's warps
  execute (fewer executions per block than the block has warps): ncu books ``barrier`` on the instruction after it.
  Those warps have no work left: their wait costs nothing (:func:`parked`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from profctl.analysis.parked import PARKED, parked, warp_specialized
from profctl.analysis.parked import opcode as _op
from profctl.analysis.source import attribute

#: the roles of an mbarrier wait, and what each means for the kernel
DATA, FREE, TURN, RELEASE = "data", "free", "turn", "release"
MEANS = {
    DATA: "consumers waiting for their tiles to land (a wait on a ready/full barrier): the loads are not issued "
          "far enough ahead",
    FREE: "the producer waiting for a free slot (a wait on an empty barrier): the consumers are the limit, as they "
          "should be: not a fault",
    TURN: "the ping-pong's handoff (a wait on a turn barrier, and the warpgroup meeting before it arrives on one): "
          "by design, each warpgroup issues its wgmma only after the other; it costs only while the tensor pipe "
          "idles",
    RELEASE: "a warpgroup meeting before it arrives on an mbarrier (releasing a slot): its warps wait for the "
             "slowest of them",
}
#: the fix of loads-not-pipelined when the loads are an mbarrier ring's (the producer's TMA into STAGES slots)
RING_FIX = ("issue the loads further ahead of their use: a deeper ring (more shared-memory slots: STAGES / "
            "num_stages), the producer's prefetch distance (how many tiles it runs ahead of the consumers), the "
            "first tiles issued before the consumers start; if L2 or DRAM is busy, fewer bytes per tile (the tile "
            "order for L2 hits) rather than more slots")

#: how far (in instructions) after its TRYWAIT the retry branch of an mbarrier wait lies (the compiler puts the
#: next wait's address arithmetic between them: 3 in the Gluon forward)
RETRY_WINDOW = 6

_WAIT = re.compile(r"\bmbarrier\.(?:wait|try_wait)\(\s*([A-Za-z_]\w*)")
_ARRIVE = re.compile(r"\bmbarrier\.arrive\(\s*([A-Za-z_]\w*)")
_CUTLASS = {"consumer_wait": DATA, "producer_acquire": FREE}
_FREE_NAME = re.compile(r"empty|free|consumed|release", re.I)
_TURN_NAME = re.compile(r"turn|order|ping|pong|sched", re.I)


def role_of(text: str) -> str | None:
    """The role of the mbarrier wait or arrive on a source line, from the barrier's name (None: not one)."""
    m = _WAIT.search(text)
    if m:
        name = m.group(1)
        return FREE if _FREE_NAME.search(name) else TURN if _TURN_NAME.search(name) else DATA
    for call, r in _CUTLASS.items():
        if call + "(" in text:
            return r
    m = _ARRIVE.search(text)
    if m:
        return TURN if _TURN_NAME.search(m.group(1)) else RELEASE
    return None


@dataclass
class Waits:
    """A kernel's mbarrier waits by role, and its parked warps: shares of all its warp samples."""

    total: int = 0
    parked: float = 0.0  # of all the samples
    #: role -> stall reason -> samples (barrier at the TRYWAIT or SYNCS.ARRIVE, long_scoreboard at the retry branch)
    samples: dict[str, dict[str, int]] = field(default_factory=dict)
    #: role -> source lines ((file, line)) of its waits, most samples first
    lines: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    names: dict[str, list[str]] = field(default_factory=dict)  # role -> the barriers' names on those lines
    warp_specialized: bool = False

    def share(self, *roles: str, reason: str | None = None) -> float:
        """The roles' share of the working warps' samples (the parked warps' left out, as explain's causes do)."""
        working = self.total * (1 - self.parked)
        if working <= 0:
            return 0.0
        return sum(v for r in roles for k, v in self.samples.get(r, {}).items()
                   if reason is None or k == reason) / working

    def keys(self, *roles: str) -> set[tuple[str, int]]:
        return {k for r in roles for k in self.lines.get(r, [])}

    @property
    def any(self) -> bool:
        return bool(self.parked or self.samples)


_CACHE: dict[int, tuple[Any, Waits]] = {}


def waits(p: Any) -> Waits:
    """The mbarrier waits of kernel `p` by role (from its lines' text) and its parked share (cached per profile)."""
    hit = _CACHE.get(id(p))
    if hit is not None and hit[0] is p:
        return hit[1]
    w = _waits(p)
    if len(_CACHE) > 16:
        _CACHE.clear()
    _CACHE[id(p)] = (p, w)
    return w


def _waits(p: Any) -> Waits:
    total = sum(x.samples for x in p.pcs)
    w = Waits(total=total, warp_specialized=warp_specialized(p))
    if not total:
        return w
    off = parked(p)
    w.parked = sum(x.stalls.get("barrier", 0) for x in p.pcs if x.offset in off) / total
    pairs, _ = attribute(p)
    pairs.sort(key=lambda xh: xh[0].offset)
    by_line: dict[str, dict[tuple[str, int], int]] = {}
    last: tuple[int, str, tuple[str, int], str] | None = None  # the TRYWAIT a retry branch reads: where, role, line
    for i, (x, home) in enumerate(pairs):
        op = _op(x.sass)
        text = p.source_text.get(home[0], {}).get(home[1], "") if home else ""
        r = role_of(text) if home else None
        if op.startswith("SYNCS.PHASECHK"):
            last = (i, r, home, text) if r in (DATA, FREE, TURN) and home else None
            n = x.stalls.get("barrier", 0)
        elif op == "BRA" and last is not None:
            at, r, home, text = last
            last = None
            if i - at <= RETRY_WINDOW:
                _add(w, by_line, r, home, "long_scoreboard", x.stalls.get("long_scoreboard", 0), text)
            continue
        elif op.startswith("SYNCS.ARRIVE") and r in (TURN, RELEASE):
            n = x.stalls.get("barrier", 0)
        else:
            continue
        if r is not None and home is not None:
            _add(w, by_line, r, home, "barrier", n, text)
    for r, ks in by_line.items():
        w.lines[r] = [k for k, _ in sorted(ks.items(), key=lambda kv: -kv[1])]
    return w


def _add(w: Waits, by_line: dict[str, dict[tuple[str, int], int]], r: str, home: tuple[str, int], reason: str,
         n: int, text: str) -> None:
    if not n:
        return
    s = w.samples.setdefault(r, {})
    s[reason] = s.get(reason, 0) + n
    ks = by_line.setdefault(r, {})
    ks[home] = ks.get(home, 0) + n
    m = _WAIT.search(text) or _ARRIVE.search(text)
    if m and m.group(1) not in w.names.setdefault(r, []):
        w.names[r].append(m.group(1))


def sentence(p: Any, floor: float) -> str | None:
    """A premise for a kernel whose warps wait at mbarriers or sit parked: what its barrier stalls are (each share
    at or above `floor` said), or None when there is nothing worth saying."""
    w = waits(p)
    parts: list[str] = []
    if w.parked >= floor:
        parts.append(f"{100 * w.parked:.0f} % of its warp samples are warps parked at the warp-specialized launch's "
                     "partition barrier (a block-wide BAR.SYNC that only some warps execute: the padding warps of a "
                     "warpgroup, and partitions that are done): they have no work, so no cause counts them")
    for r in (DATA, FREE, TURN, RELEASE):
        s = w.share(r)
        if s >= floor:
            names = ", ".join(f"`{n}`" for n in w.names.get(r, [])[:3])
            parts.append(f"{100 * s:.0f} % of the working warps' samples wait at the mbarriers"
                         f"{' ' + names if names else ''}: {MEANS[r]}")
    if not parts:
        return None
    return ("its barrier stalls are not __syncthreads (read from the SASS: USETMAXREG, SYNCS.PHASECHK.TRYWAIT, and "
            "the barrier names on the source lines): " + "; ".join(parts))


__all__ = ["DATA", "FREE", "MEANS", "PARKED", "RELEASE", "RING_FIX", "TURN", "Waits", "parked", "role_of", "sentence",
           "waits", "warp_specialized"]
