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

Each row also says the smallest change it could have seen (``noise_floor``, profctl.analysis.stats), so an
``unchanged`` says how sure it is. The statistics live in profctl.analysis.stats; :func:`gate` decides
``--fail-if-slower`` for every kind of comparison (bench runs, summaries, ``profctl bench --ab``).

Iterations of one process are not independent runs: another process of the same program differs by more than
its iterations suggest (clock state, memory placement, scheduling). So a side may be several runs (``BASE1,BASE2,
BASE3``), and every interval also holds the noise between runs (profctl.analysis.stats.across_runs): measured
from the runs when a side has several, else profctl's measured default for the timing kind (CPU or GPU,
:func:`default_noise`; ``--run-noise`` sets it), and the report says plainly when one run per side is what limits
the verdict. docs/runs-and-compare.md and benchmarks/RESULTS.md ("compare noise", "run-to-run noise") have the
numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profctl import inputs, run_store
from profctl.analysis.compare_rows import (
    CASE_FIELDS,
    CLOCK_TOLERANCE,
    CPU_THRESHOLD,
    SHORT_MS,
    Floors,
    NotComparable,
    Regression,
    RegressionReport,
    RowResult,
    judge,
    run_noise_words,
)
from profctl.analysis.compare_summaries import group_index, pair_summary, summary_method
from profctl.analysis.stats import (
    CPU_RUN_NOISE,
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_THRESHOLD,
    GPU_RUN_NOISE,
    MIN_SAMPLES,
    NO_RUN_NOISE,
    RunNoise,
    across_runs,
    bootstrap_paired,
    bootstrap_ratio,
    decide,
    noise_floor,
    pct,
    pct_change,
    samples_needed,
    seed_of,
)
from profctl.errors import BadReport, UsageError
from profctl.schema.bench import BenchRow, bench_rows

#: kept importable from here (tests, older callers): the statistics live in profctl.analysis.stats
iterations_needed = samples_needed
_seed = seed_of
__all__ = [
    "CPU_THRESHOLD",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_RESAMPLES",
    "DEFAULT_THRESHOLD",
    "MIN_SAMPLES",
    "NO_RUN_NOISE",
    "Floors",
    "Gate",
    "NotComparable",
    "Regression",
    "RegressionReport",
    "RowResult",
    "RunNoise",
    "Side",
    "bootstrap_paired",
    "bootstrap_ratio",
    "case_label",
    "compare_runs",
    "decide",
    "default_noise",
    "default_threshold",
    "gate",
    "iterations_needed",
    "load_side",
    "load_sides",
    "noise_floor",
    "pct",
    "pct_change",
    "regressions",
]

# -------------------------------------------------------------------------------------------------- inputs
@dataclass
class Side:
    """One side of a comparison: a bench run's rows, or a kernel summary."""

    ref: str
    kind: str  # "bench" | "summary"
    path: Path
    name: str
    manifest: dict[str, Any] = field(default_factory=dict)
    status: str | None = None
    rows: list[BenchRow] = field(default_factory=list)
    summary: Any = None  # profctl.schema.Summary
    #: the runs of a side given as several (``A1,A2,A3``): each a Side of one run; empty for one run
    members: list[Side] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rows = bench_rows(self.rows)  # rows given as JSON objects

    @property
    def runs(self) -> list[Side]:
        """The side's runs: its members, or itself."""
        return self.members or [self]

    def describe(self) -> dict[str, Any]:
        m = self.manifest
        out = {"ref": self.ref, "kind": self.kind, "path": str(self.path), "name": self.name,
               "run_id": m.get("run_id"), "status": self.status, "label": m.get("label"),
               "gpu": _gpu_name(self), "git": (m.get("git") or {}).get("commit")}
        if self.members:
            out["runs"] = [r.describe() for r in self.members]
        return out


