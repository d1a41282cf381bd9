"""The floor of any kernel from its own counters: the least time the work it did needs on each unit, and the
roofline position -- no attention shape needed (issue 43).

A kernel's time cannot go below the time its busiest unit needs for the work the kernel gave it. Nsight Compute
measures, for each unit, the work done as a percent of what the unit could have done in the kernel's elapsed time
at the clock it ran (``<unit metric>.avg.pct_of_peak_sustained_elapsed``: ncu's own peak model of this GPU, so no
datasheet is needed and any GPU ncu knows works). So ``floor = pct / 100 x duration``: the time at 100 % of that
unit's peak, spread evenly over the SMs. The work itself is shown beside it where the report counts it (tensor
FLOPs by precision, FP32 instructions, MUFU ops by kind, bytes at DRAM / L2 / L1, shared-memory wavefronts).

Units never sustain their peak: a device copy reaches about 90 % of the H200's DRAM bandwidth and a large cuBLAS
GEMM about 80-90 % of the tensor peak (shared/device/README.md). :data:`CEILING` holds those practical fractions;
``attainable = floor / ceiling`` is the time a kernel at its best would take for the same work, the bound no
predicted fix goes below (:meth:`Floor.after`), and a kernel within :data:`AT_ROOF` of it is *at the roof*:
healthy, with nothing to fix but doing less work on that unit.

The clock: SM-domain floors are at the clock the kernel ran (ncu's clock control, power or heat may hold it
under the GPU's max). A kernel at 97 % of its tensor pipe at 1611 MHz has 3 % left, not the 18 % a datasheet peak
at 1980 MHz suggests; the clock is a premise (:meth:`Floor.clock_premise`), never a saving.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from profctl.analysis.figures import Figures, first
from profctl.analysis.thresholds import value

#: a kernel within this fraction of its attainable time on its binding unit is at the roof
AT_ROOF = 0.85
#: the fraction of a unit's peak the best kernels reach in practice, measured with plain ncu on the H200
#: (tests/data/fixes): DRAM and L2 about 90 % (a stream copy: DRAM 85 %, L2 90 %; the README's device copy 4.3 of
#: 4.8 TB/s); the tensor pipe 85 % (cuBLAS GEMMs 97-100 % busy at the clock they ran, cuDNN's attention forward
#: 73 %: an attention kernel's MMAs wait on its softmax); issue slots 90 % (dependent instructions); others 95 %
CEILING = {"dram": 0.90, "l2": 0.90, "tensor": 0.85, "issue": 0.90}
DEFAULT_CEILING = 0.95
#: L2 busy with DRAM about as busy is DRAM's traffic passing through: the DRAM roof binds (a stream copy's L2 at 90 %
#: with DRAM at 85 % is DRAM-bound; the advice is fewer bytes, not fewer L2 accesses)
L2_CARRIES_DRAM = 0.85

_E = ".avg.pct_of_peak_sustained_elapsed"
_A = ".avg.pct_of_peak_sustained_active"


@dataclass(frozen=True)
class UnitDef:
    """A unit whose floor profctl reads: its key, label, the metrics giving its percent of peak over the elapsed
    time (first found wins; an *active* one is scaled by the SMs' active share), its clock domain and what moves
    its roof (the advice when the kernel is at it)."""

    key: str
    label: str
    elapsed: tuple[str, ...]
    active: tuple[str, ...] = ()
    domain: str = "sm"  # sm | l2 | dram: which clock its rate follows
    moves: str = ""


UNITS: tuple[UnitDef, ...] = (
    UnitDef("tensor", "tensor pipe", ("sm__pipe_tensor_cycles_active" + _E,
                                      "sm__pipe_tensor_op_hmma_cycles_active" + _E,
                                      "sm__inst_executed_pipe_tensor" + _E),
            ("sm__pipe_tensor_cycles_active" + _A, "sm__pipe_tensor_op_hmma_cycles_active" + _A),
            moves="less matrix work (skip masked or zero blocks, no recomputation) or a lower precision (fp8)"),
    UnitDef("fma", "FMA pipe", ("sm__pipe_fma_cycles_active" + _E, "sm__inst_executed_pipe_fma" + _E),
            ("sm__pipe_fma_cycles_active" + _A, "sm__inst_executed_pipe_fma" + _A),
            moves="fewer FP32 instructions: matrix work to the tensor cores, packed half-precision math, less "
                  "recomputation"),
    UnitDef("alu", "ALU pipe", ("sm__pipe_alu_cycles_active" + _E, "sm__inst_executed_pipe_alu" + _E),
            ("sm__pipe_alu_cycles_active" + _A, "sm__inst_executed_pipe_alu" + _A),
            moves="fewer integer, compare and logic instructions (index math hoisted out of loops, fewer "
                  "min/max and select chains)"),
    UnitDef("xu", "XU pipe (MUFU, conversions)", ("sm__inst_executed_pipe_xu" + _E,),
            ("sm__inst_executed_pipe_xu" + _A, "sm__pipe_xu_cycles_active" + _A),
            moves="fewer MUFU and conversion instructions (exp2 with the scale folded in, fewer dtype "
                  "conversions, part of the exps as an FMA polynomial)"),
    UnitDef("fp64", "FP64 pipe", ("sm__pipe_fp64_cycles_active" + _E, "sm__inst_executed_pipe_fp64" + _E),
            ("sm__pipe_fp64_cycles_active" + _A,), moves="FP64 work in FP32 where precision allows"),
    UnitDef("lsu", "LSU pipe", ("sm__inst_executed_pipe_lsu" + _E,), ("sm__inst_executed_pipe_lsu" + _A,),
            moves="fewer load/store instructions: wider (vector) accesses, data reused from registers"),
    UnitDef("issue", "issue slots", ("sm__inst_issued" + _E, "sm__issue_active" + _E),
            ("smsp__issue_active" + _A,),
            moves="fewer instructions: vectorized accesses, unrolled loops, less index math"),
    UnitDef("l1", "L1/shared memory", ("l1tex__throughput" + _E, "l1tex__data_pipe_lsu_wavefronts" + _E),
            ("l1tex__throughput" + _A,),
            moves="fewer L1/shared-memory wavefronts: conflict-free shared accesses, wider loads, data kept in "
                  "registers"),
    UnitDef("l2", "L2", ("lts__throughput" + _E, "lts__t_sectors" + _E), domain="l2",
            moves="fewer L2 accesses: reuse through shared memory or L1, larger tiles"),
    UnitDef("dram", "DRAM", ("dram__throughput" + _E, "gpu__dram_throughput" + _E), domain="dram",
            moves="moving fewer bytes: fuse passes, keep reused data on chip, a lower precision"),
)
UNIT = {u.key: u for u in UNITS}


@dataclass(frozen=True)
class UnitFloor:
    """One unit's floor in one kernel."""

    key: str
    label: str
    pct: float          # % of the unit's peak over the kernel's elapsed time, at the clock it ran
    floor_us: float     # the time at 100 % of the peak
    ceiling: float      # the fraction of the peak reached in practice
    work: str = ""      # what the unit did, in words (``2.75e+11 bf16 tensor FLOP``), where counted
    domain: str = "sm"

    @property
    def attainable_us(self) -> float:
        """The time at the practical ceiling (a kernel already above the ceiling sets it)."""
        return self.floor_us / max(self.ceiling, self.pct / 100.0)

    def to_dict(self) -> dict[str, Any]:
        return {"unit": self.key, "label": self.label, "pct_of_peak": round(self.pct, 2),
                "floor_us": round(self.floor_us, 3), "attainable_us": round(self.attainable_us, 3),
                "ceiling": self.ceiling, "work": self.work or None, "clock": self.domain}


@dataclass(frozen=True)
class Roofline:
    """Where the kernel sits on the roofline: its FLOPs (tensor + FP32) and DRAM bytes, their ratio, and the ridge
    (the intensity at which the compute peak and the DRAM peak take the same time), from ncu's peaks."""

    flops: float | None
    dram_bytes: float | None
    flop_rate: float | None   # achieved, FLOP/s
    byte_rate: float | None   # achieved, B/s
    peak_flop_rate: float | None
    peak_byte_rate: float | None

    @property
    def intensity(self) -> float | None:
        return self.flops / self.dram_bytes if self.flops is not None and self.dram_bytes else None

    @property
    def ridge(self) -> float | None:
        return self.peak_flop_rate / self.peak_byte_rate if self.peak_flop_rate and self.peak_byte_rate else None

    def side(self) -> str | None:
        i, r = self.intensity, self.ridge
        if i is None or r is None:
            return None
        return "compute side" if i >= r else "memory side"

    def sentence(self) -> str:
        i, r = self.intensity, self.ridge
        if i is None:
            return ""
        out = f"{_si(self.flops)}FLOP over {_si(self.dram_bytes)}B of DRAM: {i:.3g} FLOP/B"
        if r is not None:
            out += f", {self.side()} of the ridge ({r:.3g} FLOP/B)"
        if self.flop_rate:
            out += f"; {self.flop_rate / 1e12:.3g} TFLOP/s"
            if self.peak_flop_rate:
                out += f" of {self.peak_flop_rate / 1e12:.3g}"
        if self.byte_rate:
            out += f", {self.byte_rate / 1e12:.3g} TB/s"
            if self.peak_byte_rate:
                out += f" of {self.peak_byte_rate / 1e12:.3g}"
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"flops": self.flops, "dram_bytes": self.dram_bytes, "intensity": _r(self.intensity),
                "ridge": _r(self.ridge), "side": self.side(), "tflops": _r(self.flop_rate, 1e12),
                "peak_tflops": _r(self.peak_flop_rate, 1e12), "tbps": _r(self.byte_rate, 1e12),
                "peak_tbps": _r(self.peak_byte_rate, 1e12)}


