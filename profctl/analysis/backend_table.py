"""The table of backends: derived figures per (shape, pass, backend) from the cross-tool view.

time           bench median (CUDA events) when there is a bench row, else the nsys/torch GPU span of one
               iteration's NVTX range, else the sum of its kernels' times
TFLOP/s        the workload's useful FLOPs (profctl.flops: causal pairs only) / time
% of peak      against the datasheet dense peak of the GPU model and, where known, a measured matmul peak
               (profctl.devices, each number with its source)
speedup        baseline time / time, same shape and pass
bytes/s, AI    ncu DRAM bytes (read + write) of the group's kernels; arithmetic intensity = FLOPs / DRAM bytes
kernels/iter   kernel launches per iteration; launch-overhead share = 1 - kernel time / time: the part of the
               iteration where the GPU runs no kernel of it (launch gaps, CPU-side work)
why            the main kernel's tensor-pipe, DRAM, SM and occupancy figures from ncu, and a one-word verdict
               (launch-bound first: above LAUNCH_BOUND_GAP of launch gap the kernels are not what limits it)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from profctl import devices, flops
from profctl.analysis.crosstool import CrossToolView, JoinedKernel, bench_group
from profctl.analysis.figures import Figures, value
from profctl.schema.bench import BenchRow
from profctl.shapes import Shape
from profctl.spec import causal_align

#: the figures the table reads, by its own names -> profctl.analysis.figures keys (one home for the metric names)
FIGURE_KEYS = {"tensor_pct": "tensor_pct", "dram_pct": "dram_pct", "sm_pct": "compute_pct", "mem_pct": "memory_pct",
               "occupancy_pct": "achieved_occupancy", "theoretical_occupancy_pct": "theoretical_occupancy",
               "duration_ns": "duration_ns"}
BOUND_PCT = 60.0
#: launch gap share (1 - kernel time / time) above which an iteration is launch-bound: most of its time no kernel
#: of it runs, so speeding the kernel up cannot help much, whatever its ncu figures say
LAUNCH_BOUND_GAP = 0.5
BREAKDOWN_CLASSES = ("gemm", "softmax", "elementwise", "reduce", "flash_fwd", "flash_bwd", "other")


def metric(ms: dict[str, float], figure: str) -> float | None:
    """One of the table's figures (:data:`FIGURE_KEYS`) of an ncu row's metrics (profctl.analysis.figures)."""
    return value(ms, FIGURE_KEYS[figure])


def dram_bytes(ms: dict[str, float]) -> float | None:
    return Figures(ms).dram_bytes


# ------------------------------------------------------------------------------------------ scalar rules
def tflops(flop_count: float | None, ns: float | None) -> float | None:
    if not flop_count or not ns or ns <= 0:
        return None
    return flop_count / ns / 1e3


def bytes_per_s(nbytes: float | None, ns: float | None) -> float | None:
    if nbytes is None or not ns or ns <= 0:
        return None
    return nbytes / (ns * 1e-9)


def arithmetic_intensity(flop_count: float | None, nbytes: float | None) -> float | None:
    if not flop_count or not nbytes:
        return None
    return flop_count / nbytes


def share(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return part / whole


def speedup(base_ns: float | None, ns: float | None) -> float | None:
    if not base_ns or not ns:
        return None
    return base_ns / ns


def launch_overhead_share(kernel_ns: float | None, wall_ns: float | None) -> float | None:
    """The part of an iteration's time when none of its kernels runs (0 when kernels fill it)."""
    if kernel_ns is None or not wall_ns:
        return None
    return max(0.0, 1.0 - kernel_ns / wall_ns)


def bound(tensor: float | None, dram: float | None, sm: float | None, gap: float | None = None) -> str:
    """One word for where an iteration's time goes: ``launch-bound`` when the launch gap (the share of the
    iteration in which none of its kernels runs) is above LAUNCH_BOUND_GAP, whatever the kernels do; else from
    the main kernel's ncu throughputs (percent of peak): tensor, DRAM, SM, or latency when none reaches
    BOUND_PCT."""
    if gap is not None and gap > LAUNCH_BOUND_GAP:
        return "launch-bound"
    if tensor is not None and tensor >= BOUND_PCT:
        return "tensor"
    if dram is not None and dram >= BOUND_PCT:
        return "DRAM"
    if sm is not None and sm >= BOUND_PCT:
        return "SM"
    if tensor is None and dram is None and sm is None:
        return ""
    return "latency"


