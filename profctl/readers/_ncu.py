"""What the two ncu readers (``ncu_rep`` for .ncu-rep, ``ncu_csv`` for CSV exports) share: the per-launch
record, unit normalisation to base units, NVTX range formatting, the .ncu-rep container check (truncation, the
writing tool's version) and the grouping of launches into the unified Summary.

Both readers first produce the same :class:`Launch` list, so the grouping, and therefore the summary, cannot
differ between the two formats of one report; the tests compare them on the shared fixtures.
"""

from __future__ import annotations

import dataclasses
import math
import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profctl.errors import BadReport
from profctl.kernels import base_name, classify, is_generic, kernel_id, readable, short_name
from profctl.nvtx import canonical_parts
from profctl.schema import KernelRow, Source, Summary, durations_stats, warn
from profctl.schema.samples import sample_fields

#: the section header labels of ncu's details page -> metric names (from the section files of ncu 2025.3;
#: the details page prints labels, not metric names). Keys are (section display name, label).
DETAILS_LABELS: dict[tuple[str, str], str] = {
    (
        "GPU Speed Of Light Throughput",
        "Compute (SM) Throughput",
    ): "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    ("GPU Speed Of Light Throughput", "DRAM Frequency"): "dram__cycles_elapsed.avg.per_second",
    (
        "GPU Speed Of Light Throughput",
        "DRAM Throughput",
    ): "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    ("GPU Speed Of Light Throughput", "Duration"): "gpu__time_duration.sum",
    ("GPU Speed Of Light Throughput", "Elapsed Cycles"): "gpc__cycles_elapsed.max",
    (
        "GPU Speed Of Light Throughput",
        "L1/TEX Cache Throughput",
    ): "l1tex__throughput.avg.pct_of_peak_sustained_active",
    (
        "GPU Speed Of Light Throughput",
        "L2 Cache Throughput",
    ): "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    (
        "GPU Speed Of Light Throughput",
        "Memory Throughput",
    ): "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    ("GPU Speed Of Light Throughput", "SM Active Cycles"): "sm__cycles_active.avg",
    ("GPU Speed Of Light Throughput", "SM Frequency"): "gpc__cycles_elapsed.avg.per_second",
    ("Compute Workload Analysis", "Executed Ipc Active"): "sm__inst_executed.avg.per_cycle_active",
    ("Compute Workload Analysis", "Executed Ipc Elapsed"): "sm__inst_executed.avg.per_cycle_elapsed",
    ("Compute Workload Analysis", "Issue Slots Busy"): "sm__inst_issued.avg.pct_of_peak_sustained_elapsed",
    ("Compute Workload Analysis", "Issued Ipc Active"): "sm__inst_issued.avg.per_cycle_active",
    ("Compute Workload Analysis", "SM Busy"): "sm__instruction_throughput.avg.pct_of_peak_sustained_elapsed",
    ("Launch Statistics", "# SMs"): "launch__sm_count",
    ("Launch Statistics", "# TPCs"): "launch__tpc_count",
    ("Launch Statistics", "Block Size"): "launch__block_size",
    ("Launch Statistics", "Cluster Size"): "launch__cluster_size",
    ("Launch Statistics", "Driver Shared Memory Per Block"): "launch__shared_mem_per_block_driver",
    ("Launch Statistics", "Dynamic Shared Memory Per Block"): "launch__shared_mem_per_block_dynamic",
    ("Launch Statistics", "Grid Size"): "launch__grid_size",
    ("Launch Statistics", "Registers Per Thread"): "launch__registers_per_thread",
    ("Launch Statistics", "Shared Memory Configuration Size"): "launch__shared_mem_config_size",
    ("Launch Statistics", "Stack Size"): "launch__stack_size",
    ("Launch Statistics", "Static Shared Memory Per Block"): "launch__shared_mem_per_block_static",
    ("Launch Statistics", "Threads"): "launch__thread_count",
    ("Launch Statistics", "Uses Green Context"): "launch__uses_green_context",
    ("Launch Statistics", "Waves Per SM"): "launch__waves_per_multiprocessor",
    ("Memory Workload Analysis", "L1/TEX Hit Rate"): "l1tex__t_sector_hit_rate.pct",
    ("Memory Workload Analysis", "L2 Hit Rate"): "lts__t_sector_hit_rate.pct",
    (
        "Memory Workload Analysis",
        "L2 Compression Success Rate",
    ): "lrc__average_ilc_input_sector_success_rate.pct",
    (
        "Memory Workload Analysis",
        "L2 Compression Ratio",
    ): "lrc__average_ilc_output_sector_compression_achieved_rate.pct",
    ("Memory Workload Analysis", "L2 Compression Input Sectors"): "lrc__ilc_input_sectors.sum",
    ("Memory Workload Analysis", "L2 Persisting Size"): "launch__persisting_l2_cache_size",
    (
        "Memory Workload Analysis",
        "Local Memory Spilling Request Overhead",
    ): "derived__local_spilling_requests_pct",
    ("Memory Workload Analysis", "Local Memory Spilling Requests"): "derived__local_spilling_requests",
    (
        "Memory Workload Analysis",
        "Max Bandwidth",
    ): "gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed",
    (
        "Memory Workload Analysis",
        "Mem Busy",
    ): "gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed",
    ("Memory Workload Analysis", "Mem Pipes Busy"): "sm__memory_throughput.avg.pct_of_peak_sustained_elapsed",
    ("Memory Workload Analysis", "Memory Throughput"): "dram__bytes.sum.per_second",
    ("Occupancy", "Achieved Active Warps Per SM"): "sm__warps_active.avg.per_cycle_active",
    ("Occupancy", "Achieved Occupancy"): "sm__warps_active.avg.pct_of_peak_sustained_active",
    ("Occupancy", "Block Limit Barriers"): "launch__occupancy_limit_barriers",
    ("Occupancy", "Block Limit Registers"): "launch__occupancy_limit_registers",
    ("Occupancy", "Block Limit SM"): "launch__occupancy_limit_blocks",
    ("Occupancy", "Block Limit Shared Mem"): "launch__occupancy_limit_shared_mem",
    ("Occupancy", "Block Limit Warps"): "launch__occupancy_limit_warps",
    ("Occupancy", "Cluster Occupancy"): "launch__occupancy_cluster_pct",
    ("Occupancy", "Max Active Clusters"): "launch__cluster_max_active",
    ("Occupancy", "Max Cluster Size"): "launch__cluster_max_potential_size",
    ("Occupancy", "Overall GPU Occupancy"): "launch__occupancy_cluster_gpu_pct",
    ("Occupancy", "Theoretical Active Warps per SM"): "sm__maximum_warps_avg_per_active_cycle",
    ("Occupancy", "Theoretical Occupancy"): "sm__maximum_warps_per_active_cycle_pct",
}