@dataclass(frozen=True)
class Floor:
    """A kernel's floor: every unit's, the binding one, the clock, and what the report lacked."""

    duration_us: float
    units: tuple[UnitFloor, ...]
    clock_mhz: float | None = None
    max_clock_mhz: float | None = None
    missing: tuple[str, ...] = ()
    roofline: Roofline | None = None

    @property
    def l2_carries_dram(self) -> bool:
        """The L2 is the busiest memory unit with DRAM about as busy: its load is DRAM's traffic passing through."""
        l2, dram = self.get("l2"), self.get("dram")
        if l2 is None or dram is None:
            return False
        top = max(self.units, key=lambda u: u.attainable_us)
        return top.key == "l2" and dram.attainable_us >= L2_CARRIES_DRAM * l2.attainable_us

    def _practical(self, u: UnitFloor) -> float:
        """A unit's practical best; an L2 carrying DRAM's traffic counts at its full peak (DRAM sets the pace)."""
        return u.floor_us if u.key == "l2" and self.l2_carries_dram else u.attainable_us

    @property
    def binding(self) -> UnitFloor | None:
        if not self.units:
            return None
        if self.l2_carries_dram:
            return self.get("dram")
        return max(self.units, key=self._practical)

    @property
    def floor_us(self) -> float:
        """The binding unit's time at 100 % of its peak."""
        b = self.binding
        return b.floor_us if b is not None else 0.0

    @property
    def attainable_us(self) -> float:
        """The binding unit's practical best: the least time kernels reach for this work."""
        return max((self._practical(u) for u in self.units), default=0.0)

    @property
    def pct_of_attainable(self) -> float:
        return 100.0 * self.attainable_us / self.duration_us if self.duration_us else 0.0

    @property
    def at_roof(self) -> bool:
        return bool(self.units) and self.attainable_us >= AT_ROOF * self.duration_us

    def get(self, key: str) -> UnitFloor | None:
        return next((u for u in self.units if u.key == key), None)

    def after(self, remaining: Mapping[str, float] | None = None) -> float:
        """The least time the kernel can take once a fix leaves each unit in `remaining` with that fraction of its
        work (0: the fix removes it, or how much is left is unknown); every other unit keeps its work."""
        return self.after_unit(remaining)[0]

    def after_unit(self, remaining: Mapping[str, float] | None = None) -> tuple[float, UnitFloor | None]:
        """:meth:`after`, and the unit that sets it."""
        remaining = remaining or {}
        best: tuple[float, UnitFloor | None] = (0.0, None)
        for u in self.units:
            t = self._practical(u) * min(max(remaining.get(u.key, 1.0), 0.0), 1.0)
            if t > best[0]:
                best = (t, u)
        return best

    @property
    def clock_ratio(self) -> float | None:
        """The clock the kernel ran at over the GPU's max (None when either is unknown)."""
        if self.clock_mhz and self.max_clock_mhz:
            return self.clock_mhz / self.max_clock_mhz
        return None

    def floor_at_max_clock_us(self) -> float:
        """The floor with the SM-clocked units at the GPU's max clock (L2 and DRAM keep theirs)."""
        r = self.clock_ratio or 1.0
        return max((u.floor_us * (r if u.domain == "sm" else 1.0) for u in self.units), default=0.0)

    def clock_premise(self) -> str | None:
        """When the SM clock ran well under the GPU's max: a premise, never a saving."""
        r = self.clock_ratio
        if r is None or r >= 0.97 or not self.units:
            return None
        at_max = self.floor_at_max_clock_us()
        then = (f"at the max clock it would be {at_max:.1f} us, not {self.floor_us:.1f} us"
                if at_max < value("clock_moves_floor") * self.floor_us else
                f"its binding unit ({self.binding.label if self.binding else '?'}) runs on its own clock, so the "
                "SM clock does not move its floor")
        return (f"the kernel ran at {self.clock_mhz:.0f} MHz, {100 * r:.0f} % of the GPU's {self.max_clock_mhz:.0f} "
                f"MHz max (ncu's clock control, power or temperature): its floor is taken at the clock it ran; "
                f"{then}. The clock is the GPU's, not a fault of the kernel: no cause counts it as a saving")

    def verdict(self, faults: list[str] | None = None) -> str:
        """The first line of a one-kernel explanation: at the roof (healthy, unless `faults` -- causes that remove
        work from the binding unit -- are named), or how far from it."""
        b = self.binding
        if b is None:
            return "no floor: the report has none of the unit counters it needs (" + ", ".join(self.missing) + ")"
        t = self.duration_us
        what = f"{self.floor_us:,.1f} us at 100 % of its peak" + (f" for {b.work}" if b.work else "")
        best = f"{self.attainable_us:,.1f} us at the {100 * max(b.ceiling, b.pct / 100):.0f} % of peak kernels reach"
        if self.at_roof and faults:
            return (f"at the {b.label} roof ({self.pct_of_attainable:.0f} % of its practical best, {best}; {what}), "
                    f"but with work a fix removes from it: {', '.join(faults)}")
        if self.at_roof:
            return (f"healthy: at the {b.label} roof ({self.pct_of_attainable:.0f} % of its practical best, {best}; "
                    f"{what}). Nothing to fix but {UNIT[b.key].moves}")
        return (f"the {b.label} sets the floor: {what} (busy {b.pct:.0f} % of the kernel's {t:,.1f} us); its "
                f"practical best is {best}: this kernel is at {self.pct_of_attainable:.0f} % of that, "
                f"{max(t - self.attainable_us, 0.0):,.1f} us above")

    def to_dict(self) -> dict[str, Any]:
        b = self.binding
        return {"duration_us": round(self.duration_us, 3), "binding": b.key if b else None,
                "floor_us": round(self.floor_us, 3), "attainable_us": round(self.attainable_us, 3),
                "pct_of_attainable": round(self.pct_of_attainable, 1), "at_roof": self.at_roof,
                "clock_mhz": _r(self.clock_mhz), "max_clock_mhz": _r(self.max_clock_mhz),
                "floor_at_max_clock_us": round(self.floor_at_max_clock_us(), 3),
                "units": [u.to_dict() for u in sorted(
                    self.units, key=lambda u: -u.attainable_us)],
                "roofline": self.roofline.to_dict() if self.roofline else None, "missing": list(self.missing)}


