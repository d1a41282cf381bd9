"""The detectors of :mod:`profctl.analysis.causes`: one function per cause of the catalog, each reading a kernel's
:class:`Context` (its figures, its warp samples folded onto source lines, its GPU) and returning a
:class:`~profctl.analysis.causes.Cause` with its lines, its evidence and its predicted saving, or None.

The savings are physical models, not fits: a fault that multiplies the traffic of a resource by ``f`` costs
``time x (share of the time that resource sets) x (1 - 1/f)``; a launch that leaves SMs idle costs the idle share;
a unit at its limit leaves only the distance to its peak. Shares come from ncu's warp-state samples (where warps
spend their time) and from unit utilisation (which unit sets the pace). Thresholds are deliberately conservative:
a cause is named only where its evidence is in the report, and every number shown is one ncu measured.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from profctl import devices
from profctl.analysis.cause_catalog import CATALOG, Cause
from profctl.analysis.figures import Figures
from profctl.analysis.source import attribute, opcode, ratio_keys, short_path
from profctl.analysis.stalls import ratio_metric, reason

#: stall reasons of warps waiting on the memory system (global, local, texture)
MEMORY_WAITS = ("long_scoreboard", "lg_throttle", "drain", "tex_throttle")
#: causes that are worth naming with little saving left: the kernel is at a roof
AT_THE_ROOF = frozenset({"dram-bound", "compute-bound", "sfu-bound"})
#: a wgmma kernel's tensor-pipe efficiency when no other kernel says what one reaches (cuDNN's SDPA forward kept
#: 65-80 % of the pipe busy on the H100/H200: tests/data/planted/attn_pair, shared/fixtures attn_tc)
WGMMA_EFFICIENCY = 0.70
#: mma.sync's matrix rate on Hopper as a fraction of wgmma's when the report does not give both peaks: ncu's own
#: model of the H200 (tests/data/planted/attn_pair) gives the bf16 paths 360448 (HMMA) and 540672 (HGMMA) ops per
#: cycle; a report's sm__ops_path_tensor_op_{hmma,hgmma}_..._sparsity_off peak_sustained, where present, replaces it
HMMA_RATE_ON_HOPPER = 360448 / 540672
#: text on a source line that says it is a matrix product
_MATMUL = re.compile(r"\b(dot|matmul|mma|gemm|wmma|einsum|bmm|addmm)\b|@|\+=\s*\w+\s*\*\s*\w+|fma\s*\(", re.I)


@dataclass
class Line:
    """One source line (library helpers folded in) or, without source, one instruction, with what ran there."""

    file: str | None
    line: int | None
    text: str = ""
    samples: int = 0
    stalls: dict[str, int] = field(default_factory=dict)
    ops: dict[str, int] = field(default_factory=dict)       # opcode -> samples
    present: set[str] = field(default_factory=set)          # opcodes of the instructions on the line
    executed: float = 0.0                                   # warp-level instructions executed (summed)
    mem: dict[str, float] = field(default_factory=dict)     # summed per-instruction counters

    @property
    def key(self) -> tuple[str, int] | None:
        return (self.file, self.line) if self.file and self.line is not None else None

    def has(self, *prefixes: str) -> bool:
        return any(op == p or op.startswith(p + ".") for op in self.present for p in prefixes)


@dataclass
class Context:
    """What the detectors read of one kernel."""

    p: Any  # KernelProfile
    f: Figures
    roofs: Any
    peak: Any  # profctl.devices.DevicePeak or None
    cc: tuple[int, int] | None
    duration_us: float | None
    total: int
    stalls: dict[str, float]  # reason -> share of warp time (samples, else ncu's per-kernel ratios)
    lines: list[Line]
    other: Context | None = None

    @classmethod
    def of(cls, p: Any, roofs: Any = None) -> Context:
        f = Figures.of(p)
        lines = _lines(p)
        total = sum(ln.samples for ln in lines)
        return cls(p=p, f=f, roofs=roofs, peak=devices.lookup(p.device), cc=_cc(getattr(p, "cc", None)),
                   duration_us=f.duration_us, total=total, stalls=_stall_shares(p, lines, total), lines=lines)

    def share(self, *reasons: str) -> float:
        return sum(self.stalls.get(r, 0.0) for r in reasons)

    def line_share(self, ln: Line, *reasons: str) -> float:
        if not self.total:
            return 0.0
        return (sum(ln.stalls.get(r, 0) for r in reasons) if reasons else ln.samples) / self.total

    def util(self, key: str) -> float:
        """A figure in percent as a fraction (0 when absent)."""
        v = self.f.get(key)
        return max(v, 0.0) / 100.0 if v is not None else 0.0

    def max_unit(self, exclude: tuple[str, ...] = ()) -> float:
        u = {k: v for k, v in self.f.units().items() if k not in exclude and k != "issue slots"}
        return max(u.values()) / 100.0 if u else 0.0

    @property
    def has_lines(self) -> bool:
        return any(ln.key for ln in self.lines)

    def cause(self, id: str, saving: float, evidence: list[str], lines: list[Line] | None = None,
              fix: str | None = None, note: str = "") -> Cause:
        keys = [ln.key for ln in (lines or []) if ln.key]
        if lines and not keys:
            note = (note + "; " if note else "") + ("no source line: the kernel has no line table (a library kernel, "
                                                    "or CUDA built without nvcc -lineinfo)")
        c = Cause(id=id, lines=[k for k in keys if k is not None], saving_us=max(saving, 0.0), evidence=evidence,
                  fix=fix or CATALOG[id].fix, note=note, kernel_us=self.duration_us)
        _ncu_estimate(self, c)
        return c


def _cc(text: Any) -> tuple[int, int] | None:
    try:
        a, b = str(text).split(".")[:2]
        return int(a), int(b)
    except (ValueError, AttributeError):
        return None


def _lines(p: Any) -> list[Line]:
    """The kernel's instructions folded onto their user lines (profctl.analysis.source.attribute); instructions
    without a line stay one entry each."""
    pairs, _ = attribute(p)
    by: dict[Any, Line] = {}
    for x, home in pairs:
        key: Any = home if home is not None else ("pc", x.offset)
        ln = by.get(key)
        if ln is None:
            text = p.source_text.get(home[0], {}).get(home[1], "") if home else x.sass
            ln = by[key] = Line(home[0] if home else None, home[1] if home else None, text.strip())
        op = opcode(x.sass)
        ln.present.add(op)
        ln.samples += x.samples
        ln.executed += float(x.executed or 0)
        if x.samples:
            ln.ops[op] = ln.ops.get(op, 0) + x.samples
        for k, v in x.stalls.items():
            ln.stalls[k] = ln.stalls.get(k, 0) + v
        for name, val in x.memory.items():
            if name in ("smem_nway", "avg_threads"):
                ln.mem[name] = max(ln.mem.get(name, 0.0), val) if name == "smem_nway" else ln.mem.get(name, val)
            else:
                ln.mem[name] = ln.mem.get(name, 0.0) + val
        if x.executed and "thread_inst" in x.memory:
            ln.mem["warp_inst"] = ln.mem.get("warp_inst", 0.0) + x.executed
    return sorted(by.values(), key=lambda ln: -ln.samples)


def _stall_shares(p: Any, lines: list[Line], total: int) -> dict[str, float]:
    """Each stall reason's share of warp time: from the samples, else ncu's per-kernel cycles-per-instruction
    ratios over the whole latency (WarpStateStats without source counters)."""
    if total:
        out: dict[str, float] = {}
        for ln in lines:
            for k, v in ln.stalls.items():
                out[k] = out.get(k, 0.0) + v / total
        return out

    cpi = p.metrics.get("smsp__average_warp_latency_per_inst_issued.ratio")
    if not cpi:
        return {}
    return {k: (p.metrics.get(ratio_metric(k)) or 0.0) / cpi for k in ratio_keys(p)}


def _ncu_estimate(ctx: Context, c: Cause) -> None:
    """ncu's own estimated speedup for the same thing (its guided-analysis rules), in us of this kernel."""
    rules = CATALOG[c.id].ncu_rules
    best: tuple[float, str] | None = None
    for fd in ctx.p.findings:
        if fd.rule not in rules or fd.speedup is None or fd.kind not in ("optimization", "warning"):
            continue
        if c.id in ("mma-not-overlapped", "barrier-sync", "loads-not-pipelined") and \
                not _rule_matches(c.id, fd.title):
            continue
        if c.id in ("tail-effect", "too-few-blocks") and not _rule_matches(c.id, fd.title):
            continue
        if best is None or fd.speedup > best[0]:
            best = (fd.speedup, f"{fd.rule}" + (f" ({fd.title})" if fd.title else ""))
    if best is not None and ctx.duration_us:
        c.ncu_us, c.ncu_rule = ctx.duration_us * best[0] / 100.0, best[1]