# ------------------------------------------------------------------------------------------ peaks
@dataclass(frozen=True)
class Peak:
    model: str | None
    tflops: float | None
    measured_tflops: float | None
    dram_bps: float | None
    source: str | None
    measured_source: str | None


def peak_for(device: str | None, dtype: str) -> Peak:
    p = devices.lookup(device)
    if p is None:
        return Peak(None, None, None, None, None, None)
    meas = p.measured_tflops_bf16 if dtype in ("bf16", "fp16") else None
    return Peak(p.model, p.tflops.get(dtype), meas, p.dram_tbps * 1e12, p.source,
                p.measured_source if meas else None)


# ------------------------------------------------------------------------------------------ FLOPs
def workload_flops(shape_key: str | None, backend: str, pass_: str) -> float | None:
    """Useful FLOPs of one iteration of `backend`'s pass at `shape_key` (profctl.flops), None without a shape."""
    if not shape_key:
        return None

    s = Shape.try_parse(shape_key)
    if s is None:
        return None
    pairs = flops.unmasked_pairs(s.seqlen_q, s.seqlen_kv, s.causal, causal_align(backend))
    fwd = 4 * s.batch * s.heads * pairs * s.head_dim
    return fwd * flops.PASS_FACTOR[pass_]


def kernel_flops(k: JoinedKernel, group: list[JoinedKernel]) -> float | None:
    """FLOPs one iteration of kernel `k` executes, where the attention's structure says it:

    - a fused attention kernel (flash_fwd / flash_bwd class) does the pass's useful FLOPs; when a pass has
      several such kernels (FA2's backward: dot_do_o, dq_dk_dv, convert_dq) the longest does them all;
    - in an unfused backend (eager, sdpa-math) every GEMM launch is one batched sq x skv x d product over
      batch x heads, executed in full even when causal: 2 * b * h * sq * skv * d FLOPs per launch.
    Others (softmax, elementwise) get None: their FLOPs are not the attention's and are not placed by FLOPs.
    """
    s = Shape.try_parse(k.shape_key)
    if s is None:
        return None
    if k.kernel_class in ("flash_fwd", "flash_bwd"):
        fused = [g for g in group if g.kernel_class == k.kernel_class]
        main = max(fused, key=lambda g: g.time_ns() or 0.0)
        if main is not k:
            return None
        p = "fwd" if k.kernel_class == "flash_fwd" else "bwd"
        return workload_flops(k.shape_key, k.backend, p)
    if k.kernel_class == "gemm":
        n = k.launches() or 1.0
        return 2.0 * s.batch * s.heads * s.seqlen_q * s.seqlen_kv * s.head_dim * n
    return None


# ------------------------------------------------------------------------------------------ comparison
@dataclass
class BackendRow:
    """One (shape, pass, backend): the comparison table's row."""

    shape_key: str | None
    seqlen: int | None
    causal: bool | None
    pass_: str
    backend: str
    status: str
    time_ms: float | None
    time_source: str | None
    flops: float | None
    tflops: float | None
    pct_peak: float | None
    pct_measured_peak: float | None
    speedup: float | None
    peak_mem_bytes: float | None
    kernel_ms: float | None
    kernels_per_iter: float | None
    launch_overhead: float | None
    main_kernel: str | None
    tensor_pct: float | None
    dram_pct: float | None
    sm_pct: float | None
    occupancy_pct: float | None
    dram_bytes: float | None
    dram_bps: float | None
    arithmetic_intensity: float | None
    bound: str
    breakdown_ms: dict[str, float] = field(default_factory=dict)
    tools: list[str] = field(default_factory=list)
    reason: str | None = None
    main_kernel_name: str | None = None  # the main kernel's whole (demangled) name; main_kernel is for tables
    peak_mem_where: str | None = None  # "host" when peak_mem_bytes is the host's peak (a CPU bench row)


@dataclass
class RooflinePoint:
    backend: str
    pass_: str
    shape_key: str | None
    kernel: str
    kernel_class: str
    flops: float
    dram_bytes: float
    time_ns: float
    ai: float
    tflops: float
    name: str = ""  # the kernel's whole (demangled) name


@dataclass
class BackendTable:
    """The whole derived document: rows, the baseline, the device and its peaks, roofline points, notes."""

    rows: list[BackendRow]
    baseline: str | None
    device: str | None
    peak: Peak
    dtype: str | None
    roofline: list[RooflinePoint]
    unplaced: list[str]
    notes: list[str]
    sources: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "profctl.comparison/1",
            "device": self.device, "dtype": self.dtype, "baseline": self.baseline,
            "peak": asdict(self.peak),
            "rows": [_row_dict(r) for r in self.rows],
            "roofline": [asdict(p) for p in self.roofline],
            "roofline_unplaced": self.unplaced,
            "notes": self.notes, "sources": self.sources,
        }


