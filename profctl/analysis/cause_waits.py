"""Cause detectors of warps waiting: on their own wgmma, on loads not pipelined, at barriers, behind atomics, and
latency with nothing to hide it."""

from __future__ import annotations

from profctl.analysis.cause_catalog import Cause, Evidence
from profctl.analysis.cause_context import (
    Context,
    Line,
    pct,
    top,
)
from profctl.analysis.figures import matrix_flops
from profctl.analysis.mbarriers import DATA, FREE, RELEASE, RING_FIX, TURN
from profctl.analysis.mbarriers import waits as mbarrier_waits
from profctl.analysis.stalls import reason
from profctl.analysis.thresholds import value
from profctl.analysis.wgmma_serial import serialized


def waits(ctx: Context) -> list[Cause]:
    """mma-serialized or mma-not-overlapped, loads-not-pipelined, barrier-sync and atomic-contention: where warps
    wait, on what. A kernel whose wgmma the compiler serialized waits on its MMAs because of that, not for want of
    overlap in its design: mma-not-overlapped's advice (overlap it) is what it already asks for."""
    mma = _serialized(ctx) or _mma_wait(ctx)
    out = [c for c in (mma, _load_wait(ctx), _barriers(ctx), _atomics(ctx)) if c is not None]
    return out


def _serialized(ctx: Context) -> Cause | None:
    """wgmma chains split by full waits the compiler added (profctl.analysis.wgmma_serial)."""
    s = serialized(ctx.p)
    if s is None or s.ratio < value("mma_serialized_links") or not ctx.total:
        return None
    share = s.wait_samples / ctx.total
    # a warp's added wait costs the scheduler only while its other warps have nothing to issue: the share of warp
    # time over the warps a scheduler holds (fit on one recorded pair, tests/data/ladder50/plant_serial: the share
    # alone predicted 81.4 us against 44.2 realized)
    warps = max(ctx.f.get("warps_per_scheduler") or 1.0, 1.0)
    t = ctx.duration_us or 0.0
    ev: list[str] = [
        Evidence(f"{pct(s.ratio)} of the kernel's wgmma chain links ({s.split:,.0f} of {s.links:,.0f} executed) have a "
                 "full wait (WARPGROUP.DEPBAR.LE gsb0, 0x0) between two k-slices of one accumulator: each wgmma is "
                 "waited for before the next is issued", "SASS: wgmma chains split by full waits",
                 round(s.ratio, 4), "fraction of chain links", value("mma_serialized_links"), ">="),
        f"{pct(share)} of the warp time waits at those added waits, with {warps:.2f} warps per scheduler to cover "
        f"them; the tensor pipe is {pct(ctx.util('tensor_pct'))} busy"]
    on = set(s.lines)
    lines = [ln for ln in ctx.lines if ln.key in on]
    lines.sort(key=lambda ln: -ln.samples)
    note = ("ptxas serializes every wgmma of a function once one instruction may touch a running wgmma's "
            "registers (C7514), or when the registers run short (C7512); its -v output says which. The saving counts "
            "the waits the compiler added, not the overlap the program meant")
    fix = None
    if ctx.f.opcode_count("LDL", "STL"):  # spills: the registers ran short, which serializes wgmma too
        ev.append("the kernel also spills registers (LDL/STL): ptxas serializes wgmma when registers run short "
                  "(C7512), not only when an instruction touches a running wgmma's registers")
        fix = ("lower the register pressure until the spills are gone (smaller tiles, fewer values live across the "
               "wgmma, fewer score tiles in flight), then check ptxas -v for C7512 and C7514")
    return ctx.cause("mma-serialized", t * share / warps, ev, lines[:2], fix=fix, note=note, degree=s.ratio)


def _at(ctx: Context, reason: str, *ops: str, skip: frozenset[tuple[str, int]] = frozenset()
        ) -> tuple[float, list[Line]]:
    lines = [ln for ln in ctx.lines if any(ln.ops.get(o, 0) for o in ln.ops if o.startswith(ops)) and
             ln.stalls.get(reason) and ln.key not in skip]
    share = 0.0
    for ln in lines:
        # the reason's samples on the instructions of those opcodes (lines hold several instructions)
        share += ln.stalls.get(reason, 0) / ctx.total * (sum(v for o, v in ln.ops.items() if o.startswith(ops)) /
                                                         max(ln.samples, 1))
    return share, sorted(lines, key=lambda ln: -ln.stalls.get(reason, 0))


