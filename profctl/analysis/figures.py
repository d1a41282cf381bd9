"""One home for what profctl reads out of Nsight Compute's metrics: named figures of one kernel (tensor pipe, issue
slots, waves, threads per instruction, excess sectors and wavefronts, local-memory traffic, occupancy and its
limiter, ...), each defined once with the metric names that give it, and the figures derived from them.

Every view reads these (``profctl explain``, the ncu diagnosis, the backend table, the source view, the causes),
so one kernel gets one answer. Recipes collect different metrics (``tensor-core`` a handful, ``--set full`` two
thousand): each figure lists the names that give it, best first, and is ``None`` when the report has none of them,
never guessed. Input: a metrics mapping (an ncu row's ``metrics`` or a :class:`profctl.schema.profile.KernelProfile`)
and, where the report has them, SASS opcode counts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Figure:
    """A named figure: the metric names that give it (first present wins), its label and unit."""

    key: str
    label: str
    unit: str
    names: tuple[str, ...]


def _f(key: str, label: str, unit: str, *names: str) -> Figure:
    return Figure(key, label, unit, names)


_ACTIVE = ".avg.pct_of_peak_sustained_active"
_ELAPSED = ".avg.pct_of_peak_sustained_elapsed"

#: every figure profctl reads from ncu, by key
FIGURES: dict[str, Figure] = {f.key: f for f in (
    _f("duration_ns", "duration", "ns", "gpu__time_duration.sum", "gpu__time_duration.avg"),
    _f("clock_hz", "SM clock", "Hz", "gpc__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second"),
    _f("sms", "SMs", "", "device__attribute_multiprocessor_count", "launch__sm_count"),
    _f("compute_pct", "compute throughput", "% of peak", "sm__throughput" + _ELAPSED),
    _f("memory_pct", "memory throughput", "% of peak", "gpu__compute_memory_throughput" + _ELAPSED),
    _f("dram_pct", "DRAM throughput", "% of peak", "dram__throughput" + _ELAPSED, "gpu__dram_throughput" + _ELAPSED),
    _f("l1_pct", "L1/shared throughput", "% of peak", "l1tex__throughput" + _ACTIVE, "l1tex__throughput" + _ELAPSED),
    _f("l2_pct", "L2 throughput", "% of peak", "lts__throughput" + _ELAPSED),
    _f("tensor_pct", "tensor pipe", "% of active cycles", "sm__pipe_tensor_cycles_active" + _ACTIVE,
       "sm__pipe_tensor_op_hmma_cycles_active" + _ACTIVE, "sm__inst_executed_pipe_tensor" + _ACTIVE,
       "sm__pipe_tensor_cycles_active" + _ELAPSED, "sm__pipe_tensor_op_hmma_cycles_active" + _ELAPSED),
    _f("fma_pct", "FMA pipe", "% of active cycles", "sm__pipe_fma_cycles_active" + _ACTIVE,
       "sm__inst_executed_pipe_fma" + _ACTIVE, "sm__pipe_fma_cycles_active" + _ELAPSED,
       "sm__inst_executed_pipe_fma" + _ELAPSED),
    _f("alu_pct", "ALU pipe", "% of active cycles", "sm__pipe_alu_cycles_active" + _ACTIVE,
       "sm__inst_executed_pipe_alu" + _ACTIVE, "sm__inst_executed_pipe_alu" + _ELAPSED),
    _f("xu_pct", "XU pipe (MUFU: exp, rcp)", "% of active cycles", "sm__inst_executed_pipe_xu" + _ACTIVE,
       "sm__pipe_xu_cycles_active" + _ACTIVE, "sm__inst_executed_pipe_xu" + _ELAPSED),
    _f("lsu_pct", "LSU pipe", "% of active cycles", "sm__inst_executed_pipe_lsu" + _ACTIVE,
       "sm__inst_executed_pipe_lsu" + _ELAPSED),
    _f("issue_pct", "issue slots busy", "%", "smsp__issue_active" + _ACTIVE, "sm__inst_issued" + _ELAPSED),
    _f("achieved_occupancy", "achieved occupancy", "% of max warps", "sm__warps_active" + _ACTIVE),
    _f("theoretical_occupancy", "theoretical occupancy", "% of max warps", "sm__maximum_warps_per_active_cycle_pct"),
    _f("warps_per_scheduler", "warps per scheduler", "", "smsp__warps_active.avg.per_cycle_active"),
    _f("eligible_per_scheduler", "eligible warps per scheduler", "", "smsp__warps_eligible.avg.per_cycle_active"),
    _f("max_warps_per_sm", "max warps per SM", "", "device__attribute_max_warps_per_multiprocessor"),
    _f("max_blocks_per_sm", "max blocks per SM", "", "device__attribute_max_blocks_per_multiprocessor"),
    _f("registers", "registers per thread", "", "launch__registers_per_thread"),
    _f("smem_per_block", "shared memory per block", "bytes", "launch__shared_mem_per_block",
       "launch__shared_mem_per_block_allocated"),
    _f("smem_dynamic", "dynamic shared memory per block", "bytes", "launch__shared_mem_per_block_dynamic"),
    _f("block_size", "block size", "threads", "launch__block_size"),
    _f("grid_size", "grid size", "blocks", "launch__grid_size"),
    _f("waves", "waves per SM", "", "launch__waves_per_multiprocessor"),
    _f("stack_bytes", "stack frame", "bytes", "launch__stack_size"),
    _f("inst_executed", "instructions executed", "", "smsp__inst_executed.sum", "sm__inst_executed.sum"),
    _f("inst_issued", "instructions issued", "", "smsp__inst_issued.sum", "sm__inst_issued.sum"),
    _f("cpi", "cycles per issued instruction", "", "smsp__average_warp_latency_per_inst_issued.ratio"),
    _f("threads_per_inst", "threads per instruction", "of 32", "smsp__thread_inst_executed_per_inst_executed.ratio"),
    _f("cycles_active", "SM active cycles", "", "sm__cycles_active.avg"),
    # ncu's "Elapsed Cycles" (gpc__cycles_elapsed.max, SpeedOfLight) where sm__cycles_elapsed was not collected: the
    # explain recipe has only the former, and without it no SM-idle share (tails, imbalanced persistent grids) is seen
    _f("cycles_elapsed", "SM elapsed cycles", "", "sm__cycles_elapsed.avg", "gpc__cycles_elapsed.max"),
    _f("l1_bytes", "L1/shared traffic", "bytes", "l1tex__t_bytes.sum"),
    _f("l2_bytes", "L2 traffic", "bytes", "lts__t_bytes.sum"),
    _f("l2_sectors_tex", "L2 sectors requested by the SMs", "", "lts__t_sectors_srcunit_tex.sum"),
    _f("l2_hit", "L2 hit rate", "%", "lts__t_sector_hit_rate.pct"),
    _f("l1_hit", "L1 hit rate", "%", "l1tex__t_sector_hit_rate.pct"),
    _f("dram_read", "DRAM read", "bytes", "dram__bytes_read.sum"),
    _f("dram_write", "DRAM write", "bytes", "dram__bytes_write.sum"),
    _f("global_sectors_excess", "global sectors beyond ideal", "",
       "derived__memory_l2_theoretical_sectors_global_excessive"),
    _f("global_ld_sectors", "global load sectors", "", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"),
    _f("global_ld_requests", "global load requests", "", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"),
    _f("global_st_sectors", "global store sectors", "", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"),
    _f("global_st_requests", "global store requests", "", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"),
    _f("shared_wavefronts", "shared-memory wavefronts", "", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"),
    _f("shared_wavefronts_excess", "shared-memory wavefronts beyond ideal", "",
       "derived__memory_l1_wavefronts_shared_excessive"),
    _f("shared_conflicts", "shared-memory bank conflicts", "", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"),
    _f("local_ld_sectors", "local load sectors", "", "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum"),
    _f("local_st_sectors", "local store sectors", "", "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"),
    _f("local_loads", "local load instructions", "", "sass__inst_executed_local_loads",
       "smsp__sass_inst_executed_op_local_ld.sum"),
    _f("local_stores", "local store instructions", "", "sass__inst_executed_local_stores",
       "smsp__sass_inst_executed_op_local_st.sum"),
    _f("spill_requests", "local-memory spill requests", "", "derived__local_spilling_requests"),
    _f("global_atomics", "global atomic requests", "", "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum"),
    _f("global_reductions", "global reduction requests", "", "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum"),
    _f("l2_atomic_pct", "L2 atomic unit busy", "% of peak", "lts__d_atomic_input_cycles_active" + _ELAPSED),
)}

#: what caps the blocks per SM, by name -> the metric of that limit
LIMITS = {"registers": "launch__occupancy_limit_registers", "shared memory": "launch__occupancy_limit_shared_mem",
          "warps": "launch__occupancy_limit_warps", "blocks": "launch__occupancy_limit_blocks",
          "barriers": "launch__occupancy_limit_barriers"}

#: opcodes of the matrix units: warp-level MMA (Ampere's mma.sync, also run by Hopper) and warpgroup MMA (Hopper's
#: wgmma; Blackwell's tcgen05 UTC*MMA)
HMMA = ("HMMA", "IMMA", "DMMA", "BMMA", "QMMA")
GMMA = ("HGMMA", "IGMMA", "QGMMA", "BGMMA", "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA")


def first(metrics: Mapping[str, float], names: tuple[str, ...] | list[str]) -> float | None:
    """The first of `names` the metrics have, as a finite float; None when none is there."""
    for n in names:
        v = metrics.get(n)
        if v is not None:
            try:
                x = float(v)
            except (TypeError, ValueError):
                continue
            if math.isfinite(x):
                return x
    return None


def value(metrics: Mapping[str, float], key: str) -> float | None:
    """The figure `key` (:data:`FIGURES`) of a metrics mapping."""
    return first(metrics, FIGURES[key].names)


@dataclass(frozen=True)
class Figures:
    """One kernel's figures: every :data:`FIGURES` entry by attribute-free lookup (:meth:`get`), and the derived
    ones as properties. Built from a metrics mapping and the SASS opcode counts when the report has them."""

    metrics: Mapping[str, float]
    opcodes: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, p: object) -> Figures:
        """From a KernelProfile (metrics and opcodes), a summary row (metrics) or a plain mapping."""
        if isinstance(p, Mapping):
            return cls(p)
        return cls(getattr(p, "metrics", {}) or {}, getattr(p, "opcodes", {}) or {})

    def get(self, key: str) -> float | None:
        return value(self.metrics, key)

    # ---- time and the machine
    @property
    def duration_us(self) -> float | None:
        d = self.get("duration_ns")
        return d / 1e3 if d else None

    @property
    def sm_busy(self) -> float | None:
        """The fraction of the kernel's time the average SM had work (tail effects and idle SMs lower it)."""
        act, ela = self.get("cycles_active"), self.get("cycles_elapsed")
        return min(act / ela, 1.0) if act and ela else None

    # ---- launch and occupancy
    @property
    def blocks_per_sm(self) -> float | None:
        """Blocks one SM can hold at once: the smallest of the occupancy limits."""
        lims = [v for v in (self.metrics.get(m) for m in LIMITS.values()) if v is not None and math.isfinite(v)]
        return min(lims) if lims else None

    def limits(self) -> dict[str, float]:
        return {k: float(self.metrics[m]) for k, m in LIMITS.items()
                if m in self.metrics and math.isfinite(self.metrics[m])}

    def limiters(self) -> list[str]:
        """What caps the blocks per SM (several when they tie)."""
        lim = self.limits()
        if not lim:
            return []
        low = min(lim.values())
        return [k for k, v in lim.items() if v == low]

    def occupancy_limiter(self) -> str | None:
        """``registers (2 blocks/SM)``: what caps the blocks per SM, in words."""
        who = self.limiters()
        if not who:
            return None
        low = min(self.limits().values())
        return f"{' and '.join(who)} ({low:.0f} block{'s' if low != 1 else ''}/SM)"

    @property
    def warps_per_block(self) -> float | None:
        b = self.get("block_size")
        return math.ceil(b / 32) if b else None

    @property
    def full_wave_blocks(self) -> float | None:
        """Blocks in one full wave over the GPU (SMs x blocks per SM)."""
        sms, per = self.get("sms"), self.blocks_per_sm
        return sms * per if sms and per else None

    def persistent(self) -> bool:
        """A grid of about one block per SM slot (at least 90 % of one full wave, at most one): blocks loop over the
        work. A grid far below one wave is not persistent, it leaves SMs idle."""
        grid, full = self.get("grid_size"), self.full_wave_blocks
        return bool(grid and full and 0.9 * full <= grid <= full)

    def grid_note(self) -> str:
        grid, waves, sms = self.get("grid_size"), self.get("waves"), self.get("sms")
        if grid is None:
            return ""
        if self.persistent():
            return f"persistent: {grid:.0f} blocks for {sms:.0f} SMs (one wave, blocks loop over the work)"
        if sms and grid < sms:
            return f"{grid:.0f} blocks for {sms:.0f} SMs: {sms - grid:.0f} SMs idle"
        return f"{waves:.2f} waves" if waves is not None else ""

    # ---- instructions
    def opcode_count(self, *prefixes: str) -> float:
        """Warp instructions executed whose opcode starts with one of `prefixes` (whole opcode names)."""
        return sum(v for k, v in self.opcodes.items() if any(k == p or k.startswith(p + ".") for p in prefixes))

    @property
    def opcode_total(self) -> float:
        return float(sum(self.opcodes.values()))

    def opcode_share(self, *prefixes: str) -> float | None:
        tot = self.opcode_total
        return self.opcode_count(*prefixes) / tot if tot else None

    @property
    def hmma(self) -> float:
        return self.opcode_count(*HMMA)

    @property
    def gmma(self) -> float:
        return self.opcode_count(*GMMA)

    @property
    def wgmma_insts(self) -> float | None:
        """wgmma instructions: from the instruction mix where ncu gave it, else ncu's count of the tensor pipe's
        wgmma instructions (a recipe of metrics without the instruction statistics); None when neither is
        there."""
        if self.opcodes:
            return self.gmma
        return first(self.metrics, ("sm__inst_executed_pipe_tensor_op_gmma.sum",))

    @property
    def tensor_ops(self) -> float:
        """Matrix operations done on the tensor cores, every path summed (ncu's ``sm__ops_path_tensor_op_*``):
        the measure of "the same MMA work" across kernels that use different instruction shapes (0: not
        collected)."""
        pre = "sm__ops_path_tensor_op_"
        return float(sum(v for k, v in self.metrics.items() if k.startswith(pre) and k.endswith("_sparsity_off.sum")
                         and isinstance(v, (int, float)) and math.isfinite(v)))

    def instruction_mix(self, top: int = 6) -> str:
        total = self.opcode_total
        if not total:
            return ""
        ops = sorted(self.opcodes.items(), key=lambda kv: -kv[1])[:top]
        return ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in ops)

    # ---- memory
    @property
    def dram_bytes(self) -> float | None:
        if "dram__bytes.sum" in self.metrics:
            return float(self.metrics["dram__bytes.sum"])
        r, w = self.get("dram_read"), self.get("dram_write")
        return None if r is None and w is None else (r or 0.0) + (w or 0.0)

    @property
    def local_sectors(self) -> float | None:
        ld, st = self.get("local_ld_sectors"), self.get("local_st_sectors")
        return None if ld is None and st is None else (ld or 0.0) + (st or 0.0)

    @property
    def local_instructions(self) -> float:
        return (self.get("local_loads") or 0.0) + (self.get("local_stores") or 0.0) or self.opcode_count("LDL", "STL")

    @property
    def atomics(self) -> float:
        n = (self.get("global_atomics") or 0.0) + (self.get("global_reductions") or 0.0)
        return n or self.opcode_count("ATOM", "ATOMG", "RED", "REDG")

    # ---- the busiest unit
    def units(self) -> dict[str, float]:
        """Each unit's utilisation (% of its peak), as ncu's compute and memory workload sections measure it."""
        cands: dict[str, float] = {}
        pre, pre2, act = "sm__inst_executed_pipe_", "sm__pipe_", ".avg.pct_of_peak_sustained_active"
        for name, v in self.metrics.items():
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                continue
            if name.startswith(pre) and name.endswith(act):
                pipe = name[len(pre):-len(act)]
                if "_pred_on" not in pipe and not pipe.endswith("_realtime"):
                    cands[f"{pipe} pipe"] = max(v, cands.get(f"{pipe} pipe", 0.0))
            elif name.startswith(pre2) and name.endswith("_cycles_active" + act):
                pipe = name[len(pre2):-len("_cycles_active" + act)]
                cands[f"{pipe} pipe"] = max(v, cands.get(f"{pipe} pipe", 0.0))
        for label, key in (("L1/shared", "l1_pct"), ("L2", "l2_pct"), ("DRAM", "dram_pct"),
                           ("issue slots", "issue_pct")):
            x = self.get(key)
            if x is not None:
                cands[label] = x
        if not cands:  # a small recipe: the speed-of-light totals stand in
            for label, key in (("SM", "compute_pct"), ("memory", "memory_pct"), ("tensor pipe", "tensor_pct")):
                x = self.get(key)
                if x is not None:
                    cands[label] = x
        return {_unit_label(k): v for k, v in cands.items()}

    def limiting_unit(self) -> tuple[str, float] | None:
        """The busiest unit and its utilisation (% of its peak)."""
        u = self.units()
        if not u:
            return None
        k = max(u, key=lambda k: u[k])
        return k, u[k]


