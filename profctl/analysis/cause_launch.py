"""Cause detectors of the launch: tail effect, too few blocks, the occupancy limit that binds."""

from __future__ import annotations

import math

from profctl.analysis.cause_catalog import Cause, Evidence
from profctl.analysis.cause_context import (
    Context,
    pct,
)


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
    ev: list[str] = [Evidence(f"SMs busy {pct(busy)} of the time: some finish their blocks early and wait for the last "
                              "ones", "sm__cycles_active.avg / sm__cycles_elapsed.avg", round(busy, 4), "fraction",
                              0.9, "<") if busy is not None else "SM busy time not collected"]
    per = ctx.f.blocks_per_sm
    if by_waves and waves and full:
        ev.append(f"{grid:.0f} blocks, {full:.0f} per wave ({sms:.0f} SMs x {per:.0f}): {waves:.2f} waves run as "
                  f"{math.ceil(waves - 1e-9)}, the last one {pct(waves - math.floor(waves))} full")
        fix = (f"give the grid a whole number of waves ({full * math.floor(waves):.0f} blocks, now {grid:.0f}): a "
               "little more work per block, or more, smaller blocks so the last wave is fuller")
    elif ctx.f.persistent() or grid % sms == 0:  # no block more on some SMs: the blocks' work is unequal
        what = ("a persistent grid: each block loops over its share of the tiles" if ctx.f.persistent()
                else "whole waves")
        ev.append(f"{grid:.0f} blocks on {sms:.0f} SMs, {what}; no SM gets more blocks than another, so the blocks' "
                  "work is unequal: some SMs run out of work while others still have tiles")
        fix = ("give every block the same work: deal the tiles out so each block's total is equal (longest first, in "
               "turn across the blocks), or let blocks take the next tile from a shared counter as they finish")
    else:
        extra = grid - sms * math.floor(grid / sms)
        ev.append(f"{grid:.0f} blocks on {sms:.0f} SMs: {extra:.0f} SM(s) get one block more than the others, and a "
                  "block fills an SM, so the rest idle while they finish")
        lo, hi = sms * math.floor(grid / sms), sms * math.ceil(grid / sms)
        fix = (f"make the grid a multiple of the SMs ({lo:.0f} or {hi:.0f} blocks, now {grid:.0f}) by changing the "
               "work per block, or use smaller blocks so the imbalance averages out")
    return ctx.cause("tail-effect", t * idle, ev, fix=fix, degree=idle)


def too_few_blocks(ctx: Context) -> Cause | None:
    grid, full, sms = ctx.f.get("grid_size"), ctx.f.full_wave_blocks, ctx.f.get("sms")
    if not grid or not full or not sms or grid >= 0.9 * full or ctx.f.persistent():
        return None
    if grid >= sms and ctx.f.sm_busy is not None and ctx.f.sm_busy < 0.85:
        return None  # every SM has work, some idle at the end: a tail, not too few blocks
    used = min(grid, sms) / sms
    device_units = max(ctx.util("dram_pct"), ctx.util("l2_pct"))
    headroom = 0.9 / device_units if device_units > 0 else float("inf")
    raw = full / grid if grid >= sms else sms / grid
    speedup = min(raw, headroom)
    if speedup <= 1.05:
        return None
    saving = (ctx.duration_us or 0) * (1 - 1 / speedup)
    idle = f"{sms - grid:.0f} SMs idle" if grid < sms else "the SMs hold a fraction of the warps they could"
    ev: list[str] = [
        Evidence(f"{grid:.0f} blocks where the GPU runs {full:.0f} at once ({sms:.0f} SMs x "
                 f"{ctx.f.blocks_per_sm:.0f}): {idle}", "launch__grid_size", grid, "blocks", round(0.9 * full, 1), "<"),
        f"SMs busy {pct(ctx.f.sm_busy)} of the time" if ctx.f.sm_busy is not None else f"{pct(used)} of SMs used"]
    if device_units:
        ev.append(f"the device-wide units (DRAM, L2) are {pct(device_units)} busy: room for {headroom:.1f}x more")
    fix = (f"launch at least {full:.0f} blocks (SMs x blocks per SM): split each block's loop over more blocks "
           "(grid-stride loops with a grid sized to the GPU, split-K/split-KV), not a fixed small grid")
    # the model takes the grid's own share (the busy SMs' part); the device-wide units' headroom is its unit terms
    return ctx.cause("too-few-blocks", saving, ev, fix=fix, share=1 - 1 / raw, degree=1 - grid / full)


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
    grid, full = ctx.f.get("grid_size"), ctx.f.full_wave_blocks
    if grid and full and grid < full:
        return None  # the grid, not the SM's limit, leaves SMs (or their block slots) empty: too-few-blocks
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
    hidden = min(1.0, 1.2 * (1 - ctx.share("selected", "not_selected")))
    saving = (ctx.duration_us or 0) * (1 - 1 / speedup) * hidden
    ev: list[str] = [
        Evidence(f"{ctx.f.occupancy_limiter()}: {now:.0f} warps a SM of {max_warps:.0f}; without that limit {then:.0f}",
                 "sm__maximum_warps_per_active_cycle_pct / launch__occupancy_limit_*", now, "warps per SM",
                 round(then / 1.15, 1), "<"),
          f"latency-bound: the busiest unit is {pct(busiest)} busy, issue slots {pct(issue)}"
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
    return ctx.cause(_LIMIT_ID[limiter], saving, ev, fix=fix, share=(1 - now / then) * hidden, degree=1 - now / then)