def _mma_share(ctx: Context) -> tuple[float, list[Line]]:
    share, lines = _at(ctx, "barrier", "WARPGROUP")
    return share + ctx.share("warpgroup_arrive", "gmma"), lines


def _mma_wait(ctx: Context) -> Cause | None:
    """Warps waiting on their own wgmma. What it costs is the tensor pipe's idle time that other warps do not
    fill: a kernel with more warpgroups (ping-pong) can wait as much per warp and keep the pipe busier. So the
    saving is the tensor efficiency A would reach: B's for the same MMA work, else a ping-pong kernel's."""
    if ctx.f.gmma <= 0 or not ctx.total:
        return None
    share, lines = _mma_share(ctx)
    tensor = ctx.util("tensor_pct")
    t = ctx.duration_us or 0.0
    regs = ctx.f.get("registers") or 0
    warps = ctx.f.get("warps_per_scheduler")
    ev: list[str] = [Evidence(f"{pct(share)} of the warp time waits on the warpgroup's own wgmma results "
                              f"(WARPGROUP.DEPBAR / arrive) with {warps or 0:.2f} warps per scheduler to cover it; the "
                              f"tensor pipe is {pct(tensor)} busy",
                              "smsp__pcsamp_warps_issue_stalled_barrier (at WARPGROUP) + _warpgroup_arrive",
                              round(share, 4), "fraction of warp time", 0.15, ">=")]
    if regs >= value("pipelining_regs"):
        ev.append(f"{regs:.0f} registers a thread: no room for a second score tile (in-warpgroup pipelining)")
    # measured, not assumed: both overlaps inside one warpgroup were tried on profctl's own forward (issue 50)
    note = ("overlap inside one warpgroup is not advised: the next tile's Q K^T before this tile's softmax made "
            "profctl's Triton forward 28 % slower (a second score tile), and the softmax under the previous P V "
            "(Gluon, 138 registers, room to spare) halved the wgmma waits and saved 1 %: the softmax's own dependency "
            "chain then binds (benchmarks/RESULTS.md, issue 50). Two warpgroups ordered to take turns (ping-pong, a "
            "producer warp on TMA: FA3, cuDNN) keep the tensor pipe fed while one does its softmax")
    o = ctx.other
    if o is not None and o.duration_us:
        theirs = o.util("tensor_pct")
        mine_mma, their_mma = matrix_flops(ctx.p)[0], matrix_flops(o.p)[0]
        same_work = bool(mine_mma and their_mma and 0.8 < mine_mma / their_mma < 1.25)
        if not same_work or theirs <= tensor * 1.05 or share < 0.1:
            return None
        load_excess = t * load_wait_share(ctx)[0] - o.duration_us * load_wait_share(o)[0]
        if load_excess > 0.3 * (t - o.duration_us):
            return None  # A's warps wait on loads that B's do not: that, not the MMA overlap, is the gap
        ev.append(f"B keeps the tensor pipe {pct(theirs)} busy for the same MMA work with "
                  f"{o.f.get('warps_per_scheduler') or 0:.2f} warps per scheduler (blocks of "
                  f"{o.f.get('block_size') or 0:.0f} threads against A's {ctx.f.get('block_size') or 0:.0f})")
        c = ctx.cause("mma-not-overlapped", t * (1 - tensor / theirs), ev, lines[:2], note=note)
        c.differential = True
        return c
    if share < 0.15 or tensor >= 0.8 or max(ctx.util("l2_pct"), ctx.util("dram_pct")) >= 0.6:
        return None  # (a busy memory system: the MMAs wait for their operands, not for want of overlap)
    return ctx.cause("mma-not-overlapped", t * max(1 - tensor / 0.8, 0.0), ev, lines[:2], note=note, degree=share)


def _tiled(ctx: Context) -> bool:
    """A main loop that stages tiles (shared memory, async copies, TMA) or feeds the tensor pipe: loads that could
    be issued a stage ahead."""
    staged = ctx.f.opcode_count("LDGSTS", "STS", "UTMALDG", "UBLKCP", "SYNCS", "LDSM")
    return bool(staged) or ctx.util("tensor_pct") > 0.05