def floor_of(p: Any) -> Floor | None:
    """The floor of a KernelProfile (or a metrics mapping); None without a duration."""
    f = Figures.of(p)
    t = f.duration_us
    if not t:
        return None
    m = f.metrics
    busy = f.sm_busy
    units: list[UnitFloor] = []
    missing: list[str] = []
    for u in UNITS:
        pct = first(m, u.elapsed)
        if pct is None:
            act = first(m, u.active)
            if act is not None and busy is not None:
                pct = act * busy
        if pct is None:
            missing.append(f"{u.label} ({u.elapsed[0]})")
            continue
        pct = max(pct, 0.0)
        units.append(UnitFloor(u.key, u.label, pct, t * pct / 100.0, CEILING.get(u.key, DEFAULT_CEILING),
                               _work(u.key, f, p), u.domain))
    clock = f.get("clock_hz")
    max_khz = first(m, ("device__attribute_max_gpu_frequency_khz", "device__attribute_clock_rate"))
    return Floor(t, tuple(units), clock / 1e6 if clock else None, max_khz / 1e3 if max_khz else None,
                 tuple(missing), _roofline(f, t))


# ------------------------------------------------------------ the work each unit did, in words
_TENSOR_SRC = {"bf16": "bf16", "fp16": "fp16", "tf32": "tf32", "fp8": "fp8", "e4m3": "fp8", "e5m2": "fp8",
               "int8": "int8", "int4": "int4", "fp64": "fp64", "int1": "int1", "fp4": "fp4", "fp6": "fp6"}