def _rule_matches(cause: str, title: str) -> bool:
    t = title.lower()
    return {"mma-not-overlapped": "barrier" in t or "warpgroup" in t, "barrier-sync": "barrier" in t,
            "loads-not-pipelined": "scoreboard" in t, "tail-effect": "tail" in t,
            "too-few-blocks": "small grid" in t or "grid" in t}.get(cause, True)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _top(lines: list[Line], key: Callable[[Line], float], n: int = 3, floor: float = 0.0) -> list[Line]:
    xs = [ln for ln in lines if key(ln) > floor]
    xs.sort(key=lambda ln: -key(ln))
    return xs[:n]


# ------------------------------------------------------------------------------------------------ memory
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


def uncoalesced_global(ctx: Context) -> Cause | None:
    glob = [ln for ln in ctx.lines if ln.mem.get("sectors")]
    total = sum(ln.mem["sectors"] for ln in glob) or (ctx.f.get("global_ld_sectors") or 0.0) + (
        ctx.f.get("global_st_sectors") or 0.0)
    excess = sum(max(ln.mem["sectors"] - ln.mem.get("sectors_ideal", ln.mem["sectors"]), 0.0) for ln in glob)
    if not glob:
        excess = ctx.f.get("global_sectors_excess") or 0.0
    if not total or excess / total < 0.25:
        return None
    bad = _top(glob, lambda ln: ln.mem["sectors"] - ln.mem.get("sectors_ideal", ln.mem["sectors"]),
               floor=0.1 * excess)
    m = memory_bound(ctx)
    ev = [f"{_pct(excess / total)} of the global sectors moved are beyond what coalesced accesses would move; "
          f"memory sets {_pct(m)} of the time"]
    for ln in bad[:2]:
        f = ln.mem["sectors"] / max(ln.mem.get("sectors_ideal", 0.0), 1.0)
        per = ln.mem["sectors"] / ln.mem["requests"] if ln.mem.get("requests") else None
        ev.append(f"{_where(ln)}: {f:.1f}x the ideal sectors" + (f" ({per:.1f} sectors per request)" if per else "")
                  + f", {_pct(ctx.line_share(ln))} of the warp samples")
    saving = _capped(ctx, (ctx.duration_us or 0) * m * excess / total, ("L1/shared", "L2", "DRAM", "LSU pipe"))
    return ctx.cause("uncoalesced-global", saving, ev, bad)