#: ncu's pipe names -> how profctl names the unit
PIPE_LABELS = {"fma": "FMA pipe", "alu": "ALU pipe", "xu": "XU pipe (exp)", "lsu": "LSU pipe", "tensor": "tensor pipe",
               "fp64": "FP64 pipe", "fp16": "FP16 pipe", "uniform": "uniform pipe", "adu": "ADU pipe",
               "cbu": "CBU pipe", "tex": "TEX pipe", "fmaheavy": "FMA pipe (heavy)", "fmalite": "FMA pipe (lite)",
               "tensor_op_hmma": "tensor pipe (FP16/BF16)", "tensor_op_gmma": "tensor pipe (wgmma)",
               "tensor_op_imma": "tensor pipe (IMMA)", "tensor_op_dmma": "tensor pipe (DMMA)"}


def _unit_label(k: str) -> str:
    if k.endswith(" pipe"):
        pipe = k[: -len(" pipe")]
        return PIPE_LABELS.get(pipe, pipe.replace("_", " ") + " pipe")
    return k


def metric(p: object, *names: str) -> float | None:
    """The first of `names` a profile (or a metrics mapping) has: for one-off metrics a figure does not name."""
    m = p if isinstance(p, Mapping) else getattr(p, "metrics", {})
    return first(m, names)