#: ncu message types (rule results), as the details page prints them
RULE_TYPES = {0: "", 1: "INF", 2: "OPT", 3: "WRN", 4: "ERR"}
SPEEDUP_TYPES = {0: "", 1: "local", 2: "global"}



# ------------------------------------------------------------ one launch
@dataclass
class Launch:
    """One profiled kernel launch (an ncu 'result'), whichever file it came from."""

    id: int
    name: str  # demangled name as the source prints it
    base_name: str  # the function's base name (ncu's default display name)
    mangled: str | None = None
    nvtx: tuple[str, ...] = ()  # the parts of the canonical NVTX path (profctl.nvtx.canonical_path)
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    registers: int | None = None
    shared_mem_bytes: int | None = None
    device: str | None = None
    cc: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    details: dict[str, float] = field(default_factory=dict)  # details-page values with no known metric name
    rules: list[dict[str, Any]] = field(default_factory=list)

    @property
    def nvtx_range(self) -> str | None:
        return " | ".join(self.nvtx) if self.nvtx else None

    def to_dict(self) -> dict[str, Any]:
        """As JSON (the child process that reads a report hands launches back so)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Launch:
        """A Launch from its JSON (tuples were lists)."""
        x = dict(d)
        for k in ("grid", "block"):
            if x.get(k) is not None:
                x[k] = tuple(x[k])
        x["nvtx"] = tuple(x.get("nvtx") or ())
        return cls(**x)

    def set_nvtx(self, push_pop: dict[str, list[str]], start_end: dict[str, list[str]]) -> None:
        """The launch's NVTX state -> the parts of its canonical path."""
        self.nvtx = canonical_parts(push_pop, start_end)

    def set_name(self, name: str | None, mangled: str | None = None) -> None:
        """The kernel's name as shown and keyed: demangled when the tool printed a mangled one, from the mangled
        name when the tool printed only a generic base (``Kernel``); `base_name` follows unless the tool named
        the function itself."""
        raw = name.strip() if isinstance(name, str) else ""
        self.mangled = mangled or (raw if raw.startswith("_Z") else None) or self.mangled
        self.name = readable(raw, self.mangled)
        if not self.base_name or self.base_name == raw:
            self.base_name = base_name(self.name)

    @property
    def duration_ns(self) -> float | None:
        return self.metrics.get("gpu__time_duration.sum")

    def identity(self) -> dict[str, Any]:
        """What the launch list shows (and the summary keeps in meta): everything but the metrics."""
        return {
            "id": self.id,
            "kernel": self.base_name,
            "name": self.name,
            "nvtx_range": self.nvtx_range,
            "grid": list(self.grid) if self.grid else None,
            "block": list(self.block) if self.block else None,
            "registers": self.registers,
            "shared_mem_bytes": self.shared_mem_bytes,
            "duration_ns": self.duration_ns,
        }

    def fill_launch_fields(self) -> None:
        """Take grid/block/registers/shared memory from launch__* metrics where the source gave no columns."""
        m = self.metrics
        if self.grid is None and all(f"launch__grid_dim_{a}" in m for a in "xyz"):
            self.grid = tuple(int(m[f"launch__grid_dim_{a}"]) for a in "xyz")  # type: ignore[assignment]
        if self.block is None and all(f"launch__block_dim_{a}" in m for a in "xyz"):
            self.block = tuple(int(m[f"launch__block_dim_{a}"]) for a in "xyz")  # type: ignore[assignment]
        if self.registers is None and "launch__registers_per_thread" in m:
            self.registers = int(m["launch__registers_per_thread"])
        if self.shared_mem_bytes is None:
            if "launch__shared_mem_per_block" in m:
                self.shared_mem_bytes = int(m["launch__shared_mem_per_block"])
            elif "launch__shared_mem_per_block_static" in m or "launch__shared_mem_per_block_dynamic" in m:
                self.shared_mem_bytes = int(
                    m.get("launch__shared_mem_per_block_static", 0)
                    + m.get("launch__shared_mem_per_block_dynamic", 0)
                    + m.get("launch__shared_mem_per_block_driver", 0)
                )