def smem_bank_conflict(ctx: Context) -> Cause | None:
    sh = [ln for ln in ctx.lines if ln.mem.get("wavefronts")]
    total = sum(ln.mem["wavefronts"] for ln in sh) or (ctx.f.get("shared_wavefronts") or 0.0)
    excess = sum(max(ln.mem["wavefronts"] - ln.mem.get("wavefronts_ideal", ln.mem["wavefronts"]), 0.0) for ln in sh)
    if not sh:
        excess = ctx.f.get("shared_wavefronts_excess") or 0.0
    if not total or excess / total < 0.2:
        return None
    bad = _top(sh, lambda ln: ln.mem["wavefronts"] - ln.mem.get("wavefronts_ideal", ln.mem["wavefronts"]),
               floor=0.1 * excess)
    waits = sum(ctx.line_share(ln, "mio_throttle", "short_scoreboard", "lg_throttle") + ctx.line_share(ln)
                for ln in bad) / 2
    m = min(max(ctx.util("l1_pct"), waits, ctx.share("mio_throttle", "short_scoreboard")), 1.0)
    ev = [f"{_pct(excess / total)} of the shared-memory wavefronts are bank-conflict replays; the shared-memory "
          f"pipe (L1) is {_pct(ctx.util('l1_pct'))} busy"]
    for ln in bad[:2]:
        ways = ln.mem["wavefronts"] / max(ln.mem.get("wavefronts_ideal", 0.0), 1.0)
        ev.append(f"{_where(ln)}: {ways:.1f}-way conflicts ({ln.mem['wavefronts']:.3g} wavefronts for an ideal "
                  f"{ln.mem.get('wavefronts_ideal', 0):.3g}), {_pct(ctx.line_share(ln))} of the warp samples")
    saving = _capped(ctx, (ctx.duration_us or 0) * m * excess / total, ("L1/shared", "LSU pipe", "shared pipe"))
    return ctx.cause("smem-bank-conflict", saving, ev, bad)


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
    ev = [f"{what}; local loads/stores take {_pct(share)} of the time"
          + (f" ({sectors:.3g} local sectors against {glob:.3g} global)" if sectors and glob else "")]
    ev += [f"{_where(ln)}: {', '.join(sorted(o for o in ln.present if o.startswith(('LDL', 'STL'))))}, "
           f"{_pct(ctx.line_share(ln))} of the warp samples" for ln in _top(loc, lambda ln: ln.samples, 2)]
    fix = None
    if not spills:
        fix = ("index the per-thread array with compile-time constants (unroll the loop so every index is known) or "
               "put the table in shared memory; a run-time index sends a thread's array to local memory")
    saving = _capped(ctx, (ctx.duration_us or 0) * share, ("L1/shared", "L2", "LSU pipe"))
    return ctx.cause("local-memory", saving, ev, _top(loc, lambda ln: ln.samples, 3), fix)


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
              f"sets {_pct(m)} of A's time"]
        loads = _top([ln for ln in ctx.lines if ln.mem.get("sectors")], lambda ln: ln.mem["sectors"], 3)
        if req_a and req_b and 0.7 < req_a / req_b < 1.4:
            hb = ctx.other.f.get("l2_hit")
            ev.append(f"the same global loads and stores ({req_a:.3g} against {req_b:.3g} sectors asked of the "
                      f"caches) but {mine / other:.1f}x the DRAM traffic (L2 hit rate {hit or 0:.0f}% against B's "
                      f"{hb or 0:.0f}%): data the loads reuse is evicted before its reuse")
            out.append(ctx.cause("l2-thrashing", saving, ev, loads))
        else:
            if req_a and req_b:
                ev.append(f"A asks the caches for {req_a / req_b:.1f}x B's global sectors: it reads more (more "
                          "passes over the data), not just misses more")
            out.append(ctx.cause("dram-bound", saving, ev, loads))
        return out
    if dram >= 0.4 and hit is not None and hit < 60 and memory_bound(ctx) >= 0.6 and not _excess_traffic(ctx):
        ev2 = [f"L2 hit rate {hit:.0f}% with DRAM at {_pct(dram)} and memory setting {_pct(memory_bound(ctx))} of the "
               "time: if the kernel reads data more than once, the L2 is not keeping it between reads (one kernel "
               "cannot tell re-reads from streaming; compare with a kernel that reuses it)"]
        loads = _top([ln for ln in ctx.lines if ln.mem.get("sectors")], lambda ln: ln.mem["sectors"], 3)
        out.append(ctx.cause("l2-thrashing", t * dram * (1 - hit / 100) * 0.5, ev2, loads))
    if dram >= 0.6:
        left = t * max(1 - dram / 0.9, 0.0)
        ev = [f"DRAM at {_pct(dram)} of its peak ({(mine or 0) / 1e6:.1f} MB): little is left but moving fewer bytes"]
        if ctx.roofs is not None and ctx.roofs.get("dram") is not None:
            r = ctx.roofs.get("dram")
            left = max(t - r.seconds * 1e6, 0.0)
            ev.append(f"the shape's minimum traffic takes {r.seconds * 1e6:.1f} us at {r.rate:.3g} {r.unit}")
        out.append(ctx.cause("dram-bound", left, ev))
    return out


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


# ------------------------------------------------------------------------------------------------ launch
def launch_shape(ctx: Context) -> list[Cause]:
    """tail-effect, too-few-blocks and the occupancy causes: what the launch configuration leaves idle."""
    out: list[Cause] = []
    for fn in (tail_effect, too_few_blocks, occupancy):
        c = fn(ctx)
        if c is not None:
            out.append(c)
    return out