def tensor_flops(m: Mapping[str, Any]) -> dict[str, float]:
    """Tensor-core FLOPs by source precision (ncu's ``sm__ops_path_tensor_op_<path>_src_<dtype>...sum``: one op a
    FLOP, so an attention forward's 4 b h s^2 d comes out exactly)."""
    out: dict[str, float] = {}
    pre = "sm__ops_path_tensor_op_"
    for k, v in m.items():
        if not (k.startswith(pre) and k.endswith(".sum")) or "sparsity_on" in k or not isinstance(v, (int, float)):
            continue
        if not v or not math.isfinite(v) or "_src_" not in k:
            continue
        src = k.split("_src_", 1)[1].split("_")[0].split(".")[0]
        d = _TENSOR_SRC.get(src, src)
        out[d] = out.get(d, 0.0) + float(v)
    return out


def _peak_tensor_rate(m: Mapping[str, Any], clock_hz: float | None) -> float | None:
    """The tensor FLOP/s peak of the precision the kernel used most, at its clock (ncu's peak per cycle)."""
    best: tuple[float, float] | None = None
    pre = "sm__ops_path_tensor_op_"
    for k, v in m.items():
        if k.startswith(pre) and k.endswith(".sum") and "sparsity_off" in k and isinstance(v, (int, float)) and v:
            peak = m.get(k + ".peak_sustained")
            if isinstance(peak, (int, float)) and peak and (best is None or v > best[0]):
                best = (float(v), float(peak))
    return best[1] * clock_hz if best and clock_hz else None