def _row_dict(r: BackendRow) -> dict[str, Any]:
    d = asdict(r)
    d["pass"] = d.pop("pass_")
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def build(view: CrossToolView, baseline: str | None = "eager", device: str | None = None) -> BackendTable:
    """Derive the comparison rows of `view` (`baseline`: the backend speedups are against; falls back to
    sdpa-math when the baseline did not run)."""
    dev = device or view.device or _bench_device(view)
    dtypes = {sh.dtype for g in view.groups() if (sh := Shape.try_parse(g[2])) is not None}
    dtype = dtypes.pop() if len(dtypes) == 1 else None
    bench = {bench_group(r): r for r in view.bench}
    rows: list[BackendRow] = []
    for g in view.groups():
        ks = view.kernels_of(*g)
        rows.append(_row(view, g, ks, bench.get(g), dev))
    base = baseline
    if base and not any(r.backend == base and r.time_ms for r in rows):
        base = "sdpa-math" if any(r.backend == "sdpa-math" and r.time_ms for r in rows) else None
    if base:
        ref = {(r.shape_key, r.pass_): r.time_ms for r in rows if r.backend == base and r.time_ms}
        for r in rows:
            r.speedup = speedup(ref.get((r.shape_key, r.pass_)), r.time_ms)
    roof, unplaced = roofline_points(view)
    notes = list(view.notes)
    if dev and devices.lookup(dev) is None:
        notes.append(f"no peak figures for {dev!r} in profctl.devices; % of peak is left out")
    peak = peak_for(dev, dtype or "bf16")
    if peak.tflops is None:
        given = {r.peak_tflops for r in view.bench if r.peak_tflops}
        if len(given) == 1:
            peak = Peak(None, float(given.pop() or 0.0), None, None,
                        "the bench rows' peak_tflops (GPU model not named)", None)
    return BackendTable(rows=rows, baseline=base, device=dev, peak=peak, dtype=dtype,
                      roofline=roof, unplaced=unplaced, notes=notes, sources=view.sources)


def _bench_device(view: CrossToolView) -> str | None:
    for r in view.bench:
        for k in ("device_name", "gpu"):
            if r.get(k):
                return str(r[k])
    return None


