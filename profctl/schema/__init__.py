"""The unified kernel summary (``profctl.summary/1``): what every reader returns and every renderer consumes.

Readers for nsys SQLite, ncu reports and torch.profiler traces all produce a :class:`Summary`; the renderers,
``profctl report`` and the comparison code only ever see this type. Fields may be added, never renamed.
See docs/summary-schema.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

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

    def __post_init__(self) -> None:
        if self.kernel_class not in KERNEL_CLASSES:
            raise ValueError(f"kernel_class {self.kernel_class!r} is not one of {', '.join(KERNEL_CLASSES)}")
        if self.count < 0:
            raise ValueError("count must be >= 0")


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

    # ---- conversions -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "schema": self.schema,
            "sources": [asdict(s) for s in self.sources],
            "kernels": [asdict(k) for k in self.kernels],
            "ranges": [asdict(r) for r in self.ranges],
        }
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
        return cls(
            sources=tuple(Source(**_known(Source, s)) for s in d.get("sources", [])),
            kernels=tuple(KernelRow(**_known(KernelRow, k)) for k in d.get("kernels", [])),
            ranges=tuple(RangeRow(**_known(RangeRow, r)) for r in d.get("ranges", [])),
            meta=dict(d.get("meta", {})),
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


def concat(summaries: Iterable[Summary]) -> Summary:
    """Concatenate summaries (e.g. several reports given to ``profctl report``): sources, kernels and ranges
    one after the other, nothing joined (profctl.analysis.crosstool joins the same kernel across tools)."""
    ss = list(summaries)
    return Summary(
        sources=tuple(s for x in ss for s in x.sources),
        kernels=tuple(k for x in ss for k in x.kernels),
        ranges=tuple(r for x in ss for r in x.ranges),
        meta={"merged": len(ss)} if len(ss) > 1 else (ss[0].meta if ss else {}),
    )


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


__all__ = [
    "KERNEL_CLASSES", "SCHEMA_ID", "KernelRow", "RangeRow", "Source", "Summary", "concat", "durations_stats",
]
