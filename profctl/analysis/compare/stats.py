"""The statistics of every comparison profctl makes, in one place: bench runs, kernel and op summaries, and the
interleaved A/B runs of ``profctl bench --ab`` all use these functions, so one verdict means one thing.

* :func:`bootstrap_ratio`: median(new) / median(base) with a percentile bootstrap interval, both sides
  resampled independently (bench iterations, kernel launches, op calls);
* :func:`paired_rounds`: interleaved A/B rounds, the round as the unit: the median of the rounds' paired ratios
  with its distribution-free (sign-test) interval;
* :func:`decide`: the verdict from a ratio, its interval and the threshold;
* :func:`noise_floor`: the smallest change a comparison could have seen (half the interval's width);
* :func:`across_runs`: the ratio over several runs per side (one is allowed), with an interval that holds the noise
  between processes (:class:`RunNoise`) as well as the noise between the instances of one process.

Why the second level: the iterations of one process are not independent runs. Two processes of one unchanged
program differ by more than either's iterations suggest (CPU frequency, memory placement, scheduling, GPU clocks),
so an interval over one run's instances would call that difference a change. A run is the unit of noise (as
pyperf treats its worker processes): each side's per-run medians scatter by ``sigma`` on the log scale; with
several runs per side ``sigma`` is measured from them (pooled with a measured default worth
:data:`PRIOR_RUNS` runs), with one run per side it is the default alone, and the comparison says so.

Medians because a few slow instances (a context switch, a clock ramp) should not move the answer; a bootstrap
because per-instance times are skewed and a ratio of medians has no handy closed form; a ratio because it reads
as "+4 %" and is the same for time and TFLOP/s.

The noise a run cannot measure comes from the machine's recorded state for CPU bench rows (:func:`quiet_machine`):
a quiet machine's processes differ by some 16 % (one run a side catches most 2x slowdowns), a busy one's by a factor
(one run a side cannot tell). Two modes in one run's iterations widen that run's interval (:func:`mode_spread`), not the
verdict of the whole comparison.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

DEFAULT_THRESHOLD = 0.02
DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 4000
#: fewer samples than this on either side (iterations, instances, rounds): no interval
MIN_SAMPLES = 5
#: how many runs' worth of evidence the default run-to-run noise counts for when runs measure it too
PRIOR_RUNS = 6.0


@dataclass(frozen=True)
class RunNoise:
    """How much one run's median moves between processes of an unchanged program: ``sigma``, the standard deviation
    of the log of a run's median (0.05: about 5 %), where that figure comes from, and how many degrees of freedom
    it counts for beside the runs' own scatter (``dof``: few where the noise is heavy-tailed, so that with one run a
    side the interval is a t interval with that few degrees of freedom, and with several the runs decide)."""

    sigma: float
    source: str
    dof: int = int(PRIOR_RUNS)

    @property
    def off(self) -> bool:
        return self.sigma <= 0


#: measured with benchmarks/run_noise.py on the 2-core CI machine (docs/runs-and-compare.md, "Run-to-run noise"):
#: CPU ops of examples/ops_program.py over eight processes, pooled sigma 4.0 % with other jobs running and 5.2 %
#: with both cores kept busy (10 % for a 12-us op); 6 % covers both
CPU_RUN_NOISE = RunNoise(0.06, "profctl's default for CPU timings, measured with benchmarks/run_noise.py")
#: bench rows of 0.17 ms and more on the H100: the 12 pairs of three runs of one workload differed by 0.8 % RMS
#: (1.5 % at most), i.e. 0.6 % a run (benchmarks/RESULTS.md, "compare noise")
GPU_RUN_NOISE = RunNoise(0.006, "profctl's default for GPU timings, measured on the H100 (benchmarks/RESULTS.md)")
#: CPU bench rows (one attention call, torch's intra-op threads on a 2-core machine) timed while other work took
#: cores the threads needed: a process's median lands in one of two states several times apart (2.35 or 4.8 ms in
#: issue 39; beside one spinner 1.6-1.9 or 8.0 ms, one scheduler tick a parallel region). Measured per process with
#: benchmarks/run_noise.py --bench on busy 2-CPU slices of the H200 machine's host (benchmarks/gate_slices.sh): sigma
#: 0.73 (2026-11-28, one spinner, 36 degrees of freedom), 0.69 (two spinners, 8), 0.80 (2026-11-29, one spinner,
#: processes of bench --processes 3 runs, 224). 0.20 worth one degree of freedom before: with three processes a run
#: the processes' own scatter then decided alone, and three of them in one state against three mostly in the other
#: failed identical code (2 of 42 one-run-a-side pairs). 0.75 worth six: one run a side fails only a many-fold
#: change, which a busy machine cannot tell from its states (benchmarks/RESULTS.md, "The gate: power and false
#: alarms")
CPU_BENCH_RUN_NOISE = RunNoise(0.75, "profctl's default for CPU bench rows timed on a busy machine (or one whose "
                                     "state was not recorded), measured with benchmarks/run_noise.py --bench", dof=6)
#: CPU bench rows where every run of both sides had its threads' cores to itself (profctl.machine_state: busy cores of
#: other work plus torch's threads within the machine's cores, :func:`quiet_machine`): what makes a process land in a
#: state several times as slow (its threads waiting on cores other work holds) is absent, yet processes of one
#: program still differ: measured on quiet 2-CPU slices of a 16-core Xeon host (benchmarks/run_noise.py --bench via
#: benchmarks/gate_slices.sh, 10 pairs of six identical processes), a process's median of one attention call fell
#: near 1.25 or 1.7 ms, sigma 15.6 % (RMS over the pairs), two identical single runs up to 1.60x apart. 16 % a run
#: worth six runs: one run a side fails a 5 % gate from about 1.75x (plus what the iterations allow); the 10 % this
#: was before called that 1.60x slower (a false alarm, 1 of 30 quiet one-against-one pairs). benchmarks/RESULTS.md,
#: "The gate: power and false alarms (issue 48)"
CPU_BENCH_QUIET_RUN_NOISE = RunNoise(0.16, "profctl's default for CPU bench rows timed on a quiet machine (every "
                                           "run's threads had their cores), measured with benchmarks/run_noise.py "
                                           "--bench", dof=6)
#: the per-run value of a CPU or GPU bench run: its iterations' median. Measured against a low quantile (0.25, 0.1:
#: contention only adds time, so a run's fast iterations might be steadier) on the same recordings, which
#: `benchmarks/run_noise.py --bench --reanalyse R --quantile Q` judges again: on quiet 2-CPU slices and with one
#: spinner the per-run scatter did not shrink (it is a per-process state, every iteration in it, not added time),
#: and the gate failed identical code more often (quiet one-against-one 2 of 30 at 0.25 against 1 of 30; one busy
#: core, three against three, 1 of 9 against 0); only with two spinners (2 pairs) was the low quantile steadier
BENCH_RUN_QUANTILE = 0.5
#: processes a bench run times each point in when --processes is not given, by device. A CPU process keeps a speed
#: state for its whole life (quiet 2-CPU slices of the H200 machine's host: one attention call 1.25 or 1.7 ms a
#: process, every iteration in it; beside a spinner 1.8 or 8.0 ms), so a run of one process cannot show the gate
#: that noise, and one run a side could not catch a 2x slowdown every time (25 of 30). Three processes a run make the
#: process the unit within one run: recorded so on the same slices, one run a side caught 2x in 66 of 66 quiet pairs
#: and three runs a side 1.3x in 22 of 22, failing no identical one-run pair (benchmarks/RESULTS.md, "The gate: power
#: and false alarms"). A GPU process's kernels time alike (0.6 % a run on the H100, GPU_RUN_NOISE): one
PROCESSES = {"cpu": 3, "cuda": 1}
#: a machine is quiet for a CPU timing when other work's busy cores and the timing's threads fit in its cores with
#: at most this much of a core short (a tick of other work is not a load; a quarter core is)
QUIET_SLACK_CORES = 0.25
NO_RUN_NOISE = RunNoise(0.0, "left out (--run-noise 0): the intervals cover one process's instances only")


@dataclass(frozen=True)
class Estimate:
    """new / base over the runs of each side, and its interval with what went into it."""

    ratio: float
    lo: float
    hi: float
    runs: tuple[int, int]       # runs on the base and new side
    within: float               # log half-width from the instances of each run (the bootstrap), 0 without
    between: float              # log half-width from run-to-run noise
    sigma: float                # the per-run noise used (log scale)
    measured_sigma: float | None  # what the runs themselves showed (None: one run per side)
    modes: float = 0.0          # log half-width from runs whose iterations fell in two modes (:func:`mode_spread`)

    @property
    def run_limited(self) -> bool:
        """Whether noise between runs, not between instances, sets the interval's width."""
        return self.between > self.within


