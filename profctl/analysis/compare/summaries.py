"""Kernel summaries compared instance by instance (nsys, torch.profiler, ncu; profctl.analysis.compare's
second kind of input): rows paired by kernel identity and NVTX range, the ratio of medians over each row's
instances with a bootstrap interval, a first call left out, warm-up ranges and rows under the floors not judged,
and summaries written before samples existed compared by a plain threshold (``method: threshold``)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from profctl import nvtx
from profctl.analysis.compare.checks import env_checks, machine_checks, side_checks, values_text
from profctl.analysis.compare.rows import (
    Comparison,
    Floors,
    RowResult,
    groups_words,
    hold_for_machine,
    judge,
    run_noise_words,
)
from profctl.analysis.compare.stats import RunNoise, across_runs, decide, run_groups, seed_of
from profctl.errors import NotComparable
from profctl.inputs import Side
from profctl.kernels import match_key
from profctl.schema import Summary, timed_rows
from profctl.schema.samples import merged, samples_of


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


def group_index(summaries: list[Any]) -> dict[tuple[str, str], list[_Entry]]:
    """(match key, NVTX range) -> one entry per run (summary) that has it."""
    out: dict[tuple[str, str], list[_Entry]] = {}
    for s in summaries:
        for k, e in _summary_index(s).items():
            out.setdefault(k, []).append(e)
    return out


def _combined(es: list[_Entry]) -> _Entry:
    """The runs' entries of one kernel as one (for the floors and the threshold-only path)."""
    if len(es) == 1:
        return es[0]
    count = sum(e.count for e in es)
    med = sum(e.med_ns * e.count for e in es) / count if count else es[0].med_ns
    return _Entry(short=es[0].short, med_ns=med, count=count // len(es), total_ns=sum(e.total_ns for e in es) / len(es),
                  samples=[x for e in es for x in e.samples], rows=sum(e.rows for e in es),
                  bare=sum(e.bare for e in es), cpu=any(e.cpu for e in es))


#: an ncu report's one duration of a launch moves by about this much between recordings with the clocks left free
#: (--clock-control none: the same kernels ran at 1653-1786 MHz under ncu on the H200, tests/data/fixes and pairs);
#: a single launch is judged against the larger of it and the threshold
NCU_SINGLE_SPREAD = 0.05


def pair_summary(key: tuple[str, str], bs: list[_Entry], ns: list[_Entry], *, threshold: float,
                  confidence: float, resamples: int, floors: Floors, noise: RunNoise, tool: str | None = None
                  ) -> RowResult:
    """One kernel (op) over the runs of both sides: not judged, an interval over runs and instances, or a plain
    threshold; an ncu report's single launches by their one duration each (ncu replays a launch to measure it, so
    one launch is all there is)."""
    b, n = _combined(bs), _combined(ns)
    usable = [_usable(e, key[1]) for e in (*bs, *ns)]
    sb = [u[0] for u in usable[:len(bs)]]
    sn = [u[0] for u in usable[len(bs):]]
    left_out = sorted({note for _, notes in usable for note in notes})
    bootstrap = all(x is not None for x in (*sb, *sn))
    rr = RowResult(case={"kernel": n.short, "range": key[1], "match_key": key[0]}, base_ms=b.med_ns / 1e6,
                   new_ms=n.med_ns / 1e6, n_base=sum(len(x) for x in sb if x) if bootstrap else b.count,
                   n_new=sum(len(x) for x in sn if x) if bootstrap else n.count,
                   method="bootstrap" if bootstrap else "threshold", runs=(len(bs), len(ns)))
    if b.count != n.count:
        rr.notes.append(f"instances {b.count} vs {n.count}" + (" (a run's mean)" if rr.runs != (1, 1) else ""))
    if b.med_ns > 0 and n.med_ns > 0:
        rr.ratio = n.med_ns / b.med_ns
    fewest_b = min(len(x or ()) for x in sb) if bootstrap else rr.n_base
    fewest_n = min(len(x or ()) for x in sn) if bootstrap else rr.n_new
    why = _not_judged(b, n, fewest_b, fewest_n, key[1], floors)
    if why is not None and tool == "ncu" and why.endswith(f"fewer than {floors.samples}") and rr.ratio is not None:
        band = max(threshold, NCU_SINGLE_SPREAD)
        rr.method = "single launch"
        rr.verdict, _ = decide(rr.ratio, None, None, band)
        rr.notes.append(f"{b.count} vs {n.count} launch(es): ncu's one duration each, judged against ±"
                        f"{band * 100:g}% (no interval: ncu measures a launch once; its durations move about "
                        f"{NCU_SINGLE_SPREAD * 100:g}% between recordings with free clocks)")
        return rr
    if why is not None:
        rr.verdict = "not judged"
        rr.notes.insert(0, why)
        return rr
    if not bootstrap:
        if rr.ratio is not None:
            rr.verdict, _ = decide(rr.ratio, None, None, threshold)
            rr.notes.append("no per-instance samples: plain threshold, no interval")
        return rr
    runs_b, runs_n = [x for x in sb if x], [x for x in sn if x]
    if any(_median(x) <= 0 for x in (*runs_b, *runs_n)):
        rr.verdict = "not judged"
        rr.notes.insert(0, "median time 0: nothing to compare")
        return rr
    est = across_runs(runs_b, runs_n, noise=noise, confidence=confidence, resamples=resamples, seed=seed_of(key))
    rr.base_ms = _geo([_median(x) for x in runs_b]) / 1e6
    rr.new_ms = _geo([_median(x) for x in runs_n]) / 1e6
    rr.notes += left_out
    groups = max((g for label, runs in (("base", runs_b), ("new", runs_n))
                  for g in [run_groups([_median(x) / 1e6 for x in runs], f"{label}'s per-run medians")]
                  if g is not None), key=lambda g: g.ratio, default=None)
    judge(rr, est, threshold, samples=max(len(x) for x in (*runs_b, *runs_n)), more="instances", groups=groups)
    return rr


