"""Cause detectors of the memory system: uncoalesced global access, shared-memory bank conflicts, local
memory, L2 and DRAM traffic (the savings models: :mod:`profctl.analysis.cause_rules`)."""

from __future__ import annotations

from collections.abc import Callable

from profctl.analysis.cause_catalog import Cause, Evidence
from profctl.analysis.cause_context import (
    MEMORY_WAITS,
    Context,
    Line,
    line_where,
    pct,
    top,
)
from profctl.analysis.thresholds import value
from profctl.analysis.time_model import hold_key


def memory_bound(ctx: Context) -> float:
    """How much of the time the memory system sets: the larger of the share of warp time waiting on memory and the
    busiest memory unit's utilisation."""
    units = max(ctx.util("l2_pct"), ctx.util("dram_pct"), ctx.util("l1_pct"))
    return min(max(ctx.share(*MEMORY_WAITS), units), 1.0)


#: the utilisation another unit reaches once a fault stops hiding it (kernels rarely sustain more than this)
ATTAINABLE = 0.7


def floor_after(ctx: Context, freed: tuple[str, ...]) -> float:
    """The time the kernel still needs once the units in `freed` are relieved: what its busiest other unit does
    now, at :data:`ATTAINABLE` utilisation (a kernel freed of bank conflicts becomes DRAM-bound, not free)."""
    others = {k: v for k, v in ctx.f.units().items() if k not in freed and k != "issue slots"}
    busiest = max(others.values()) / 100.0 if others else 0.0
    return (ctx.duration_us or 0.0) * min(busiest / ATTAINABLE, 1.0)


def _capped(ctx: Context, saving: float, freed: tuple[str, ...]) -> float:
    t = ctx.duration_us or 0.0
    return max(min(saving, t - floor_after(ctx, freed)), 0.0)


def _beyond_ideal(ctx: Context, key: str, totals: tuple[str, ...], excess_figure: str
                  ) -> tuple[list[Line], float, float, Callable[[Line], float]]:
    """The lines that moved `key` (sectors, wavefronts), how many in all and how many beyond their ideal
    (``<key>_ideal``), and each line's own excess; without such lines, ncu's kernel-wide figures (`totals`
    summed, `excess_figure`)."""

    def extra(ln: Line) -> float:
        return float(ln.mem[key] - ln.mem.get(f"{key}_ideal", ln.mem[key]))

    lines = [ln for ln in ctx.lines if ln.mem.get(key)]
    total = sum(ln.mem[key] for ln in lines) or sum(ctx.f.get(k) or 0.0 for k in totals)
    excess = sum(max(extra(ln), 0.0) for ln in lines) if lines else ctx.f.get(excess_figure) or 0.0
    return lines, total, excess, extra


def uncoalesced_global(ctx: Context) -> Cause | None:
    glob, total, excess, extra = _beyond_ideal(ctx, "sectors", ("global_ld_sectors", "global_st_sectors"),
                                               "global_sectors_excess")
    if not total or excess / total < 0.25:
        return None
    bad = top(glob, extra, floor=0.1 * excess)
    m = memory_bound(ctx)
    ev: list[str] = [Evidence(f"{pct(excess / total)} of the global sectors moved are beyond what coalesced accesses "
                              f"would move; memory sets {pct(m)} of the time",
                              "memory_l2_theoretical_sectors_global_excess / l1tex__t_sectors (global)",
                              round(excess / total, 4), "fraction", 0.25, ">=")]
    for ln in bad[:2]:
        f = ln.mem["sectors"] / max(ln.mem.get("sectors_ideal", 0.0), 1.0)
        per = ln.mem["sectors"] / ln.mem["requests"] if ln.mem.get("requests") else None
        ev.append(f"{line_where(ln)}: {f:.1f}x the ideal sectors" + (f" ({per:.1f} sectors per request)" if per else "")
                  + f", {pct(ctx.line_share(ln))} of the warp samples")
    # the excess as a part of all the memory traffic the memory-bound share stands for: a kernel that loads its
    # tiles by TMA (bulk copies, not in the LSU's global sectors) and stores an uncoalesced output moves most of its
    # bytes coalesced (tests/data/ladder50 plant_register_shuffle: a 2x-sector O store beside 2 GB of TMA loads);
    # without bulk copies the LSU's sectors are the traffic (L2's own count adds its DRAM fills and write-backs)
    tma = ctx.f.opcode_count("UTMALDG", "UBLKCP")  # bulk copies: through L2 to shared memory, not the LSU
    l2 = float(ctx.p.metrics.get("lts__t_sectors.sum") or (ctx.f.get("l2_bytes") or 0.0) / 32.0) if tma else 0.0
    moved = max(total, l2)
    if moved > total:
        ev.append(f"the excess is {pct(excess / moved)} of all L2 traffic ({l2 / 1e6:.3g} M sectors: the kernel's TMA "
                  "loads are not in the LSU's global sectors)")
    saving = _capped(ctx, (ctx.duration_us or 0) * m * excess / moved, ("L1/shared", "L2", "DRAM", "LSU pipe"))
    left = 1 - excess / moved  # the sectors coalesced accesses would still move
    return ctx.cause("uncoalesced-global", saving, ev, bad, relieves={"l1": left, "l2": left, "dram": left},
                     share=m * excess / moved, degree=excess / total)