# ------------------------------------------------------------ units
_TIME = {
    "ns": 1.0,
    "nsecond": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "s": 1e9,
    "second": 1e9,
}
_TIME_PER = {
    "ns": 1e-9,
    "nsecond": 1e-9,
    "us": 1e-6,
    "usecond": 1e-6,
    "ms": 1e-3,
    "msecond": 1e-3,
    "s": 1.0,
    "second": 1.0,
}
_PREFIX = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_SCALABLE = (
    "byte",
    "hz",
    "inst",
    "cycle",
    "sector",
    "request",
    "warp",
    "thread",
    "block",
    "transaction",
    "wavefront",
    "register",
    "flop",
    "op",
    "pass",
    "cluster",
    "SM",
    "bit",
)
_UNIT_RE = re.compile(r"^(?P<p>[KkMGTP]?)(?P<b>" + "|".join(_SCALABLE) + r")$", re.I)


def to_base(value: float, unit: str | None) -> tuple[float, str]:
    """`value` in `unit` -> (value in base units, base unit): us -> ns, Kbyte -> byte, Gbyte/s -> byte/s,
    Ghz -> hz. ncu's prefixes are decimal (1 Kbyte = 1000 bytes). Unknown units pass through unchanged."""
    u = (unit or "").strip()
    if not u or u == "%":
        return value, u
    if u in _TIME:
        return value * _TIME[u], "ns"
    num, _, den = u.partition("/")
    factor = 1.0
    m = _UNIT_RE.match(num)
    if m:
        factor = _PREFIX[m.group("p")]
        base = m.group("b").lower() if m.group("b").lower() in ("hz", "byte") else m.group("b")
        num = base
    if den:
        if den in _TIME_PER:
            factor /= _TIME_PER[den]
            den = "s"
        return value * factor, f"{num}/{den}"
    return value * factor, num