def seed_of(key: Any) -> int:
    """A generator seed from what is compared, so the same inputs always give the same interval."""
    return int.from_bytes(hashlib.sha256(repr(key).encode()).digest()[:8], "little")


def bootstrap_ratio(base: Iterable[float], new: Iterable[float], *, confidence: float = DEFAULT_CONFIDENCE,
                    resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> tuple[float, float, float]:
    """(median(new) / median(base), lo, hi): the percentile bootstrap interval of the ratio of medians."""
    import numpy as np

    a = np.asarray(list(base), dtype=float)
    b = np.asarray(list(new), dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("empty sample")
    ma0, mb0 = float(np.median(a)), float(np.median(b))
    if ma0 <= 0 or mb0 <= 0:
        raise ValueError("non-positive median time")
    rng = np.random.default_rng(seed)
    out = np.empty(resamples)
    chunk = max(1, 2_000_000 // max(a.size, b.size))
    for s in range(0, resamples, chunk):
        k = min(chunk, resamples - s)
        ma = np.median(a[rng.integers(0, a.size, (k, a.size))], axis=1)
        mb = np.median(b[rng.integers(0, b.size, (k, b.size))], axis=1)
        out[s:s + k] = mb / ma
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(out, [alpha, 1.0 - alpha])
    return mb0 / ma0, float(lo), float(hi)


def across_runs(base_runs: Sequence[Sequence[float]], new_runs: Sequence[Sequence[float]], *, noise: RunNoise,
                confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                modes: bool = False, quantile: float = 0.5) -> Estimate:
    """The ratio of the two sides' geometric means of per-run medians, with an interval of two parts added in
    quadrature on the log scale: the percentile bootstrap over each run's instances (what one process's noise
    allows), and ``t x sigma_b x sqrt(1/k_base + 1/k_new)`` for the noise between runs, where ``sigma_b`` pools
    what the runs show (their medians' scatter on each side, less what instance noise explains) with `noise`'s
    default counted as ``noise.dof`` degrees of freedom, and ``t`` has the runs' and the default's degrees of
    freedom together (few runs and a heavy-tailed default: a wide interval). One run per side: ``sigma_b`` is the
    default alone. With `modes` (repeats of one call: bench iterations) a run whose iterations fall in two modes
    is uncertain by half their distance too (:func:`mode_spread`); a summary's instances of one kernel name can be
    different calls, whose mixture is the program's, so there it is off. `quantile`: the per-run value, the
    median (0.5) or a lower quantile of the run's instances (:data:`BENCH_RUN_QUANTILE` for bench iterations).
    With ``noise.sigma == 0`` and one run per side this is :func:`bootstrap_ratio`'s interval."""
    import numpy as np

    if not base_runs or not new_runs:
        raise ValueError("a side without runs")
    a = [np.asarray(list(r), dtype=float) for r in base_runs]
    b = [np.asarray(list(r), dtype=float) for r in new_runs]
    if any(x.size == 0 for x in (*a, *b)):
        raise ValueError("empty sample")
    la = np.log([float(np.quantile(x, quantile)) for x in a])
    lb = np.log([float(np.quantile(x, quantile)) for x in b])
    ratio = float(math.exp(lb.mean() - la.mean()))
    rng = np.random.default_rng(seed)
    boot_a, var_a = _boot_log_medians(a, rng, resamples, quantile)
    boot_b, var_b = _boot_log_medians(b, rng, resamples, quantile)
    stat = np.exp(boot_b.mean(axis=0) - boot_a.mean(axis=0))
    alpha = (1.0 - confidence) / 2.0
    qlo, qhi = (float(v) for v in np.quantile(stat, [alpha, 1.0 - alpha]))
    down, up = max(math.log(ratio / qlo), 0.0), max(math.log(qhi / ratio), 0.0)
    ka, kb = len(a), len(b)
    # a run whose iterations fall in two modes: its median could have landed in either (another process of it
    # would put a different share in each), so that run -- and only it -- is uncertain by half the modes' distance
    spread = mode_spread if modes else (lambda _: 0.0)
    mode_a, mode_b = [spread(x) for x in a], [spread(x) for x in b]
    var_a = [v + m * m for v, m in zip(var_a, mode_a, strict=True)]
    var_b = [v + m * m for v, m in zip(var_b, mode_b, strict=True)]
    bimodal = math.sqrt(sum(m * m for m in mode_a) / ka ** 2 + sum(m * m for m in mode_b) / kb ** 2)
    if bimodal > 0:
        z = _z_quantile(1.0 - alpha)
        down, up = math.hypot(down, z * bimodal), math.hypot(up, z * bimodal)
    dof = (ka - 1) + (kb - 1)
    measured = None
    if dof > 0:
        ss = float(((la - la.mean()) ** 2).sum() + ((lb - lb.mean()) ** 2).sum())
        within_var = float(np.mean([*var_a, *var_b]))  # what instance noise alone puts into a run's median
        measured = math.sqrt(max(ss / dof - within_var, 0.0))
    sigma = noise.sigma
    between = 0.0
    if not noise.off or measured is not None:
        prior = noise.dof if not noise.off else 0
        pooled = (dof * (measured or 0.0) ** 2 + prior * noise.sigma ** 2) / (dof + prior)
        sigma = math.sqrt(pooled)
        if sigma > 0:
            between = _t_quantile(1.0 - alpha, dof + prior) * sigma * math.sqrt(1.0 / ka + 1.0 / kb)
    lo = ratio * math.exp(-math.hypot(down, between))
    hi = ratio * math.exp(math.hypot(up, between))
    return Estimate(ratio, lo, hi, (ka, kb), max(down, up), between, sigma, measured,
                    _z_quantile(1.0 - alpha) * bimodal)


def mode_spread(times: Any) -> float:
    """Half the log distance between the two modes of one run's iterations (:func:`iteration_modes`), 0 when
    they have one: how far that run's median could have moved had the process put another share in each mode."""
    g = iteration_modes([float(x) for x in times])
    return 0.0 if g is None else math.log(g.ratio) / 2.0


def quiet_machine(machines: Sequence[Any]) -> bool:
    """Whether every run's recorded machine state (profctl.machine_state: ``busy_cores`` of other work over the run,
    ``torch_threads``, ``cpus``) left its threads their cores: busy cores plus threads within the cores, less
    :data:`QUIET_SLACK_CORES`. False when any run did not record it (an older run, or one too short to measure)."""
    if not machines:
        return False
    for m in machines:
        if not isinstance(m, dict):
            return False
        busy, cpus = m.get("busy_cores"), m.get("cpus")
        if not isinstance(busy, (int, float)) or not isinstance(cpus, int) or cpus <= 0:
            return False
        threads = m.get("torch_threads")
        threads = threads if isinstance(threads, int) and threads > 0 else cpus
        if busy + min(threads, cpus) > cpus + QUIET_SLACK_CORES:
            return False
    return True


def paired_rounds(base_rounds: Sequence[Sequence[float]], new_rounds: Sequence[Sequence[float]], *,
                  confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float, float, float]:
    """(ratio, lo, hi, confidence) for interleaved A/B rounds, the round as the unit: each round's
    median(new) / median(base) (both under that round's conditions), their median, and the distribution-free
    interval of that median from the order statistics of the rounds' ratios (the binomial sign-test interval, at
    least `confidence`; with too few rounds for it, the smallest and largest round, at the confidence that
    has). A round where one variant's block fell in another mode (a slow state of the process that lasted a while)
    is one extreme round among many, not the answer: the median and its interval move by one order statistic."""
    if len(base_rounds) != len(new_rounds) or not base_rounds:
        raise ValueError("the two sides need the same rounds")
    d = []
    for ra, rb in zip(base_rounds, new_rounds, strict=True):
        if not ra or not rb:
            raise ValueError("empty round")
        ma, mb = _med(ra), _med(rb)
        if ma <= 0 or mb <= 0:
            raise ValueError("non-positive median time")
        d.append(math.log(mb / ma))
    d.sort()
    n = len(d)
    alpha = 1.0 - confidence
    # largest k with P(X < k) <= alpha/2 for X ~ Binomial(n, 1/2): the interval [d_(k), d_(n-k+1)] (1-based)
    k, cdf, term = 0, 0.0, 0.5 ** n
    for j in range(n):
        if cdf + term > alpha / 2:
            break
        cdf += term
        k = j + 1
        term *= (n - j) / (j + 1)
    if k == 0:
        k, cdf = 1, 0.5 ** n
    mid = d[n // 2] if n % 2 else (d[n // 2 - 1] + d[n // 2]) / 2
    return math.exp(mid), math.exp(d[k - 1]), math.exp(d[n - k]), 1.0 - 2.0 * cdf


def same_mode_rounds(base_rounds: Sequence[Sequence[float]], new_rounds: Sequence[Sequence[float]]) -> list[int] | None:
    """The rounds whose two blocks sat in the same mode of the process, when each variant's block medians fall in
    two modes (:func:`iteration_modes`, each variant's own split): the machine's states (a CPU process beside other
    work sat at 1.9 or 5.5 ms for stretches of rounds), which both variants visit whatever the change does to their
    times, so a round with A in one and B in the other measures the states' distance, not the change. None (keep
    every round) when a variant has one mode (then two modes may be the change's own), or when fewer than
    :data:`MIN_SAMPLES` rounds would remain."""
    ma, mb = [_med(r) for r in base_rounds], [_med(r) for r in new_rounds]
    ga, gb = iteration_modes(ma, "A's blocks"), iteration_modes(mb, "B's blocks")
    if ga is None or gb is None:
        return None
    ha = [m > math.sqrt(ga.low * ga.high) for m in ma]
    hb = [m > math.sqrt(gb.low * gb.high) for m in mb]
    keep = [i for i, (x, y) in enumerate(zip(ha, hb, strict=True)) if x == y]
    return keep if MIN_SAMPLES <= len(keep) < len(ma) else None


def _med(xs: Sequence[float]) -> float:
    ys = sorted(float(x) for x in xs)
    n = len(ys)
    return ys[n // 2] if n % 2 else (ys[n // 2 - 1] + ys[n // 2]) / 2


def _boot_log_medians(runs: Sequence[Any], rng: Any, resamples: int, quantile: float = 0.5
                      ) -> tuple[Any, list[float]]:
    """(resamples x runs) bootstrap log-medians (or log `quantile`) of each run's instances, and each run's
    bootstrap variance."""
    import numpy as np

    out = np.empty((len(runs), resamples))
    for i, x in enumerate(runs):
        chunk = max(1, 2_000_000 // max(x.size, 1))
        for s in range(0, resamples, chunk):
            k = min(chunk, resamples - s)
            draw = x[rng.integers(0, x.size, (k, x.size))]
            out[i, s:s + k] = np.log(np.median(draw, axis=1) if quantile == 0.5 else
                                     np.quantile(draw, quantile, axis=1))
    return out, [float(v) for v in out.var(axis=1)]


def _t_quantile(p: float, dof: float) -> float:
    """Student's t quantile: exact for 1 and 2 degrees of freedom and by bisection on the exact CDF for other
    whole numbers up to 30; the Cornish-Fisher expansion around the normal (within 0.5 % for dof >= 4) beyond
    and for fractional dof."""
    if dof == 1:
        return math.tan(math.pi * (p - 0.5))
    if dof == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    if float(dof).is_integer() and 2 < dof <= 30 and 0.5 < p < 1:
        lo, hi = 0.0, 100.0
        for _ in range(80):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if _t_cdf(mid, int(dof)) < p else (lo, mid)
        return (lo + hi) / 2
    z = _z_quantile(p)
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    return z + g1 / dof + g2 / dof ** 2 + g3 / dof ** 3


def _t_cdf(t: float, n: int) -> float:
    """Student's t CDF for whole degrees of freedom (Abramowitz & Stegun 26.7.3-4: a finite sum)."""
    th = math.atan(t / math.sqrt(n))
    c, s_ = math.cos(th), math.sin(th)
    if n % 2:  # odd
        acc, term = 0.0, c
        if n > 1:
            acc = term
            for k in range(3, n - 1, 2):
                term *= c * c * (k - 1) / k
                acc += term
        a = (2 / math.pi) * (th + s_ * acc)
    else:
        acc, term = 1.0, 1.0
        for k in range(2, n - 1, 2):
            term *= c * c * (k - 1) / k
            acc += term
        a = s_ * acc
    return 0.5 + a / 2


def _z_quantile(p: float) -> float:
    return NormalDist().inv_cdf(p)


#: two groups of timings count only when their centres are this far apart (a ratio): well past a 10 % gate
GROUP_RATIO = 1.25
#: per-run medians: the gap between the groups must be this many times the spread inside either group
GROUP_GAP_OVER_SPREAD = 2.0
#: iterations of one run: Ashman's D (the modes' separation over their spreads) at least this, and each mode at
#: least this share of the iterations (so a few slow outliers are not a mode)
MODES_D = 4.5
MODES_SHARE = 0.15


@dataclass(frozen=True)
class Groups:
    """Timings that fall in two groups: the low and high group's centre (geometric mean, the timings' unit) and
    what they are (``runs``: per-run medians of one side; ``iterations``: one run's iterations)."""

    low: float
    high: float
    what: str
    unit: str = "ms"

    @property
    def ratio(self) -> float:
        return self.high / self.low

    def words(self) -> str:
        return (f"{self.what} in two groups, {self.low:.4g} and {self.high:.4g} {self.unit} "
                f"({self.ratio:.2f}x apart)")


def run_groups(medians: Sequence[float], what: str = "runs") -> Groups | None:
    """Per-run medians of one side in two groups (the processes landed in two states): the largest gap between
    sorted medians at least :data:`GROUP_RATIO` and :data:`GROUP_GAP_OVER_SPREAD` times the spread inside either
    group. Two runs far apart count too (nothing says which one is typical). None: one group, or one run."""
    xs = sorted(math.log(x) for x in medians if x > 0)
    if len(xs) < 2:
        return None
    i = max(range(len(xs) - 1), key=lambda j: xs[j + 1] - xs[j])
    gap = xs[i + 1] - xs[i]
    low, high = xs[:i + 1], xs[i + 1:]
    inner = max(low[-1] - low[0], high[-1] - high[0])
    if gap < math.log(GROUP_RATIO) or gap < GROUP_GAP_OVER_SPREAD * inner:
        return None
    return Groups(math.exp(sum(low) / len(low)), math.exp(sum(high) / len(high)), what)


def iteration_modes(times: Sequence[float], what: str = "iterations") -> Groups | None:
    """One run's iterations in two modes (the median then depends on how many fell in each, and moves between
    runs by up to the modes' ratio): the best split of the sorted log times in two (least squares, each part at
    least :data:`MODES_SHARE` of them), kept when the parts' centres are :data:`GROUP_RATIO` apart and well
    separated (Ashman's D >= :data:`MODES_D`). None with fewer than 10 iterations."""
    xs = sorted(math.log(x) for x in times if x > 0)
    n = len(xs)
    if n < 10:
        return None
    m = max(3, math.ceil(MODES_SHARE * n))
    pre = [0.0]
    pre2 = [0.0]
    for x in xs:
        pre.append(pre[-1] + x)
        pre2.append(pre2[-1] + x * x)

    def sse(a: int, b: int) -> float:
        k = b - a
        s1 = pre[b] - pre[a]
        return max(pre2[b] - pre2[a] - s1 * s1 / k, 0.0)

    best = min(range(m, n - m + 1), key=lambda j: sse(0, j) + sse(j, n), default=None)
    if best is None:
        return None
    mu1, mu2 = (pre[best] - pre[0]) / best, (pre[n] - pre[best]) / (n - best)
    v1, v2 = sse(0, best) / best, sse(best, n) / (n - best)
    if mu2 - mu1 < math.log(GROUP_RATIO):
        return None
    d = math.sqrt(2) * (mu2 - mu1) / math.sqrt(max(v1 + v2, 1e-12))
    if d < MODES_D:
        return None
    return Groups(math.exp(mu1), math.exp(mu2), what)


def runs_needed(est: Estimate, threshold: float) -> int | None:
    """Runs per side for the run-to-run part of the interval to fit inside half the band (None: it already
    does, or instance noise is what limits)."""
    target = math.log(1.0 + threshold) / 2
    if not est.run_limited or est.between <= target or target <= 0:
        return None
    k = min(est.runs)
    return math.ceil(k * (est.between / target) ** 2)


def decide(ratio: float, lo: float | None, hi: float | None, threshold: float) -> tuple[str, str | None]:
    """The verdict for a time ratio and its interval (None: no interval, a plain threshold), and why it is
    inconclusive when it is."""
    up, down = 1.0 + threshold, 1.0 / (1.0 + threshold)
    if lo is None or hi is None:
        if ratio >= up:
            return "slower", None
        if ratio <= down:
            return "faster", None
        return "unchanged", None
    if lo > 1.0 and ratio >= up:
        return "slower", None
    if hi < 1.0 and ratio <= down:
        return "faster", None
    if lo >= down and hi <= up:
        return "unchanged", None
    return "inconclusive", f"the interval {pct_change(lo)}..{pct_change(hi)} reaches past ±{threshold * 100:g}%"


def noise_floor(lo: float | None, hi: float | None) -> float | None:
    """The smallest change (a fraction) the comparison could have told from noise: half the interval's width,
    on the log scale (``sqrt(hi/lo) - 1``). A true change of about this size just moves the interval off 1;
    a smaller one would read as no change. None without an interval."""
    if lo is None or hi is None or lo <= 0 or hi <= 0:
        return None
    return math.exp((math.log(hi) - math.log(lo)) / 2.0) - 1.0


def samples_needed(n: int, lo: float, hi: float, threshold: float) -> int:
    """Samples for an interval half as wide as the band (the width shrinks as 1/sqrt(n))."""
    half = (math.log(hi) - math.log(lo)) / 2
    target = math.log(1.0 + threshold) / 2
    if half <= 0 or target <= 0:
        return n
    return math.ceil(n * (half / target) ** 2)


def pct_change(r: float | None) -> str:
    """A ratio as a signed percentage change ('+4.0%'); '-' for None."""
    return "-" if r is None else f"{(r - 1.0) * 100:+.1f}%"


def pct(x: float | None) -> str:
    """A fraction as an unsigned ±percentage ('±0.4%'); '-' for None."""
    return "-" if x is None else f"±{x * 100:.1f}%"


__all__ = ["BENCH_RUN_QUANTILE", "CPU_BENCH_QUIET_RUN_NOISE", "CPU_BENCH_RUN_NOISE", "CPU_RUN_NOISE",
           "DEFAULT_CONFIDENCE", "DEFAULT_RESAMPLES", "DEFAULT_THRESHOLD", "GPU_RUN_NOISE", "GROUP_RATIO",
           "MIN_SAMPLES", "NO_RUN_NOISE", "PRIOR_RUNS", "PROCESSES", "QUIET_SLACK_CORES", "Estimate", "Groups",
           "RunNoise",
           "across_runs", "bootstrap_ratio", "decide", "iteration_modes", "mode_spread", "noise_floor", "paired_rounds",
           "pct", "pct_change", "quiet_machine", "run_groups", "runs_needed", "same_mode_rounds", "samples_needed",
           "seed_of"]