def smem_bank_conflict(ctx: Context) -> Cause | None:
    sh, total, excess, extra = _beyond_ideal(ctx, "wavefronts", ("shared_wavefronts",), "shared_wavefronts_excess")
    if not total or excess / total < 0.2:
        return None
    bad = top(sh, extra, floor=0.1 * excess)
    waits = sum(ctx.line_share(ln, "mio_throttle", "short_scoreboard", "lg_throttle") + ctx.line_share(ln)
                for ln in bad) / 2
    m = min(max(ctx.util("l1_pct"), waits, ctx.share("mio_throttle", "short_scoreboard")), 1.0)
    ev: list[str] = [Evidence(f"{pct(excess / total)} of the shared-memory wavefronts are bank-conflict replays; the "
                              f"shared-memory pipe (L1) is {pct(ctx.util('l1_pct'))} busy",
                              "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared (excess over ideal)",
                              round(excess / total, 4), "fraction", 0.2, ">=")]
    for ln in bad[:2]:
        ways = ln.mem["wavefronts"] / max(ln.mem.get("wavefronts_ideal", 0.0), 1.0)
        ev.append(f"{line_where(ln)}: {ways:.1f}-way conflicts ({ln.mem['wavefronts']:.3g} wavefronts for an ideal "
                  f"{ln.mem.get('wavefronts_ideal', 0):.3g}), {pct(ctx.line_share(ln))} of the warp samples")
    saving = _capped(ctx, (ctx.duration_us or 0) * m * excess / total, ("L1/shared", "LSU pipe", "shared pipe"))
    return ctx.cause("smem-bank-conflict", saving, ev, bad, relieves={"l1": 1 - excess / total},
                     share=m * excess / total, degree=excess / total)


def local_memory(ctx: Context) -> Cause | None:
    loc = [ln for ln in ctx.lines if ln.has("LDL", "STL") or ln.mem.get("local_sectors")]
    sectors = ctx.f.local_sectors or sum(ln.mem.get("local_sectors", 0.0) for ln in loc)
    if not loc and not sectors:
        return None
    glob = _global_sectors(ctx)
    at_lines = sum(ctx.line_share(ln) for ln in loc)
    # the local share of the memory traffic only where the report says what the global traffic is
    by_traffic = memory_bound(ctx) * sectors / (sectors + glob) if sectors and glob else 0.0
    share = max(at_lines, by_traffic)
    if share < 0.05:
        return None
    spills = ctx.f.get("spill_requests") or 0.0
    stack = ctx.f.get("stack_bytes") or 0.0
    what = (f"register spills ({spills:.3g} spill requests, {ctx.f.get('registers') or 0:.0f} registers a thread)"
            if spills else f"a per-thread array in local memory (a {stack:.0f}-byte stack frame, no spills: indexed "
                           "at run time)")
    how = (f"{pct(at_lines)} of the warp samples are at local loads/stores" if at_lines >= by_traffic else
           f"local sectors are {pct(sectors / (sectors + (glob or 0.0)))} of the memory traffic ({sectors:.3g} against "
           f"{glob:.3g} global) while memory sets {pct(memory_bound(ctx))} of the time")
    ev: list[str] = [Evidence(f"{what}; about {pct(share)} of the time: {how}",
                              "smsp__pcsamp (LDL/STL) / l1tex__t_sectors_pipe_lsu_mem_local", round(share, 4),
                              "fraction of the time", 0.05, ">=")]
    ev += [f"{line_where(ln)}: {', '.join(sorted(o for o in ln.present if o.startswith(('LDL', 'STL'))))}, "
           f"{pct(ctx.line_share(ln))} of the warp samples" for ln in top(loc, lambda ln: ln.samples, 2)]
    fix = None
    if not spills:
        fix = ("index the per-thread array with compile-time constants (unroll the loop so every index is known) or "
               "put the table in shared memory; a run-time index sends a thread's array to local memory")
    saving = _capped(ctx, (ctx.duration_us or 0) * share, ("L1/shared", "L2", "LSU pipe"))
    return ctx.cause("local-memory", saving, ev, top(loc, lambda ln: ln.samples, 3), fix, share=share, degree=share)


