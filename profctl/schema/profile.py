"""One kernel launch as Nsight Compute saw it in depth (``profctl.kernel-profile/1``): its metrics, its warp-state
samples per instruction with their source lines, its launch configuration and ncu's own guided-analysis findings.

The :class:`Summary` of :mod:`profctl.schema` aggregates launches into rows and keeps scalar metrics only; the
"why and where" views (``profctl report --view source|stalls``, ``profctl explain``) need more: which instruction
each warp sample hit, on which line, stalled for what. A reader (profctl.readers.ncu_profiles) fills these records
from an ``.ncu-rep``; profctl.analysis.source turns them into hot lines and stall breakdowns. Plain data, so the
records cross a process boundary as JSON and are kept in run directories. Fields may be added, never renamed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

SCHEMA_ID = "profctl.kernel-profile/1"

#: path parts of source files that are library code, not the kernel author's: Triton's language helpers (tl.sum,
#: tl.max are inlined from triton/language/standard.py), the CUDA toolkit's and C++ libraries' headers
LIBRARY_PARTS = ("/triton/language/", "/triton/runtime/", "/triton/compiler/", "/cuda/include/", "/usr/include/",
                 "/targets/x86_64-linux/include/", "/cutlass/", "/cute/", "/cub/", "/thrust/", "/libcudacxx/",
                 "/cuda/std/", "/torch/include/", "/site-packages/nvidia/")


def is_library_file(path: str | None) -> bool:
    """Whether `path` is library code (its samples belong to the user's line that called into it)."""
    if not path:
        return False
    p = "/" + path.replace("\\", "/").lstrip("/")
    return any(part in p for part in LIBRARY_PARTS)


@dataclass(frozen=True)
class PcSample:
    """One instruction (program counter) of the kernel: its warp samples by stall reason, how often it ran, where
    it came from. `offset` is the address relative to the kernel's first instruction (stable across runs)."""

    offset: int
    sass: str
    samples: int = 0
    stalls: dict[str, int] = field(default_factory=dict)  # reason -> samples (non-zero only)
    executed: int | None = None  # warp-level instructions executed at this PC
    file: str | None = None
    line: int | None = None
    #: per-instruction counters where ncu has them: ``sectors`` / ``sectors_ideal`` / ``excessive_sectors`` (L2
    #: sectors of a global access, of an ideally coalesced one, and the difference), ``wavefronts`` /
    #: ``wavefronts_ideal`` and ``smem_nway`` (shared-memory wavefronts with and without bank conflicts, the
    #: conflict ways), ``local_sectors``, ``requests`` (global), ``avg_threads`` and ``thread_inst`` (threads
    #: active per execution: below 32 means divergence or a ragged tail), ``divergent_targets``
    memory: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Marker:
    """Where a rule points: a source line (file, line) or an instruction (offset), with ncu's words for it."""

    message: str
    file: str | None = None
    line: int | None = None
    offset: int | None = None


@dataclass(frozen=True)
class RuleFinding:
    """One result of ncu's guided analysis (a rule of a section), with the source lines its markers point at."""

    rule: str
    section: str
    kind: str  # optimization | warning | error | ok | info
    title: str
    message: str
    speedup: float | None = None  # ncu's estimated speedup, percent of the kernel's time
    speedup_type: str = ""  # global (of the whole kernel) | local (of the part the rule looks at)
    markers: tuple[Marker, ...] = ()  # the lines and instructions it points at


@dataclass(frozen=True)
class KernelProfile:
    """One profiled launch: names, NVTX path, device, metrics in base units, and (when the report holds them)
    warp-state samples per instruction, source text around the hot lines, and ncu's findings."""

    id: int
    name: str
    base_name: str
    nvtx: tuple[str, ...] = ()
    device: str | None = None
    cc: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    pcs: tuple[PcSample, ...] = ()
    findings: tuple[RuleFinding, ...] = ()
    source_files: tuple[str, ...] = ()  # files the report embeds (empty: no -lineinfo, or a library kernel)
    source_text: dict[str, dict[int, str]] = field(default_factory=dict)  # file -> line -> text (hot windows)
    #: file -> line -> the function the line is in, for lines of library files (Triton's language helpers, CUDA
    #: headers) that instructions map to: how their samples find the user's line that called them
    source_funcs: dict[str, dict[int, str]] = field(default_factory=dict)
    opcodes: dict[str, float] = field(default_factory=dict)  # SASS opcode -> warp instructions executed
    has_samples: bool = False  # warp-state sampling was collected (SourceCounters / WarpStateStats sections)
    report: str = ""  # the report file it came from
    names_only: bool = False  # read for its names only (a reader asked for other kernels in depth)

    @property
    def total_samples(self) -> int:
        return sum(p.samples for p in self.pcs)

    @property
    def duration_ns(self) -> float | None:
        return self.metrics.get("gpu__time_duration.sum")

    @property
    def nvtx_path(self) -> str | None:
        return "/".join(self.nvtx) if self.nvtx else None

    def metric(self, name: str) -> float | None:
        return self.metrics.get(name)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["schema"] = SCHEMA_ID
        d["source_text"] = {f: {str(k): v for k, v in lines.items()} for f, lines in self.source_text.items()}
        d["source_funcs"] = {f: {str(k): v for k, v in lines.items()} for f, lines in self.source_funcs.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KernelProfile:
        """Read one back (unknown fields ignored, so files of later versions read)."""
        if not isinstance(d, dict):
            raise ValueError("a kernel profile must be a JSON object")
        known = {f.name for f in fields(cls)}
        x = {k: v for k, v in d.items() if k in known}
        x["nvtx"] = tuple(x.get("nvtx") or ())
        x["source_files"] = tuple(x.get("source_files") or ())
        for key in ("metrics", "opcodes"):
            x[key] = {str(k): float(v) for k, v in (x.get(key) or {}).items()
                      if isinstance(v, (int, float)) and not isinstance(v, bool)}
        x["pcs"] = tuple(_pc(p) for p in x.get("pcs") or ())
        x["findings"] = tuple(_finding(f) for f in x.get("findings") or ())
        for key in ("source_text", "source_funcs"):
            x[key] = {str(f): {int(k): str(v) for k, v in lines.items()} for f, lines in (x.get(key) or {}).items()}
        return cls(**x)


def _pc(d: dict[str, Any]) -> PcSample:
    known = {f.name for f in fields(PcSample)}
    x = {k: v for k, v in d.items() if k in known}
    x["stalls"] = {str(k): int(v) for k, v in (x.get("stalls") or {}).items()}
    x["memory"] = {str(k): float(v) for k, v in (x.get("memory") or {}).items() if isinstance(v, (int, float))}
    return PcSample(**x)


def _finding(d: dict[str, Any]) -> RuleFinding:
    known = {f.name for f in fields(RuleFinding)}
    x = {k: v for k, v in d.items() if k in known}
    x["markers"] = tuple(Marker(**{k: v for k, v in m.items() if k in _MARKER}) for m in x.get("markers") or ()
                         if isinstance(m, dict))
    return RuleFinding(**x)


_MARKER = {f.name for f in fields(Marker)}


__all__ = ["SCHEMA_ID", "KernelProfile", "Marker", "PcSample", "RuleFinding", "is_library_file"]