def same_mma_efficiency_gap(ctx: Context) -> float | None:
    """Against B doing the same matrix work (tensor operations within 5 %) with its tensor pipe busier: A's time x
    (1 - A's tensor utilisation / B's), what A would save at B's efficiency; None otherwise."""
    o = ctx.other
    if o is None or not o.duration_us:
        return None
    ma, mb = matrix_flops(ctx.p)[0], matrix_flops(o.p)[0]
    ua, ub = ctx.util("tensor_pct"), o.util("tensor_pct")
    if not ma or not mb or not 0.95 < ma / mb < 1.05 or ub <= ua * 1.05 or not ua:
        return None
    return (ctx.duration_us or 0.0) * (1 - ua / ub)


def sync_staged(ctx: Context) -> bool:
    """Matrix work whose operand tiles are staged through registers with no asynchronous copy (LDG, then STS, then a
    block barrier before the MMA reads shared memory; no cp.async, no TMA): Triton's num_stages=1 on Hopper. The
    barrier then waits for the slowest warp's loads: its wait is the loads', which a prefetch hides."""
    f = ctx.f
    if not f.opcodes or f.opcode_count("LDGSTS", "UTMALDG", "UBLKCP"):
        return False
    return bool(f.opcode_count("LDG") and f.opcode_count("STS") and f.opcode_count("BAR") and (f.gmma or f.hmma))


def not_for_loads(ctx: Context) -> frozenset[tuple[str, int]]:
    """The lines of mbarrier waits that are not for data (profctl.analysis.mbarriers: the producer waiting for a
    free slot, the ping-pong's turns, a warpgroup meeting before it arrives): no load is late there."""
    return frozenset(mbarrier_waits(ctx.p).keys(FREE, TURN, RELEASE))


def load_wait_share(ctx: Context) -> tuple[float, float, float, list[Line]]:
    """(all, long scoreboard, barriers waiting for loads) shares of warp time waiting for loads, and the lines: the
    async-copy barriers, and where tiles are staged synchronously (:func:`sync_staged`) the block barriers too.
    An mbarrier wait that is not for data (:func:`not_for_loads`) is left out."""
    skip = not_for_loads(ctx)
    # an mbarrier (TMA) wait at SYNCS shows here too (the retry branch after the TRYWAIT)
    long_sb = ctx.share("long_scoreboard") - sum(ctx.line_share(ln, "long_scoreboard") for ln in ctx.lines
                                                 if ln.key in skip)
    sync, sync_lines = _at(ctx, "barrier", "SYNCS", "DEPBAR", "LDGDEPBAR", skip=skip)
    if sync_staged(ctx):
        bar, bars = _barrier_share(ctx)
        sync, sync_lines = sync + bar, sync_lines + bars[:1]
    hot = sorted([ln for ln in ctx.lines if ln.stalls.get("long_scoreboard") and ln.key not in skip],
                 key=lambda ln: -ln.stalls.get("long_scoreboard", 0))[:2]
    hot += [ln for ln in sync_lines[:1] if all(ln is not h for h in hot)]
    return long_sb + sync, long_sb, sync, hot