def l2_dram(ctx: Context) -> list[Cause]:
    """dram-bound (at the roof; against B: more DRAM bytes for the same loads) and l2-thrashing."""
    out: list[Cause] = []
    t = ctx.duration_us or 0.0
    dram, hit = ctx.util("dram_pct"), ctx.f.get("l2_hit")
    mine, other = ctx.f.dram_bytes, (ctx.other.f.dram_bytes if ctx.other else None)
    if ctx.other is not None and mine and other and mine > 1.3 * other and not _excess_traffic(ctx):
        req_a, req_b = _global_sectors(ctx), _global_sectors(ctx.other)
        m = max(memory_bound(ctx), dram)
        saving = t * m * (1 - other / mine)
        ev = [f"A moves {mine / 1e6:.1f} MB to and from DRAM, B {other / 1e6:.1f} MB ({mine / other:.1f}x); memory "
              f"sets {pct(m)} of A's time"]
        loads = top([ln for ln in ctx.lines if ln.mem.get("sectors")], lambda ln: ln.mem["sectors"], 3)
        if req_a and req_b and 0.7 < req_a / req_b < 1.4:
            hb = ctx.other.f.get("l2_hit")
            ev.append(f"the same global loads and stores ({req_a:.3g} against {req_b:.3g} sectors asked of the "
                      f"caches) but {mine / other:.1f}x the DRAM traffic (L2 hit rate {hit or 0:.0f}% against B's "
                      f"{hb or 0:.0f}%): data the loads reuse is evicted before its reuse")
            relieves = _rereads_only(ctx)
            if _loads_alike(ctx, ctx.other):
                relieves[hold_key("loads-not-pipelined")] = 0.0
                ev.append("both issue their loads alike (the same load instructions): A's extra wait for them is "
                          "the misses' latency, which goes with the misses")
            out.append(ctx.cause("l2-thrashing", saving, ev, loads, relieves=relieves))
        else:
            if req_a and req_b:
                ev.append(f"A asks the caches for {req_a / req_b:.1f}x B's global sectors: it reads more (more "
                          "passes over the data), not just misses more")
            out.append(ctx.cause("dram-bound", saving, ev, loads))
        return out
    # alone, thrashing is advice to reorder the work: only for code the user writes (a line table); a library GEMM
    # orders its own tiles, and one report cannot tell its DRAM reads from the compulsory ones (cuBLAS's P x V of an
    # eager attention streams its 1 GB P once at the DRAM roof, with a 15 % hit rate: tests/data/unseen)
    reuse = _reuse(ctx) if ctx.has_lines else ""
    if dram >= value("thrash_dram") and hit is not None and hit < value("thrash_hit_pct") and \
            memory_bound(ctx) >= value("memory_share") and \
            not _excess_traffic(ctx) and reuse:
        ev2 = [f"L2 hit rate {hit:.0f}% with DRAM at {pct(dram)} and memory setting {pct(memory_bound(ctx))} of the "
               f"time, and the kernel re-reads its data: {reuse}"]
        loads = top([ln for ln in ctx.lines if ln.mem.get("sectors")], lambda ln: ln.mem["sectors"], 3)
        out.append(ctx.cause("l2-thrashing", t * dram * (1 - hit / 100) * 0.5, ev2, loads, relieves=_rereads_only(ctx)))
    if ctx.other is not None:
        return out  # against B the same bytes are no cause: the roof is each kernel's own verdict
    if dram >= 0.6:
        left = t * max(1 - dram / 0.9, 0.0)
        ev = [f"DRAM at {pct(dram)} of its peak ({(mine or 0) / 1e6:.1f} MB): little is left but moving fewer bytes"]
        if ctx.roofs is not None and ctx.roofs.get("dram") is not None:
            r = ctx.roofs.get("dram")
            left = max(t - r.seconds * 1e6, 0.0)
            ev.append(f"the shape's minimum traffic takes {r.seconds * 1e6:.1f} us at {r.rate:.3g} {r.unit}")
        out.append(ctx.cause("dram-bound", left, ev, relieves={}))  # what is left to the roof: no work removed
    return out