_NUM_RE = re.compile(r"^[+-]?(\d{1,3}(,\d{3})+|\d+)?(\.\d+)?([eE][+-]?\d+)?$")


def parse_number(text: str) -> float | None:
    """ncu's printed numbers ('1,980,000', '77.10', '1e-05'); None for text ('n/a', 'PolicySpread')."""
    t = text.strip()
    if not t or not any(c.isdigit() for c in t) or not _NUM_RE.match(t):
        return None
    try:
        v = float(t.replace(",", ""))
    except ValueError:
        return None
    return v if math.isfinite(v) else None  # '1e999' is a damaged cell, not a number


# ------------------------------------------------------------ container
NCU_REP_MAGIC = b"NVR\x00"


def _varint(b: bytes, i: int) -> tuple[int, int]:
    r = s = 0
    while True:
        if i >= len(b):
            raise ValueError("varint past end")
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if not c & 0x80:
            return r, i
        if s > 63:
            raise ValueError("varint too long")


def _pb_fields(b: bytes) -> Iterable[tuple[int, int, Any]]:
    """Decode one protobuf message's top-level fields (number, wire type, value); no schema needed."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        v: Any
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            v, i = b[i : i + 8], i + 8
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i : i + n], i + n
        elif wt == 5:
            v, i = b[i : i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        if i > len(b):
            raise ValueError("field past end")
        yield num, wt, v


@dataclass(frozen=True)
class RepInfo:
    """What the container of a .ncu-rep says before any library opens it."""

    blocks: int
    tool_version: str | None  # the Nsight Compute version that wrote it, e.g. "2025.3.1.0"


def check_rep(path: Path, data: bytes | None = None) -> RepInfo:
    """Walk the .ncu-rep container (magic, file header, then blocks of [u32 header length][header][payload]),
    so a truncated or foreign file is a one-line BadReport instead of a silently shorter report: the
    ncu_report library loads a truncated file without complaint and returns fewer (or no) results.
    """
    if data is None:
        try:
            data = path.read_bytes()
        except OSError as e:
            raise BadReport(f"{path}: cannot read: {e.strerror}") from None
    n = len(data)
    if n < 8 or data[:4] != NCU_REP_MAGIC:
        raise BadReport(f"{path}: not an Nsight Compute report (no NVR header)")
    (hlen,) = struct.unpack_from("<I", data, 4)
    i = 8 + hlen
    if i > n:
        raise BadReport(f"{path}: truncated Nsight Compute report ({n} bytes, ends inside its file header)")
    version: str | None = None
    blocks = 0
    while i < n:
        if i + 4 > n:
            raise BadReport(
                f"{path}: truncated Nsight Compute report ({n} bytes, ends inside block {blocks + 1})"
            )
        (bh,) = struct.unpack_from("<I", data, i)
        start = i + 4
        if start + bh > n:
            raise BadReport(
                f"{path}: truncated Nsight Compute report ({n} bytes, ends inside block {blocks + 1})"
            )
        payload = 0
        try:
            for num, wt, v in _pb_fields(data[start : start + bh]):
                if num == 5 and wt == 0:
                    payload = v
                elif num == 3 and wt == 2 and version is None:
                    version = _tool_version(v)
        except ValueError:
            raise BadReport(
                f"{path}: corrupt Nsight Compute report (block {blocks + 1} at byte {i} does not decode)"
            ) from None
        i = start + bh + payload
        blocks += 1
        if i > n:
            raise BadReport(f"{path}: truncated Nsight Compute report ({n} bytes; block {blocks} needs {i})")
    if blocks == 0:
        raise BadReport(f"{path}: truncated Nsight Compute report ({n} bytes, no result blocks)")
    return RepInfo(blocks=blocks, tool_version=version)


_VERSION_RE = re.compile(rb"^(\d{4}\.\d+(?:\.\d+)*)")


def _tool_version(inline: bytes) -> str | None:
    """A header's inline message may hold {8: {1: name, 2: version}} pairs; take 'Nsight Compute*'."""
    try:
        for num, wt, v in _pb_fields(inline):
            if num == 8 and wt == 2:
                kv = {k: val for k, w, val in _pb_fields(v) if w == 2}
                name = kv.get(1, b"")
                if name.startswith(b"Nsight Compute"):
                    m = _VERSION_RE.match(kv.get(2, b""))
                    if m:
                        return m.group(1).decode()
    except ValueError:
        return None
    return None