#: an MMA instruction's shape in its SASS name: ``HGMMA.64x128x16.F32.BF16`` (a warpgroup's m x n x k),
#: ``HMMA.16816.F32.BF16`` (a warp's m16 n8 k16), ``HMMA.1688`` (m16 n8 k8)
_WG_SHAPE = re.compile(r"^[A-Z]*GMMA\.(\d+)x(\d+)x(\d+)")
_WARP_SHAPE = re.compile(r"^[A-Z]*MMA\.(16)(8)(8|16|32)\b")


def mma_flops_per_exec(sass: str) -> float | None:
    """The FLOPs one warp-level execution of an MMA instruction does, from the shape its SASS names (ncu counts a
    warpgroup MMA once per warp of the warpgroup, so a wgmma's 2 m n k is split over its 4 warps: on the H200,
    ``HMMA.16816`` x 4096 and ``HGMMA.64x128x16`` x 65536 give ncu's own sm__ops_path_tensor_op counts exactly,
    tests/data/pairs/pairs_sdpa); None for an instruction that is not an MMA or names no shape."""
    parts = (sass or "").split()
    if parts and parts[0].startswith("@"):
        parts = parts[1:]
    op = parts[0] if parts else ""
    m = _WG_SHAPE.match(op)
    if m:
        a, b, c = (int(x) for x in m.groups())
        return 2.0 * a * b * c / 4.0
    m = _WARP_SHAPE.match(op)
    if m:
        a, b, c = (int(x) for x in m.groups())
        return 2.0 * a * b * c
    return None


def matrix_flops(p: object) -> tuple[float, str]:
    """A kernel's matrix work in one unit, FLOPs: ncu's tensor operations where the report counts them
    ("counted"), else its MMA instructions weighed by the shapes their SASS names ("sass"; an m64n64k16 wgmma does
    half an m64n128k16's work); (0, "") when neither is there -- its instruction counts alone are not comparable."""
    f = Figures.of(p)
    if f.tensor_ops:
        return f.tensor_ops, "counted"
    tot, unknown = 0.0, 0.0
    for x in getattr(p, "pcs", None) or ():
        if not x.executed:
            continue
        w = mma_flops_per_exec(x.sass)
        if w is not None:
            tot += w * float(x.executed)
        elif "MMA" in (x.sass or "").split(".")[0]:
            unknown += float(x.executed)
    if tot and not unknown:
        return tot, "sass"
    return 0.0, ""


__all__ = ["FIGURES", "GMMA", "HMMA", "LIMITS", "Figure", "Figures", "first", "matrix_flops", "metric",
           "mma_flops_per_exec", "value"]