def tail_effect(ctx: Context) -> Cause | None:
    """Every SM got work, but some finish early and idle while the last blocks run: a partial last wave (a grid just
    over whole waves), or one SM holding one block more than the rest when a block fills an SM. What it costs is
    the SMs' idle share (ncu's SM active cycles against elapsed): time x (1 - SM busy), the time if the same work
    were spread evenly."""
    waves, grid, full, sms = ctx.f.get("waves"), ctx.f.get("grid_size"), ctx.f.full_wave_blocks, ctx.f.get("sms")
    busy, t = ctx.f.sm_busy, ctx.duration_us or 0.0
    if not grid or not sms or grid < sms or t < 10:
        return None
    by_waves = 0.0
    if waves and waves >= 1.0 and full:
        whole = math.ceil(waves - 1e-9)
        frac = waves - math.floor(waves)
        if whole >= 2 and 1e-6 < frac <= 0.5:
            by_waves = 1 - waves / whole
    idle = 1 - busy if busy is not None else by_waves
    if idle < 0.1 or (by_waves == 0.0 and busy is not None and busy > 0.85):
        return None
    ev = [f"SMs busy {_pct(busy)} of the time: some finish their blocks early and wait for the last ones"
          if busy is not None else "SM busy time not collected"]
    per = ctx.f.blocks_per_sm
    if by_waves and waves and full:
        ev.append(f"{grid:.0f} blocks, {full:.0f} per wave ({sms:.0f} SMs x {per:.0f}): {waves:.2f} waves run as "
                  f"{math.ceil(waves - 1e-9)}, the last one {_pct(waves - math.floor(waves))} full")
        fix = (f"give the grid a whole number of waves ({full * math.floor(waves):.0f} blocks, now {grid:.0f}): a "
               "little more work per block, or more, smaller blocks so the last wave is fuller")
    else:
        extra = grid - sms * math.floor(grid / sms)
        ev.append(f"{grid:.0f} blocks on {sms:.0f} SMs: {extra:.0f} SM(s) get one block more than the others, and a "
                  "block fills an SM, so the rest idle while they finish")
        lo, hi = sms * math.floor(grid / sms), sms * math.ceil(grid / sms)
        fix = (f"make the grid a multiple of the SMs ({lo:.0f} or {hi:.0f} blocks, now {grid:.0f}) by changing the "
               "work per block, or use smaller blocks so the imbalance averages out")
    return ctx.cause("tail-effect", t * idle, ev, fix=fix)


def too_few_blocks(ctx: Context) -> Cause | None:
    grid, full, sms = ctx.f.get("grid_size"), ctx.f.full_wave_blocks, ctx.f.get("sms")
    if not grid or not full or not sms or grid >= 0.9 * full or ctx.f.persistent():
        return None
    if grid >= sms and ctx.f.sm_busy is not None and ctx.f.sm_busy < 0.85:
        return None  # every SM has work, some idle at the end: a tail, not too few blocks
    used = min(grid, sms) / sms
    device_units = max(ctx.util("dram_pct"), ctx.util("l2_pct"))
    headroom = 0.9 / device_units if device_units > 0 else float("inf")
    speedup = min(full / grid if grid >= sms else sms / grid, headroom)
    if speedup <= 1.05:
        return None
    saving = (ctx.duration_us or 0) * (1 - 1 / speedup)
    ev = [f"{grid:.0f} blocks where the GPU runs {full:.0f} at once ({sms:.0f} SMs x {ctx.f.blocks_per_sm:.0f}): "
          + (f"{sms - grid:.0f} SMs idle" if grid < sms else "the SMs hold a fraction of the warps they could"),
          f"SMs busy {_pct(ctx.f.sm_busy)} of the time" if ctx.f.sm_busy is not None else f"{_pct(used)} of SMs used"]
    if device_units:
        ev.append(f"the device-wide units (DRAM, L2) are {_pct(device_units)} busy: room for {headroom:.1f}x more")
    fix = (f"launch at least {full:.0f} blocks (SMs x blocks per SM): split each block's loop over more blocks "
           "(grid-stride loops with a grid sized to the GPU, split-K/split-KV), not a fixed small grid")
    return ctx.cause("too-few-blocks", saving, ev, fix=fix)


_LIMIT_ID = {"registers": "occupancy-registers", "shared memory": "occupancy-shared-memory",
             "blocks": "occupancy-block-size"}


def _binding_limiter(ctx: Context, who: list[str], wpb: float, max_warps: float) -> str | None:
    """Which of the tied limits binds: the block limit when blocks are so small that it caps the warps; shared
    memory only when the block uses some (with none, its limit is the hardware's block limit); else registers."""
    if "blocks" in who and wpb * min(ctx.f.limits().values()) < max_warps:
        return "blocks"
    if "registers" in who:
        return "registers"
    if "shared memory" in who and (ctx.f.get("smem_per_block") or 0) >= 1024:
        return "shared memory"
    return None