def version_tuple(v: str | None) -> tuple[int, ...]:
    if not v:
        return ()
    m = re.match(r"(\d+(?:\.\d+)*)", v)
    return tuple(int(x) for x in m.group(1).split(".")) if m else ()


def newer_than(report: str | None, reader: str | None) -> bool:
    """True when the report's writer is a newer Nsight Compute (year.minor.patch) than the reader."""
    r, w = version_tuple(report)[:3], version_tuple(reader)[:3]
    return bool(r and w) and r > w


# ------------------------------------------------------------ summary
def summarize(
    launches: Sequence[Launch], *, path: Path, tool_version: str | None, by_range: bool = True, reader: str
) -> Any:
    """Group launches per (kernel identity, canonical NVTX path) into a Summary: metrics averaged over launches,
    count = launches, times from gpu__time_duration.sum (0, with a warning, when the report did not collect it).
    The group key is profctl.kernels.kernel_id, so a report and its CSV (which spell names differently) give
    the same rows."""
    if not launches:
        raise BadReport(f"{path}: no profiled kernel launch in the report (ncu's filters matched nothing?)")
    groups: dict[tuple[str, str | None], list[Launch]] = {}
    for ln in sorted(launches, key=lambda x: x.id):
        key = (kernel_id(ln.name) or f"<unnamed launch {ln.id}>", ln.nvtx_range if by_range else None)
        groups.setdefault(key, []).append(ln)
    first: dict[str, int] = {}  # each kernel's first profiled launch (ids count launches in order)
    for (kid, _), ls in groups.items():
        first[kid] = min(first.get(kid, ls[0].id), ls[0].id)
    rows = [_row(kid, rng, ls, by_range, first_call=ls[0].id == first[kid]) for (kid, rng), ls in groups.items()]
    meta: dict[str, Any] = {
        "reader": reader,
        "launches": [x.identity() for x in sorted(launches, key=lambda x: x.id)],
    }
    _devices(launches, meta)
    _check_launches(launches, meta)
    return Summary(
        sources=(Source(path=str(path), tool="ncu", tool_version=tool_version),),
        kernels=tuple(rows),
        meta=meta,
    )


