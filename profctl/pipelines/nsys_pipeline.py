"""The nsys pipeline (`profctl nsys`): the target under ``nsys profile``, the report exported to SQLite, read
back into the unified summary, plus the GPU time per iteration of each case and pass with its speedup over the
baseline.

Run directory: ``profile.nsys-rep`` (for the GUI), ``profile.sqlite``, ``nsys.log`` (nsys and the workload's
output), ``rows.jsonl`` (the workload's events), ``summary.json`` and the manifest. docs/nsys.md.
"""

from __future__ import annotations

import functools
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from profctl import nvtx, run_store
from profctl.analysis.select import is_empty, range_names, within_range
from profctl.errors import NothingMatched, UsageError
from profctl.fsutil import atomic_write_json
from profctl.pipelines.base import Request, Result, Target
from profctl.pipelines.executors import PartContext, PartOutcome, gather, part_records
from profctl.readers import nsys_sqlite
from profctl.readers.nsys_sqlite import NsysExport
from profctl.schema import Summary, concat
from profctl.tools import nsys as tool

CAPTURES = ("cudaProfilerApi", "nvtx", "none")
#: baselines, in order of preference, for the speedup of each case
BASELINES = ("eager", "sdpa-math")


@dataclass(frozen=True, kw_only=True)
class NsysRequest(Request):
    """`trace`: nsys --trace list (cuda needed); `capture`: what to record (cudaProfilerApi: between
    cudaProfilerStart and Stop -- the measured iterations of every case of a workload; nvtx: from the first
    'measure' range; none: the whole process; None: cudaProfilerApi for a workload, none for a program);
    `range`: summarize only the kernels launched inside this NVTX range (``name`` or ``domain@name``) of a
    program; `all_work`: keep work launched outside cudaProfilerStart/Stop; `by_range`: per-range kernel rows."""

    trace: tuple[str, ...] = tool.DEFAULT_TRACE
    capture: str | None = None
    range: str | None = None
    sample: bool = False
    all_work: bool = False
    by_range: bool = False


@dataclass(frozen=True)
class PassTime:
    """GPU time of one iteration of a case's pass (median over the measured iterations, projected from its NVTX
    range), and its speedup over the baseline's time for the same shape and pass."""

    backend: str
    shape_key: str
    pass_: str
    median_ns: float
    iterations: int
    baseline: str | None = None
    speedup: float | None = None


@dataclass(kw_only=True)
class NsysResult(Result):
    summary: Summary
    report: Path
    sqlite: Path
    log: Path
    tool_version: str
    exe: Path
    pass_times: list[PassTime] = field(default_factory=list)
    returncode: int = 0  # the profiled process's exit status (nsys passes it on)


@dataclass
class NsysPart:
    """What one part of an nsys run returns: its summary, nsys' version, the program's exit status, the
    workload's events, the report's file name in the part's folder, and where the part's time went (seconds:
    version, profile, export, read; benchmarks/tool_overhead.py reads them)."""

    summary: Summary
    version: str
    returncode: int
    events: list[dict[str, Any]]
    report: str
    walls: dict[str, float]


def check(req: NsysRequest) -> None:
    """UsageError for options nsys cannot honour (before anything runs)."""
    bad = [t for t in req.trace if t not in tool.TRACE_CHOICES]
    if bad:
        raise UsageError(f"--trace: unknown {', '.join(bad)}; choose from {', '.join(tool.TRACE_CHOICES)}")
    if "cuda" not in req.trace:
        raise UsageError("--trace must include cuda: without it the report has no kernels")
    if req.capture is not None and req.capture not in CAPTURES:
        raise UsageError(f"--capture {req.capture!r}: choose {', '.join(CAPTURES)}")
    if req.range is not None and req.target.case_ranges:
        raise UsageError("--range selects a range of your own program (profctl nsys --range NAME -- CMD ...) or "
                         "a part of a model step (--model ... --range attn.core); the attention workload's ranges "
                         "are selected per case already")
    if req.timeout_s <= 0:
        raise UsageError(f"--timeout must be positive, got {req.timeout_s}")