def occupancy(ctx: Context) -> Cause | None:
    """A latency-bound kernel held below the SM's warps by one resource."""
    lims = ctx.f.limits()
    who = ctx.f.limiters()
    wpb, max_warps = ctx.f.warps_per_block, ctx.f.get("max_warps_per_sm") or 64.0
    if not lims or not who or not wpb or "warps" in who:
        return None
    limiter = _binding_limiter(ctx, who, wpb, max_warps)
    if limiter is None:
        return None
    now = min(lims.values()) * wpb
    if limiter == "blocks":
        then = max_warps  # larger blocks: the warp limit applies
    else:  # lifting one limit helps only up to the next one (a tie with another resource: not at all)
        others = [v for k, v in lims.items() if k != limiter and not (k in ("blocks", "barriers") and v >= 16)]
        then = min(min(others) * wpb if others else max_warps, max_warps)
    busiest = ctx.max_unit()
    eligible = ctx.f.get("eligible_per_scheduler")
    issue = ctx.util("issue_pct")
    latency = busiest < 0.6 and issue < 0.6 and (eligible is None or eligible < 1.0)
    ach, theo = ctx.f.get("achieved_occupancy"), ctx.f.get("theoretical_occupancy")
    if then <= now * 1.15 or not latency or (ach and theo and ach < 0.6 * theo):
        return None
    speedup = min(then / now, 0.9 / max(busiest, issue, 1e-3))
    if speedup <= 1.05:
        return None
    saving = (ctx.duration_us or 0) * (1 - 1 / speedup) * min(1.0, 1.2 * (1 - ctx.share("selected", "not_selected")))
    ev = [f"{ctx.f.occupancy_limiter()}: {now:.0f} warps a SM of {max_warps:.0f}; without that limit {then:.0f}",
          f"latency-bound: the busiest unit is {_pct(busiest)} busy, issue slots {_pct(issue)}"
          + (f", {eligible:.2f} eligible warps per scheduler" if eligible is not None else "")]
    fix = None
    if limiter == "registers":
        regs = ctx.f.get("registers") or 0
        target = regs * now / then if then else regs
        fix = (f"use at most ~{max(int(target) // 8 * 8, 32)} registers a thread (now {regs:.0f}): __launch_bounds__"
               "(threads, blocks per SM) or -maxrregcount, smaller tiles, fewer live values")
    elif limiter == "shared memory":
        smem = (ctx.f.get("smem_per_block") or 0) / 1024
        fix = (f"use less shared memory per block (now {smem:.1f} KiB): drop or shrink buffers the block does not "
               "need, fewer pipeline stages, smaller tiles")
    else:
        fix = (f"launch larger blocks (now {ctx.f.get('block_size') or 0:.0f} threads; 128-256) so the SM's limit "
               "on resident blocks stops capping its warps")
    return ctx.cause(_LIMIT_ID[limiter], saving, ev, fix=fix)


# ------------------------------------------------------------------------------------------------ compute
def warp_divergence(ctx: Context) -> Cause | None:
    tpi = ctx.f.get("threads_per_inst")
    div = [ln for ln in ctx.lines if ln.mem.get("warp_inst") and ln.mem.get("thread_inst")
           and ln.mem["thread_inst"] / ln.mem["warp_inst"] < 28]
    if not div and (tpi is None or tpi >= 28):
        return None
    saving = 0.0
    by_inst = 0.0
    all_inst = sum(ln.mem.get("warp_inst", 0.0) for ln in ctx.lines) or 1.0
    for ln in div:
        avg = ln.mem["thread_inst"] / ln.mem["warp_inst"]
        saving += ctx.line_share(ln) * (1 - avg / 32)
        by_inst += ln.mem["warp_inst"] / all_inst * (1 - avg / 32)
    if ctx.util("issue_pct") >= 0.6:  # issue-bound: time goes with warp instructions, and the paths serialize
        saving = max(saving, by_inst * ctx.util("issue_pct"))
    if not div and tpi is not None:
        saving = (1 - tpi / 32) * (1 - ctx.share(*MEMORY_WAITS))
    if saving < 0.05:
        return None
    hot = _top(div, lambda ln: ln.samples)
    ev = [f"{tpi:.1f} of 32 threads active per instruction on average" if tpi is not None else "lanes idle"]
    ev += [f"{_where(ln)}: {ln.mem['thread_inst'] / ln.mem['warp_inst']:.1f} threads per instruction, "
           f"{_pct(ctx.line_share(ln))} of the warp samples" for ln in hot[:2]]
    branches = [ln for ln in ctx.lines if ln.mem.get("divergent_targets")]
    if branches:
        ev.append("divergent branches at " + ", ".join(_where(ln) for ln in _top(branches, lambda x: x.mem[
            "divergent_targets"], 2)))
    return ctx.cause("warp-divergence", (ctx.duration_us or 0) * saving, ev, hot + _top(branches, lambda x: x.mem[
        "divergent_targets"], 1))


def _peak_ratio(ctx: Context, slow: str, fast: str) -> float | None:
    """ncu's own peak of one tensor path over another's (``sm__ops_path_tensor_op_<path>..peak_sustained``)."""
    def peak(path: str) -> float | None:
        for k, v in ctx.p.metrics.items():
            if k.startswith(f"sm__ops_path_tensor_op_{path}_src_") and "sparsity_off" in k and \
                    k.endswith(".sum.peak_sustained") and v:
                return float(v)
        return None

    a, b = peak(slow), peak(fast)
    return a / b if a and b else None


