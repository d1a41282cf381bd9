"""Two kernels side by side, and why one takes longer: ``profctl explain``.

The side-by-side table holds what ncu's GUI would show for each kernel (throughputs, the limiting unit, tensor pipe,
issue slots, occupancy and its limiter, launch configuration, instruction count and mix, stalls, memory traffic).
The ranking splits the time gap into parts that add up exactly. A streaming multiprocessor sub-partition issues at
most one instruction per cycle; with W warps resident and each warp issuing once every CPI cycles (CPI: ncu's
``smsp__average_warp_latency_per_inst_issued``, the sum of its per-reason stall cycles plus the issue cycle),

    time = instructions x CPI / (W x busy fraction x clock)

up to a constant of the GPU. So ``log(tA / tB)`` is a sum of the log ratios of instructions, CPI (split over the
stall reasons in proportion to their cycle differences), resident warps, the fraction of the time the SMs are busy
(tail effects, idle SMs) and the clock; what is left over is printed as the remainder. Each part becomes its share
of the measured gap in microseconds: positive parts make A slower, negative ones make it faster.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from profctl.analysis import source as src
from profctl.analysis.stalls import ratio_metric, reason
from profctl.roofs import Roofs
from profctl.schema.profile import KernelProfile

DURATION = "gpu__time_duration.sum"
CPI = "smsp__average_warp_latency_per_inst_issued.ratio"
INST = "smsp__inst_issued.sum"
INST_EXEC = "smsp__inst_executed.sum"
WARPS = "smsp__warps_active.avg.per_cycle_active"
ACTIVE, ELAPSED = "sm__cycles_active.avg", "sm__cycles_elapsed.avg"
CLOCK = "gpc__cycles_elapsed.avg.per_second"
TENSOR = ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
          "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
          "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active")
ISSUE = "smsp__issue_active.avg.pct_of_peak_sustained_active"
LIMITS = {"registers": "launch__occupancy_limit_registers", "shared memory": "launch__occupancy_limit_shared_mem",
          "warps": "launch__occupancy_limit_warps", "blocks": "launch__occupancy_limit_blocks",
          "barriers": "launch__occupancy_limit_barriers"}


def metric(p: KernelProfile, *names: str) -> float | None:
    """The first of `names` the profile has."""
    for n in names:
        v = p.metrics.get(n)
        if v is not None and math.isfinite(v):
            return v
    return None


# ------------------------------------------------------------ one kernel's figures
def limiting_unit(p: KernelProfile) -> tuple[str, float] | None:
    """The busiest unit, as ncu's compute and memory workload sections measure it (percent of its peak)."""
    cands: dict[str, float] = {}
    for name, v in p.metrics.items():
        if name.startswith("sm__inst_executed_pipe_") and name.endswith(".avg.pct_of_peak_sustained_active"):
            pipe = name[len("sm__inst_executed_pipe_"):-len(".avg.pct_of_peak_sustained_active")]
            if "_pred_on" not in pipe and not pipe.endswith("_realtime"):
                cands[f"{pipe} pipe"] = v
        elif name.startswith("sm__pipe_") and name.endswith("_cycles_active.avg.pct_of_peak_sustained_active"):
            pipe = name[len("sm__pipe_"):-len("_cycles_active.avg.pct_of_peak_sustained_active")]
            cands[f"{pipe} pipe"] = max(v, cands.get(f"{pipe} pipe", 0.0))
    for label, name in (("L1/shared", "l1tex__throughput.avg.pct_of_peak_sustained_active"),
                        ("L2", "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
                        ("DRAM", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
                        ("issue slots", ISSUE)):
        val = p.metrics.get(name)
        if val is not None:
            cands[label] = val
    cands = {k.replace("tensor_op_", "tensor ").replace("_", " "): v for k, v in cands.items() if math.isfinite(v)}
    if not cands:
        return None
    k = max(cands, key=lambda k: cands[k])
    return k, cands[k]


def occupancy_limiter(p: KernelProfile) -> str | None:
    """What caps the blocks per SM (registers, shared memory, warps, blocks, barriers): the smallest limit."""
    lim = {k: p.metrics[m] for k, m in LIMITS.items() if m in p.metrics}
    if not lim:
        return None
    low = min(lim.values())
    who = [k for k, v in lim.items() if v == low]
    return f"{' and '.join(who)} ({low:.0f} block{'s' if low != 1 else ''}/SM)"


def grid_note(p: KernelProfile) -> str:
    grid = metric(p, "launch__grid_size")
    sms = metric(p, "device__attribute_multiprocessor_count", "launch__sm_count")
    waves = metric(p, "launch__waves_per_multiprocessor")
    if grid is None:
        return ""
    per_sm = min((p.metrics[m] for m in LIMITS.values() if m in p.metrics), default=None)
    if sms and per_sm and grid <= sms * per_sm and waves is not None and waves <= 1.0001:
        return f"persistent: {grid:.0f} blocks for {sms:.0f} SMs (one wave, blocks loop over the work)"
    return f"{waves:.2f} waves" if waves is not None else ""


def instruction_mix(p: KernelProfile, top: int = 6) -> str:
    total = sum(p.opcodes.values())
    if not total:
        return ""
    ops = sorted(p.opcodes.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in ops)


# ------------------------------------------------------------ the side-by-side table
@dataclass(frozen=True)
class Row:
    """One quantity of the side-by-side table; `a` and `b` are display strings, `va`/`vb` numbers when numeric."""

    quantity: str
    a: str
    b: str
    va: float | None = None
    vb: float | None = None
    unit: str = ""


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def _rows_numeric(a: KernelProfile, b: KernelProfile) -> list[Row]:
    def m(label: str, unit: str, fmt: str, get: Callable[[KernelProfile], float | None]) -> Row:
        x, y = get(a), get(b)
        return Row(label, _num(x, fmt), _num(y, fmt), x, y, unit)

    def bytes_of(*names: str) -> Callable[[KernelProfile], float | None]:
        def f(p: KernelProfile) -> float | None:
            vals = [metric(p, n) for n in names]
            return sum(v for v in vals if v is not None) / 1e6 if any(v is not None for v in vals) else None
        return f

    return [
        m("duration", "us", ".1f", lambda p: (p.duration_ns or 0) / 1e3 or None),
        m("SM clock", "MHz", ".0f", lambda p: (metric(p, CLOCK) or 0) / 1e6 or None),
        m("compute throughput", "% of peak", ".1f",
          lambda p: metric(p, "sm__throughput.avg.pct_of_peak_sustained_elapsed")),
        m("memory throughput", "% of peak", ".1f",
          lambda p: metric(p, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")),
        m("tensor pipe", "% of active cycles", ".1f", lambda p: metric(p, *TENSOR)),
        m("issue slots busy", "%", ".1f", lambda p: metric(p, ISSUE)),
        m("achieved occupancy", "% of max warps", ".1f",
          lambda p: metric(p, "sm__warps_active.avg.pct_of_peak_sustained_active")),
        m("theoretical occupancy", "% of max warps", ".1f",
          lambda p: metric(p, "sm__maximum_warps_per_active_cycle_pct")),
        m("warps per scheduler", "", ".2f", lambda p: metric(p, WARPS)),
        m("eligible warps per scheduler", "", ".2f", lambda p: metric(p, "smsp__warps_eligible.avg.per_cycle_active")),
        m("registers per thread", "", ".0f", lambda p: metric(p, "launch__registers_per_thread")),
        m("shared memory per block", "KiB", ".1f",
          lambda p: (metric(p, "launch__shared_mem_per_block") or 0) / 1024 or None),
        m("block size", "threads", ".0f", lambda p: metric(p, "launch__block_size")),
        m("grid size", "blocks", ".0f", lambda p: metric(p, "launch__grid_size")),
        m("instructions executed", "M", ".1f", lambda p: (metric(p, INST_EXEC) or 0) / 1e6 or None),
        m("cycles per issued instruction", "", ".2f", lambda p: metric(p, CPI)),
        m("L1/shared traffic", "MB", ".1f", bytes_of("l1tex__t_bytes.sum")),
        m("L2 traffic", "MB", ".1f", bytes_of("lts__t_bytes.sum")),
        m("L2 hit rate", "%", ".1f", lambda p: metric(p, "lts__t_sector_hit_rate.pct")),
        m("DRAM traffic", "MB", ".1f", bytes_of("dram__bytes_read.sum", "dram__bytes_write.sum")),
    ]


def side_by_side(a: KernelProfile, b: KernelProfile) -> list[Row]:
    """Every row of the table, numeric rows first, then the words (limiting unit, limiter, grid, mix)."""
    rows = [r for r in _rows_numeric(a, b) if r.va is not None or r.vb is not None]

    def unit(p: KernelProfile) -> str:
        u = limiting_unit(p)
        return f"{u[0]} ({u[1]:.0f}%)" if u else "-"

    rows += [Row("limiting unit", unit(a), unit(b)),
             Row("occupancy limited by", occupancy_limiter(a) or "-", occupancy_limiter(b) or "-"),
             Row("grid", grid_note(a) or "-", grid_note(b) or "-"),
             Row("instruction mix", instruction_mix(a) or "-", instruction_mix(b) or "-")]
    for k in _stall_keys(a, b):
        x, y = metric(a, ratio_metric(k)), metric(b, ratio_metric(k))
        rows.append(Row(f"stall: {reason(k).label}", _num(x, ".2f"), _num(y, ".2f"), x, y, "cycles/instruction"))
    return rows


def _stall_keys(a: KernelProfile, b: KernelProfile, floor: float = 0.05) -> list[str]:
    keys = {s.reason for p in (a, b) for s in src.stall_breakdown(p)}
    vals = {k: max(metric(a, ratio_metric(k)) or 0, metric(b, ratio_metric(k)) or 0) for k in keys}
    return sorted((k for k, v in vals.items() if v >= floor), key=lambda k: -vals[k])


# ------------------------------------------------------------ the gap, in parts
@dataclass(frozen=True)
class Factor:
    """One part of the time gap: its microseconds (positive: makes A slower) and the sentence that says why."""

    name: str
    us: float
    share: float  # of the gap, signed (1.0 = all of it)
    says: str


@dataclass
class Explanation:
    a: KernelProfile
    b: KernelProfile
    rows: list[Row]
    factors: list[Factor]
    headline: str
    remainder_us: float = 0.0
    notes: list[str] = field(default_factory=list)
    roofs: dict[str, Roofs | None] = field(default_factory=dict)  # "a"/"b" -> the kernel's roofs


def _log_ratio(x: float | None, y: float | None) -> float | None:
    return math.log(x / y) if x and y and x > 0 and y > 0 else None


def factors(a: KernelProfile, b: KernelProfile) -> tuple[list[Factor], float, list[str]]:
    """The gap split as the module docstring says; (factors ranked by size, remainder in us, notes)."""
    ta, tb = a.duration_ns, b.duration_ns
    total = _log_ratio(ta, tb)
    if total is None or ta is None or tb is None:
        return [], 0.0, ["a duration is missing: no gap to explain"]
    gap_us = (ta - tb) / 1e3
    parts: list[tuple[str, float, str]] = []
    notes: list[str] = []
    li = _log_ratio(metric(a, INST, INST_EXEC), metric(b, INST, INST_EXEC))
    if li is not None:
        ia, ib = metric(a, INST, INST_EXEC) or 0, metric(b, INST, INST_EXEC) or 0
        parts.append(("instructions", li, f"A issues {ia / 1e6:.1f}M instructions against B's {ib / 1e6:.1f}M "
                                          f"({_pct_more(ia, ib)})"))
    parts += _cpi_parts(a, b, notes)
    lw = _log_ratio(metric(a, WARPS), metric(b, WARPS))
    if lw is not None:
        parts.append(("resident warps", -lw, f"A keeps {metric(a, WARPS):.2f} warps per scheduler resident against "
                      f"B's {metric(b, WARPS):.2f} (occupancy: A limited by {occupancy_limiter(a) or '?'}, "
                      f"B by {occupancy_limiter(b) or '?'}); fewer warps hide less latency"))
    fa, fb = _busy(a), _busy(b)
    lf = _log_ratio(fa, fb)
    if lf is not None and fa is not None and fb is not None:
        parts.append(("SM busy time", -lf, f"A's SMs are busy {100 * fa:.1f}% of its duration against B's "
                      f"{100 * fb:.1f}% ({grid_note(a) or 'A'}; {grid_note(b) or 'B'}): idle SMs at the tail"))
    lc = _log_ratio(metric(a, CLOCK), metric(b, CLOCK))
    if lc is not None:
        parts.append(("SM clock", -lc, f"A ran at {(metric(a, CLOCK) or 0) / 1e6:.0f} MHz, B at "
                      f"{(metric(b, CLOCK) or 0) / 1e6:.0f} MHz (clocks were not locked: a gap of this part is the "
                      "GPU's, not the kernel's)"))
    used = sum(x for _, x, _ in parts)
    scale = gap_us / total if total else 0.0
    out = [Factor(n, x * scale, x / total if total else 0.0, says) for n, x, says in parts if abs(x * scale) >= 0.05]
    out.sort(key=lambda f: -abs(f.us))
    return out, (total - used) * scale, notes


def _busy(p: KernelProfile) -> float | None:
    act, ela = metric(p, ACTIVE), metric(p, ELAPSED)
    return act / ela if act and ela else None


def _pct_more(x: float, y: float) -> str:
    if not y:
        return "-"
    d = 100 * (x / y - 1)
    return f"{abs(d):.1f}% {'more' if d > 0 else 'fewer'}"


def _cpi_parts(a: KernelProfile, b: KernelProfile, notes: list[str]) -> list[tuple[str, float, str]]:
    """log(CPI_A / CPI_B) split over the stall reasons by their cycle differences (log-mean weights: exact)."""
    ca, cb = metric(a, CPI), metric(b, CPI)
    lc = _log_ratio(ca, cb)
    if lc is None or ca is None or cb is None:
        notes.append("no warp-state statistics (WarpStateStats): the stall part of the gap is not split")
        return []
    keys = sorted({s.reason for p in (a, b) for s in src.stall_breakdown(p)} | {"selected"})
    diffs = {k: (metric(a, ratio_metric(k)) or 0.0) - (metric(b, ratio_metric(k)) or 0.0) for k in keys}
    dc = ca - cb
    weight = lc / dc if abs(dc) > 1e-9 else 1.0 / ca
    out = []
    for k, d in diffs.items():
        if abs(d) < 1e-6 or k == "selected":
            continue
        xa, xb = metric(a, ratio_metric(k)) or 0.0, metric(b, ratio_metric(k)) or 0.0
        r = reason(k)
        slower = a if d > 0 else b
        site = src.site_sentence(slower, k)
        where = f" {'A' if d > 0 else 'B'}'s: {site}." if site else ""
        specific = bool(site and ": " in site)  # the site's opcode says what it means and what to do
        says = (f"A's warps spend {xa:.2f} cycles per instruction in '{r.label}' against B's {xb:.2f}"
                + (f".{where}" if specific else f": {r.means}.{where} Usual fix: {r.fix}"))
        out.append((f"stall: {r.label}", d * weight, says))
    return out


def _tensor_sentence(a: KernelProfile, b: KernelProfile) -> str | None:
    x, y = metric(a, *TENSOR), metric(b, *TENSOR)
    if x is None or y is None or max(x, y) < 5:
        return None
    hi, lo, who, other = (y, x, "B", "A") if y > x else (x, y, "A", "B")
    return (f"{who} keeps the tensor pipe {hi:.0f}% busy against {other}'s {lo:.0f}%: with the same matrix work, "
            f"that alone is a {hi / lo:.2f}x difference in time" if lo > 0 else None)


def explain(a: KernelProfile, b: KernelProfile, roofs: dict[str, Roofs | None] | None = None) -> Explanation:
    """A against B: the table, the gap's parts ranked, and a headline."""
    fs, rem, notes = factors(a, b)
    ta, tb = a.duration_ns, b.duration_ns
    if ta and tb:
        rel = ta / tb
        head = (f"A takes {ta / 1e3:.1f} us, B {tb / 1e3:.1f} us: A is {abs(rel - 1) * 100:.1f}% "
                f"{'slower' if rel > 1 else 'faster'} ({ta / 1e3 - tb / 1e3:+.1f} us)")
    else:
        head = "A or B has no duration"
    t = _tensor_sentence(a, b)
    if t:
        notes.insert(0, t)
    if abs(rem) > 0.15 * abs(((ta or 0) - (tb or 0)) / 1e3) and ta and tb:
        notes.append(f"{rem:+.1f} us of the gap is not explained by these parts (replay overheads, the clock "
                     "varying within the kernel, or counters collected in different passes)")
    return Explanation(a, b, side_by_side(a, b), fs, head, rem, notes, dict(roofs or {}))


# ------------------------------------------------------------ choosing kernels, their shapes and roofs
def describe(p: KernelProfile) -> str:
    """How a kernel is named in messages: its base name, and its NVTX path when it has one."""
    return p.base_name + (f" [{p.nvtx_path}]" if p.nvtx_path else "")


def matching(profiles: list[KernelProfile], pattern: str, where: str, flag: str = "--kernel/--vs"
             ) -> list[KernelProfile]:
    """The launches `pattern` (a regex over the kernel's demangled name, base name and NVTX path) matches in
    `profiles` (read from `where`). NothingMatched names the kernels there; a bad regex is a UsageError."""
    import re

    from profctl.errors import NothingMatched, UsageError

    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise UsageError(f"{flag} {pattern!r} is not a regular expression: {e}") from None
    hits = [p for p in profiles if rx.search(p.name) or rx.search(p.base_name) or rx.search(p.nvtx_path or "")]
    if not hits:
        seen = ", ".join(dict.fromkeys(describe(p) for p in profiles)) or "none"
        raise NothingMatched(f"{pattern!r} matches no kernel in {where}; its kernels: {seen}")
    return hits


def select(profiles: list[KernelProfile], pattern: str, where: str) -> tuple[KernelProfile, str | None]:
    """The first launch `pattern` matches (:func:`matching`), and a note when it picked one of several."""
    hits = matching(profiles, pattern, where)
    note = None
    if len(hits) > 1:
        names = list(dict.fromkeys(describe(p) for p in hits))
        note = (f"{pattern!r} matches {len(hits)} launches in {where} ({', '.join(names[:4])}"
                f"{', ...' if len(names) > 4 else ''}); using the first (narrow the regex, e.g. with the NVTX path)")
    return hits[0], note


def profile_work(p: KernelProfile, shape: str | None = None) -> Any:
    """The attention work of a kernel (profctl.roofs.AttentionWork): from `shape` (a shape key such as
    ``b1,sq4096,h32,d128``) when given, else from profctl's NVTX range the launch ran in; None without either."""
    from profctl.nvtx import parse_range
    from profctl.roofs import AttentionWork
    from profctl.shapes import Shape
    from profctl.spec import causal_align

    key = parse_range(p.nvtx_path) if p.nvtx_path else None
    sh = Shape.try_parse(shape) if shape else Shape.try_parse(key.shape_key if key else None)
    if sh is None:
        return None
    align = causal_align(key.backend) if key and sh.causal else None
    return AttentionWork.of(batch=sh.batch, heads=sh.heads, kv_heads=sh.kv_heads, seqlen_q=sh.seqlen_q,
                            seqlen_kv=sh.seqlen_kv, head_dim=sh.head_dim, dtype=sh.dtype, causal=sh.causal,
                            causal_align=align, pass_=(key.pass_ if key and key.pass_ else "fwd"))


def kernel_roofs(p: KernelProfile, shape: str | None = None) -> Roofs | None:
    from profctl.roofs import attention_roofs

    work = profile_work(p, shape)
    return attention_roofs(work, p.device) if work is not None else None


__all__ = ["Explanation", "Factor", "Row", "describe", "explain", "factors", "grid_note", "instruction_mix",
           "kernel_roofs", "limiting_unit", "matching", "occupancy_limiter", "profile_work", "select", "side_by_side"]