def _row(view: CrossToolView, g: tuple[str, str, str | None], ks: list[JoinedKernel], b: BenchRow | None,
         dev: str | None) -> BackendRow:
    backend, pass_, shape = g
    seqlen = causal = None
    sp = Shape.try_parse(shape)
    if sp is not None:
        seqlen, causal = sp.seqlen_q, sp.causal
    status = "ok"
    reason = None
    time_ns: float | None = None
    source = None
    if b is not None:
        status = str(b.status) if "status" in b else "ok"
        reason = b.reason
        if status == "ok" and b.median_ms:
            time_ns, source = float(b.median_ms) * 1e6, "bench"
    span = view.spans.get(g)
    if time_ns is None and span is not None:
        time_ns, source = span.per_iter_ns, f"{span.tool} range"
    prefer = ("nsys", "torch", "ncu")
    kernel_ns = None
    kernel_tool = None
    timed = [k for k in ks if k.time_ns(prefer) is not None]
    if timed:
        tool = kernel_tool = next(t for t in prefer if any(t in k.tools for k in timed))
        kernel_ns = sum(k.tools[tool].per_iter_ns for k in timed if tool in k.tools)
        launches = sum(k.tools[tool].launches_per_iter for k in timed if tool in k.tools)
        if time_ns is None:
            time_ns, source = kernel_ns, f"{tool} kernels"
    else:
        launches = None
    flop = float(b.flops) if b and b.flops else workload_flops(shape, backend, pass_)
    rate = tflops(flop, time_ns)
    pk = peak_for(dev, sp.dtype if sp else "bf16")
    pct = 100.0 * rate / pk.tflops if rate and pk.tflops else (b.pct_of_peak if b else None)
    pct_m = 100.0 * rate / pk.measured_tflops if rate and pk.measured_tflops else None
    main = max(ks, key=lambda k: k.time_ns(prefer) or 0.0) if ks else None
    ncu_ks = [k for k in ks if k.metrics]
    main_ncu = max(ncu_ks, key=lambda k: k.tools["ncu"].per_iter_ns) if ncu_ks else None
    ms = main_ncu.metrics if main_ncu else {}
    dbytes = None
    dtime = None
    if ncu_ks:
        per = [(dram_bytes(k.metrics), k.tools["ncu"]) for k in ncu_ks]
        if any(x is not None for x, _ in per):
            dbytes = sum((x or 0.0) * t.launches_per_iter for x, t in per)
            dtime = sum(t.per_iter_ns for _, t in per)
    tensor, dram, sm = metric(ms, "tensor_pct"), metric(ms, "dram_pct"), metric(ms, "sm_pct")
    gap = (launch_overhead_share(kernel_ns, time_ns)
           if source and "kernels" not in source and kernel_tool in ("nsys", "torch")
           and not (b and b.device == "cpu") else None)
    breakdown: dict[str, float] = {}
    for k in timed:
        t = k.time_ns(prefer)
        if t is not None:
            cls = k.kernel_class if k.kernel_class in BREAKDOWN_CLASSES else "other"
            breakdown[cls] = breakdown.get(cls, 0.0) + t / 1e6
    tools = sorted({t for k in ks for t in k.tools} | ({"bench"} if b else set()) |
                   ({span.tool} if span else set()))
    return BackendRow(
        shape_key=shape, seqlen=seqlen, causal=causal, pass_=pass_, backend=backend, status=status,
        time_ms=time_ns / 1e6 if time_ns else None, time_source=source, flops=flop, tflops=rate, pct_peak=pct,
        pct_measured_peak=pct_m, speedup=None, peak_mem_bytes=b.peak_mem_bytes if b else None,
        peak_mem_where=b.peak_mem_where if b else None,
        kernel_ms=kernel_ns / 1e6 if kernel_ns else None, kernels_per_iter=launches,
        launch_overhead=gap,
        main_kernel=_name(main_ncu or main), main_kernel_name=_full_name(main_ncu or main),
        tensor_pct=tensor, dram_pct=dram, sm_pct=sm, occupancy_pct=metric(ms, "occupancy_pct"),
        dram_bytes=dbytes, dram_bps=bytes_per_s(dbytes, dtime), arithmetic_intensity=arithmetic_intensity(flop, dbytes),
        bound=bound(tensor, dram, sm, gap), breakdown_ms=breakdown, tools=tools, reason=reason,
    )


def _name(k: JoinedKernel | None) -> str | None:
    return k.short_name if k is not None else None


def _full_name(k: JoinedKernel | None) -> str | None:
    return k.name if k is not None else None


def roofline_points(view: CrossToolView) -> tuple[list[RooflinePoint], list[str]]:
    """Each ncu-measured kernel with a FLOP count (kernel_flops) and DRAM bytes, at (FLOP/byte, TFLOP/s) with
    ncu's duration; the names of ncu kernels that could not be placed (no FLOPs of their own, or no DRAM bytes)."""
    pts: list[RooflinePoint] = []
    unplaced: list[str] = []
    groups: dict[tuple[str, str, str | None], list[JoinedKernel]] = {}
    for k in view.kernels:
        groups.setdefault((k.backend, k.pass_, k.shape_key), []).append(k)
    for ks in groups.values():
        for k in ks:
            if "ncu" not in k.tools:
                continue
            tk = k.tools["ncu"]
            f = kernel_flops(k, ks)
            nb = dram_bytes(tk.metrics)
            dur = metric(tk.metrics, "duration_ns") or tk.avg_ns
            if f is None or not nb or not dur:
                unplaced.append(f"{k.backend} {k.pass_}: {k.short_name}")
                continue
            per_launch_f = f / max(tk.launches_per_iter, 1.0) if k.kernel_class == "gemm" else f
            ai = per_launch_f / nb
            pts.append(RooflinePoint(k.backend, k.pass_, k.shape_key, k.short_name, k.kernel_class, per_launch_f,
                                     nb, dur, ai, per_launch_f / dur / 1e3, k.name))
    return pts, unplaced


def baseline_breakdown(c: BackendTable) -> list[dict[str, Any]]:
    """The baseline's time per kernel class at each shape and pass (ms and share of its kernel time)."""
    out = []
    for r in c.rows:
        if r.backend != c.baseline or not r.breakdown_ms:
            continue
        tot = sum(r.breakdown_ms.values()) or 1.0
        out.append({"shape": r.shape_key, "seqlen": r.seqlen, "causal": r.causal, "pass": r.pass_,
                    "total_ms": tot, **{f"{k}_ms": v for k, v in r.breakdown_ms.items()},
                    **{f"{k}_share": v / tot for k, v in r.breakdown_ms.items()}})
    return out