def _names(index: dict[tuple[str, str], list[_Entry]], n: int = 3) -> str:
    names = sorted({v[0].short for v in index.values()})
    if not names:
        return "none"
    return ", ".join(names[:n]) + (f", ... ({len(names) - n} more)" if len(names) > n else "")


def _by_name_where_ranges_are_missing(bi: dict[tuple[str, str], list[_Entry]], ni: dict[tuple[str, str], list[_Entry]]
                                      ) -> tuple[dict[tuple[str, str], list[_Entry]],
                                                 dict[tuple[str, str], list[_Entry]], str]:
    """Where no kernel shares a range with the other side -- one side's kernels carry NVTX ranges and the other's
    none (a profctl run against a plain ncu report), or the two programs named their ranges differently -- pair them
    by kernel name alone, each side's ranges pooled; the indexes unchanged and '' otherwise."""
    ranged_b, ranged_n = any(k[1] for k in bi), any(k[1] for k in ni)
    if not ranged_b and not ranged_n:
        return bi, ni, ""

    def pooled(ix: dict[tuple[str, str], list[_Entry]]) -> dict[tuple[str, str], list[_Entry]]:
        out: dict[tuple[str, str], list[_Entry]] = {}
        for (name, _), es in ix.items():
            out.setdefault((name, ""), []).extend(es)
        return out

    pb, pn = pooled(bi), pooled(ni)
    shared = [k for k in pb if k in pn]
    if not shared:
        return bi, ni, ""
    why = ("their NVTX ranges differ" if ranged_b and ranged_n else
           f"{'base' if ranged_b else 'new'}'s kernels carry NVTX ranges and the other side's none")
    return pb, pn, (f"paired by kernel name: {why} ({len(shared)} kernel name(s) in common; each side's ranges "
                    "pooled)")