def _load_wait(ctx: Context) -> Cause | None:
    if not ctx.total:
        return None
    wait, long_sb, sync, hot = load_wait_share(ctx)
    busiest = max(ctx.max_unit(), ctx.util("issue_pct"))
    glob = [ln for ln in ctx.lines if ln.mem.get("sectors")]
    excess = sum(max(ln.mem["sectors"] - ln.mem.get("sectors_ideal", ln.mem["sectors"]), 0) for ln in glob)
    total = sum(ln.mem["sectors"] for ln in glob)
    if (total and excess / total >= 0.25) or ctx.f.local_instructions > 0 or heavy_atomics(ctx):
        return None
    if not _tiled(ctx):
        return None  # plain dependent loads (a pointer chase) cannot be prefetched: latency-bound, not this
    t = ctx.duration_us or 0.0  # (idle SMs too: the model composes the two, each binding after the other's fix)
    ev: list[str] = [
        Evidence(f"{pct(wait)} of the warp time waits for loads (long scoreboard {pct(long_sb)}, barriers waiting "
                 f"on them {pct(sync)}) while the busiest unit is {pct(busiest)} busy: the loads are issued too late "
                 "to hide",
                 "smsp__pcsamp_warps_issue_stalled_long_scoreboard (+ barrier at SYNCS/DEPBAR)", round(wait, 4),
                 "fraction of warp time", 0.2, ">="),
          "the loads are coalesced: prefetching, not the access pattern, is what is missing"]
    relieves = None
    ring = mbarrier_waits(ctx.p)
    fix = RING_FIX if ring.lines.get(DATA) else None  # the loads are a ring of slots that mbarriers guard
    if fix:
        names = ", ".join(f"`{n}`" for n in ring.names.get(DATA, [])[:3])
        ev.append(f"{pct(ring.share(DATA))} of the warp time is consumers waiting on the mbarriers {names} for their "
                  "tiles (TMA into a ring of shared-memory slots)" +
                  (f"; the producer waits {pct(ring.share(FREE))} for free slots (the consumers are its limit)"
                   if ring.share(FREE) >= value("said_share") else ""))
    if sync_staged(ctx):  # the register round trip goes with the async copy: about half the L1 work
        left = value("staged_l1_left")
        relieves = {"l1": left, "lsu": left}
        ev.append(f"the tiles pass through registers (LDG then STS, no cp.async or TMA): an asynchronous copy also "
                  f"leaves about {pct(left)} of the L1 work")
    o = ctx.other
    if o is not None and o.duration_us and o.total:
        theirs = load_wait_share(o)[0]
        excess = t * wait - o.duration_us * theirs
        saving = min(excess, t * (1 - busiest))
        share = excess / t if t else 0.0  # uncapped: the model sets it against the units
        if wait < theirs + 0.05 or saving <= 0:
            return None
        eff = same_mma_efficiency_gap(ctx)
        if eff is not None and excess > 0.3 * (t - o.duration_us) and eff > saving:
            saving, share = eff, eff / t  # the same MMA work at B's tensor efficiency: what the late loads cost
            ev.append(f"B does the same matrix work with its tensor pipe {pct(o.util('tensor_pct'))} busy against "
                      f"A's {pct(ctx.util('tensor_pct'))}: fed in time, A would take {t - eff:.1f} us")
        ev.append(f"B waits {pct(theirs)} of its warp time for loads ({o.duration_us:.1f} us x {pct(theirs)} "
                  f"against A's {t:.1f} us x {pct(wait)})")
        c = ctx.cause("loads-not-pipelined", saving, ev, hot, fix=fix, share=share, degree=wait - theirs,
                      relieves=relieves)
        c.differential = True
        return c
    if wait < value("late_loads_wait") or busiest >= value("late_loads_busy") or \
            max(ctx.util("l2_pct"), ctx.util("dram_pct")) >= value("late_loads_memory"):
        return None  # a memory system near its roof is bandwidth, not latency: prefetching would not help
    return ctx.cause("loads-not-pipelined", t * min(wait, 1 - busiest), ev, hot, fix=fix, share=wait, degree=wait,
                     relieves=relieves)


def _barrier_share(ctx: Context) -> tuple[float, list[Line]]:
    """Warp time waiting at block-wide barriers: the barrier stall (ncu books it on the instruction after the
    BAR) less the part at wgmma or async-copy waits (mbarriers: SYNCS), and the lines that hold the barriers, most
    executed first; not the lines of mbarrier waits or arrives, whose BAR is the compiler's (the warpgroup's
    128 threads meeting). Warps parked at a warp-specialized launch's partition barrier are not in the samples
    (profctl.analysis.cause_context)."""
    async_, _ = _at(ctx, "barrier", "WARPGROUP", "SYNCS", "DEPBAR", "LDGDEPBAR")
    share = max(ctx.share("barrier") - async_, 0.0)
    mbar = mbarrier_waits(ctx.p).keys(DATA, FREE, TURN, RELEASE)
    bars = [ln for ln in ctx.lines if ln.has("BAR") and ln.key not in mbar]
    bars.sort(key=lambda ln: -ln.executed)
    return share, bars


