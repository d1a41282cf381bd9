"""The nsys pipeline (`profctl nsys`): the target under ``nsys profile``, the report exported to SQLite, read
back into the unified summary, plus the GPU time per iteration of each case and pass with its speedup over the
baseline.

Run directory: ``profile.nsys-rep`` (for the GUI), ``profile.sqlite``, ``nsys.log`` (nsys and the workload's
output), ``rows.jsonl`` (the workload's events), ``summary.json`` and the manifest. docs/nsys.md.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profctl import nvtx, runs
from profctl.errors import NothingMatched, UsageError
from profctl.pipelines.base import Request, Result
from profctl.pipelines.targets import Model, Program, Workload
from profctl.schema import Summary
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


def check(req: NsysRequest) -> None:
    """UsageError for options nsys cannot honour (before anything runs)."""
    bad = [t for t in req.trace if t not in tool.TRACE_CHOICES]
    if bad:
        raise UsageError(f"--trace: unknown {', '.join(bad)}; choose from {', '.join(tool.TRACE_CHOICES)}")
    if "cuda" not in req.trace:
        raise UsageError("--trace must include cuda: without it the report has no kernels")
    if req.capture is not None and req.capture not in CAPTURES:
        raise UsageError(f"--capture {req.capture!r}: choose {', '.join(CAPTURES)}")
    if req.range is not None and isinstance(req.target, Workload):
        raise UsageError("--range selects a range of your own program (profctl nsys --range NAME -- CMD ...) or "
                         "a part of a model step (--model ... --range attn.core); the attention workload's ranges "
                         "are selected per case already")
    if req.timeout_s <= 0:
        raise UsageError(f"--timeout must be positive, got {req.timeout_s}")


def run(req: NsysRequest) -> NsysResult:
    """Profile, export, read; the run directory records each step (complete / incomplete / failed)."""
    check(req)
    target = req.target.resolve()
    if isinstance(target, (Workload, Model)) and target.device != "cuda":
        raise UsageError("profctl nsys needs a CUDA GPU (the workload resolved to --device cpu)")
    exe = tool.find()  # before the run directory: a missing tool leaves no empty run behind
    capture = req.capture or ("none" if isinstance(target, Program) else "cudaProfilerApi")
    run_dir = runs.new_run("nsys", root=req.reports, argv=list(req.command) if req.command else None,
                           extra={**target.manifest(), "trace": list(req.trace), "capture": capture,
                                  "range": req.range, "sample": req.sample})
    with runs.recording(run_dir):
        return _profile(req, target, exe, run_dir, capture)


def _profile(req: NsysRequest, target: Any, exe: Path, run_dir: Path, capture: str) -> NsysResult:
    version = tool.version(exe)
    log, rows = run_dir / "nsys.log", run_dir / "rows.jsonl"
    argv = tool.profile_argv(exe, run_dir / "profile", target.argv(jsonl=rows), trace=req.trace, capture=capture,
                             sample=req.sample)
    runs.record_tool(run_dir, "nsys", argv, version=version, log=log.name, exe=str(exe))
    res = req.executor.run(argv, log=log, timeout_s=req.timeout_s, env=target.env(), cwd=getattr(target, "cwd", None),
                           classify=tool.classify_profile(run_dir / "profile"))
    rep = tool.report_path(run_dir / "profile")
    sqlite = tool.export_sqlite(exe, rep, run_dir / "profile.sqlite", log=log, timeout_s=req.timeout_s)
    summary = summarize(sqlite, req, capture)
    from profctl.fsutil import atomic_write_json

    atomic_write_json(run_dir / "summary.json", json.loads(summary.to_json()))
    events = runs.read_events(rows)
    runs.update_manifest(run_dir, device=runs.device_of(events) or None, returncode=res.returncode)
    specs = target.cases()
    one_shape = {s.label: s.shape_key for s in specs} if len({s.shape_key for s in specs}) == 1 else {}
    warnings = [f"the program exited with status {res.returncode}; what nsys recorded was kept"] \
        if res.returncode else []
    return NsysResult(run_dir=run_dir, summary=summary, report=rep, sqlite=sqlite, log=log, tool_version=version,
                      exe=exe, pass_times=pass_times(sqlite, one_shape) if specs else [], warnings=warnings,
                      returncode=res.returncode,
                      failed_cases=[r for r in runs.rows_of(events) if r.get("status") != "ok"])


def summarize(sqlite: Path, req: NsysRequest, capture: str) -> Summary:
    """The unified summary of the export: the cudaProfilerStart/Stop window only unless --all-work or no
    capture range; with `range`, only the kernels launched inside that NVTX range (NothingMatched naming the
    ranges seen when there are none)."""
    from profctl.analysis.select import range_names, within_range
    from profctl.readers import nsys_sqlite

    window = None if (req.all_work or capture == "none") else "profiler-api"
    with nsys_sqlite.NsysExport(sqlite, window=window) as ex:
        s = ex.summary(by_range=req.by_range or req.range is not None)
    if req.range is None:
        return s
    sel = within_range(s, req.range)
    if not sel.kernels:
        seen = range_names(s)
        raise NothingMatched(f"no kernel was launched inside an NVTX range named {req.range!r}; ranges seen: "
                             f"{', '.join(seen) or 'none (did the program push any?)'}")
    return sel


def pass_times(sqlite: Path, shape_of: dict[str, str] | None = None) -> list[PassTime]:
    """Per case and pass: the median GPU time of one iteration, projected from profctl's ``<backend>.fwd|bwd``
    ranges inside ``measure``, and the speedup over the baseline (eager, else sdpa-math) of the same shape.

    The case is the enclosing ``<backend>[<shape>]`` range; the first case's is pushed before capture starts and
    may be missing, then `shape_of` (backend -> the sweep's only shape) names it."""
    from profctl.readers.nsys_sqlite import NsysExport

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
    med = {k: statistics.median(v) for k, v in per.items()}
    out = []
    for (backend, shape, p), v in sorted(med.items()):
        base = next((b for b in BASELINES if b != backend and (b, shape, p) in med), None)
        out.append(PassTime(backend, shape, p, v, len(per[(backend, shape, p)]), base,
                            med[(base, shape, p)] / v if base else None))
    return out