def _geo(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def summary_method(rows: list[RowResult], threshold: float, confidence: float, resamples: int,
                    floors: Floors) -> str:
    judged = [r for r in rows if r.verdict != "not judged"]
    boot = sum(r.method == "bootstrap" for r in judged)
    interval = (f"ratio of medians over each kernel's instances, {confidence * 100:g}% percentile bootstrap "
                f"({resamples} resamples)")
    plain = (f"median kernel time, plain ±{threshold * 100:g}% threshold: no confidence interval (a summary "
             "without per-instance samples, written before profctl kept them)")
    single = sum(r.method == "single launch" for r in judged)
    if single:
        plain = (f"ncu's one duration per launch against ±{max(threshold, NCU_SINGLE_SPREAD) * 100:g}% (ncu "
                 "measures each launch once: no interval)")
    if judged and boot == len(judged):
        what = interval
    elif boot:
        what = f"{interval}; {len(judged) - boot} kernel(s) by {plain}"
    else:
        what = plain
    return f"{what}; {floors.describe()}"


def _summary(side: Side) -> Summary:
    """A summary side's Summary (profctl.inputs.load_side gives one to every summary side)."""
    assert side.summary is not None, side.name
    return side.summary


def summary_checks(base: Side, new: Side, warnings: list[str]) -> list[str]:
    """Reasons to refuse two summaries (tools, ncu versions, GPUs, versions); warnings added in place."""
    reasons, warns = env_checks(base, new, set())
    reasons += side_checks(base, "base", set()) + side_checks(new, "new", set())
    warnings += warns
    tb = {x.tool for run in base.runs for x in _summary(run).sources}
    tn = {x.tool for run in new.runs for x in _summary(run).sources}
    if tb != tn:
        reasons.append(f"different tools: {values_text(tb)} vs {values_text(tn)} (ncu replays each kernel alone; its "
                       "times do not compare with a timeline's)")
    else:
        for tool in sorted(tb):
            vb = {x.tool_version for run in base.runs for x in _summary(run).sources
                  if x.tool == tool and x.tool_version}
            vn = {x.tool_version for run in new.runs for x in _summary(run).sources
                  if x.tool == tool and x.tool_version}
            if vb and vn and vb != vn:
                msg = f"{tool} {values_text(vb)} vs {values_text(vn)}"
                (reasons if tool == "ncu" else warnings).append(msg)
    return reasons


def _shape_keys(side: Side) -> set[str]:
    """The attention shapes a side's profctl NVTX ranges name (``backend[b1,sq1024,...]``)."""
    out: set[str] = set()
    for run in side.runs:
        for r in _summary(run).ranges:
            key = nvtx.parse_range(r.name)
            if key is not None and key.shape_key:
                out.add(key.shape_key)
    return out


def _launch_grids(side: Side) -> dict[str, set[tuple[int, ...]]]:
    """match key -> the launch grids its kernels ran with (nsys summaries keep them, ``extra.launch_configs``)."""
    out: dict[str, set[tuple[int, ...]]] = {}
    for run in side.runs:
        for k in timed_rows(_summary(run)):
            for c in k.extra.get("launch_configs") or []:
                g = c.get("grid") if isinstance(c, dict) else None
                if isinstance(g, list) and g:
                    out.setdefault(match_key(k.name), set()).add(tuple(int(x) for x in g))
    return out


#: the kernels in common (with launch grids on both sides) that ran other grids, past this share: other problems
GRID_MISMATCH_SHARE = 0.5


def shape_checks(base: Side, new: Side, bi: dict[tuple[str, str], list[_Entry]],
                 ni: dict[tuple[str, str], list[_Entry]], common: list[tuple[str, str]]) -> list[str]:
    """Reasons two captures timed different problems (as bench runs of different shapes are refused): the shapes
    their profctl NVTX ranges name do not meet, or most kernels in common ran other launch grids (a kernel's grid
    follows its problem's size: a code change moves one kernel's grid, another shape moves nearly all)."""
    sb, sn = _shape_keys(base), _shape_keys(new)
    if sb and sn and not sb & sn:
        return [f"other shapes: {values_text(sb)} vs {values_text(sn)}"]
    gb, gn = _launch_grids(base), _launch_grids(new)
    keys = sorted({k[0] for k in common if gb.get(k[0]) and gn.get(k[0])})
    apart = [k for k in keys if not gb[k] & gn[k]]
    if len(keys) >= 2 and len(apart) > GRID_MISMATCH_SHARE * len(keys):
        name = next(v[0].short for kk, v in bi.items() if kk[0] == apart[0])[:60]

        def grid(gs: set[tuple[int, ...]]) -> str:
            return ",".join("x".join(map(str, g)) for g in sorted(gs)[:2]) + (",..." if len(gs) > 2 else "")

        return [f"{len(apart)} of the {len(keys)} kernels in common ran other launch grids (e.g. {name} "
                f"{grid(gb[apart[0]])} vs {grid(gn[apart[0]])}): other shapes or problem sizes"]
    return []


def compare_summaries(base: Side, new: Side, *, threshold: float, confidence: float, resamples: int, force: bool,
                       warnings: list[str], floors: Floors, noise: RunNoise) -> Comparison:
    reasons = summary_checks(base, new, warnings)
    bi = group_index([_summary(r) for r in base.runs])
    ni = group_index([_summary(r) for r in new.runs])
    common = [k for k in bi if k in ni]
    if not common:
        bi, ni, said = _by_name_where_ranges_are_missing(bi, ni)
        common = [k for k in bi if k in ni]
        if said:
            warnings.append(said)
    if not common:
        raise NotComparable(f"not comparable: no kernel in common (base: {_names(bi)}; new: {_names(ni)})")
    reasons += shape_checks(base, new, bi, ni, common)
    if reasons and not force:
        raise NotComparable("not comparable: " + "; ".join(reasons) + " (--force to compare anyway)")
    only_b, only_n = len(bi) - len(common), len(ni) - len(common)
    if only_b or only_n:
        warnings.append(f"{only_b} kernel(s) only in base and {only_n} only in new: not compared")
    tools = {x.tool for side in (base, new) for run in side.runs for x in _summary(run).sources}
    tool = next(iter(tools)) if len(tools) == 1 else None
    rows = [pair_summary(k, bi[k], ni[k], threshold=threshold, confidence=confidence, resamples=resamples,
                          floors=floors, noise=noise, tool=tool) for k in common]
    states, held = machine_checks(base, new)
    warnings += states
    if held:
        hold_for_machine(rows, held)
    rows.sort(key=lambda r: (r.verdict == "not judged", -(r.base_ms or 0)))
    runs = (len(base.runs), len(new.runs))
    method = summary_method(rows, threshold, confidence, resamples, floors)
    if any(r.method == "bootstrap" for r in rows):
        method += f"; {run_noise_words(noise, runs)}"
    grouped = groups_words(rows)
    if grouped:
        method += f"; {grouped}"
    return Comparison(base=base, new=new, rows=rows, threshold=threshold, confidence=confidence,
                            method=method, by="kernel", warnings=warnings, forced=reasons if force else [],
                            floors=floors)