def mma_paths(ctx: Context) -> list[Cause]:
    """no-tensor-cores and legacy-mma: matrix work on a slower path than the GPU offers."""
    out: list[Cause] = []
    t = ctx.duration_us or 0.0
    tensor = ctx.util("tensor_pct")
    fma = ctx.util("fma_pct")
    ffma = ctx.f.opcode_share("FFMA", "DFMA") or 0.0
    hot = ctx.lines[:5]
    matmul_text = [ln for ln in hot if _MATMUL.search(ln.text or "")]
    name_hint = bool(re.search(r"gemm|matmul|mm_|dot|attn|attention|fwd|mma", ctx.p.base_name, re.I))
    if tensor < 0.05 and (fma >= 0.4 or ffma >= 0.3) and (matmul_text or (name_hint and not ctx.has_lines)) and \
            (ctx.cc is None or ctx.cc >= (7, 0)):
        r = _fma_over_tensor(ctx)
        saving = t * max(fma, ffma) * (1 - r)
        ev = [f"the FMA pipe is {_pct(fma)} busy and FFMA is {_pct(ffma)} of the instructions while the tensor pipe "
              f"is idle ({_pct(tensor)})", f"FP32 FMA rate is {r:.2f}x the tensor cores' on this GPU (TF32)"]
        ev += [f"{_where(ln)}: {ln.text[:80]}" for ln in matmul_text[:1]]
        out.append(ctx.cause("no-tensor-cores", saving, ev, matmul_text[:2] or hot[:1]))
    # warp-level MMA only: HMMA in the instruction mix and no wgmma; or, without the mix, on Hopper, a busy tensor
    # pipe that ran no wgmma instruction (its other work there is mma.sync; Blackwell's tcgen05 MMAs are not
    # counted by that metric, so there only the mix tells)
    by_mix = ctx.f.hmma > 0 and ctx.f.gmma == 0
    by_count = not ctx.f.opcodes and ctx.f.wgmma_insts == 0 and ctx.cc is not None and ctx.cc[0] == 9
    if ctx.cc is not None and ctx.cc >= (9, 0) and (by_mix or by_count) and tensor >= 0.1:
        r = _peak_ratio(ctx, "hmma", "hgmma") or HMMA_RATE_ON_HOPPER
        eff, whose = WGMMA_EFFICIENCY, "a typical wgmma attention kernel's"
        if ctx.other is not None and (ctx.other.f.wgmma_insts or 0) > 0 and ctx.other.util("tensor_pct") > 0:
            eff, whose = ctx.other.util("tensor_pct"), "B's"
        new = t * tensor * r / eff
        mma_lines = [ln for ln in ctx.lines if ln.has("HMMA")]
        what = (f"{ctx.f.hmma:.3g} HMMA (mma.sync) instructions and no wgmma" if by_mix else
                "no wgmma instruction (sm__inst_executed_pipe_tensor_op_gmma = 0) while the tensor pipe works: "
                "its matrix work is warp-level mma.sync")
        ev = [f"{what} on a compute capability {ctx.cc[0]}.{ctx.cc[1]} GPU; the tensor pipe is {_pct(tensor)} busy",
              f"mma.sync's rate is {r:.2f}x wgmma's here; at {whose} {_pct(eff)} tensor efficiency the same work "
              f"takes {new:.1f} us"]
        out.append(ctx.cause("legacy-mma", t - new, ev, _top(mma_lines, lambda ln: ln.samples, 2)))
    return out


def _fma_over_tensor(ctx: Context) -> float:
    """FP32 FMA FLOP rate over the TF32 tensor rate of the GPU (profctl.devices), or the H100's (67 / 495)."""
    pk = ctx.peak
    fma = getattr(pk, "fp32_tflops", None) if pk is not None else None
    tf32 = pk.tflops.get("fp32") if pk is not None else None
    if fma and tf32:
        return float(min(fma / tf32, 1.0))
    return 67.0 / 494.7


def pipes(ctx: Context) -> list[Cause]:
    """sfu-bound and compute-bound: a pipe at its limit (alone), or more of one pipe's work than B's."""
    out: list[Cause] = []
    t = ctx.duration_us or 0.0
    xu, fma = ctx.util("xu_pct"), ctx.util("fma_pct")
    busiest = ctx.f.limiting_unit()
    if xu >= 0.6 and busiest and busiest[0].startswith("XU"):
        k = 1.0  # FMA-pipe time per emulated exp, in units of one MUFU exp's time (a degree-3..5 polynomial)
        p = max((xu - fma) / (xu * (1 + k)), 0.0)
        balanced = max((1 - p) * xu, fma + p * xu * k, ctx.max_unit(exclude=("XU pipe (exp)",)))
        exp_lines = [ln for ln in ctx.lines if ln.has("MUFU")]
        ev = [f"the XU pipe (MUFU: exp, rcp) is the busiest unit at {_pct(xu)}; the FMA pipe is {_pct(fma)}",
              f"moving {_pct(p)} of the exps to an FMA polynomial would balance the two at about {_pct(balanced)}"]
        if ctx.roofs is not None and ctx.roofs.get("sfu") is not None:
            ev.append(f"the shape's SFU roof: {ctx.roofs.get('sfu').seconds * 1e6:.1f} us")
        out.append(ctx.cause("sfu-bound", t * (1 - balanced / xu), ev, _top(exp_lines, lambda ln: ln.samples, 2)))
    c = _compute_bound(ctx)
    if c is not None:
        out.append(c)
    return out


def _compute_bound(ctx: Context) -> Cause | None:
    t = ctx.duration_us or 0.0
    if ctx.other is not None:
        o = ctx.other
        tpa = (ctx.f.get("threads_per_inst") or 32.0) / 32.0
        tpb = (o.f.get("threads_per_inst") or 32.0) / 32.0
        work = (("matrix operations", *_mma_work(ctx, o), ctx.util("tensor_pct")),
                ("FP32 thread instructions", ctx.f.opcode_count("FFMA", "FMUL", "FADD") * tpa,
                 o.f.opcode_count("FFMA", "FMUL", "FADD") * tpb, ctx.util("fma_pct")))
        for label, mine, theirs, util in work:
            if mine and theirs and mine > 1.3 * theirs and util >= 0.2:
                ev = [f"A does {mine:.3g} {label}, B {theirs:.3g} ({mine / theirs:.2f}x) for the same result; that "
                      f"pipe is {_pct(util)} busy in A"]
                return ctx.cause("compute-bound", t * min(util / 0.8, 1.0) * (1 - theirs / mine), ev)
        return None
    pipes_ = {k: v for k, v in ctx.f.units().items() if "pipe" in k and not k.startswith(("XU", "LSU"))}
    name = max(pipes_, key=lambda k: pipes_[k]) if pipes_ else ""
    val = pipes_.get(name, 0.0)
    if val >= 75:
        left = t * max(1 - val / 95, 0.0)
        ev = [f"the {name} is {val:.0f}% busy: the kernel is at its compute roof; only less work on it helps"]
        roof = _tensor_roof_us(ctx) if name.startswith("tensor") else None
        if roof is not None:
            left = max(t - roof, 0.0)
            ev.append(f"its {ctx.f.tensor_ops / 1e12:.3g} TFLOP of matrix work take {roof:.1f} us at the "
                      f"{ctx.peak.model} dense peak: {_pct(roof / t)} of the time")
        elif ctx.roofs is not None:
            ev.append("the shape's roofs: " + ", ".join(f"{r.name} {r.seconds * 1e6:.1f} us" for r in ctx.roofs.roofs))
        return ctx.cause("compute-bound", left, ev)
    return None


