"""What every cause detector reads (:mod:`profctl.analysis.cause_rules`): a kernel's :class:`Context` -- its
figures, its warp samples folded onto source lines (:class:`Line`), its GPU and, in a pair, the other
kernel -- and the small helpers the detectors share to word their evidence."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from profctl import devices
from profctl.analysis.cause_catalog import CATALOG, Cause
from profctl.analysis.figures import Figures
from profctl.analysis.parked import parked
from profctl.analysis.source import attribute, opcode, ratio_keys, short_path
from profctl.analysis.stalls import ratio_metric

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
#: text on a source line that says it is a matrix product: a dot/matmul call, ``@``, or an accumulation of the
#: product of two loaded operands (``acc += a[i] * b[j]``, ``fma(a[i], b[j], acc)``) -- not any FMA: a polynomial
#: ``fma(p, x, c)`` of constants is no matrix work (issue 43)
MATMUL_TEXT = re.compile(r"\b(dot|matmul|mma|gemm|wmma|einsum|bmm|addmm)\b|\s@\s|"
                         r"\+=\s*[\w.]+\s*\[[^\]]*\]\s*\*\s*[\w.]+\s*\[|"
                         r"\+=\s*[\w.]+\s*\*\s*[\w.]+\s*\[|"
                         r"fmaf?\s*\(\s*[\w.]+\s*\[[^\]]*\]\s*,\s*[\w.]+\s*\[", re.I)


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
              fix: str | None = None, note: str = "", relieves: dict[str, float] | None = None,
              share: float | None = None, degree: float | None = None) -> Cause:
        """A cause found: `saving` is the detector's own estimate; `share` (default: saving over the time) what the
        model of the kernel's time takes as the fault's part of it, uncapped by other units or faults."""
        keys = [ln.key for ln in (lines or []) if ln.key]
        if lines and not keys:
            note = (note + "; " if note else "") + ("no source line: the kernel has no line table (a library kernel, "
                                                    "or CUDA built without nvcc -lineinfo)")
        c = Cause(id=id, lines=[k for k in keys if k is not None], saving_us=max(saving, 0.0), evidence=evidence,
                  fix=fix or CATALOG[id].fix, note=note, kernel_us=self.duration_us, relieves=relieves,
                  share=share, degree=degree)
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
    without a line stay one entry each. The samples of warps parked at a warp-specialized launch's partition
    barrier (profctl.analysis.mbarriers.parked: no work left, or none at all) are left out: they are no part of
    the kernel's warp time that a fix could give back."""
    pairs, _ = attribute(p)
    idle = parked(p)  # a warp-specialized kernel's warps with no work: their wait at the partition barrier is no cost
    by: dict[Any, Line] = {}
    for x, home in pairs:
        key: Any = home if home is not None else ("pc", x.offset)
        ln = by.get(key)
        if ln is None:
            text = p.source_text.get(home[0], {}).get(home[1], "") if home else x.sass
            ln = by[key] = Line(home[0] if home else None, home[1] if home else None, text.strip())
        op = opcode(x.sass)
        gone = x.stalls.get("barrier", 0) if x.offset in idle else 0
        ln.present.add(op)
        ln.samples += x.samples - gone
        ln.executed += float(x.executed or 0)
        if x.samples - gone:
            ln.ops[op] = ln.ops.get(op, 0) + x.samples - gone
        for k, v in x.stalls.items():
            if v - (gone if k == "barrier" else 0):
                ln.stalls[k] = ln.stalls.get(k, 0) + v - (gone if k == "barrier" else 0)
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


def pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def top(lines: list[Line], key: Callable[[Line], float], n: int = 3, floor: float = 0.0) -> list[Line]:
    xs = [ln for ln in lines if key(ln) > floor]
    xs.sort(key=lambda ln: -key(ln))
    return xs[:n]


def line_where(ln: Line) -> str:
    if ln.file and ln.line is not None:
        return f"{short_path(ln.file)}:{ln.line}"
    return "instruction " + (ln.text.split()[0] if ln.text else "?")