def load_sides(refs: str | Path, root: Path | str | None = None) -> Side:
    """One side of a comparison: a run or file (:func:`load_side`), or several runs of the same thing given as a
    comma list (``A1,A2,A3``), whose scatter measures the noise between runs."""
    parts = [p.strip() for p in str(refs).split(",")] if "," in str(refs) and not Path(refs).exists() else [str(refs)]
    if any(not p for p in parts):
        raise UsageError(f"{refs!r}: an empty run in the comma list")
    if len(parts) == 1:
        return load_side(parts[0], root)
    runs = [load_side(p, root) for p in parts]
    kinds = {r.kind for r in runs}
    if len(kinds) > 1:
        raise NotComparable(f"{refs}: the runs of one side must be of one kind (bench runs or summaries), not "
                            f"{' and '.join(sorted(_kind_words(r) for r in runs))}")
    names = [r.name for r in runs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"{refs}: {', '.join(twice)} given twice in one side")
    first = runs[0]
    return Side(ref=str(refs), kind=first.kind, path=first.path, name=f"{first.name} (+{len(runs) - 1} more)",
                manifest=first.manifest, status=first.status, rows=list(first.rows), summary=first.summary,
                members=runs)


def load_side(ref: str | Path, root: Path | str | None = None) -> Side:
    """A run (directory, id, unique part of an id, 'latest'), a bench JSON file, a summary file or a report."""
    p = Path(ref)
    if p.is_file() and p.name != run_store.MANIFEST:
        inp = inputs.file_input(p)
        manifest: dict[str, Any] = {}
        status = None
        if inp.run_dir is not None:
            info = run_store.load_run_dir(inp.run_dir)
            manifest, status = info.manifest, info.status
        common: dict[str, Any] = {"ref": str(ref), "path": p, "name": p.name, "manifest": manifest, "status": status}
        if inp.kind == "bench-json":
            return Side(kind="bench", rows=_bench_rows(p), **common)
        return Side(kind="summary", summary=inputs.read_summary(inp), **common)
    info = run_store.load_run(ref, root)
    d = info.path
    if info.status == "unreadable":
        raise BadReport(info.note or f"{d}: unreadable manifest")
    run: dict[str, Any] = {"ref": str(ref), "path": d, "name": info.run_id, "manifest": info.manifest,
                           "status": info.status}
    if (d / "bench.json").is_file():
        return Side(kind="bench", rows=_bench_rows(d / "bench.json"), **run)
    if (d / inputs.SUMMARY_NAME).is_file():
        return Side(kind="summary", summary=inputs.read_summary(inputs.file_input(d / inputs.SUMMARY_NAME)), **run)
    reports = [i for i in inputs.run_inputs(d) if i.kind != "bench-json"]
    if reports:
        from profctl.schema import concat

        return Side(kind="summary", summary=concat(inputs.read_summary(i) for i in reports), **run)
    if info.kind == "ab":
        raise BadReport(f"run {info.run_id} is an A/B (profctl bench --ab): it holds its own comparison of its two "
                        f"variants; profctl show {info.run_id}")
    raise BadReport(f"run {info.run_id} ({info.kind}) holds nothing to compare: no bench.json, no summary JSON, "
                    "no report file")


def _bench_rows(p: Path) -> list[BenchRow]:
    from profctl.readers import bench_json

    return bench_json.read(p, strict=False)



