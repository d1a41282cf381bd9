"""What a comparison of two runs returns and the vocabulary it uses (profctl.analysis.regression compares; here
the rows, the report, the floors, the errors): one home the bench, summary and A/B comparisons share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profctl.analysis.stats import MIN_SAMPLES, noise_floor
from profctl.errors import ProfctlError
from profctl.schema.bench import ATTENTION_CASE_FIELDS

#: the SM clock may differ this much between the sides before it is called out
CLOCK_TOLERANCE = 0.03
#: GPU medians below this (ms) were launch-bound and bimodal between processes on the H100 (benchmarks/RESULTS.md)
SHORT_MS = 0.15

#: what pairs two runs' rows (with their label or backend): the attention case fields, for every row
CASE_FIELDS = ATTENTION_CASE_FIELDS
VERDICTS = ("faster", "slower", "unchanged", "inconclusive", "not judged", "failed", "n/a")


#: the band of no real change for CPU timings (CPU ops, CPU bench rows) when none is given: on a shared 2-core
#: machine, CPU ops of 6-40 us moved by up to 14 % between two processes of one program, those of 30-300 us by
#: up to 6 % (docs/runs-and-compare.md); GPU kernels of 0.17 ms and more by 1.5 % (DEFAULT_THRESHOLD stands)
CPU_THRESHOLD = 0.10


@dataclass(frozen=True)
class Floors:
    """Below these a summary row is ``not judged``: too little time for a change to matter or be measured
    (`total_ns`: the larger of the two sides' total time), too short an instance (both sides' medians under
    `instance_ns` for a GPU kernel -- profiler overhead and timer resolution are of that size -- or under
    `cpu_instance_ns` for a CPU op, which is then mostly dispatch and allocation and moves between processes),
    or too few instances (`samples`, on either side, after a first call is left out)."""

    total_ns: float = 50_000.0
    instance_ns: float = 1_000.0
    cpu_instance_ns: float = 10_000.0
    samples: int = MIN_SAMPLES

    def describe(self) -> str:
        return (f"not judged below {self.total_ns / 1e6:g} ms in total, {self.instance_ns / 1e3:g} us per kernel "
                f"({self.cpu_instance_ns / 1e3:g} us per CPU op) or {self.samples} instances")


class NotComparable(ProfctlError):
    """Two runs that measure different things (GPU, shapes, dtype, versions that change the numbers)."""

    exit_code = 6


class Regression(ProfctlError):
    """`--fail-if-slower`: a case got slower than the limit (or stopped working)."""

    exit_code = 1


@dataclass
class RowResult:
    """One paired case: the base and new medians, their ratio with its interval, and the verdict."""

    case: dict[str, Any]
    base_ms: float | None
    new_ms: float | None
    ratio: float | None = None
    ci_lo: float | None = None
    ci_hi: float | None = None
    n_base: int = 0
    n_new: int = 0
    base_tflops: float | None = None
    new_tflops: float | None = None
    method: str = "bootstrap"
    verdict: str = "n/a"
    notes: list[str] = field(default_factory=list)

    @property
    def change(self) -> float | None:
        """Relative change of time, new/base - 1 (positive: slower)."""
        return None if self.ratio is None else self.ratio - 1.0

    @property
    def noise_floor(self) -> float | None:
        """The smallest change this comparison could have seen (half the interval's width); None without one."""
        return noise_floor(self.ci_lo, self.ci_hi)

    def to_dict(self) -> dict[str, Any]:
        tf_lo = 1.0 / self.ci_hi if self.ci_hi else None
        tf_hi = 1.0 / self.ci_lo if self.ci_lo else None
        return {**self.case, "base_ms": self.base_ms, "new_ms": self.new_ms, "ratio": self.ratio,
                "change": self.change, "ci_lo": self.ci_lo, "ci_hi": self.ci_hi, "noise_floor": self.noise_floor,
                "n_base": self.n_base, "n_new": self.n_new, "base_tflops": self.base_tflops,
                "new_tflops": self.new_tflops, "tflops_ratio": (1.0 / self.ratio) if self.ratio else None,
                "tflops_ci_lo": tf_lo, "tflops_ci_hi": tf_hi, "method": self.method, "verdict": self.verdict,
                "note": "; ".join(self.notes) or None}


@dataclass
class RegressionReport:
    base: Any  # profctl.analysis.regression.Side
    new: Any
    rows: list[RowResult]
    threshold: float
    confidence: float
    method: str
    by: str
    warnings: list[str] = field(default_factory=list)
    forced: list[str] = field(default_factory=list)
    floors: Floors | None = None  # summaries: below these a row is not judged
    threshold_why: str = ""  # where the threshold came from when it was not given ("the default for CPU timings")
    kind: str = ""  # "bench", "summary" or "ab" (the sides' kind unless given)

    def __post_init__(self) -> None:
        self.kind = self.kind or self.base.kind

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rows:
            out[r.verdict] = out.get(r.verdict, 0) + 1
        return out

    def noise_range(self) -> tuple[float, float] | None:
        """The smallest and largest noise floor over the rows that have one."""
        xs = [r.noise_floor for r in self.rows if r.noise_floor is not None]
        return (min(xs), max(xs)) if xs else None

    def to_dict(self) -> dict[str, Any]:
        return {"base": self.base.describe(), "new": self.new.describe(), "kind": self.kind,
                "method": self.method, "threshold": self.threshold, "threshold_from": self.threshold_why or "given",
                "confidence": self.confidence, "by": self.by,
                "floors": None if self.floors is None else {"total_ms": self.floors.total_ns / 1e6,
                                                            "instance_us": self.floors.instance_ns / 1e3,
                                                            "samples": self.floors.samples},
                "counts": self.counts(), "warnings": self.warnings, "forced": self.forced,
                "rows": [r.to_dict() for r in self.rows]}


