"""The unified kernel summary (``profctl.summary/1``): what every reader returns and every renderer consumes.

Readers for nsys SQLite, ncu reports and torch.profiler traces all produce a :class:`Summary`; the renderers,
``profctl report`` and the comparison code only ever see this type. Fields may be added, never renamed.
See docs/summary-schema.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

from profctl.kernels import kernel_id

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_ID = "profctl.summary/1"

KernelClass = Literal[
    "flash_fwd", "flash_bwd", "gemm", "softmax", "elementwise", "reduce", "memcpy", "memset", "other"
]
KERNEL_CLASSES: tuple[str, ...] = (
    "flash_fwd", "flash_bwd", "gemm", "softmax", "elementwise", "reduce", "memcpy", "memset", "other",
)
RangeStyle = Literal["push_pop", "start_end"]
Tool = Literal["nsys", "ncu", "torch", "bench"]


@dataclass(frozen=True)
class Source:
    """One input file the summary was read from."""

    path: str
    tool: str
    tool_version: str | None = None


@dataclass(frozen=True)
class KernelRow:
    """One kernel name (optionally within one NVTX range), aggregated over its launches.

    Times are nanoseconds. ``metrics`` maps ncu metric names to values in base units (bytes, ns, percent,
    counts); it is empty for timeline tools.
    """

    tool: str
    name: str
    short_name: str
    kernel_class: str
    nvtx_range: str | None
    count: int
    total_ns: float
    avg_ns: float
    med_ns: float
    min_ns: float
    max_ns: float
    std_ns: float
    metrics: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    #: the canonical kernel identity (profctl.kernels.kernel_id): equal for the same kernel in every tool;
    #: filled from ``name`` when not given (summaries written before it existed)
    kernel_id: str = ""

    def __post_init__(self) -> None:
        if self.kernel_class not in KERNEL_CLASSES:
            raise ValueError(f"kernel_class {self.kernel_class!r} is not one of {', '.join(KERNEL_CLASSES)}")
        if self.count < 0:
            raise ValueError("count must be >= 0")
        if not self.kernel_id:
            object.__setattr__(self, "kernel_id", kernel_id(self.name))


@dataclass(frozen=True)
class CpuOpRow:
    """One CPU operator (``aten::mm``, a backward node; optionally within one range path), aggregated over its
    calls: the times are its *self* times (children's time left out), in nanoseconds. torch.profiler traces give
    them; a trace without GPU activity gives nothing else."""

    tool: str
    name: str
    op_class: str
    nvtx_range: str | None
    count: int
    total_ns: float
    avg_ns: float
    med_ns: float
    min_ns: float
    max_ns: float
    std_ns: float
    cpu_total_ns: float = 0.0  # inclusive time (children included), summed
    extra: dict[str, Any] = field(default_factory=dict)


def timed_rows(s: Summary) -> list[KernelRow]:
    """The rows a comparison times: the GPU kernels (memcpy/memset left out); for a CPU-only torch trace (no
    kernels), its CPU ops by self time, standing in for kernels (their ``extra['device']`` says cpu)."""
    rows = [k for k in s.kernels if k.extra.get("kind", "kernel") == "kernel" and k.kernel_class not in
            ("memcpy", "memset")]
    if rows or not s.cpu_ops:
        return rows
    return [KernelRow(tool=c.tool, name=c.name, short_name=c.name, kernel_class=c.op_class, nvtx_range=c.nvtx_range,
                      count=c.count, total_ns=c.total_ns, avg_ns=c.avg_ns, med_ns=c.med_ns, min_ns=c.min_ns,
                      max_ns=c.max_ns, std_ns=c.std_ns, extra=dict(c.extra, device="cpu")) for c in s.cpu_ops]


@dataclass(frozen=True)
class RangeRow:
    """One NVTX range text (per domain and style), aggregated over its instances.

    ``range_total_ns`` sums the ranges' own CPU-side durations; ``gpu_proj_total_ns`` the GPU time they
    project as nsys' nvtx_gpu_proj_sum defines it: per instance, from the start of the first GPU op launched
    inside the range to the end of the last one (gaps included), summed over instances.
    """

    name: str
    domain: str | None
    style: str
    count: int
    range_total_ns: float
    gpu_proj_total_ns: float | None
    gpu_ops: int | None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Summary:
    """A whole summary: where it came from, its kernels and its ranges."""

    sources: tuple[Source, ...]
    kernels: tuple[KernelRow, ...]
    ranges: tuple[RangeRow, ...] = ()
    schema: str = SCHEMA_ID
    meta: dict[str, Any] = field(default_factory=dict)
    cpu_ops: tuple[CpuOpRow, ...] = ()

    @property
    def warnings(self) -> list[str]:
        """What the reader found odd in the report (``meta["warnings"]``): the summary is still valid."""
        w = self.meta.get("warnings")
        return [str(x) for x in w] if isinstance(w, list) else []

    # ---- conversions -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "schema": self.schema,
            "sources": [asdict(s) for s in self.sources],
            "kernels": [asdict(k) for k in self.kernels],
            "ranges": [asdict(r) for r in self.ranges],
        }
        if self.cpu_ops:
            d["cpu_ops"] = [asdict(c) for c in self.cpu_ops]
        if self.meta:
            d["meta"] = self.meta
        return d

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False, default=str)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Summary:
        if not isinstance(d, dict) or d.get("schema") != SCHEMA_ID:
            got = d.get("schema") if isinstance(d, dict) else None
            raise ValueError(f"not a {SCHEMA_ID} document (schema={got!r})")
        kernels, cpu = [], [CpuOpRow(**_known(CpuOpRow, c)) for c in d.get("cpu_ops", [])]
        for k in d.get("kernels", []):
            if isinstance(k, dict) and isinstance(k.get("extra"), dict) and k["extra"].get("device") == "cpu":
                cpu.append(_cpu_from_kernel(k))  # written before cpu_ops existed: CPU ops listed as kernels
            else:
                kernels.append(KernelRow(**_known(KernelRow, k)))
        return cls(
            sources=tuple(Source(**_known(Source, s)) for s in d.get("sources", [])),
            kernels=tuple(kernels),
            ranges=tuple(RangeRow(**_known(RangeRow, r)) for r in d.get("ranges", [])),
            meta=dict(d.get("meta", {})),
            cpu_ops=tuple(cpu),
        )

    def kernels_df(self) -> pd.DataFrame:
        """Kernels as a DataFrame, metrics flattened into ``metric:<name>`` columns."""
        import pandas as pd

        rows = []
        for k in self.kernels:
            r = {f.name: getattr(k, f.name) for f in fields(k) if f.name not in ("metrics", "extra")}
            r.update({f"metric:{m}": v for m, v in k.metrics.items()})
            rows.append(r)
        cols = [f.name for f in fields(KernelRow) if f.name not in ("metrics", "extra")]
        return pd.DataFrame(rows, columns=None if rows else cols)

    def cpu_ops_df(self) -> pd.DataFrame:
        """CPU ops as a DataFrame (self times)."""
        import pandas as pd

        cols = [f.name for f in fields(CpuOpRow) if f.name != "extra"]
        return pd.DataFrame([{c: getattr(r, c) for c in cols} for r in self.cpu_ops], columns=cols)

    def ranges_df(self) -> pd.DataFrame:
        import pandas as pd

        cols = [f.name for f in fields(RangeRow) if f.name != "extra"]
        return pd.DataFrame([{c: getattr(r, c) for c in cols} for r in self.ranges], columns=cols)

    def to_dataframe(self) -> pd.DataFrame:
        return self.kernels_df()


def _known(cls: type, d: dict[str, Any]) -> dict[str, Any]:
    """Drop keys a newer writer added, so old readers keep working (fields may be added, not renamed)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def _cpu_from_kernel(k: dict[str, Any]) -> CpuOpRow:
    x = dict(k.get("extra") or {})
    return CpuOpRow(tool=str(k.get("tool", "torch")), name=str(k.get("name", "")),
                    op_class=str(k.get("kernel_class", "other")), nvtx_range=k.get("nvtx_range"),
                    count=int(k.get("count", 0)), total_ns=float(k.get("total_ns", 0.0)),
                    avg_ns=float(k.get("avg_ns", 0.0)), med_ns=float(k.get("med_ns", 0.0)),
                    min_ns=float(k.get("min_ns", 0.0)), max_ns=float(k.get("max_ns", 0.0)),
                    std_ns=float(k.get("std_ns", 0.0)), cpu_total_ns=float(x.pop("cpu_total_ns", 0.0) or 0.0),
                    extra=x)


def concat(summaries: Iterable[Summary]) -> Summary:
    """Concatenate summaries (e.g. several reports given to ``profctl report``): sources, kernels and ranges
    one after the other, nothing joined (profctl.analysis.crosstool joins the same kernel across tools)."""
    ss = list(summaries)
    return Summary(
        sources=tuple(s for x in ss for s in x.sources),
        kernels=tuple(k for x in ss for k in x.kernels),
        ranges=tuple(r for x in ss for r in x.ranges),
        meta=_merged_meta(ss) if len(ss) > 1 else (ss[0].meta if ss else {}),
        cpu_ops=tuple(c for x in ss for c in x.cpu_ops),
    )


def _merged_meta(ss: Sequence[Summary]) -> dict[str, Any]:
    """The meta of concatenated summaries: their count, and the warnings and devices of all of them."""
    meta: dict[str, Any] = {"merged": len(ss)}
    warnings = [w for x in ss for w in x.warnings]
    if warnings:
        meta["warnings"] = warnings
    devices = [d for x in ss for d in (x.meta.get("devices") or []) if isinstance(d, str)]
    if devices:
        meta["devices"] = sorted(set(devices))
    return meta


_NUM = (int, float)


def validate(s: Summary) -> None:
    """ValueError naming the first field of `s` whose value has the wrong type or is not a finite number: what a
    summary read from someone's JSON must pass before renderers see it."""
    def num(where: str, v: Any, *, none: bool = False, integer: bool = False) -> None:
        if v is None and none:
            return
        ok = isinstance(v, int if integer else _NUM) and not isinstance(v, bool)
        if not ok or (isinstance(v, float) and not math.isfinite(v)):
            raise ValueError(f"{where} is {v!r}, not a finite number")

    def text(where: str, v: Any, *, none: bool = False) -> None:
        if not (isinstance(v, str) or (v is None and none)):
            raise ValueError(f"{where} is {v!r}, not text")

    if not isinstance(s.meta, dict):
        raise ValueError("meta is not an object")
    for i, src in enumerate(s.sources):
        text(f"sources[{i}].path", src.path)
        text(f"sources[{i}].tool", src.tool)
        text(f"sources[{i}].tool_version", src.tool_version, none=True)
    rows: list[Any] = [*s.kernels, *s.cpu_ops]
    for i, r in enumerate(rows):
        w = f"kernels[{i}]" if i < len(s.kernels) else f"cpu_ops[{i - len(s.kernels)}]"
        for f in ("tool", "name"):
            text(f"{w}.{f}", getattr(r, f))
        text(f"{w}.nvtx_range", r.nvtx_range, none=True)
        num(f"{w}.count", r.count, integer=True)
        for f in ("total_ns", "avg_ns", "med_ns", "min_ns", "max_ns", "std_ns"):
            num(f"{w}.{f}", getattr(r, f))
        metrics = getattr(r, "metrics", {})
        if not isinstance(metrics, dict) or not isinstance(getattr(r, "extra", {}), dict):
            raise ValueError(f"{w}.metrics or .extra is not an object")
        for k, v in metrics.items():
            num(f"{w}.metrics[{k!r}]", v)
    for i, g in enumerate(s.ranges):
        text(f"ranges[{i}].name", g.name)
        text(f"ranges[{i}].domain", g.domain, none=True)
        num(f"ranges[{i}].count", g.count, integer=True)
        num(f"ranges[{i}].range_total_ns", g.range_total_ns)
        num(f"ranges[{i}].gpu_proj_total_ns", g.gpu_proj_total_ns, none=True)
        num(f"ranges[{i}].gpu_ops", g.gpu_ops, none=True, integer=True)


def warn(meta: dict[str, Any], message: str) -> None:
    """Add a warning to a summary's meta (``meta["warnings"]``): something odd in the report, named."""
    meta.setdefault("warnings", []).append(message)


def durations_stats(durations_ns: Sequence[float]) -> dict[str, float]:
    """count/total/avg/med/min/max/std as nsys stats defines them (median of even counts = mean of the middle
    two; std is the sample standard deviation, 0 for a single instance)."""
    xs = sorted(float(x) for x in durations_ns)
    n = len(xs)
    if n == 0:
        return {"count": 0, "total_ns": 0.0, "avg_ns": 0.0, "med_ns": 0.0, "min_ns": 0.0, "max_ns": 0.0, "std_ns": 0.0}
    total = sum(xs)
    avg = total / n
    med = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    var = sum((x - avg) ** 2 for x in xs) / (n - 1) if n > 1 else 0.0
    return {"count": n, "total_ns": total, "avg_ns": avg, "med_ns": med, "min_ns": xs[0], "max_ns": xs[-1],
            "std_ns": var ** 0.5}


def busy_fields(busy_ns: float | None, span_ns: float) -> dict[str, float | None]:
    """A range row's GPU-busy fields (``extra``): the union of its instances' own GPU operations (kernels, memcpy,
    memset; overlaps merged, gaps left out), the range's time they are a share of (per instance from its start to
    its end or its last operation's end, whichever is later), and the share; None where the tool cannot tell."""
    if busy_ns is None:
        return {"gpu_busy_ns": None, "gpu_span_ns": span_ns, "gpu_busy_share": None}
    return {"gpu_busy_ns": busy_ns, "gpu_span_ns": span_ns,
            "gpu_busy_share": min(busy_ns / span_ns, 1.0) if span_ns > 0 else None}


__all__ = [
    "KERNEL_CLASSES", "SCHEMA_ID", "CpuOpRow", "KernelRow", "RangeRow", "Source", "Summary", "busy_fields",
    "concat", "durations_stats", "validate", "warn",
]