def run(req: NsysRequest) -> NsysResult:
    """Profile, export, read; the run directory records each step (complete / incomplete / failed). On workers
    (``--workers``) each part is profiled into its own folder and the summaries are concatenated."""
    check(req)
    with req.executor.session() as ex:
        target = ex.ask(req.target.resolve)
        if target.runs_on_cpu():
            raise UsageError("profctl nsys needs a CUDA GPU (the workload resolved to --device cpu)")
        exe = ex.ask(tool.find)  # before the run directory: a missing tool leaves no empty run behind
        capture = req.capture or ("none" if target.foreign else "cudaProfilerApi")
        ex.prepare("cuda", points=max(1, len(target.cases())))
        run_dir = run_store.new_run("nsys", root=req.reports, argv=list(req.command) if req.command else None,
                                    extra={**target.manifest(), "trace": list(req.trace), "capture": capture,
                                           "range": req.range, "sample": req.sample})
        with run_store.recording(run_dir):
            part = functools.partial(_part, req=req, target=target, exe=exe, capture=capture)
            outs, interrupted = gather(ex.map_parts(part, range(len(target.cases())), run_dir=run_dir, device="cuda",
                                                    on_event=lambda p, e: None, weights=target.costs()))
            res = _combine(outs, target, run_dir, exe, parallel=ex.parallel)
            run_store.update_manifest(run_dir, executor=ex.describe(),
                                      parts=part_records(outs) if ex.parallel else None)
            if interrupted or res.status != "complete":
                run_store.finish(run_dir, "incomplete",
                                 reason="interrupted" if interrupted else "; ".join(res.warnings))
            if interrupted:
                raise KeyboardInterrupt
    return res


def _part(ctx: PartContext, *, req: NsysRequest, target: Target, exe: Path, capture: str) -> NsysPart:
    """One part: nsys over the target's cases of this part, exported and summarized in the part's folder."""
    target = ctx.localize(target)
    t0 = time.perf_counter()
    version = tool.version(exe)
    log, rows = ctx.workdir / "nsys.log", ctx.workdir / "rows.jsonl"
    argv = tool.profile_argv(exe, ctx.workdir / "profile", target.argv(jsonl=rows, only=ctx.part.cases),
                             trace=req.trace, capture=capture, sample=req.sample)
    ctx.record_tool("nsys", argv, version=version, log=log, exe=str(exe))
    t1 = time.perf_counter()
    with ctx.follow(rows):
        res = ctx.run(argv, log=log, timeout_s=req.timeout_s, env=target.env(), cwd=target.cwd,
                      classify=tool.classify_profile(ctx.workdir / "profile"))
    t2 = time.perf_counter()
    rep = tool.report_path(ctx.workdir / "profile")
    sqlite = tool.export_sqlite(exe, rep, ctx.workdir / "profile.sqlite", log=log, timeout_s=req.timeout_s)
    t3 = time.perf_counter()
    summary = ctx.with_final_paths(summarize(sqlite, req, capture))

    atomic_write_json(ctx.workdir / "summary.json", json.loads(summary.to_json()))
    # where the part's time went (benchmarks/tool_overhead.py reads these: profctl's cost over nsys alone)
    walls = {"version_wall_s": t1 - t0, "profile_wall_s": t2 - t1, "export_wall_s": t3 - t2,
             "read_wall_s": time.perf_counter() - t3}
    return NsysPart(summary=summary, version=version, returncode=res.returncode, events=run_store.read_events(rows),
                    report=rep.name, walls=walls)


def _combine(outs: list[PartOutcome[NsysPart]], target: Target, run_dir: Path, exe: Path, *, parallel: bool
             ) -> NsysResult:
    """The run's result from its parts (one part's as it is; several concatenated, with the per-pass times of
    all parts together); the first part's error when none finished."""
    ok = [o for o in outs if o.error is None and o.value and o.dir is not None]
    if not ok:
        if outs and outs[0].error is not None:
            raise outs[0].error
        raise KeyboardInterrupt
    vals = [o.value for o in ok if o.value is not None]
    summary = vals[0].summary if not parallel else concat(v.summary for v in vals)
    if parallel:
        summary = replace(summary, meta={**summary.meta, "parts": [str(o.dir.name) for o in ok if o.dir]})
        atomic_write_json(run_dir / "summary.json", json.loads(summary.to_json()))
    events = [e for v in vals for e in v.events]
    rc = max(v.returncode for v in vals)
    walls = {k: round(max(v.walls[k] for v in vals), 3) for k in vals[0].walls}
    run_store.update_manifest(run_dir, device=run_store.device_of(events) or None, returncode=rc, **walls)
    specs = target.cases()
    per: dict[tuple[str, str, str], list[float]] = {}
    if specs:
        for o in ok:
            assert o.dir is not None
            first = specs[o.part.cases[0] if o.part.cases else 0]
            for k, v in pass_samples(o.dir / "profile.sqlite", _shape_of(specs, first)).items():
                per.setdefault(k, []).extend(v)
    warnings = [f"the program exited with status {rc}; what nsys recorded was kept"] if rc else []
    warnings += [f"part {o.part.index} failed: {o.error}" for o in outs if o.error is not None]
    d = ok[0].dir
    assert d is not None
    return NsysResult(run_dir=run_dir, summary=summary, report=d / vals[0].report, sqlite=d / "profile.sqlite",
                      log=d / "nsys.log", tool_version=vals[0].version, exe=exe, pass_times=pass_times_of(per),
                      warnings=warnings, returncode=rc, status="complete" if len(ok) == len(outs) else "incomplete",
                      failed_cases=[r for r in run_store.rows_of(events) if r.get("status") != "ok"])


