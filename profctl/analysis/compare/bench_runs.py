"""Bench runs compared (``profctl compare`` of two bench runs): rows paired by (label or backend, shape, pass),
the ratio of medians over every measured iteration with a bootstrap interval that also holds the noise between
runs (profctl.analysis.compare.stats), and the SM clocks checked."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from profctl.analysis.compare import stats
from profctl.analysis.compare.checks import env_checks, machine_checks, side_checks, values_text
from profctl.analysis.compare.rows import (
    CASE_FIELDS,
    CLOCK_TOLERANCE,
    SHORT_MS,
    Comparison,
    RowResult,
    groups_words,
    hold_for_machine,
    judge,
    run_noise_words,
)
from profctl.analysis.compare.stats import (
    MIN_SAMPLES,
    Groups,
    RunNoise,
    across_runs,
    decide,
    iteration_modes,
    run_groups,
    seed_of,
)
from profctl.errors import NotComparable
from profctl.inputs import Side
from profctl.schema.bench import BenchRow


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
            out.append((i, f"{f} {values_text(vb)} vs {values_text(vn)}"))
    return out


def _group_index(side: Side, by: str, fields: tuple[str, ...], warnings: list[str], label: str
                 ) -> dict[tuple[Any, ...], list[BenchRow]]:
    """Case key -> the side's rows for it, one per run that has it."""
    out: dict[tuple[Any, ...], list[BenchRow]] = {}
    for i, run in enumerate(side.runs):
        tag = label if len(side.runs) == 1 else f"{label} run {i + 1} ({run.name})"
        for k, r in _index(run.rows, by, fields, warnings, tag).items():
            out.setdefault(k, []).append(r)
    return out


def compare_bench(base: Side, new: Side, *, threshold: float, confidence: float, resamples: int, by: str,
                   force: bool, warnings: list[str], noise: RunNoise) -> Comparison:
    fields = CASE_FIELDS
    names = ("label" if by == "label" else "backend", *fields)
    bi = _group_index(base, by, fields, warnings, "base")
    ni = _group_index(new, by, fields, warnings, "new")
    backends = {str(r.backend) for side in (base, new) for run in side.runs for r in run.rows}
    reasons, warns = env_checks(base, new, backends)
    reasons += side_checks(base, "base", backends) + side_checks(new, "new", backends)
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
    busy = noise is stats.CPU_BENCH_RUN_NOISE and _recorded_state(base, new)
    rows = [_pair_bench(b, n, by=by, threshold=threshold, confidence=confidence, resamples=resamples, noise=noise,
                        busy=busy)
            for b, n in pairs]
    states, held = machine_checks(base, new)
    warnings += states
    if held:
        hold_for_machine(rows, held)
    units = next((r.processes for r in rows if r.processes), None)
    method = (f"ratio of medians, {confidence * 100:g}% percentile bootstrap ({resamples} resamples), "
              f"{run_noise_words(noise, (len(base.runs), len(new.runs)), processes=units)}")
    grouped = groups_words(rows)
    return Comparison(base=base, new=new, rows=rows, threshold=threshold, confidence=confidence,
                      method=method + (f"; {grouped}" if grouped else ""), by=by, warnings=warnings, forced=forced)


def _units(rows: list[BenchRow]) -> list[list[float]]:
    """A side's runs of one case as the units of run-to-run noise: each process's steps (a run of
    ``bench --processes N`` is N of them), an empty list for a row without steps."""
    return [t for r in rows for t in (r.process_times() or [[]])]


def _groups(tb: list[list[float]], tn: list[list[float]], unit: str = "run") -> Groups | None:
    """The widest two groups among a case's timings: each side's per-run (per-process) medians, each run's
    iterations."""
    import statistics

    found: list[Groups] = []
    for label, side in (("base", tb), ("new", tn)):
        g = run_groups([statistics.median(t) for t in side], f"{label}'s per-{unit} medians")
        if g is not None:
            found.append(g)
        for i, t in enumerate(side):
            m = iteration_modes(t, f"{label}'s iterations" + (f" ({unit} {i + 1})" if len(side) > 1 else ""))
            if m is not None:
                found.append(m)
    return max(found, key=lambda g: g.ratio, default=None)


def _pair_bench(bs: list[BenchRow], ns: list[BenchRow], *, by: str, threshold: float, confidence: float,
                resamples: int, noise: RunNoise, busy: bool = False) -> RowResult:
    """One case over the runs of each side: failed, an interval over runs and iterations, or a threshold; `busy`:
    the runs recorded a busy machine (their note then points to an A/B)."""
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
    tb, tn = _units(ok_b), _units(ok_n)
    rr.n_base, rr.n_new = sum(map(len, tb)), sum(map(len, tn))
    fewest = min(len(t) for t in (*tb, *tn))
    if fewest >= MIN_SAMPLES:
        est = across_runs(tb, tn, noise=noise, confidence=confidence, resamples=resamples,
                          seed=seed_of((name, case["shape"], case["pass"])), modes=True,
                          quantile=stats.BENCH_RUN_QUANTILE)
        unit = "process" if len(tb) > len(ok_b) or len(tn) > len(ok_n) else "run"
        judge(rr, est, threshold, samples=max(map(len, (*tb, *tn))), more="--iters", groups=_groups(tb, tn, unit),
              unit=unit, busy=busy)
        rr.runs = (len(ok_b), len(ok_n))
        rr.processes = est.runs
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


def _recorded_state(base: Side, new: Side) -> bool:
    """Whether some run of either side recorded a machine state (a run that recorded none is not known busy)."""
    return any(isinstance(r.manifest.machine, dict) and r.manifest.machine for side in (base, new) for r in side.runs)


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