def fp32_flops(f: Figures, p: Any) -> float | None:
    """FP32 FLOPs on the FMA pipe (an FFMA counts 2): ncu's thread-instruction counts, else the executed
    instructions of the SASS (warp instructions x threads per instruction)."""
    m = f.metrics
    names = tuple(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in ("ffma", "fadd", "fmul"))
    vals = [first(m, (n, n.replace("smsp__", "sm__"))) for n in names]
    if all(v is not None for v in vals):
        return 2 * (vals[0] or 0.0) + (vals[1] or 0.0) + (vals[2] or 0.0)
    pcs = getattr(p, "pcs", None) or []
    if pcs:
        tot = 0.0
        for x in pcs:
            op = _op(x.sass)
            if op in ("FFMA", "FADD", "FMUL") and x.executed:
                threads = float(x.memory.get("thread_inst", 32.0 * x.executed))
                tot += threads * (2.0 if op == "FFMA" else 1.0)
        return tot
    if f.opcodes:
        tpi = f.get("threads_per_inst") or 32.0
        return tpi * (2 * f.opcode_count("FFMA") + f.opcode_count("FADD", "FMUL"))
    return None


#: opcodes that run on the XU pipe: MUFU (exp2, rcp, rsqrt, sin, lg2, ...) and the conversions, rounding and bit
#: ops that share it
XU_OPS = ("MUFU", "F2F", "F2I", "I2F", "FRND", "POPC", "FLO", "BREV", "I2FP", "F2IP")


