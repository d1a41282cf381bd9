"""Two kernels side by side, and why one takes longer: ``profctl explain``.

First the causes (profctl.analysis.causes): what to change, where, and what it saves, ranked by the time each is
predicted to save; then the mechanisms below, which is what this module computes itself:

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

from profctl.analysis import source
from profctl.analysis.causes import diagnose_one, gap_causes, rank_key
from profctl.analysis.figures import FIGURES, Figures, metric
from profctl.analysis.floor import Floor, floor_of
from profctl.analysis.mbarriers import sentence as mbarrier_sentence
from profctl.analysis.select import pass_of
from profctl.analysis.stalls import ratio_metric, reason
from profctl.analysis.thresholds import value
from profctl.nvtx import parse_range
from profctl.roofs import Roofs, attention_roofs, shape_work
from profctl.schema.profile import KernelProfile

CPI = "smsp__average_warp_latency_per_inst_issued.ratio"
INST = "smsp__inst_issued.sum"
INST_EXEC = "smsp__inst_executed.sum"
WARPS = "smsp__warps_active.avg.per_cycle_active"
CLOCK = "gpc__cycles_elapsed.avg.per_second"


# ------------------------------------------------------------ one kernel's figures (profctl.analysis.figures)
def occupancy_limiter(p: KernelProfile) -> str | None:
    """What caps the blocks per SM (registers, shared memory, warps, blocks, barriers): the smallest limit."""
    return Figures.of(p).occupancy_limiter()


def grid_note(p: KernelProfile) -> str:
    return Figures.of(p).grid_note()


def instruction_mix(p: KernelProfile, top: int = 6) -> str:
    return Figures.of(p).instruction_mix(top)


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
    fa, fb = Figures.of(a), Figures.of(b)

    def m(label: str, unit: str, fmt: str, get: Callable[[Figures], float | None]) -> Row:
        x, y = get(fa), get(fb)
        return Row(label, _num(x, fmt), _num(y, fmt), x, y, unit)

    def fig(key: str, fmt: str, scale: float = 1.0, label: str | None = None, unit: str | None = None) -> Row:
        f = FIGURES[key]
        return m(label or f.label, f.unit if unit is None else unit, fmt,
                 lambda x: (x.get(key) / scale if x.get(key) is not None else None))  # type: ignore[operator]

    def mb(get: Callable[[Figures], float | None]) -> Callable[[Figures], float | None]:
        return lambda x: (v / 1e6 if (v := get(x)) is not None else None)

    return [
        m("duration", "us", ".1f", lambda x: x.duration_us),
        fig("clock_hz", ".0f", 1e6, unit="MHz"),
        fig("compute_pct", ".1f"), fig("memory_pct", ".1f"), fig("tensor_pct", ".1f"), fig("issue_pct", ".1f"),
        fig("achieved_occupancy", ".1f"), fig("theoretical_occupancy", ".1f"),
        fig("warps_per_scheduler", ".2f"), fig("eligible_per_scheduler", ".2f"), fig("registers", ".0f"),
        fig("smem_per_block", ".1f", 1024, unit="KiB"), fig("block_size", ".0f"), fig("grid_size", ".0f"),
        fig("inst_executed", ".1f", 1e6, unit="M"), fig("cpi", ".2f"), fig("threads_per_inst", ".1f"),
        m("L1/shared traffic", "MB", ".1f", mb(lambda x: x.get("l1_bytes"))),
        m("L2 traffic", "MB", ".1f", mb(lambda x: x.get("l2_bytes"))),
        fig("l2_hit", ".1f"),
        m("DRAM traffic", "MB", ".1f", mb(lambda x: x.dram_bytes)),
    ]


def side_by_side(a: KernelProfile, b: KernelProfile) -> list[Row]:
    """Every row of the table, numeric rows first, then the words (limiting unit, limiter, grid, mix)."""
    rows = [r for r in _rows_numeric(a, b) if r.va is not None or r.vb is not None]

    def unit(p: KernelProfile) -> str:
        u = Figures.of(p).limiting_unit()
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
    keys = {s.reason for p in (a, b) for s in source.stall_breakdown(p)}
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
    """What ``profctl explain`` shows: A against B (or A alone, `b` None): causes first, then mechanisms."""

    a: KernelProfile
    b: KernelProfile | None
    rows: list[Row]
    factors: list[Factor]
    headline: str
    remainder_us: float = 0.0
    notes: list[str] = field(default_factory=list)
    roofs: dict[str, Roofs | None] = field(default_factory=dict)  # "a"/"b" -> the kernel's roofs
    causes: list[Any] = field(default_factory=list)  # profctl.analysis.causes.Cause, ranked
    #: what the comparison rests on and where it is weak (GPUs, roofs, samples), said before anything else
    premises: list[str] = field(default_factory=list)
    #: each kernel's floor from its own counters (profctl.analysis.floor), "a"/"b"
    floors: dict[str, Floor | None] = field(default_factory=dict)
    #: the first sentence about A: at the roof (healthy), how far from it, or -- in a pair -- the same time as B
    verdict: str | None = None
    #: at the roof, causes that cannot move it: each saves at most the distance to the roof
    slack: list[Any] = field(default_factory=list)
    #: where A and B take the same time: B's own first causes, said apart from A's
    b_causes: list[Any] = field(default_factory=list)
    #: how --kernel / --vs chose A and B (said at the top)
    chosen: list[str] = field(default_factory=list)
    #: the same kernel before and after a change: what was predicted against what the change realized
    loop: list[str] = field(default_factory=list)
    #: A and B take the same time: there is no gap, and A's own causes are set apart here (out of A's time)
    same_time: bool = False
    a_own: list[Any] = field(default_factory=list)
    #: in a pair, faults both kernels have to the same degree: not causes of the gap
    shared: list[Any] = field(default_factory=list)
    #: the named fixes together (profctl.analysis.time_model.Joint): the time they leave, what then binds
    together: Any = None
    #: each kernel's diagnosis alone, made once ("a", and "b" where it was needed): what the kept prediction is
    diagnoses: dict[str, Any] = field(default_factory=dict)

    @property
    def gap_us(self) -> float | None:
        ta, tb = self.a.duration_ns, self.b.duration_ns if self.b is not None else None
        return (ta - tb) / 1e3 if ta and tb else None


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
    return Figures.of(p).sm_busy


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
    keys = sorted({s.reason for p in (a, b) for s in source.stall_breakdown(p)} | {"selected"})
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
        site = source.site_sentence(slower, k)
        where = f" {'A' if d > 0 else 'B'}'s: {site}." if site else ""
        specific = bool(site and ": " in site)  # the site's opcode says what it means and what to do
        says = (f"A's warps spend {xa:.2f} cycles per instruction in '{r.label}' against B's {xb:.2f}"
                + (f".{where}" if specific else f": {r.means}.{where} Usual fix: {r.fix}"))
        out.append((f"stall: {r.label}", d * weight, says))
    return out


def _tensor_sentence(a: KernelProfile, b: KernelProfile) -> str | None:
    x, y = Figures.of(a).get("tensor_pct"), Figures.of(b).get("tensor_pct")
    if x is None or y is None or max(x, y) < 5:
        return None
    hi, lo, who, other = (y, x, "B", "A") if y > x else (x, y, "A", "B")
    return (f"{who} keeps the tensor pipe {hi:.0f}% busy against {other}'s {lo:.0f}%: with the same matrix work, "
            f"that alone is a {hi / lo:.2f}x difference in time" if lo > 0 else None)


def explain(a: KernelProfile, b: KernelProfile, roofs: dict[str, Roofs | None] | None = None,
            shape_given: bool = False) -> Explanation:
    """A against B: the causes of the gap ranked by predicted saving, the table, the gap's parts, a headline and
    the premises (different GPUs, missing roofs, missing samples)."""
    roofs = dict(roofs or {})
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
    sampled = a.has_samples and b.has_samples and bool(a.total_samples and b.total_samples)
    if abs(rem) > 0.15 * abs(((ta or 0) - (tb or 0)) / 1e3) and ta and tb:
        why = ("replay overheads, the clock varying within the kernel, or counters collected in different passes"
               if any(f.name.startswith("stall:") for f in fs) else
               "the stall part could not be split: the report has no warp-state statistics")
        notes.append(f"{rem:+.1f} us of the gap is not explained by these parts ({why})")
    fa, fb = floor_of(a), floor_of(b)
    da = diagnose_one(a, roofs.get("a"), fa)
    diagnoses = {"a": da}
    verdict = None
    b_causes: list[Any] = []
    slack: list[Any] = []
    a_own: list[Any] = []
    causes: list[Any] = []
    shared: list[Any] = []
    together = None
    if ta and tb and abs(ta - tb) <= value("same_time") * max(ta, tb):
        # no gap to explain: say so first, whatever the metrics differ in; each kernel's own causes apart (a pair's
        # causes would only be faults both share, or noise)
        verdict = (f"A and B take the same time ({ta / 1e3:.1f} us against {tb / 1e3:.1f} us, "
                   f"{100 * abs(ta / tb - 1):.1f} % apart, within ncu's run-to-run spread): there is no gap to "
                   "explain; what each kernel could gain on its own follows apart")
        db = diagnose_one(b, roofs.get("b"), fb)
        diagnoses["b"] = db
        a_own, slack, b_causes = da.causes, da.slack, db.causes[:2]
    elif ta and tb and ta > tb:
        g = gap_causes(a, b, roofs.get("a"), roofs.get("b"))
        causes, shared, together = g.causes, g.shared, g.together
        verdict = pair_verdict(ta / 1e3, tb / 1e3, causes, together)
    if ta and tb and ta < tb and verdict is None:
        notes.insert(0, "A is not slower than B: the causes below are A's own (swap --kernel and --vs to explain B)")
        causes, slack, verdict, together = da.causes, da.slack, da.verdict(), da.together
    e = Explanation(a, b, side_by_side(a, b), fs, head, rem, notes, roofs, causes,
                    premises(a, b, roofs, shape_given=shape_given, sampled=sampled, floors=(fa, fb)),
                    floors={"a": fa, "b": fb}, verdict=verdict, slack=slack, b_causes=b_causes,
                    same_time=bool(a_own or b_causes) or (verdict or "").startswith("A and B take the same time"),
                    a_own=a_own, shared=shared, together=together, diagnoses=diagnoses)
    return e


def pair_verdict(ta: float, tb: float, causes: list[Any], together: Any) -> str:
    """A pair's first line: how much slower A is, and what most of it is (the first cause's share of the gap), or
    that no cause of the catalog fits."""
    gap = ta - tb
    out = f"A is {gap:,.1f} us slower than B ({100 * (ta / tb - 1):.0f} %)"
    if not causes:
        return out + "; no cause of the catalog fits the gap: the mechanisms below say where the time goes"
    c = causes[0]
    part = max(c.saving_us, c.with_others_us or 0.0)
    out += f"; {'most' if part >= 0.5 * gap else 'the largest part'} of it is {c.id}"
    out += f" (fixing it saves about {part:,.1f} us, {100 * part / gap:.0f} % of the gap)"
    if together is not None and len(together.ids) > 1:
        out += (f"; the {len(together.ids)} named fixes together about {together.saving_us:,.1f} us "
                f"({100 * min(together.saving_us / gap, 1.0):.0f} %)")
    return out


def explain_one(a: KernelProfile, roofs: Roofs | None = None, shape_given: bool = False) -> Explanation:
    """One kernel against its own figures and roofs (``profctl explain R --kernel A``): its causes, ranked."""
    head = f"A takes {a.duration_ns / 1e3:.1f} us" if a.duration_ns else "A has no duration"
    if roofs is not None and a.duration_ns:
        head += f": {roofs.against(a.duration_ns * 1e-9).sentence()}"
    rows = [r for r in side_by_side(a, a)]
    fl = floor_of(a)
    d = diagnose_one(a, roofs, fl)
    verdict = d.verdict()
    if verdict and d.causes and not (fl is not None and fl.at_roof):
        c = d.causes[0]
        if c.id != "latency-bound" or c.saving_us:
            verdict += f"; most of the distance is {c.id} (fixing it saves about {rank_key(c):,.1f} us)"
    return Explanation(a, None, rows, [], head, 0.0, [], {"a": roofs}, d.causes,
                       premises(a, None, {"a": roofs}, shape_given=shape_given, sampled=a.has_samples,
                                floors=(fl, None)),
                       floors={"a": fl}, verdict=verdict, slack=d.slack, together=d.together, diagnoses={"a": d})


def premises(a: KernelProfile, b: KernelProfile | None, roofs: dict[str, Roofs | None], *, shape_given: bool,
             sampled: bool, floors: tuple[Floor | None, Floor | None] = (None, None)) -> list[str]:
    """What the explanation rests on, where it is weak: said first, in words (issue 29: explain was silent)."""
    out = []
    for who, fl in zip(("A", "B"), floors, strict=True):
        if fl is None:
            continue
        clock = fl.clock_premise()
        if clock:
            out.append(f"{who}: {clock}" if b is not None else clock)
        if not fl.units:
            out.append(f"{who} has no floor: the report lacks the unit counters it needs (" + ", ".join(fl.missing)
                       + "); record with profctl ncu --recipe explain, or ncu --set full")
    for who, p in (("A", a), ("B", b)):
        ws = mbarrier_sentence(p, value("said_share")) if p is not None else None
        if ws:
            out.append(f"{who}: {ws}" if b is not None else ws)
    if b is not None and a.device and b.device and a.device != b.device:
        out.append(f"A ran on {a.device} and B on {b.device}: different GPUs, so part of the gap is the hardware's; "
                   "the causes are judged on each kernel's own figures")
    if b is not None and a.cc and b.cc and a.cc != b.cc and a.device == b.device:
        out.append(f"compute capability {a.cc} against {b.cc}")
    pa, pb = (pass_of(a), pass_of(b)) if b is not None else (None, None)
    if pa and pb and pa != pb:
        words = {"fwd": "forward", "bwd": "backward"}
        out.append(f"A is a {words[pa]} kernel and B a {words[pb]} one: they do different work, so the gap is not "
                   f"only the causes below (pick B of the {words[pa]} pass with --vs)")
    if not any(roofs.values()):
        if not shape_given and floors[0] is not None and floors[0].units:
            out.append("no attention-shape roofs (the NVTX range names no shape; --shape b1,s4096,h32,d128,bf16 adds "
                       "them): the floor and the bounds below come from the kernel's own counters")
        elif not shape_given:
            out.append("no speed-of-light roofs: the NVTX range names no attention shape; give --shape (e.g. "
                       "b1,s4096,h32,d128,bf16) to put the kernels against their roofs")
        else:
            dev = a.device or "the GPU"
            out.append(f"no speed-of-light roofs: profctl has no peak figures for {dev} (profctl.devices)")
    if not sampled:
        out.append("no warp-state samples in " + ("these reports" if b is not None else "this report")
                   + ": causes that need them (stalls per line) are not judged and no line is named; record with "
                   "profctl ncu --recipe explain, or ncu --set full --import-source yes")
    elif not any(p.file for p in a.pcs):
        out.append(f"{a.base_name} has no source lines (a library kernel, or built without nvcc -lineinfo): causes "
                   "are named without lines")
    return out


# ------------------------------------------------------------ a kernel's shape and roofs
def profile_work(p: KernelProfile, shape: str | None = None) -> Any:
    """The attention work of a kernel (profctl.roofs.AttentionWork): from `shape` (a shape key such as
    ``b1,sq4096,h32,d128``) when given, else from profctl's NVTX range the launch ran in; None without either."""
    key = parse_range(p.nvtx_path) if p.nvtx_path else None
    return shape_work(shape or (key.shape_key if key else None), key.backend if key else None,
                      (key.pass_ if key and key.pass_ else "fwd"))


#: backends whose attention is several kernels (GEMMs, a softmax, elementwise): the shape's roofs are the whole
#: op's, not any one kernel's (each kernel has its own floor from its counters)
MULTI_KERNEL = frozenset({"eager", "sdpa-math"})


def kernel_roofs(p: KernelProfile, shape: str | None = None) -> Roofs | None:
    key = parse_range(p.nvtx_path) if p.nvtx_path else None
    if shape is None and key is not None and key.backend in MULTI_KERNEL:
        return None
    work = profile_work(p, shape)
    return attention_roofs(work, p.device) if work is not None else None


__all__ = ["Explanation", "Factor", "Row", "explain", "explain_one", "factors", "grid_note", "instruction_mix",
           "kernel_roofs", "occupancy_limiter", "pair_verdict", "profile_work", "side_by_side"]
