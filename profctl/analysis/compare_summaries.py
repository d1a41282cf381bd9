"""Kernel summaries compared instance by instance (nsys, torch.profiler, ncu; profctl.analysis.regression's
second kind of input): rows paired by kernel identity and NVTX range, the ratio of medians over each row's
instances with a bootstrap interval, a first call left out, warm-up ranges and rows under the floors not judged,
and summaries written before samples existed compared by a plain threshold (``method: threshold``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profctl.analysis.compare_rows import Floors, RowResult
from profctl.analysis.stats import bootstrap_ratio, decide, samples_needed, seed_of


# ---- kernel summaries
@dataclass
class _Entry:
    """One kernel (op) of a summary as a comparison sees it: its rows of one (match key, range) combined."""

    short: str
    med_ns: float
    count: int
    total_ns: float
    samples: list[Any] = field(default_factory=list)  # profctl.schema.samples.Samples, one per row
    rows: int = 0
    bare: int = 0  # rows without samples: any makes the whole entry threshold-only
    cpu: bool = False  # a CPU op standing in for kernels (a CPU-only trace)


def _summary_index(s: Any) -> dict[tuple[str, str], _Entry]:
    """(match key, NVTX range) -> median, count, total and samples; duplicates (merged summaries) combine
    (medians count-weighted, samples concatenated)."""
    from profctl.kernels import match_key
    from profctl.schema import timed_rows
    from profctl.schema.samples import samples_of

    out: dict[tuple[str, str], _Entry] = {}
    for k in timed_rows(s):
        key = (match_key(k.name), k.nvtx_range or "")
        e = out.get(key)
        if e is None:
            e = out[key] = _Entry(short=k.short_name, med_ns=float(k.med_ns), count=0, total_ns=0.0,
                                  cpu=k.extra.get("device") == "cpu")
        elif e.count + k.count:
            e.med_ns = (e.med_ns * e.count + k.med_ns * k.count) / (e.count + k.count)
        e.count += int(k.count)
        e.total_ns += float(k.total_ns)
        e.rows += 1
        smp = samples_of(k.extra)
        if smp is None:
            e.bare += 1
        else:
            e.samples.append(smp)
    return out


def _phase(path: str) -> str | None:
    """The profctl phase (warmup, measure, setup) a range path lies in, if it follows profctl's scheme."""
    from profctl import nvtx

    if not path:
        return None
    key = nvtx.parse_range(path)
    if key is not None and key.phase:
        return key.phase
    for dom, _, parts in nvtx.split_canonical(path):
        if dom == nvtx.DOMAIN:
            for p in parts:
                if p in nvtx.PHASES:
                    return p
    return None


def _usable(e: _Entry, path: str) -> tuple[list[float] | None, list[str]]:
    """The samples a comparison uses (None: the summary has none, a plain threshold) and what was left out:
    a first call, when the row is not in a measured range and has 3 instances or more."""
    from profctl import nvtx
    from profctl.schema.samples import merged

    if e.bare or not e.samples:
        return None, []
    smp = merged(e.samples)
    assert smp is not None
    vals, notes = list(smp.values), []
    if smp.first_call and _phase(path) != nvtx.MEASURE and len(vals) >= 3:
        vals = vals[1:]
        notes.append("first call left out")
    if smp.subsampled:
        notes.append(f"{len(smp.values)} of {smp.of} instances sampled")
    return vals, notes


def _not_judged(b: _Entry, n: _Entry, nb: int, nn: int, path: str, floors: Floors) -> str | None:
    """Why a pair is not judged (below a floor, or a warm-up range); None when it is judged."""
    from profctl import nvtx

    phase = _phase(path)
    if phase in (nvtx.WARMUP, nvtx.SETUP):
        return f"in the {phase} range"
    total = max(b.total_ns, n.total_ns)
    if total < floors.total_ns:
        return f"{total / 1e6:.3g} ms in total, under the floor of {floors.total_ns / 1e6:g} ms"
    floor = floors.cpu_instance_ns if (b.cpu or n.cpu) else floors.instance_ns
    if max(b.med_ns, n.med_ns) < floor:
        why = ("a CPU op that short is mostly dispatch and allocation, which move between processes" if b.cpu
               else "profiler overhead and timer resolution are of that size")
        return f"{max(b.med_ns, n.med_ns) / 1e3:.3g} us per instance, under {floor / 1e3:g} us ({why})"
    if min(nb, nn) < floors.samples:
        return f"{min(nb, nn)} instance(s) on a side, fewer than {floors.samples}"
    return None


def _pair_summary(key: tuple[str, str], b: _Entry, n: _Entry, *, threshold: float, confidence: float,
                  resamples: int, floors: Floors) -> RowResult:
    """One kernel (op) of both summaries: not judged, a bootstrap over its instances, or a plain threshold."""
    sb, notes_b = _usable(b, key[1])
    sn, notes_n = _usable(n, key[1])
    bootstrap = sb is not None and sn is not None
    rr = RowResult(case={"kernel": n.short, "range": key[1], "match_key": key[0]}, base_ms=b.med_ns / 1e6,
                   new_ms=n.med_ns / 1e6, n_base=len(sb) if sb is not None else b.count,
                   n_new=len(sn) if sn is not None else n.count, method="bootstrap" if bootstrap else "threshold")
    if b.count != n.count:
        rr.notes.append(f"instances {b.count} vs {n.count}")
    if b.med_ns > 0 and n.med_ns > 0:
        rr.ratio = n.med_ns / b.med_ns
    why = _not_judged(b, n, rr.n_base, rr.n_new, key[1], floors)
    if why is not None:
        rr.verdict = "not judged"
        rr.notes.insert(0, why)
        return rr
    if sb is None or sn is None:
        if rr.ratio is not None:
            rr.verdict, _ = decide(rr.ratio, None, None, threshold)
            rr.notes.append("no per-instance samples: plain threshold, no interval")
        return rr
    if _median(sb) <= 0 or _median(sn) <= 0:
        rr.verdict = "not judged"
        rr.notes.insert(0, "median time 0: nothing to compare")
        return rr
    ratio, lo, hi = bootstrap_ratio(sb, sn, confidence=confidence, resamples=resamples, seed=seed_of(key))
    rr.base_ms, rr.new_ms = _median(sb) / 1e6, _median(sn) / 1e6
    rr.ratio, rr.ci_lo, rr.ci_hi = ratio, lo, hi
    rr.verdict, why_inc = decide(ratio, lo, hi, threshold)
    rr.notes += sorted(set(notes_b) | set(notes_n))
    if why_inc:
        need = samples_needed(max(len(sb), len(sn)), lo, hi, threshold)
        rr.notes.append(why_inc + (f"; about {need} instances would tell" if need > max(len(sb), len(sn)) else ""))
    return rr


def _median(xs: list[float]) -> float:
    import statistics

    return float(statistics.median(xs))


def _summary_method(rows: list[RowResult], threshold: float, confidence: float, resamples: int,
                    floors: Floors) -> str:
    judged = [r for r in rows if r.verdict != "not judged"]
    boot = sum(r.method == "bootstrap" for r in judged)
    interval = (f"ratio of medians over each kernel's instances, {confidence * 100:g}% percentile bootstrap "
                f"({resamples} resamples)")
    plain = (f"median kernel time, plain ±{threshold * 100:g}% threshold: no confidence interval (a summary "
             "without per-instance samples, written before profctl kept them)")
    if judged and boot == len(judged):
        what = interval
    elif boot:
        what = f"{interval}; {len(judged) - boot} kernel(s) by {plain}"
    else:
        what = plain
    return f"{what}; {floors.describe()}"


