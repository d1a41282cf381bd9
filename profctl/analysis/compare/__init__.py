"""Run against run (`profctl compare BASE NEW`): did the kernel get faster or slower, with a confidence interval
instead of eyeballs.

Two kinds of input:

* bench runs (a run directory, its id, or a ``bench.json``): rows carry every measured iteration (``times_ms``).
  Rows pair by (label or backend, shape, pass). The estimate is the ratio of medians, new / base, with a
  percentile bootstrap confidence interval: both sides' iterations are resampled independently (seeded, so
  the same inputs always give the same interval), the medians' ratio taken each time. Medians because a few
  slow iterations (a context switch, a clock ramp) should not move the answer; a bootstrap because per-iteration
  times are skewed and a ratio has no simple closed-form interval.
* kernel summaries (``profctl.summary/1`` JSON, or a run directory holding one; nsys, torch.profiler, ncu):
  kernels (CPU ops, for a CPU-only trace) pair by (match key, NVTX range). Their rows keep every instance's
  duration (``extra.samples_ns``, profctl.schema.samples): the same ratio of medians and bootstrap, over the
  instances, with a first call left out and warm-up ranges not judged. Rows too small or too rare to judge
  (:class:`Floors`: total time, time per instance, instances) are ``not judged``. Summaries written before
  samples existed fall back to a plain threshold on ``med_ns`` and say so (``method: threshold``).

Verdicts, with ``r`` the time ratio, ``[lo, hi]`` its interval and ``d`` the threshold (default 2 %); the band of
"no real change" is ``[1/(1+d), 1+d]``:

* ``slower``: ``lo > 1`` (the slowdown is not noise) and ``r >= 1+d`` (and it is big enough to matter);
* ``faster``: ``hi < 1`` and ``r <= 1/(1+d)``;
* ``unchanged``: the whole interval lies inside the band;
* ``inconclusive``: anything else: the interval is too wide to tell (more iterations are suggested), too few
  samples, or the GPU clocks differ enough to explain the change;
* ``not judged`` (summaries): below the floors, or a warm-up range: listed, never called faster or slower.

Each row also says the smallest change it could have seen (``noise_floor``, profctl.analysis.compare.stats), so an
``unchanged`` says how sure it is. The statistics live in profctl.analysis.compare.stats; :func:`gate` decides
``--fail-if-slower`` for every kind of comparison (bench runs, summaries, ``profctl bench --ab``).

Iterations of one process are not independent runs: another process of the same program differs by more than
its iterations suggest (clock state, memory placement, scheduling). So a side may be several runs (``BASE1,BASE2,
BASE3``), and every interval also holds the noise between runs (profctl.analysis.compare.stats.across_runs): measured
from the runs when a side has several, else profctl's measured default for the timing kind (CPU or GPU,
:func:`default_noise`; ``--run-noise`` sets it), and the report says plainly when one run per side is what limits
the verdict. docs/runs-and-compare.md and benchmarks/RESULTS.md ("compare noise", "run-to-run noise") have the
numbers.
"""

from __future__ import annotations

from profctl.analysis.compare.bench_runs import compare_bench
from profctl.analysis.compare.checks import all_cpu
from profctl.analysis.compare.gate import Gate, case_label, gate, regressions
from profctl.analysis.compare.rows import CPU_THRESHOLD, Comparison, Floors, RowResult
from profctl.analysis.compare.stats import (
    CPU_BENCH_QUIET_RUN_NOISE,
    CPU_BENCH_RUN_NOISE,
    CPU_RUN_NOISE,
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_THRESHOLD,
    GPU_RUN_NOISE,
    NO_RUN_NOISE,
    RunNoise,
    quiet_machine,
)
from profctl.analysis.compare.summaries import compare_summaries
from profctl.errors import NotComparable, UsageError
from profctl.inputs import Side, kind_words