def _rereads_only(ctx: Context) -> dict[str, float]:
    """What reordering for reuse can take off DRAM and L2: re-reads, never the writes (a GEMM of a small K writes
    its output once, however its tiles are ordered): the units keep at least the write share of their traffic."""
    r, w = ctx.f.get("dram_read"), ctx.f.get("dram_write")
    keep = w / (r + w) if r is not None and w is not None and r + w > 0 else 0.0
    return {"dram": keep, "l2": keep}


def _reuse(ctx: Context) -> str:
    """Evidence that a kernel alone reads data more than once (L2 thrashing needs re-reads: a kernel that streams
    every byte once misses in L2 by design and is at the DRAM roof, not thrashing). Either its DRAM bytes exceed the
    bytes its shape must move (with a shape), or it does matrix work on the tensor cores, whose operand tiles many
    blocks read again. '' when there is no such evidence."""
    mine = ctx.f.dram_bytes
    matrix = bool(ctx.f.tensor_ops or ctx.f.opcode_count(*("HMMA", "HGMMA", "IMMA", "QGMMA", "UTCHMMA")))
    # the shape's traffic is an attention kernel's to compare with, not that of one kernel among an eager
    # baseline's several (its softmax moves the score matrix, which the shape never counts)
    if ctx.roofs is not None and ctx.roofs.get("dram") is not None and mine and matrix:
        need = ctx.roofs.get("dram").work
        if need and mine > 1.3 * need:
            return f"it moves {mine / 1e6:.1f} MB to and from DRAM where its shape needs {need / 1e6:.1f} MB"
        return ""
    if matrix:
        return "it does matrix work (tensor-core MMAs), whose operand tiles many blocks read again"
    return ""  # (a matrix-vector product on the FMA pipe streams its matrix once: its text is no evidence)


def _loads_alike(a: Context, b: Context) -> bool:
    """Whether two kernels issue their global loads the same way: plain loads (LDG) within the ``same_loads`` ratio
    of each other, and async copies (LDGSTS, TMA) in both or in neither. Then what B waits for its loads is what
    A's loads would wait once they hit as B's do: A's extra wait is its misses, not loads issued late."""
    r = value("same_loads")
    ldg_a, ldg_b = a.f.opcode_count("LDG"), b.f.opcode_count("LDG")
    asy_a, asy_b = (x.f.opcode_count("LDGSTS", "UTMALDG", "UBLKCP") for x in (a, b))
    if bool(asy_a) != bool(asy_b):
        return False
    return bool(ldg_a and ldg_b and 1 / r <= ldg_a / ldg_b <= r)


def _global_sectors(ctx: Context) -> float | None:
    """The global sectors the SMs ask of L1 (loads and stores): what the code reads, whatever the caches do."""
    per_line = sum(ln.mem.get("sectors", 0.0) for ln in ctx.lines)
    if per_line:
        return per_line
    ld, st = ctx.f.get("global_ld_sectors"), ctx.f.get("global_st_sectors")
    return None if ld is None and st is None else (ld or 0.0) + (st or 0.0)


def _excess_traffic(ctx: Context) -> bool:
    """Whether the kernel's own access pattern explains extra traffic (uncoalesced or local accesses): then more
    DRAM bytes than another kernel are that cause's consequence, not a cause of their own."""
    glob = [ln for ln in ctx.lines if ln.mem.get("sectors")]
    total = sum(ln.mem["sectors"] for ln in glob)
    excess = sum(max(ln.mem["sectors"] - ln.mem.get("sectors_ideal", ln.mem["sectors"]), 0.0) for ln in glob)
    if not glob:
        total = (ctx.f.get("global_ld_sectors") or 0.0) + (ctx.f.get("global_st_sectors") or 0.0)
        excess = ctx.f.get("global_sectors_excess") or 0.0
    local = ctx.f.local_sectors or 0.0
    return bool(total and excess / total >= 0.25) or bool(local and local > 0.25 * (total + local))