def _barriers(ctx: Context) -> Cause | None:
    if not ctx.total or sync_staged(ctx):
        return None  # (tiles staged synchronously: the barrier waits for the loads, loads-not-pipelined names it)
    share, lines = _barrier_share(ctx)
    queue = ctx.share("mio_throttle") if ctx.f.opcode_share("LDS", "STS") else 0.0  # the tree's small smem ops
    t = ctx.duration_us or 0.0
    ev: list[str] = [Evidence(f"{pct(share)} of the warp time waits at block-wide barriers (__syncthreads)"
                              + (f", {pct(queue)} more queues shared-memory accesses between them"
                                 if queue >= value("said_share") else ""),
                              "smsp__pcsamp_warps_issue_stalled_barrier (at BAR)", round(share, 4),
                              "fraction of warp time", 0.15, ">=")]
    bars, grid = ctx.f.opcode_count("BAR"), ctx.f.get("grid_size")
    if bars and grid:
        ev.append(f"{bars:.3g} barrier instructions executed ({bars / grid:.1f} per block, counted per warp)")
    o = ctx.other
    if o is not None and o.duration_us and o.total:
        theirs, _ = _barrier_share(o)
        their_q = o.share("mio_throttle") if o.f.opcode_share("LDS", "STS") else 0.0
        saving = t * (share + queue) - o.duration_us * (theirs + their_q)
        if share < theirs + 0.05 or saving <= 0:
            return None
        ev.append(f"B waits {pct(theirs)} of its warp time at barriers")
        c = ctx.cause("barrier-sync", saving, ev, lines[:2])
        c.differential = True
        return c
    if share < 0.15:
        return None
    return ctx.cause("barrier-sync", t * (share + queue), ev, lines[:2], degree=share)


def heavy_atomics(ctx: Context) -> bool:
    """Atomics or reductions at least one for every ten global load requests (one per element, not per block)."""
    n = ctx.f.atomics
    loads = ctx.f.get("global_ld_requests") or sum(ln.mem.get("requests", 0.0) for ln in ctx.lines)
    return bool(n and (not loads or n >= 0.1 * loads))


def _atomics(ctx: Context) -> Cause | None:
    lines = [ln for ln in ctx.lines if ln.has("ATOM", "ATOMG", "RED", "REDG", "ATOMS")]
    if not lines or not ctx.total or not heavy_atomics(ctx):
        return None
    at_lines = sum(ctx.line_share(ln) for ln in lines) + ctx.share("drain")
    # memory waits with the memory system idle: the loads queue behind the serialized atomics
    idle_mem = max(ctx.util("l2_pct"), ctx.util("dram_pct")) < 0.3
    share = min(at_lines + (ctx.share("long_scoreboard", "lg_throttle") if idle_mem else 0.0), 1.0)
    if share < 0.15:
        return None
    n = ctx.f.atomics
    ev: list[str] = [Evidence(f"{n:.3g} atomic/reduction requests, one per element: {pct(share)} of the warp time is "
                              "at them or waits behind them" + (" while L2 and DRAM are nearly idle (the atomics to "
                                                                "one address serialize)" if idle_mem else ""),
                              "smsp__pcsamp (ATOM/RED) + stalled_drain", round(share, 4), "fraction of warp time",
                              0.15, ">=")]
    if ctx.f.get("l2_atomic_pct") is not None:
        ev.append(f"L2 atomic unit {pct(ctx.util('l2_atomic_pct'))} busy")
    return ctx.cause("atomic-contention", (ctx.duration_us or 0) * share * (1 - 1 / 32), ev,
                     top(lines, lambda ln: ln.samples, 2))


def latency_bound(ctx: Context) -> Cause | None:
    """The catch-all: nothing specific fits; the largest stall says what the warps wait for."""
    if not ctx.stalls:
        return None
    waits_ = {k: v for k, v in ctx.stalls.items() if k not in ("selected", "not_selected")}
    if not waits_:
        return None
    k = max(waits_, key=lambda r: waits_[r])

    busiest = ctx.max_unit()
    if busiest >= 0.6:
        return None
    ev = [f"no unit is busy (the busiest {pct(busiest)}); the warps mostly wait: {reason(k).label} "
          f"{pct(waits_[k])} of the warp time ({reason(k).means})"]
    hot = top([ln for ln in ctx.lines if ln.stalls.get(k)], lambda ln: ln.stalls.get(k, 0), 2)
    note = ""
    if k == "wait" and ctx.f.gmma > 0:
        # what its usual fix did on wgmma kernels of this kind, measured (issue 50, ladder steps 15-17)
        note = ("in a wgmma attention forward, interleaving two tiles (the next tile's Q K^T issued before this "
                "tile's softmax) was measured not to pay on profctl's own kernels: the bf16 Triton forward 28 % "
                "slower, the FP8 one-warpgroup Gluon forward 6 % slower once ptxas no longer serialized it; its "
                "fixed-latency waits fell (30 -> 22 % of warp time) and its time did not (benchmarks/RESULTS.md, "
                "issue 50)")
    return ctx.cause("latency-bound", 0.0, ev, hot, fix=f"{reason(k).fix}", note=note)