def compare_runs(base: Side, new: Side, *, threshold: float | None = None, confidence: float = DEFAULT_CONFIDENCE,
                 resamples: int = DEFAULT_RESAMPLES, by: str = "label", force: bool = False,
                 floors: Floors | None = None, limit: float | None = None,
                 noise: RunNoise | None = None) -> RegressionReport:
    """Pair the two sides' cases and decide each; NotComparable (with every reason) unless `force`.

    `threshold`: the band of no real change; None: the default for what was timed (:func:`default_threshold`),
    narrowed to `limit` (a ``--fail-if-slower`` limit) when that is smaller. `floors`: what a summary row needs
    to be judged (default :class:`Floors`). `noise`: the run-to-run noise each interval allows for (None: the
    default for what was timed, :func:`default_noise`; with several runs per side, measured too)."""
    if base.kind != new.kind:
        raise NotComparable(f"{base.name} is {_kind_words(base)} and {new.name} is {_kind_words(new)}: "
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
        rep = _compare_bench(base, new, threshold=threshold, confidence=confidence, resamples=resamples, by=by,
                             force=force, warnings=warnings, noise=noise)
    else:
        rep = _compare_summaries(base, new, threshold=threshold, confidence=confidence, resamples=resamples,
                                 force=force, warnings=warnings, floors=floors or Floors(), noise=noise)
    rep.threshold_why = why
    rep.noise = noise
    rep.runs = (len(base.runs), len(new.runs))
    return rep


def default_threshold(base: Side, new: Side) -> tuple[float, str]:
    """The band of no real change when none is given, and why: :data:`CPU_THRESHOLD` when everything compared
    was timed on a CPU (CPU ops and CPU bench rows move more between processes), else
    :data:`DEFAULT_THRESHOLD`."""
    if _all_cpu(base) and _all_cpu(new):
        return CPU_THRESHOLD, "the default for CPU timings"
    return DEFAULT_THRESHOLD, "the default"


def default_noise(base: Side, new: Side) -> RunNoise:
    """The run-to-run noise assumed where the runs cannot measure it: :data:`CPU_RUN_NOISE` when everything
    compared was timed on a CPU, else :data:`GPU_RUN_NOISE`."""
    return CPU_RUN_NOISE if _all_cpu(base) and _all_cpu(new) else GPU_RUN_NOISE


def _all_cpu(s: Side) -> bool:
    """Whether everything a side timed was timed on a CPU (CPU ops, CPU bench rows)."""
    if s.kind == "bench":
        return bool(s.rows) and all(r.device == "cpu" for r in s.rows)
    from profctl.schema import timed_rows

    rows = timed_rows(s.summary) if s.summary is not None else []
    return bool(rows) and all(k.extra.get("device") == "cpu" for k in rows)


def _kind_words(s: Side) -> str:
    return "a bench run" if s.kind == "bench" else "a kernel summary"


# ---- environment checks shared by both kinds
def _gpu_name(s: Side) -> str | None:
    m = s.manifest
    dev = m.get("device") or {}
    env = m.get("environment") or {}
    for cand in (dev.get("name"), dev.get("nvml_name"), env.get("gpu")):
        if cand and cand != "cpu":
            return str(cand)
    if s.summary is not None:
        names = _summary_gpus(s.summary.meta)
        if names:
            return ", ".join(sorted(names))
    return None


def _summary_gpus(meta: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    for g in meta.get("gpus") or []:
        if isinstance(g, dict) and g.get("name"):
            out.add(str(g["name"]))
    for d in meta.get("devices") or []:
        if isinstance(d, dict) and d.get("device"):
            out.add(str(d["device"]))
        elif isinstance(d, str) and d:
            out.add(d)
    return out


def _version(s: Side, key: str) -> str | None:
    """A version as the workload child reported it (its device event), else as the parent saw it."""
    dev = s.manifest.get("device") or {}
    env = s.manifest.get("environment") or {}
    v = dev.get(key) if key in ("torch", "cuda") else None
    return str(v) if v else (str(env[key]) if env.get(key) else None)


def _env_checks(base: Side, new: Side, backends: set[str]) -> tuple[list[str], list[str]]:
    """(reasons to refuse, warnings) from the two manifests."""
    reasons: list[str] = []
    warns: list[str] = []
    gb, gn = _gpu_name(base), _gpu_name(new)
    if gb and gn and gb != gn:
        reasons.append(f"different GPU: {gb} vs {gn}")
    checks = [("torch", "PyTorch"), ("cuda", "CUDA")]
    if "flash-attn" in backends:
        checks.append(("flash_attn", "flash-attn"))
    if "fa4" in backends:
        checks += [("fa4", "FA4"), ("cutlass_dsl", "CUTLASS DSL")]
    for key, name in checks:
        vb, vn = _version(base, key), _version(new, key)
        if vb and vn and vb != vn:
            reasons.append(f"{name} {vb} vs {vn}")
    db = (base.manifest.get("environment") or {}).get("driver") or (base.manifest.get("device") or {}).get("driver")
    dn = (new.manifest.get("environment") or {}).get("driver") or (new.manifest.get("device") or {}).get("driver")
    if db and dn and db != dn:
        warns.append(f"driver {db} vs {dn}")
    wb, wn = base.manifest.get("workload") or {}, new.manifest.get("workload") or {}
    if wb and wn:
        if bool(wb.get("flush_l2")) != bool(wn.get("flush_l2")):
            reasons.append(f"L2 flushed before each iteration in {'base' if wb.get('flush_l2') else 'new'} only")
        if wb.get("nvtx") != wn.get("nvtx"):
            warns.append("NVTX ranges on in one run only (a small per-iteration cost)")
        if wb.get("warmup") != wn.get("warmup"):
            warns.append(f"warm-up iterations {wb.get('warmup')} vs {wn.get('warmup')}")
    cb, cn = (base.manifest.get("git") or {}).get("commit"), (new.manifest.get("git") or {}).get("commit")
    if cb and cn and cb != cn:
        warns.append(f"code under test: {cb[:10]} -> {cn[:10]}")
    return reasons, warns


# ---- bench runs
def _name(r: BenchRow, by: str) -> str:
    return r.name if by == "label" else str(r.backend)


def _index(rows: list[BenchRow], by: str, fields: tuple[str, ...], warnings: list[str], side: str
           ) -> dict[tuple[Any, ...], BenchRow]:
    out: dict[tuple[Any, ...], BenchRow] = {}
    for r in rows:
        k = (_name(r, by), *(r.get(f) for f in fields))
        if k in out:
            warnings.append(f"{side}: two rows for {k[0]} {r.shape_label()} {r.pass_}; the first is used")
            continue
        out[k] = r
    return out


def _mismatch(bkeys: Iterable[tuple[Any, ...]], nkeys: Iterable[tuple[Any, ...]], names: tuple[str, ...]
              ) -> list[tuple[int, str]]:
    """(position, 'field: base values vs new values') for every key field whose values differ."""
    bl, nl = list(bkeys), list(nkeys)
    out = []
    for i, f in enumerate(names):
        vb, vn = {k[i] for k in bl}, {k[i] for k in nl}
        if vb != vn:
            out.append((i, f"{f} {_vals(vb)} vs {_vals(vn)}"))
    return out


def _vals(v: set[Any]) -> str:
    xs = sorted(str(x) for x in v)
    return ",".join(xs[:6]) + (",..." if len(xs) > 6 else "")


def _group_index(side: Side, by: str, fields: tuple[str, ...], warnings: list[str], label: str
                 ) -> dict[tuple[Any, ...], list[BenchRow]]:
    """Case key -> the side's rows for it, one per run that has it."""
    out: dict[tuple[Any, ...], list[BenchRow]] = {}
    for i, run in enumerate(side.runs):
        tag = label if len(side.runs) == 1 else f"{label} run {i + 1} ({run.name})"
        for k, r in _index(run.rows, by, fields, warnings, tag).items():
            out.setdefault(k, []).append(r)
    return out


def _side_checks(side: Side, label: str, backends: set[str]) -> list[str]:
    """Reasons the runs of one side are not runs of the same thing (different GPU or versions)."""
    out = []
    for other in side.runs[1:]:
        reasons, _ = _env_checks(side.runs[0], other, backends)
        out += [f"{label} runs {side.runs[0].name} and {other.name}: {r}" for r in reasons]
    return out


def _compare_bench(base: Side, new: Side, *, threshold: float, confidence: float, resamples: int, by: str,
                   force: bool, warnings: list[str], noise: RunNoise) -> RegressionReport:
    fields = CASE_FIELDS
    names = ("label" if by == "label" else "backend", *fields)
    bi = _group_index(base, by, fields, warnings, "base")
    ni = _group_index(new, by, fields, warnings, "new")
    backends = {str(r.backend) for side in (base, new) for run in side.runs for r in run.rows}
    reasons, warns = _env_checks(base, new, backends)
    reasons += _side_checks(base, "base", backends) + _side_checks(new, "new", backends)
    warnings += warns
    common = [k for k in bi if k in ni]
    forced: list[str] = []
    if not common:
        diffs = _mismatch(bi, ni, names)
        why = [d for _, d in diffs] or ["no case in common"]
        if diffs and diffs[0][0] == 0 and by == "label":
            why[0] += (" (rows pair by label, else backend: run both with the same --label to compare "
                       "different backends)")
        if not force:
            raise NotComparable("not comparable: " + "; ".join(reasons + why) + " (--force to compare anyway)")
        # forced: pair on the fields that do agree
        keep = [i for i in range(len(names)) if i not in {j for j, _ in diffs}]
        bi2 = {tuple(k[i] for i in keep): r for k, r in bi.items()}
        ni2 = {tuple(k[i] for i in keep): r for k, r in ni.items()}
        if len(bi2) != len(bi) or len(ni2) != len(ni) or not (set(bi2) & set(ni2)):
            raise NotComparable("not comparable even with --force: " + "; ".join(why) + ": no unambiguous pairs")
        forced += why
        pairs = [(bi2[k], ni2[k]) for k in bi2 if k in ni2]
    else:
        pairs = [(bi[k], ni[k]) for k in common]
        only_b, only_n = len(bi) - len(common), len(ni) - len(common)
        if only_b or only_n:
            warnings.append(f"{only_b} case(s) only in base and {only_n} only in new: not compared")
    if reasons:
        if not force:
            raise NotComparable("not comparable: " + "; ".join(reasons) + " (--force to compare anyway)")
        forced += reasons
    if any((r.device == "cuda") and not (r.clocks or {}).get("clock_samples")
           for pair in pairs for rs in pair for r in rs):
        warnings.append("no NVML clock samples for some GPU rows: clocks and throttling were not checked")
    rows = [_pair_bench(b, n, by=by, threshold=threshold, confidence=confidence, resamples=resamples, noise=noise)
            for b, n in pairs]
    return RegressionReport(base=base, new=new, rows=rows, threshold=threshold, confidence=confidence,
                            method=f"ratio of medians, {confidence * 100:g}% percentile bootstrap ({resamples} "
                                   f"resamples), {run_noise_words(noise, (len(base.runs), len(new.runs)))}",
                            by=by, warnings=warnings, forced=forced)


def _pair_bench(bs: list[BenchRow], ns: list[BenchRow], *, by: str, threshold: float, confidence: float,
                resamples: int, noise: RunNoise) -> RowResult:
    """One case over the runs of each side: failed, an interval over runs and iterations, or a threshold."""
    b, n = bs[0], ns[0]
    name = _name(n, by)
    case: dict[str, Any] = {"name": name, "backend_base": b.backend, "backend_new": n.backend,
                            "shape": n.shape_label(), "pass": n.pass_}
    case.update({f: n.get(f) for f in CASE_FIELDS if f != "pass"})
    ok_b, ok_n = [r for r in bs if r.ok], [r for r in ns if r.ok]
    rr = RowResult(case=case, base_ms=b.median_ms, new_ms=n.median_ms, base_tflops=b.tflops, new_tflops=n.tflops)
    if not ok_b or not ok_n:
        bad = next(r for r in ns if not r.ok) if not ok_n else None
        if ok_b and bad is not None:
            rr.verdict = "failed"
            rr.notes.append(f"new: {bad.status}: {(bad.reason or '')[:120]}")
        else:
            rr.notes.append(f"base: {b.status}" + (f"; new: {n.status}" if not ok_n else ""))
        return rr
    lost = [f"{side}: {len(rs) - len(ok)} of {len(rs)} runs {next(r.status for r in rs if not r.ok)}"
            for side, rs, ok in (("base", bs, ok_b), ("new", ns, ok_n)) if len(ok) < len(rs)]
    rr.notes += [f"{w}: left out" for w in lost]
    tb, tn = [list(r.times_ms or []) for r in ok_b], [list(r.times_ms or []) for r in ok_n]
    rr.n_base, rr.n_new = sum(map(len, tb)), sum(map(len, tn))
    fewest = min(len(t) for t in (*tb, *tn))
    if fewest >= MIN_SAMPLES:
        est = across_runs(tb, tn, noise=noise, confidence=confidence, resamples=resamples,
                          seed=_seed((name, case["shape"], case["pass"])))
        judge(rr, est, threshold, samples=max(map(len, (*tb, *tn))), more="--iters")
        rr.base_ms, rr.new_ms = _geomean([r.median_ms for r in ok_b]), _geomean([r.median_ms for r in ok_n])
        rr.base_tflops, rr.new_tflops = _scaled_tflops(ok_b[0], rr.base_ms), _scaled_tflops(ok_n[0], rr.new_ms)
    elif all(r.median_ms for r in (*ok_b, *ok_n)):
        rr.base_ms, rr.new_ms = _geomean([r.median_ms for r in ok_b]), _geomean([r.median_ms for r in ok_n])
        rr.ratio = (rr.new_ms or 0) / rr.base_ms if rr.base_ms else None
        if all(tb) and all(tn):
            rr.verdict = "inconclusive"
            rr.method = "too few samples"
            rr.notes.append(f"{fewest} iterations; at least {MIN_SAMPLES} needed for an interval")
        elif rr.ratio is not None:
            rr.method = "threshold"
            rr.verdict, _ = decide(rr.ratio, None, None, threshold)
            rr.notes.append("no per-iteration samples: plain threshold, no interval")
    else:
        return rr
    _clock_check(rr, b, n, threshold)
    return rr


def _geomean(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in vals) / len(vals)) if vals else None


def _scaled_tflops(r: BenchRow, ms: float | None) -> float | None:
    """The row's TFLOP/s at the side's median time (the same FLOPs over every run)."""
    if r.tflops is None or not r.median_ms or not ms:
        return r.tflops
    return r.tflops * r.median_ms / ms


def _clock_check(rr: RowResult, b: BenchRow, n: BenchRow, threshold: float) -> None:
    """Throttling, or SM clocks that differ between the sides, make a change that small untrustworthy.

    The slack is how far the two sides' median SM clocks are apart (the medians are what set the median
    times); without both medians, how far a throttled side's clock fell within its point."""
    cb, cn = b.clocks or {}, n.clocks or {}
    problems = [f"{side}: {w}" for side, w in (("base", b.clock_warning), ("new", n.clock_warning)) if w]
    slack = 0.0
    mb, mn = cb.get("sm_clock_mhz_median"), cn.get("sm_clock_mhz_median")
    if mb and mn:
        slack = abs(mn / mb - 1.0)
        if slack > CLOCK_TOLERANCE:
            problems.append(f"SM clock median {mb:.0f} vs {mn:.0f} MHz")
    elif problems:
        for c in (cb, cn):
            lo_, hi_ = c.get("sm_clock_mhz_min"), c.get("sm_clock_mhz_max")
            if lo_ and hi_:
                slack = max(slack, 1.0 - lo_ / hi_)
    if rr.base_ms is not None and rr.base_ms < SHORT_MS and n.device == "cuda":
        rr.notes.append(f"under {SHORT_MS} ms per iteration: so short a GPU time can be launch-bound and differ "
                        "between processes by more than the interval shows; confirm with another run")
    if not problems:
        return
    rr.notes.append("clocks: " + "; ".join(problems))
    if slack > 0 and rr.verdict in ("slower", "faster") and rr.ratio is not None and \
            abs(math.log(rr.ratio)) <= math.log(1.0 + threshold) + slack:
        rr.verdict = "inconclusive"
        rr.notes.append(f"a clock difference of {slack * 100:.1f}% could explain a change this small")



# ---- kernel summaries (the rows: profctl.analysis.compare_summaries)
def _summary_checks(base: Side, new: Side, warnings: list[str]) -> list[str]:
    """Reasons to refuse two summaries (tools, ncu versions, GPUs, versions); warnings added in place."""
    reasons, warns = _env_checks(base, new, set())
    reasons += _side_checks(base, "base", set()) + _side_checks(new, "new", set())
    warnings += warns
    tb = {x.tool for run in base.runs for x in run.summary.sources}
    tn = {x.tool for run in new.runs for x in run.summary.sources}
    if tb != tn:
        reasons.append(f"different tools: {_vals(tb)} vs {_vals(tn)} (ncu replays each kernel alone; its times do "
                       "not compare with a timeline's)")
    else:
        for tool in sorted(tb):
            vb = {x.tool_version for run in base.runs for x in run.summary.sources
                  if x.tool == tool and x.tool_version}
            vn = {x.tool_version for run in new.runs for x in run.summary.sources
                  if x.tool == tool and x.tool_version}
            if vb and vn and vb != vn:
                msg = f"{tool} {_vals(vb)} vs {_vals(vn)}"
                (reasons if tool == "ncu" else warnings).append(msg)
    return reasons


def _compare_summaries(base: Side, new: Side, *, threshold: float, confidence: float, resamples: int, force: bool,
                       warnings: list[str], floors: Floors, noise: RunNoise) -> RegressionReport:
    reasons = _summary_checks(base, new, warnings)
    bi = group_index([r.summary for r in base.runs])
    ni = group_index([r.summary for r in new.runs])
    common = [k for k in bi if k in ni]
    if not common:
        ex_b = ", ".join(sorted({v[0].short for v in bi.values()})[:3]) or "none"
        ex_n = ", ".join(sorted({v[0].short for v in ni.values()})[:3]) or "none"
        raise NotComparable(f"not comparable: no kernel in common (base: {ex_b}; new: {ex_n})")
    if reasons and not force:
        raise NotComparable("not comparable: " + "; ".join(reasons) + " (--force to compare anyway)")
    only_b, only_n = len(bi) - len(common), len(ni) - len(common)
    if only_b or only_n:
        warnings.append(f"{only_b} kernel(s) only in base and {only_n} only in new: not compared")
    rows = [pair_summary(k, bi[k], ni[k], threshold=threshold, confidence=confidence, resamples=resamples,
                          floors=floors, noise=noise) for k in common]
    rows.sort(key=lambda r: (r.verdict == "not judged", -(r.base_ms or 0)))
    runs = (len(base.runs), len(new.runs))
    method = summary_method(rows, threshold, confidence, resamples, floors)
    if any(r.method == "bootstrap" for r in rows):
        method += f"; {run_noise_words(noise, runs)}"
    return RegressionReport(base=base, new=new, rows=rows, threshold=threshold, confidence=confidence,
                            method=method, by="kernel", warnings=warnings, forced=reasons if force else [],
                            floors=floors)



# ---------------------------------------------------------------------------------------------------- the gate
def regressions(cmp: RegressionReport, limit: float, *, strict: bool = False) -> list[RowResult]:
    """Rows that fail `--fail-if-slower limit` (:func:`gate`'s rule): slower beyond the limit, a case that
    stopped working, and with `strict` an inconclusive case whose estimate is beyond the limit. ``not judged``
    rows never fail."""
    out = []
    for r in cmp.rows:
        if r.verdict == "failed" or (r.verdict == "slower" and r.ratio is not None and r.ratio - 1.0 > limit) or \
                (strict and r.verdict == "inconclusive" and r.ratio is not None and r.ratio - 1.0 > limit):
            out.append(r)
    return out


@dataclass
class Gate:
    """What ``--fail-if-slower`` decided: the rows that fail it, and the inconclusive ones beyond the limit that
    pass only because ``--strict`` was not given."""

    limit: float
    strict: bool
    failing: list[RowResult]
    beyond: list[RowResult]

    @property
    def passed(self) -> bool:
        return not self.failing

    @property
    def exit_code(self) -> int:
        """0 when it passed, 1 (:class:`Regression`) when it failed."""
        return 0 if self.passed else Regression.exit_code

    def error(self) -> Regression | None:
        """The one-line error that fails the run (None when it passed)."""
        if not self.failing:
            return None
        first = self.failing[0]
        if first.verdict == "failed":
            what = f"{case_label(first)} {first.verdict}"
        else:
            what = f"{case_label(first)} {(first.change or 0.0) * 100:+.1f}%" + (
                f" (CI {first.ci_lo * 100 - 100:+.1f}%..{first.ci_hi * 100 - 100:+.1f}%)"
                if first.ci_lo is not None and first.ci_hi is not None else " (threshold only)")
            if first.verdict == "inconclusive":
                what += ", inconclusive (--strict)"
        more = f" and {len(self.failing) - 1} more" if len(self.failing) > 1 else ""
        return Regression(f"regression beyond --fail-if-slower {self.limit * 100:g}%: {what}{more}")

    def warning(self) -> str | None:
        """What passed only for want of --strict, as one warning line."""
        if not self.beyond or self.strict:
            return None
        return (f"{len(self.beyond)} inconclusive case(s) with an estimate beyond {self.limit * 100:g}% (e.g. "
                f"{case_label(self.beyond[0])}); --strict makes them fail")


def gate(cmp: RegressionReport, limit: float, *, strict: bool = False) -> Gate:
    """``--fail-if-slower limit``, the same for every kind of comparison (bench runs, nsys/torch/ncu summaries,
    ``profctl bench --ab``): it fails on a row that is ``slower`` (its interval above 1, its estimate past the
    threshold) by more than `limit`, or that stopped working; with `strict` also on an ``inconclusive`` row
    whose estimate is beyond `limit`. ``unchanged``, ``faster`` and ``not judged`` rows never fail."""
    beyond = [r for r in cmp.rows if r.verdict == "inconclusive" and r.ratio is not None and r.ratio - 1 > limit]
    return Gate(limit=limit, strict=strict, failing=regressions(cmp, limit, strict=strict), beyond=beyond)


def case_label(r: RowResult) -> str:
    """The row's case in a few words: kernel [range], or name (backends) shape pass."""
    c = r.case
    if "kernel" in c:
        return f"{c['kernel']}" + (f" [{c['range']}]" if c.get("range") else "")
    b = c["name"]
    if c.get("backend_base") != c.get("backend_new"):
        b += f" ({c['backend_base']}->{c['backend_new']})"
    return f"{b} {c['shape']} {c['pass']}"
