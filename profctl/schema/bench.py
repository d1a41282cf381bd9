"""A bench row (``profctl.bench/1``): one point of a ``profctl bench`` sweep, as bench.json holds it and every
reader of bench rows (report, compare, show, the Python API) sees it.

A row is the JSON object profctl writes, unchanged: the case (the attention shape and pass, or the model step),
what the workload child measured (its fields pass through as it sends them, whatever their names), what profctl
adds (TFLOP/s, % of peak, speedup, clocks, warnings) and where it ran. :class:`BenchRow` is that object with a
typed name for each field profctl reads, so code says ``row.median_ms`` instead of ``row["median_ms"]``; it is a
``dict`` underneath, so the file, ``-f json`` and ``BenchResult.to_dataframe()`` keep their keys and key order,
fields profctl does not know (an older or newer writer's) are kept as they are, and a field a row lacks reads as
None. Fields may be added, never renamed (as in ``profctl.summary/1``); a row carries no version key: files
written before this type existed are version 1.

The case fields, which name what a row measured and pair rows across runs, are defined here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Generic, TypeVar, overload

from profctl.shapes import Shape

SCHEMA_ID = "profctl.bench/1"

#: the fields that name an attention case: its shape, pass, layout and device (rows of one case pair on them)
ATTENTION_CASE_FIELDS: tuple[str, ...] = (
    "batch", "seqlen_q", "seqlen_kv", "heads", "kv_heads", "head_dim", "dtype", "causal", "pass", "layout", "device",
    "window", "docs",
)
#: the fields that name a model case (profctl bench --model)
MODEL_CASE_FIELDS: tuple[str, ...] = (
    "model", "layers", "kv_heads", "mode", "batch", "seqlen", "dtype", "device", "memory_limit_gib",
)
#: the case fields a row read from a file must have to be placed in a table (the rest came later, and rows of
#: older files lack them), with the backend
ATTENTION_REQUIRED: tuple[str, ...] = ("backend", *(f for f in ATTENTION_CASE_FIELDS
                                                    if f not in ("causal", "layout", "device", "window", "docs")))
MODEL_REQUIRED: tuple[str, ...] = ("backend", *(f for f in MODEL_CASE_FIELDS
                                                if f in ("model", "mode", "batch", "seqlen", "dtype")))

T = TypeVar("T")


class _Field(Generic[T]):
    """One named field of a row: reads the key (None when the row lacks it), writes it."""

    __slots__ = ("key",)

    def __init__(self, key: str = "") -> None:
        self.key = key

    def __set_name__(self, owner: type, name: str) -> None:
        if not self.key:
            self.key = name

    @overload
    def __get__(self, row: None, owner: type) -> _Field[T]: ...

    @overload
    def __get__(self, row: BenchRow, owner: type) -> T: ...

    def __get__(self, row: BenchRow | None, owner: type) -> Any:
        return self if row is None else row.get(self.key)

    def __set__(self, row: BenchRow, value: T) -> None:
        row[self.key] = value


class BenchRow(dict[str, Any]):
    """One bench row: the JSON object itself (a dict, keys in the order they were written), with typed fields."""

    __slots__ = ()
    schema: ClassVar[str] = SCHEMA_ID

    # ---- what ran, and as what
    backend: _Field[str] = _Field()
    backend_ref: _Field[str | None] = _Field()  # the function reference a label stands for
    label: _Field[str | None] = _Field()  # the run's name for the backend (--label)
    workload: _Field[str | None] = _Field()  # "model" for a model step; absent for attention
    # ---- the case (ATTENTION_CASE_FIELDS, MODEL_CASE_FIELDS)
    batch: _Field[int | None] = _Field()
    seqlen_q: _Field[int | None] = _Field()
    seqlen_kv: _Field[int | None] = _Field()
    heads: _Field[int | None] = _Field()
    kv_heads: _Field[int | None] = _Field()
    head_dim: _Field[int | None] = _Field()
    dtype: _Field[str | None] = _Field()
    causal: _Field[bool | None] = _Field()
    window: _Field[int | None] = _Field()  # --window: a sliding window of this many keys (absent: none)
    docs: _Field[list[int] | None] = _Field()  # --docs: [n] equal documents or their lengths (absent: one)
    causal_align: _Field[str | None] = _Field()
    pass_: _Field[str | None] = _Field("pass")
    layout: _Field[str | None] = _Field()
    device: _Field[str | None] = _Field()
    model: _Field[str | None] = _Field()
    layers: _Field[int | None] = _Field()
    mode: _Field[str | None] = _Field()
    seqlen: _Field[int | None] = _Field()
    memory_limit_gib: _Field[float | None] = _Field()
    # ---- how it went, what it measured
    status: _Field[str | None] = _Field()
    reason: _Field[str | None] = _Field()
    median_ms: _Field[float | None] = _Field()
    times_ms: _Field[list[float] | None] = _Field()
    # ---- a point timed in several processes (bench --processes): times_ms holds every process's steps in turn
    processes: _Field[int | None] = _Field()  # the processes whose steps are in times_ms (absent: one)
    times_per_process: _Field[list[int] | None] = _Field()  # how many of times_ms each process timed, in order
    process_medians_ms: _Field[list[float] | None] = _Field()  # each process's median; median_ms is their middle
    process_failures: _Field[list[str] | None] = _Field()  # "status: reason" of each process that timed nothing
    flops: _Field[float | None] = _Field()
    model_flops: _Field[float | None] = _Field()
    tflops: _Field[float | None] = _Field()
    peak_tflops: _Field[float | None] = _Field()
    pct_of_peak: _Field[float | None] = _Field()
    mfu: _Field[float | None] = _Field()
    suspect: _Field[bool | None] = _Field()
    suspect_reason: _Field[str | None] = _Field()
    roof: _Field[str | None] = _Field()  # the binding speed-of-light roof of the shape (tensor, sfu, dram)
    roof_ms: _Field[float | None] = _Field()  # the least time under it
    pct_of_roof: _Field[float | None] = _Field()  # roof_ms / median_ms, in percent
    rel_error: _Field[float | None] = _Field()
    tolerance: _Field[float | None] = _Field()
    check: _Field[str | None] = _Field()  # "ok" | "fail": the result against the reference
    peak_mem_bytes: _Field[int | None] = _Field()
    peak_mem_allocated_bytes: _Field[int | None] = _Field()
    peak_mem_reserved_bytes: _Field[int | None] = _Field()
    #: the process's peak resident host memory over the measured steps (a CPU run: no GPU counter)
    peak_host_mem_bytes: _Field[int | None] = _Field()
    #: "host" when peak_mem_bytes is peak_host_mem_bytes (a CPU run); absent for the GPU's allocator figure
    peak_mem_where: _Field[str | None] = _Field()
    torch_dtype: _Field[str | None] = _Field()
    tokens_per_s: _Field[float | None] = _Field()
    samples_per_s: _Field[float | None] = _Field()
    attn_share: _Field[float | None] = _Field()
    forward_ms: _Field[float | None] = _Field()
    backward_ms: _Field[float | None] = _Field()
    optimizer_ms: _Field[float | None] = _Field()
    part_timing_cost: _Field[float | None] = _Field()
    # ---- what profctl adds
    clocks: _Field[dict[str, Any] | None] = _Field()  # NVML samples over the point (profctl.nvml)
    clock_warning: _Field[str | None] = _Field()
    baseline: _Field[str | None] = _Field()
    speedup: _Field[float | None] = _Field()
    iqr_ratio: _Field[float | None] = _Field()
    noise_warning: _Field[str | None] = _Field()
    process_spread: _Field[float | None] = _Field()  # the largest process median over the smallest (--processes)
    process_warning: _Field[str | None] = _Field()
    host_ms: _Field[float | None] = _Field()  # the host's median time a step, between its events (GPU rows)
    host_warning: _Field[str | None] = _Field()
    # ---- where it ran (profctl.nvml.here)
    host: _Field[str | None] = _Field()
    gpu_index: _Field[int | None] = _Field()
    gpu_name: _Field[str | None] = _Field()
    gpu_uuid: _Field[str | None] = _Field()
    driver: _Field[str | None] = _Field()
    #: the file the row was read from, where several inputs are joined (profctl report); bench.json has none
    source: _Field[str | None] = _Field("_source")

    # ---- conversions
    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BenchRow:
        """A row from its JSON object (a copy): every key kept, those profctl does not know included."""
        return cls(d)

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> BenchRow:
        """`d` itself when it is a row already, else the row of its JSON object."""
        return d if isinstance(d, BenchRow) else cls.from_dict(d)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (a plain dict, keys in their order)."""
        return dict(self)

    # ---- what the row is
    @property
    def is_model(self) -> bool:
        return self.workload == "model"

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def name(self) -> str:
        """What the row measured, as runs name it: its label, else its backend."""
        return str(self.label or self.backend)

    @property
    def case_fields(self) -> tuple[str, ...]:
        return MODEL_CASE_FIELDS if self.is_model else ATTENTION_CASE_FIELDS

    def case(self) -> tuple[Any, ...]:
        """The values of the row's case fields (None for those it lacks): rows of one case have equal ones."""
        return tuple(self.get(k) for k in self.case_fields)

    def missing(self) -> list[str]:
        """The required fields (ATTENTION_REQUIRED, MODEL_REQUIRED) the row lacks."""
        return [k for k in (MODEL_REQUIRED if self.is_model else ATTENTION_REQUIRED) if k not in self]

    def shape_label(self) -> str:
        """What tables print for the case: its shape's label (``b1 s4096 h32 d128 bf16 causal``, profctl.shapes),
        a model step's ``llama-7b l4 train b2 s4096 bf16``; '?' when the row lacks a shape field."""
        if self.is_model:
            layers = f" l{self.layers}" if self.layers else ""
            kv = f" kv{self.kv_heads}" if self.kv_heads else ""
            return f"{self.model}{layers} {self.mode} b{self.batch} s{self.seqlen} {self.dtype}{kv}"
        try:
            return Shape.from_row(self).label()
        except (KeyError, TypeError, ValueError):
            return "?"

    def process_times(self) -> list[list[float]]:
        """The measured steps of each process that timed the row (``times_per_process`` splits ``times_ms``): a
        process is the unit of run-to-run noise, since one keeps a speed state for its whole life. One list for a
        row of one process, or one whose counts do not add up; none for a row without steps."""
        t = [float(x) for x in (self.times_ms or []) if isinstance(x, (int, float))]
        counts = self.times_per_process
        if not t:
            return []
        if not isinstance(counts, list) or sum(counts) != len(t) or any(not isinstance(c, int) or c <= 0
                                                                         for c in counts):
            return [t]
        out, i = [], 0
        for c in counts:
            out.append(t[i:i + c])
            i += c
        return out

    def shape_key(self) -> str:
        """The shape key of an attention row (profctl.shapes); KeyError/TypeError when it lacks a field."""
        return Shape.from_row(self).key()


def bench_rows(items: Iterable[Mapping[str, Any]]) -> list[BenchRow]:
    """Bench rows from JSON objects (or rows already)."""
    return [BenchRow.of(r) for r in items]


__all__ = [
    "ATTENTION_CASE_FIELDS", "ATTENTION_REQUIRED", "MODEL_CASE_FIELDS", "MODEL_REQUIRED", "SCHEMA_ID", "BenchRow",
    "bench_rows",
]