def _row(kid: str, rng: str | None, ls: list[Launch], by_range: bool, *, first_call: bool = False) -> Any:
    """One KernelRow from the launches of one kernel (in one range), their durations kept as samples
    (`first_call`: the first of them is the kernel's first profiled launch)."""
    first = ls[0]
    name = first.name or kid
    durs = [x.duration_ns for x in ls if x.duration_ns is not None]
    st = durations_stats(durs)
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    units: dict[str, str] = {}
    for x in ls:
        units.update(x.units)
        for k, v in x.metrics.items():
            sums[k] = sums.get(k, 0.0) + v
            counts[k] = counts.get(k, 0) + 1
    extra: dict[str, Any] = {
        "base_name": first.base_name,
        "ids": [x.id for x in ls],
        "grid": list(first.grid) if first.grid else None,
        "block": list(first.block) if first.block else None,
        "registers": first.registers,
        "shared_mem_bytes": first.shared_mem_bytes,
        "units": units,
    }
    if durs:
        extra.update(sample_fields(durs, first_call=first_call and first.duration_ns is not None))
    if first.mangled:
        extra["mangled"] = first.mangled
    if not by_range:
        extra["nvtx_ranges"] = sorted({x.nvtx_range for x in ls if x.nvtx_range})
    rules = _merge_rules(ls)
    if rules:
        extra["rules"] = rules
    details = {k: v for x in ls for k, v in x.details.items()}
    if details:
        extra["details"] = details
    return KernelRow(
        tool="ncu", name=name,
        short_name=short_name(name if is_generic(first.base_name) or not first.base_name else first.base_name),
        kernel_class=classify(name), nvtx_range=rng, count=len(ls), total_ns=st["total_ns"], avg_ns=st["avg_ns"],
        med_ns=st["med_ns"], min_ns=st["min_ns"], max_ns=st["max_ns"], std_ns=st["std_ns"],
        metrics={k: sums[k] / counts[k] for k in sums}, extra=extra, kernel_id=kid)


def _devices(launches: Sequence[Launch], meta: dict[str, Any]) -> None:
    """``meta["devices"]``: the GPU names the launches name (``device__attribute_display_name``, or a CSV's
    ``Device`` column when it holds a name rather than an index); ``meta["device_info"]`` with the compute
    capability."""
    info: dict[tuple[str, str], None] = {}
    for x in launches:
        info[(x.device or "", x.cc or "")] = None
    names = sorted({d for d, _ in info if d and not d.isdigit()})
    if names:
        meta["devices"] = names
    elif any(d for d, _ in info):
        warn(meta, "the report names its GPU only by index (Device column); no peak figures without the model "
                   "(the raw page's device__attribute_display_name, or the report itself, names it)")
    if info:
        meta["device_info"] = [{"name": d or None, "cc": c or None} for d, c in sorted(info)]


def _check_launches(launches: Sequence[Launch], meta: dict[str, Any]) -> None:
    """Warnings for what would otherwise read silently wrong: no duration metric, all times zero, unnamed
    launches."""
    durs = [x.duration_ns for x in launches]
    if all(d is None for d in durs):
        warn(meta, "no launch has gpu__time_duration.sum: kernel times are 0 (collect it, e.g. --metrics "
                   "gpu__time_duration.sum or --section SpeedOfLight)")
    elif not any(d for d in durs if d is not None):
        warn(meta, "every launch's gpu__time_duration.sum is 0: kernel times are 0 (units not read?)")
    elif any(d is None for d in durs):
        n = sum(1 for d in durs if d is None)
        warn(meta, f"{n} of {len(durs)} launches have no gpu__time_duration.sum: their time counts as 0")
    unnamed = [x.id for x in launches if not x.name]
    if unnamed:
        warn(meta, f"{len(unnamed)} launch(es) without a kernel name (IDs {', '.join(map(str, unnamed[:5]))}"
                   f"{', ...' if len(unnamed) > 5 else ''})")


def _merge_rules(ls: Sequence[Launch]) -> list[dict[str, Any]]:
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for x in ls:
        for r in x.rules:
            seen.setdefault((r.get("section", ""), r.get("rule", "")), r)
    return list(seen.values())