__all__ = ["CPU_THRESHOLD", "DEFAULT_CONFIDENCE", "DEFAULT_RESAMPLES", "DEFAULT_THRESHOLD", "NO_RUN_NOISE",
           "Comparison", "Floors", "Gate", "RowResult", "RunNoise", "case_label", "compare_runs", "default_noise",
           "default_threshold", "gate", "regressions"]


def compare_runs(base: Side, new: Side, *, threshold: float | None = None, confidence: float = DEFAULT_CONFIDENCE,
                 resamples: int = DEFAULT_RESAMPLES, by: str = "label", force: bool = False,
                 floors: Floors | None = None, limit: float | None = None,
                 noise: RunNoise | None = None) -> Comparison:
    """Pair the two sides' cases and decide each; NotComparable (with every reason) unless `force`.

    `threshold`: the band of no real change; None: the default for what was timed (:func:`default_threshold`),
    narrowed to `limit` (a ``--fail-if-slower`` limit) when that is smaller. `floors`: what a summary row needs
    to be judged (default :class:`Floors`). `noise`: the run-to-run noise each interval allows for (None: the
    default for what was timed, :func:`default_noise`; with several runs per side, measured too)."""
    if base.kind != new.kind:
        raise NotComparable(f"{base.name} is {kind_words(base)} and {new.name} is {kind_words(new)}: "
                            "compare bench runs with bench runs, summaries with summaries")
    why = ""
    if threshold is None:
        threshold, why = default_threshold(base, new)
        if limit is not None and limit < threshold:
            threshold, why = limit, "narrowed to --fail-if-slower"
    if not 0 < threshold < 1:
        raise UsageError(f"threshold {threshold:g} must be between 0 and 1 (e.g. 0.02 for 2%)")
    if not 0.5 <= confidence < 1:
        raise UsageError(f"confidence {confidence:g} must be in [0.5, 1)")
    if by not in ("label", "backend"):
        raise UsageError(f"--by {by!r}: choose label or backend")
    warnings = [f"{s.name} is {s.status}: only its finished points are compared" for side in (base, new)
                for s in side.runs if s.status in ("incomplete", "running", "failed")]
    if noise is None:
        noise = default_noise(base, new)
    if base.kind == "bench":
        rep = compare_bench(base, new, threshold=threshold, confidence=confidence, resamples=resamples, by=by,
                             force=force, warnings=warnings, noise=noise)
    else:
        rep = compare_summaries(base, new, threshold=threshold, confidence=confidence, resamples=resamples,
                                 force=force, warnings=warnings, floors=floors or Floors(), noise=noise)
    rep.threshold_why = why
    rep.noise = noise
    rep.runs = (len(base.runs), len(new.runs))
    return rep


def default_threshold(base: Side, new: Side) -> tuple[float, str]:
    """The band of no real change when none is given, and why: :data:`CPU_THRESHOLD` when everything compared
    was timed on a CPU (CPU ops and CPU bench rows move more between processes), else
    :data:`DEFAULT_THRESHOLD`."""
    if all_cpu(base) and all_cpu(new):
        return CPU_THRESHOLD, "the default for CPU timings"
    return DEFAULT_THRESHOLD, "the default"


def default_noise(base: Side, new: Side) -> RunNoise:
    """The run-to-run noise assumed where the runs cannot measure it: for CPU bench rows
    :data:`CPU_BENCH_QUIET_RUN_NOISE` when every run of both sides recorded a quiet machine (its threads had their
    cores, :func:`profctl.analysis.compare.stats.quiet_machine`), else :data:`CPU_BENCH_RUN_NOISE` (whole
    multi-threaded calls on a busy machine: heavy-tailed between processes); :data:`CPU_RUN_NOISE` for CPU ops of a
    summary; :data:`GPU_RUN_NOISE` for GPU timings."""
    if all_cpu(base) and all_cpu(new):
        if base.kind != "bench":
            return CPU_RUN_NOISE
        machines = [r.manifest.machine or None for side in (base, new) for r in side.runs]
        return CPU_BENCH_QUIET_RUN_NOISE if quiet_machine(machines) else CPU_BENCH_RUN_NOISE
    return GPU_RUN_NOISE