def xu_mix(p: Any) -> dict[str, float]:
    """Warp instructions executed on the XU pipe by kind (``MUFU.EX2``, ``MUFU.RCP``, ``F2I``, ``FRND`` ...), from the
    report's SASS (per-instruction executed counts); empty when the report has none."""
    out: dict[str, float] = {}
    for x in getattr(p, "pcs", None) or []:
        if not x.executed:
            continue
        full = _full_op(x.sass)
        if full.split(".")[0] in XU_OPS:
            key = full if full.startswith("MUFU") else full.split(".")[0]
            out[key] = out.get(key, 0.0) + float(x.executed)
    return out


def _op(sass: str) -> str:
    return _full_op(sass).split(".")[0]


def _full_op(sass: str) -> str:
    parts = (sass or "").split()
    if parts and parts[0].startswith("@"):
        parts = parts[1:]
    if not parts:
        return ""
    op = parts[0]
    if op.startswith("MUFU"):
        return ".".join(op.split(".")[:2])
    return op


def _work(key: str, f: Figures, p: Any) -> str:
    m = f.metrics
    if key == "tensor":
        tf = tensor_flops(m)
        return ", ".join(f"{_si(v)}FLOP {d}" for d, v in sorted(tf.items(), key=lambda kv: -kv[1]))
    if key == "fma":
        fl = fp32_flops(f, p)
        return f"{_si(fl)}FLOP FP32" if fl else ""
    if key in ("alu", "lsu", "fp64"):
        n = first(m, (f"sm__inst_executed_pipe_{key}.sum", f"smsp__inst_executed_pipe_{key}.sum"))
        return f"{_n(n)} warp instructions" if n else ""
    if key == "xu":
        mix = xu_mix(p)
        if not mix:
            return ""
        tot = sum(mix.values())
        top = sorted(mix.items(), key=lambda kv: -kv[1])[:4]
        return f"{_n(tot)} warp instructions (" + ", ".join(f"{k} {100 * v / tot:.0f} %" for k, v in top) + ")"
    if key == "issue":
        n = f.get("inst_issued") or f.get("inst_executed")
        return f"{_n(n)} warp instructions" if n else ""
    if key == "l1":
        g = sum(f.get(k) or 0.0 for k in ("global_ld_sectors", "global_st_sectors")) + (f.local_sectors or 0.0)
        w = f.get("shared_wavefronts")
        parts = ([f"{_si(g * 32)}B of global and local sectors"] if g else []) + \
            ([f"{_n(w)} shared-memory wavefronts"] if w else [])
        return ", ".join(parts)
    if key == "l2":
        b = f.get("l2_bytes")
        if b is None:
            s = first(m, ("lts__t_sectors.sum",))
            b = s * 32 if s is not None else None
        return f"{_si(b)}B" if b else ""
    if key == "dram":
        b = f.dram_bytes
        return f"{_si(b)}B" if b else ""
    return ""


def _roofline(f: Figures, t_us: float) -> Roofline | None:
    m = f.metrics
    tf = sum(tensor_flops(m).values())
    fp = fp32_flops(f, None) or 0.0
    flops = tf + fp if (tf or fp) else None
    dram = f.dram_bytes
    if flops is None and dram is None:
        return None
    clock = f.get("clock_hz")
    t = t_us * 1e-6
    peak_bytes = None
    per_cycle = first(m, ("dram__bytes.sum.peak_sustained",))
    dclock = first(m, ("dram__cycles_elapsed.avg.per_second",))
    if per_cycle and dclock:
        peak_bytes = per_cycle * dclock
    peak_flops = _peak_tensor_rate(m, clock) if tf else None
    return Roofline(flops, dram, flops / t if flops else None, dram / t if dram else None, peak_flops, peak_bytes)


def _si(x: float | None) -> str:
    if x is None:
        return "? "
    for div, pre in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g} {pre}"
    return f"{x:.3g} "


def _n(x: float | None) -> str:
    """A count with an SI prefix: ``174 M``."""
    return _si(x).rstrip()


def _r(x: float | None, scale: float = 1.0) -> float | None:
    return None if x is None else round(x / scale, 4)


__all__ = ["AT_ROOF", "CEILING", "UNITS", "XU_OPS", "Floor", "Roofline", "UnitFloor", "floor_of", "fp32_flops",
           "tensor_flops", "xu_mix"]