def _shape_of(specs: Sequence[Any], first: Any) -> dict[str, str]:
    """backend -> shape for ranges whose case range nsys did not see (pushed before the capture started): the
    sweep's only shape, and the first case of the part."""
    one = {s.label: s.shape_key for s in specs} if len({s.shape_key for s in specs}) == 1 else {}
    return {**one, first.label: first.shape_key}


def summarize(sqlite: Path, req: NsysRequest, capture: str) -> Summary:
    """The unified summary of the export: the cudaProfilerStart/Stop window only unless --all-work or no
    capture range; with `range`, only the kernels launched inside that NVTX range (NothingMatched naming the
    ranges seen when there are none)."""
    window = None if (req.all_work or capture == "none") else "profiler-api"
    with nsys_sqlite.NsysExport(sqlite, window=window) as ex:
        s = nsys_sqlite.summarize(ex, by_range=req.by_range or req.range is not None)
    if req.range is None:
        return s
    sel = within_range(s, req.range)
    if is_empty(sel):
        seen = range_names(s)
        raise NothingMatched(f"no kernel was launched inside an NVTX range named {req.range!r}; ranges seen: "
                             f"{', '.join(seen) or 'none (did the program push any?)'}")
    return sel


def pass_times(sqlite: Path, shape_of: dict[str, str] | None = None) -> list[PassTime]:
    """Per case and pass: the median GPU time of one iteration, projected from profctl's ``<backend>.fwd|bwd``
    ranges inside ``measure``, and the speedup over the baseline (eager, else sdpa-math) of the same shape.

    The case is the enclosing ``<backend>[<shape>]`` range; the first case's is pushed before capture starts and
    may be missing, then `shape_of` (backend -> its shape) names it."""
    return pass_times_of(pass_samples(sqlite, shape_of))


def pass_samples(sqlite: Path, shape_of: dict[str, str] | None = None) -> dict[tuple[str, str, str], list[float]]:
    """(backend, shape key, pass) -> the GPU time of each measured iteration, ns (see pass_times)."""
    with NsysExport(sqlite) as ex:  # all ranges: the case ranges open before the window too
        insts = [i for i in ex.range_instances() if i.domain == nvtx.DOMAIN]
    per: dict[tuple[str, str, str], list[float]] = {}
    for i, parents in nvtx.nest(insts):
        if i.proj_start is None or i.proj_end is None:
            continue
        backend = i.text.rsplit(".", 1)[0]
        first = nvtx.case_range(backend, shape_of[backend]) if shape_of and backend in shape_of else None
        path = nvtx.measured_leaf_path(i, parents, first)
        key = nvtx.parse_range(path)
        if key is None or key.shape_key is None or key.pass_ is None:
            continue
        per.setdefault((key.backend, key.shape_key, key.pass_), []).append(float(i.proj_end - i.proj_start))
    return per


def pass_times_of(per: dict[tuple[str, str, str], list[float]]) -> list[PassTime]:
    """Medians and speedups over the baseline of the same shape and pass (from one report, or several parts')."""
    med = {k: statistics.median(v) for k, v in per.items()}
    out = []
    for (backend, shape, p), v in sorted(med.items()):
        base = next((b for b in BASELINES if b != backend and (b, shape, p) in med), None)
        out.append(PassTime(backend, shape, p, v, len(per[(backend, shape, p)]), base,
                            med[(base, shape, p)] / v if base else None))
    return out
