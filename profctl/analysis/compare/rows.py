"""What a comparison of two runs returns and the vocabulary it uses (profctl.analysis.compare compares; here
the rows, the report, the floors): one home the bench, summary and A/B comparisons share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profctl.analysis.compare.stats import (
    MIN_SAMPLES,
    Estimate,
    Groups,
    RunNoise,
    decide,
    noise_floor,
    runs_needed,
    samples_needed,
)
from profctl.inputs import Side
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
    runs: tuple[int, int] = (1, 1)  # runs on each side behind the estimate
    processes: tuple[int, int] | None = None  # bench rows: the processes those runs timed in (the noise's units)
    run_noise: float | None = None  # the per-run noise (log-scale sigma) the interval allowed for
    run_noise_measured: float | None = None  # what the runs themselves showed (several runs on a side)
    run_limited: bool = False  # noise between runs, not between instances, set the interval's width
    groups: Groups | None = None  # timings in two groups (per-run medians, or one run's iterations)

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
                "runs_base": self.runs[0], "runs_new": self.runs[1],
                "processes_base": None if self.processes is None else self.processes[0],
                "processes_new": None if self.processes is None else self.processes[1], "run_noise": self.run_noise,
                "run_noise_measured": self.run_noise_measured, "run_limited": self.run_limited,
                "groups": None if self.groups is None else {"what": self.groups.what, "low": self.groups.low,
                                                            "high": self.groups.high, "ratio": self.groups.ratio},
                "note": "; ".join(self.notes) or None}


def judge(rr: RowResult, est: Estimate, threshold: float, *, samples: int, more: str,
          groups: Groups | None = None, unit: str = "run", busy: bool = False) -> None:
    """Fill a row from an estimate over runs: ratio, interval, verdict, and when inconclusive what would tell
    (more runs per side when the noise between runs limits; more iterations or instances, `more`, otherwise).
    `unit`: what the estimate's runs are, ``run`` or ``process`` (bench runs of several processes each); `busy`:
    CPU bench runs timed on a busy machine, whose processes fall in states several times apart: more of them do
    not tell, an A/B inside one process does.

    `groups`: timings that fall in two groups (:func:`profctl.analysis.compare.stats.run_groups`,
    ``iteration_modes``), said in the note. They are already in the interval, where they belong: a run whose
    iterations have two modes is uncertain by the modes' distance (``across_runs``), and per-run medians in two
    groups scatter, which the runs' t interval measures; nothing vetoes the verdict afterwards."""
    rr.ratio, rr.ci_lo, rr.ci_hi = est.ratio, est.lo, est.hi
    rr.runs, rr.run_noise, rr.run_noise_measured = est.runs, est.sigma or None, est.measured_sigma
    rr.run_limited = est.run_limited
    rr.groups = groups
    rr.verdict, why = decide(est.ratio, est.lo, est.hi, threshold)
    if groups is not None:
        rr.notes.append(f"{groups.words()}: the interval holds a switch between them")
    if not why:
        return
    if est.modes > 0 and est.modes >= max(est.between, 0.5 * est.within):
        rr.notes.append(why + "; a run's iterations fell in two modes: more runs per side, or a quieter machine "
                        "(OMP_NUM_THREADS=1 on a CPU), would tell")
        return
    if est.run_limited:
        k = runs_needed(est, threshold)
        bench = more == "--iters"
        if busy:
            why += ("; the machine was busy (other work on the runs' cores): its processes fall in states several "
                    "times apart, which more processes do not average out; `profctl bench --ab BASE,NEW` (both in "
                    "one process, round by round) or a quiet machine would tell")
        elif est.runs == (1, 1):
            why += (f"; with one run per side the noise between runs (±{est.sigma * 100:.1f}% a run) cannot be told "
                    "from a change this small: give several runs per side (BASE1,BASE2,BASE3 NEW1,NEW2,NEW3)"
                    + (", or time each in several processes (bench --processes 3)" if bench else ""))
        elif k and unit == "process":
            why += f"; about {k} processes per side would tell (runs x --processes)"
        elif k:
            why += f"; about {k} runs per side would tell"
        rr.notes.append(why)
        return
    need = samples_needed(samples, est.lo, est.hi, threshold)
    if more == "--iters":
        rr.notes.append(why + (f"; about --iters {need} would tell" if need > samples else ""))
    else:
        rr.notes.append(why + (f"; about {need} {more} would tell" if need > samples else ""))


def run_noise_words(noise: RunNoise, runs: tuple[int, int], processes: tuple[int, int] | None = None) -> str:
    """How the intervals treat noise between runs, in words for the report's method line; `processes`: what the
    runs timed in, when a run was several processes (bench --processes), each then a unit of that noise."""
    if processes is not None and processes != runs:
        return (f"{processes[0]} process(es) in {runs[0]} run(s) against {processes[1]} in {runs[1]}: run-to-run "
                f"noise measured from them (a t interval on per-process medians), pooled with "
                f"±{noise.sigma * 100:g}% a process ({noise.source}) as {_dof_words(noise)}")
    if runs == (1, 1):
        if noise.off:
            return "one run per side, run-to-run noise left out (--run-noise 0)"
        return (f"one run per side: intervals include run-to-run noise of ±{noise.sigma * 100:g}% a run "
                f"({noise.source}; {_dof_words(noise)}; --run-noise sets it; several runs per side measure it)")
    return (f"{runs[0]} run(s) against {runs[1]}: run-to-run noise measured from them (a t interval on per-run "
            f"medians), pooled with ±{noise.sigma * 100:g}% a run ({noise.source}) as {_dof_words(noise)}")


def _dof_words(noise: RunNoise) -> str:
    return f"worth {noise.dof} degree{'s' if noise.dof != 1 else ''} of freedom"


def hold_for_machine(rows: list[RowResult], words: str) -> None:
    """Two sides timed on CPUs in different states (other work's busy cores apart, profctl.machine_state): a
    faster/slower verdict becomes inconclusive, with the states in its note; nothing in the data can separate a
    change from what the load did."""
    for rr in rows:
        if rr.verdict in ("slower", "faster"):
            rr.verdict = "inconclusive"
            rr.notes.append(f"the sides ran in different machine states ({words}): the change could come from "
                            "that; rerun both under the same load")


def groups_words(rows: list[RowResult]) -> str | None:
    """For the method line: how many rows had timings in two groups, and how they were judged."""
    n = sum(r.groups is not None for r in rows)
    if not n:
        return None
    return (f"timings in two groups in {n} case(s) (per-run medians, or a run's iterations): in the interval of the "
            "run or side they belong to")


@dataclass
class Comparison:
    """Two sides compared: a row per paired case, how, and what was refused or forced."""

    base: Side
    new: Side
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
    noise: RunNoise | None = None  # the run-to-run noise the intervals allowed for (None: paired A/B rounds)
    runs: tuple[int, int] = (1, 1)  # runs on each side

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
                "runs": {"base": self.runs[0], "new": self.runs[1]},
                "run_noise": None if self.noise is None else {"sigma": self.noise.sigma, "source": self.noise.source},
                "counts": self.counts(), "warnings": self.warnings, "forced": self.forced,
                "rows": [r.to_dict() for r in self.rows]}