_MMA_OPS = ("HMMA", "HGMMA", "UTCHMMA", "IMMA", "QGMMA")


def _mma_work(a: Context, b: Context) -> tuple[float, float]:
    """The matrix work of two kernels in one unit: ncu's tensor operations where both reports have them, else
    MMA instruction counts only when both issue the same kind (an HMMA and a wgmma do different amounts of work
    each: 16x between FA2's mma.sync and cuDNN's wgmma); (0, 0) when the two cannot be compared."""
    if a.f.tensor_ops and b.f.tensor_ops:
        return a.f.tensor_ops, b.f.tensor_ops
    kinds = [{op for op in _MMA_OPS if x.f.opcode_count(op)} for x in (a, b)]
    if kinds[0] and kinds[0] == kinds[1]:
        return a.f.opcode_count(*_MMA_OPS), b.f.opcode_count(*_MMA_OPS)
    return 0.0, 0.0


def _tensor_roof_us(ctx: Context) -> float | None:
    """The kernel's own matrix work (ncu's tensor ops) at the GPU's dense peak for its dtype, in us."""
    ops, pk = ctx.f.tensor_ops, ctx.peak
    if not ops or pk is None:
        return None
    dtypes = {"bf16": "bf16", "fp16": "fp16", "tf32": "fp32", "fp8": "fp8", "e4m3": "fp8", "e5m2": "fp8"}
    used = [k for k, v in ctx.p.metrics.items() if k.startswith("sm__ops_path_tensor_op_") and
            k.endswith("_sparsity_off.sum") and v]
    for k, d in dtypes.items():
        if any(f"_src_{k}" in u for u in used) and pk.tflops.get(d):
            return float(ops / (pk.tflops[d] * 1e12) * 1e6)
    return None


# ------------------------------------------------------------------------------------------------ waiting
def waits(ctx: Context) -> list[Cause]:
    """mma-not-overlapped, loads-not-pipelined, barrier-sync and atomic-contention: where warps wait, on what."""
    out = [c for c in (_mma_wait(ctx), _load_wait(ctx), _barriers(ctx), _atomics(ctx)) if c is not None]
    return out


def _at(ctx: Context, reason: str, *ops: str) -> tuple[float, list[Line]]:
    lines = [ln for ln in ctx.lines if any(ln.ops.get(o, 0) for o in ln.ops if o.startswith(ops)) and
             ln.stalls.get(reason)]
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
    ev = [f"{_pct(share)} of the warp time waits on the warpgroup's own wgmma results (WARPGROUP.DEPBAR / arrive) "
          f"with {warps or 0:.2f} warps per scheduler to cover it; the tensor pipe is {_pct(tensor)} busy"]
    note = ""
    if regs >= 160:
        ev.append(f"{regs:.0f} registers a thread: no room for a second score tile (in-warpgroup pipelining)")
        note = ("in-warpgroup pipelining (the next tile's Q K^T before this tile's softmax) is not advised here: it "
                "needs a second score tile in registers, and profctl's own Triton forward got 28 % slower with it "
                "(benchmarks/RESULTS.md); two warpgroups taking turns (ping-pong / warp specialization: FA3, cuDNN, "
                "Triton's warp_specialize where the target supports it) need no extra tile")
    o = ctx.other
    if o is not None and o.duration_us:
        theirs = o.util("tensor_pct")
        mine_mma, their_mma = ctx.f.tensor_ops or ctx.f.gmma + ctx.f.hmma, o.f.tensor_ops or o.f.gmma + o.f.hmma
        same_work = bool(mine_mma and their_mma and 0.8 < mine_mma / their_mma < 1.25)
        if not same_work or theirs <= tensor * 1.05 or share < 0.1:
            return None
        load_excess = t * load_wait_share(ctx)[0] - o.duration_us * load_wait_share(o)[0]
        if load_excess > 0.3 * (t - o.duration_us):
            return None  # A's warps wait on loads that B's do not: that, not the MMA overlap, is the gap
        ev.append(f"B keeps the tensor pipe {_pct(theirs)} busy for the same MMA work with "
                  f"{o.f.get('warps_per_scheduler') or 0:.2f} warps per scheduler (blocks of "
                  f"{o.f.get('block_size') or 0:.0f} threads against A's {ctx.f.get('block_size') or 0:.0f})")
        c = ctx.cause("mma-not-overlapped", t * (1 - tensor / theirs), ev, lines[:2], note=note)
        c.differential = True
        return c
    if share < 0.15 or tensor >= 0.8:
        return None
    return ctx.cause("mma-not-overlapped", t * max(1 - tensor / 0.8, 0.0), ev, lines[:2], note=note)


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
    ma, mb = ctx.f.tensor_ops, o.f.tensor_ops
    ua, ub = ctx.util("tensor_pct"), o.util("tensor_pct")
    if not ma or not mb or not 0.95 < ma / mb < 1.05 or ub <= ua * 1.05 or not ua:
        return None
    return (ctx.duration_us or 0.0) * (1 - ua / ub)


def load_wait_share(ctx: Context) -> tuple[float, float, float, list[Line]]:
    """(all, long scoreboard, async-copy barriers) shares of warp time waiting for loads, and the lines."""
    long_sb = ctx.share("long_scoreboard")  # an mbarrier (TMA) wait at SYNCS shows here too
    sync, sync_lines = _at(ctx, "barrier", "SYNCS", "DEPBAR", "LDGDEPBAR")
    hot = sorted([ln for ln in ctx.lines if ln.stalls.get("long_scoreboard")],
                 key=lambda ln: -ln.stalls.get("long_scoreboard", 0))[:2] + sync_lines[:1]
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
    grid, full = ctx.f.get("grid_size"), ctx.f.full_wave_blocks
    if grid and full and grid < 0.9 * full and not ctx.f.persistent():
        return None  # idle SMs, not late loads
    t = ctx.duration_us or 0.0
    ev = [f"{_pct(wait)} of the warp time waits for loads (long scoreboard {_pct(long_sb)}, async-copy barriers "
          f"{_pct(sync)}) while the busiest unit is {_pct(busiest)} busy: the loads are issued too late to hide",
          "the loads are coalesced and no SM is idle: prefetching, not the access pattern, is what is missing"]
    o = ctx.other
    if o is not None and o.duration_us and o.total:
        theirs = load_wait_share(o)[0]
        excess = t * wait - o.duration_us * theirs
        saving = min(excess, t * (1 - busiest))
        if wait < theirs + 0.05 or saving <= 0:
            return None
        eff = same_mma_efficiency_gap(ctx)
        if eff is not None and excess > 0.3 * (t - o.duration_us) and eff > saving:
            saving = eff  # the same MMA work at B's tensor efficiency: what the late loads cost
            ev.append(f"B does the same matrix work with its tensor pipe {_pct(o.util('tensor_pct'))} busy against "
                      f"A's {_pct(ctx.util('tensor_pct'))}: fed in time, A would take {t - eff:.1f} us")
        ev.append(f"B waits {_pct(theirs)} of its warp time for loads ({o.duration_us:.1f} us x {_pct(theirs)} "
                  f"against A's {t:.1f} us x {_pct(wait)})")
        c = ctx.cause("loads-not-pipelined", saving, ev, hot)
        c.differential = True
        return c
    if wait < 0.2 or busiest >= 0.7 or max(ctx.util("l2_pct"), ctx.util("dram_pct")) >= 0.5:
        return None  # a busy memory system is bandwidth, not latency: prefetching would not help
    return ctx.cause("loads-not-pipelined", t * min(wait, 1 - busiest), ev, hot)


def _barrier_share(ctx: Context) -> tuple[float, list[Line]]:
    """Warp time waiting at block-wide barriers: the barrier stall (ncu books it on the instruction after the
    BAR) less the part at wgmma or async-copy waits, and the lines that hold the barriers, most executed first."""
    async_, _ = _at(ctx, "barrier", "WARPGROUP", "SYNCS", "DEPBAR", "LDGDEPBAR")
    share = max(ctx.share("barrier") - async_, 0.0)
    bars = [ln for ln in ctx.lines if ln.has("BAR")]
    bars.sort(key=lambda ln: -ln.executed)
    return share, bars


def _barriers(ctx: Context) -> Cause | None:
    if not ctx.total:
        return None
    share, lines = _barrier_share(ctx)
    queue = ctx.share("mio_throttle") if ctx.f.opcode_share("LDS", "STS") else 0.0  # the tree's small smem ops
    t = ctx.duration_us or 0.0
    ev = [f"{_pct(share)} of the warp time waits at block-wide barriers (__syncthreads)"
          + (f", {_pct(queue)} more queues shared-memory accesses between them" if queue >= 0.05 else "")]
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
        ev.append(f"B waits {_pct(theirs)} of its warp time at barriers")
        c = ctx.cause("barrier-sync", saving, ev, lines[:2])
        c.differential = True
        return c
    if share < 0.15:
        return None
    return ctx.cause("barrier-sync", t * (share + queue), ev, lines[:2])


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
    ev = [f"{n:.3g} atomic/reduction requests, one per element: {_pct(share)} of the warp time is at them or waits "
          "behind them" + (" while L2 and DRAM are nearly idle (the atomics to one address serialize)"
                           if idle_mem else "")]
    if ctx.f.get("l2_atomic_pct") is not None:
        ev.append(f"L2 atomic unit {_pct(ctx.util('l2_atomic_pct'))} busy")
    return ctx.cause("atomic-contention", (ctx.duration_us or 0) * share * (1 - 1 / 32), ev,
                     _top(lines, lambda ln: ln.samples, 2))


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
    ev = [f"no unit is busy (the busiest {_pct(busiest)}); the warps mostly wait: {reason(k).label} "
          f"{_pct(waits_[k])} of the warp time ({reason(k).means})"]
    hot = _top([ln for ln in ctx.lines if ln.stalls.get(k)], lambda ln: ln.stalls.get(k, 0), 2)
    return ctx.cause("latency-bound", 0.0, ev, hot, fix=f"{reason(k).fix}")


def _where(ln: Line) -> str:
    if ln.file and ln.line is not None:
        return f"{short_path(ln.file)}:{ln.line}"
    return "instruction " + (ln.text.split()[0] if ln.text else "?")


DETECTORS: tuple[Callable[[Context], Cause | list[Cause] | None], ...] = (
    uncoalesced_global, smem_bank_conflict, local_memory, l2_dram, launch_shape, warp_divergence, mma_paths, pipes,
    waits,
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
            root.saving_us = min(root.saving_us + c.saving_us, 0.98 * (ctx.duration_us or 0.0))
            root.evidence.append(f"{c.title} at the same line follows from it: " + (c.evidence[0] if c.evidence
                                                                                     else ""))
            out.remove(c)
    return out


__all__ = ["AT_THE_ROOF", "MEMORY_WAITS", "ROOTS", "Context", "Line", "consequences", "detect", "floor_after",
           "heavy_atomics", "latency_bound", "memory_bound", "same_mma_efficiency_gap"]
