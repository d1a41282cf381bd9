"""The ncu pipeline (`profctl ncu`): NVTX filters from profctl's scheme, one ncu invocation with a timeout and
a kept log, the report read back, every launch checked against the filter, and the diagnosis.

Run directory: ``<reports>/<UTC timestamp>-ncu-<random>/`` with ``profile.ncu-rep``, ``ncu.log`` (ncu and the
workload's output), ``workload.jsonl`` (one row per case) and ``summary.json`` (the Summary, with the recipe,
the ncu command line, the wall times and the diagnosis in ``meta``).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profctl import inputs, nvml, nvtx, proc, run_store
from profctl.analysis.diagnose import backend_of, diagnose
from profctl.analysis.select import range_names
from profctl.errors import NothingMatched, ProfctlError, RecipeError, ToolFailed, UsageError
from profctl.fsutil import atomic_write_text
from profctl.pipelines.base import NcuTarget, Request, Result
from profctl.pipelines.executors import PartContext, PartOutcome, gather, part_records
from profctl.pipelines.targets import Model, Workload
from profctl.readers.ncu_profiles import read_with_summary
from profctl.recipes import Recipe
from profctl.schema import Summary, concat
from profctl.tools import ncu as tool

if TYPE_CHECKING:
    from profctl.analysis.diagnose import Diagnosis
    from profctl.schema.profile import KernelProfile

#: what reading and diagnosing a report imports, loaded in a thread while ncu runs (issue 31: ncu starts ~0.1 s
#: sooner, and the imports cost nothing after it); imported where they are used, so any order works
READING = ("profctl.inputs", "profctl.analysis.diagnose", "profctl.analysis.select", "profctl.readers.ncu_profiles")


def prefetch(modules: Sequence[str]) -> None:
    """Import `modules` in a daemon thread (the import system's per-module locks make a later import of one of
    them wait for it, never import it twice)."""

    def load() -> None:
        for m in modules:
            with contextlib.suppress(Exception):  # the import where it is used says what is wrong
                importlib.import_module(m)

    threading.Thread(target=load, name="profctl-prefetch", daemon=True).start()


@dataclass(frozen=True, kw_only=True)
class NcuRequest(Request):
    """A recipe and the launches to profile: the measured iteration of every case and pass (NVTX), narrowed
    by a kernel regex and a launch count; ncu's replay, clock and cache control (None: ncu's default)."""

    recipe: Recipe
    kernel: str | None = None
    launch_skip: int | None = None
    launch_count: int | None = None
    range: str | None = None  # a program's NVTX range (``name`` or ``domain@name``), push/pop or start/end
    replay_mode: str | None = None
    clock_control: str | None = None
    cache_control: str | None = None
    exe: Path | None = None  # None: found (profctl.tools.ncu.find)
    cc: tuple[int, int] | None = None  # None: asked of the GPU (NVML)
    once: bool = False  # each distinct kernel once: its first launch that passes the other filters
    #: modules the caller imports once the run is back (its renderers): loaded in a thread while ncu runs
    prefetch: tuple[str, ...] = ()


@dataclass(frozen=True)
class NcuProgress:
    """What ncu has profiled so far, over every part: launches per kernel name, the last one finished (name and
    about how long it took), the one being profiled now (name, seconds so far), and -- once ncu profiles far
    more launches than the recipe needs -- how to narrow the run (`advice`, the same text from then on)."""

    launches: int
    counts: dict[str, int]
    last: str | None = None
    last_s: float | None = None
    current: str | None = None
    current_s: float | None = None
    mean_s: float | None = None
    advice: str | None = None

    def describe(self) -> str:
        """One line: ``ncu: 12 launches of 3 kernels profiled; last _attn_fwd 1.2 s; now: _attn_fwd (3 s)``."""
        k = len(self.counts)
        line = f"ncu: {self.launches} launch{'es' if self.launches != 1 else ''} of {k} kernel" \
               f"{'s' if k != 1 else ''} profiled"
        if self.last is not None and self.last_s is not None:
            line += f"; last {tool._short(self.last)} {self.last_s:.1f} s"
        if self.current is not None:
            line += f"; now: {tool._short(self.current)}" + \
                (f" ({self.current_s:.0f} s)" if self.current_s is not None else "")
        return line


class _Tracker:
    """The submitting side of ncu's progress: the parts' ``ncu`` events summed, passed on as NcuProgress."""

    def __init__(self, req: NcuRequest, on_progress: Callable[[NcuProgress], None] | None) -> None:
        self.req, self.on_progress = req, on_progress
        self.counts: dict[str, int] = {}
        self.seconds = 0.0
        self.advice: str | None = None
        self.phases: list[dict[str, Any]] = []  # per ncu run: when it connected, profiled, exited
        self.lock = threading.Lock()

    def on_event(self, part: Any, ev: dict[str, Any]) -> None:
        if ev.get("event") == "ncu-phases":
            self.phases.append({k: v for k, v in ev.items() if k not in ("event", "where", "t")})
        if ev.get("event") != "ncu":
            return
        with self.lock:
            name = ev.get("name")
            if ev.get("done") and name is not None:
                self.counts[name] = self.counts.get(name, 0) + 1
                self.seconds += float(ev.get("seconds") or 0.0)
            n = sum(self.counts.values())
            mean = self.seconds / n if n else None
            if self.advice is None and mean is not None:
                req = self.req
                self.advice = tool.narrowing_advice(self.counts, recipe=req.recipe.name, seconds=mean,
                                                    once=req.once, kernel=req.kernel, range_=req.range,
                                                    launch_count=req.launch_count, program=req.target.foreign)
            p = NcuProgress(n, dict(self.counts), last=name if ev.get("done") else None,
                            last_s=ev.get("seconds") if ev.get("done") else None,
                            current=None if ev.get("done") else name,
                            current_s=ev.get("elapsed"), mean_s=mean, advice=self.advice)
        if self.on_progress is not None:
            self.on_progress(p)


@dataclass(kw_only=True)
class NcuResult(Result):
    summary: Summary
    diagnosis: list[Diagnosis]
    recipe: Recipe
    cc: tuple[int, int] | None
    report: Path
    launches: int
    ncu_wall_s: float
    total_wall_s: float
    returncode: int = 0  # the profiled program's exit status (0 for the built-in workload)
    #: the launches in depth (warp samples per instruction, source lines, findings) when the recipe collects them
    profiles: list[KernelProfile] = field(default_factory=list)


@dataclass
class NcuPart:
    """What one part of an ncu run returns: its report read back (the Summary, its launches), the checks'
    warnings, the workload's rows and device, the program's exit status, and the ncu command that made it."""

    summary: Summary
    launches: list[dict[str, Any]]
    warnings: list[str]
    rows: list[dict[str, Any]]
    status: int  # the profiled program's exit status (0 for the built-in workload)
    argv: list[str]
    filters: list[str]
    ncu_wall_s: float
    device: dict[str, Any]
    report: str  # the report's file name in the part's folder
    profiles: list[KernelProfile] = field(default_factory=list)
    read_s: float = 0.0  # reading the report back


def check(req: NcuRequest) -> None:
    """UsageError for options ncu cannot honour (before anything runs)."""
    for opt, val, allowed in (("--replay-mode", req.replay_mode, tool.REPLAY_MODES),
                              ("--clock-control", req.clock_control, tool.CLOCK_CONTROLS),
                              ("--cache-control", req.cache_control, tool.CACHE_CONTROLS)):
        if val is not None and val not in allowed:
            raise UsageError(f"{opt} {val!r}: choose {', '.join(allowed)}")
    if req.launch_count is not None and req.launch_count <= 0:
        raise UsageError(f"--launch-count must be positive, got {req.launch_count}")
    if req.launch_skip is not None and req.launch_skip < 0:
        raise UsageError(f"--launch-skip must be >= 0, got {req.launch_skip}")
    if req.range is not None and req.target.case_ranges:
        raise UsageError("--range selects a range of your own program (profctl ncu --range NAME -- CMD ...); "
                         "the built-in workload's measured ranges are selected already")
    if req.kernel is not None:
        try:
            re.compile(req.kernel[6:] if req.kernel.startswith("regex:") else req.kernel)
        except re.error as e:
            raise UsageError(f"--kernel {req.kernel!r} is not a valid regular expression: {e}") from None
    if not req.target.nvtx:
        raise UsageError("profctl ncu selects the measured launches by NVTX range; --no-nvtx would profile nothing")
    if req.once:
        if req.launch_skip is not None:
            raise UsageError("--once profiles each kernel's first launch; --launch-skip skips launches: give one "
                             "or the other")
        tool.once_id(req.kernel)  # a regex ncu's kernel identifier cannot hold


def device_cc() -> tuple[int, int]:
    """The compute capability of the GPU the workload will use, from NVML (milliseconds; torch would take
    seconds to import and initialise CUDA just to answer)."""
    vis = nvml.visible_gpus()
    if vis and vis[0].capability:
        return vis[0].capability
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability(0)
            return int(major), int(minor)
    except (ImportError, RuntimeError, AssertionError):
        pass
    raise UsageError("profctl ncu profiles CUDA kernels, and no NVIDIA GPU is visible here (NVML lists none and "
                     "PyTorch has no CUDA device; check CUDA_VISIBLE_DEVICES and nvidia-smi); to read reports "
                     "recorded elsewhere: profctl report REPORT")


def cases_of(target: Workload) -> list[tuple[str, str, str]]:
    """(backend, shape key, pass) of every case, as the NVTX filter selects them."""
    return target.nvtx_cases()


#: what `profctl ncu --model` profiles unless --range names another part: the attention call itself
MODEL_DEFAULT_PART = Model.DEFAULT_PART


def model_filter(target: Model, part: str, cases: Sequence[int] | None = None) -> str:
    """ONE regex selecting the launches of part `part` in the measured steps of a model sweep's cases."""
    return target.part_filter(part, cases)


def filter_variants(req: NcuRequest, target: NcuTarget, cases: Sequence[int] | None = None) -> list[list[str]]:
    """The --nvtx-include expressions to try, in order (the target's: its measured ranges, those of `cases` only
    when a part runs a subset; a program's --range in its two forms; no filter)."""
    return target.ncu_filters(req.range, cases)


def run(req: NcuRequest, on_progress: Callable[[NcuProgress], None] | None = None) -> NcuResult:
    """Profile, read, check, diagnose; the run directory records each step (complete / incomplete / failed). On
    workers (``--workers``) each part is profiled into its own folder; summaries and diagnoses are joined.
    `on_progress` hears what ncu has profiled while it runs (from ncu's own progress lines; any thread)."""
    t0, t0_wall = time.perf_counter(), time.time()
    check(req)
    tracker = _Tracker(req, on_progress)
    with req.executor.session() as ex:
        exe = req.exe or ex.ask(tool.find)  # first: without ncu nothing else matters
        target = ex.ask(req.target.resolve)
        if not isinstance(target, NcuTarget):
            raise UsageError(f"profctl ncu does not run the {target.kind} target")
        if target.runs_on_cpu():
            raise UsageError("profctl ncu profiles CUDA kernels, and PyTorch sees no CUDA GPU here "
                             "(read existing reports with `profctl report`)")
        rec = req.recipe
        cc = req.cc or ex.ask(device_cc)
        metrics, sections = tuple(rec.metric_names(cc)), tuple(rec.sections_for(cc))
        if not metrics and not sections and not rec.set_name:
            raise RecipeError(f"{rec.path}: recipe {rec.name} has no metric for compute capability {cc[0]}.{cc[1]}")
        ex.prepare("cuda", points=max(1, len(target.cases())))
        run_dir = run_store.new_run("ncu", root=req.reports, argv=list(req.command) if req.command else None,
                                    extra={**target.manifest(), "recipe": rec.name, "recipe_path": rec.path,
                                           "cc": f"{cc[0]}.{cc[1]}", "range": req.range})
        with run_store.recording(run_dir):
            part = functools.partial(_part, req=req, target=target, exe=exe, cc=cc, metrics=metrics,
                                     sections=sections)
            outs, interrupted = gather(ex.map_parts(part, range(len(target.cases())), run_dir=run_dir,
                                                    device="cuda", on_event=tracker.on_event,
                                                    weights=target.costs()))
            res = _combine(req, target, run_dir, outs, cc, t0, parallel=ex.parallel, interrupted=interrupted,
                           advice=tracker.advice, phases=tracker.phases, t0_wall=t0_wall)
            run_store.update_manifest(run_dir, executor=ex.describe(),
                                      parts=part_records(outs) if ex.parallel else None)
            if interrupted:
                raise KeyboardInterrupt
    return res


def _part(ctx: PartContext, *, req: NcuRequest, target: NcuTarget, exe: Path, cc: tuple[int, int],
          metrics: tuple[str, ...], sections: tuple[str, ...]) -> NcuPart:
    """One part: ncu over this part's cases (each filter variant in turn), its report read back and checked."""
    target = ctx.localize(target)
    variants = filter_variants(req, target, ctx.part.cases)
    for i, filters in enumerate(variants):
        try:
            res, argv, ncu_wall = _profile(ctx, req, target, exe, metrics, sections, filters)
            break
        except NothingMatched as e:
            if i + 1 < len(variants):
                continue
            if target.foreign:
                raise NothingMatched(f"{e.message}; {_seen(ctx, req, target, exe)}", log=e.log) from None
            raise
    t_read = time.perf_counter()
    out = _read(ctx, req, target, res, cc, argv, filters, ncu_wall)
    out.read_s = time.perf_counter() - t_read
    return out


def _profile(ctx: PartContext, req: NcuRequest, target: NcuTarget, exe: Path, metrics: tuple[str, ...],
             sections: tuple[str, ...], filters: list[str]) -> tuple[proc.ProcResult, list[str], float]:
    """One ncu run over the part's cases with these NVTX filters: (its result, its argv, its wall time)."""
    rec = req.recipe
    report, log, jsonl = ctx.workdir / "profile.ncu-rep", ctx.workdir / "ncu.log", ctx.workdir / "workload.jsonl"
    workload_argv = target.argv(jsonl=jsonl, only=ctx.part.cases)
    opts = tool.ProfileOptions(metrics=metrics, sections=sections, set_name=rec.set_name, nvtx_include=tuple(filters),
                               kernel_regex=req.kernel, launch_skip=req.launch_skip, launch_count=req.launch_count,
                               replay_mode=req.replay_mode, clock_control=req.clock_control,
                               cache_control=req.cache_control, import_source=rec.import_source, once=req.once)
    argv = tool.profile_argv(exe, report, opts, workload_argv)
    ctx.record_tool("ncu", argv, log=log, exe=str(exe), nvtx_include=filters, workload_argv=workload_argv)
    t_ncu, phases = time.perf_counter(), {"started": time.time()}
    ahead = _ReadAhead((*READING, *req.prefetch), warm=rec.samples_warps)
    with ctx.follow(jsonl), _follow_progress(log, ctx, phases, on_first_launch=ahead.start):
        res = ctx.run(argv, log=log, timeout_s=req.timeout_s, env=target.env(), cwd=target.cwd,
                      classify=lambda r: _classify(r, rec, filters, jsonl, req))
    if ahead.started_at is not None:
        phases["read_ahead_s"] = round(ahead.started_at - phases["started"], 3)
    ctx.emit({"event": "ncu-phases", **phases, "exit_s": round(res.wall_s, 3)})  # where ncu's time went
    return res, argv, time.perf_counter() - t_ncu


class _ReadAhead:
    """What reading the report needs, done while ncu runs -- but only once ncu names its first launch: by then
    the program is past its own start (Python, torch, CUDA), which the imports (~0.3 s of CPU and disk) and
    ncu_report's one-time start (~0.4 s, `warm`) would otherwise compete with. (Issue 31: ncu ran 0.05-0.5 s
    longer inside profctl than alone on the built-in workload; on the H200 this did not move the median by more
    than ncu's own round-to-round spread, benchmarks/RESULTS.md.) Never started (no launch), the read imports
    what it needs itself."""

    def __init__(self, modules: Sequence[str], *, warm: bool) -> None:
        self.modules, self.warm = tuple(modules), warm
        self.started_at: float | None = None

    def start(self) -> None:
        if self.started_at is not None:
            return
        self.started_at = time.time()
        prefetch(self.modules)
        if self.warm:  # the report will be read in depth: ncu_report's one-time start, meanwhile
            threading.Thread(target=tool.warm_reader, name="profctl-ncu-warm", daemon=True).start()


@contextlib.contextmanager
def _follow_progress(log: Path, ctx: PartContext, phases: dict[str, float] | None = None,
                     interval_s: float = 0.2, on_first_launch: Callable[[], None] | None = None) -> Iterator[None]:
    """While ncu runs, read its progress lines as its log grows and pass them on as ``ncu`` events: each launch
    whose profiling ended (``done``, its name and about how many seconds it took), and the launch being profiled
    now (not ``done``: its name and the seconds so far, when it starts and then once a second). At the end,
    `phases` gets when (seconds after the start) ncu connected to the program and its first and last launch
    ended, to the poll's resolution: where ncu's own time goes. `on_first_launch` is called (once, in the
    polling thread) when the log first names a launch being profiled."""
    reader = tool.ProgressReader()
    t0 = time.time()
    last_tick = [0.0]
    try:
        offset = log.stat().st_size
    except OSError:
        offset = 0

    def pump() -> None:
        nonlocal offset
        try:
            with open(log, "rb") as f:
                f.seek(offset)
                data = f.read()
        except OSError:
            data = b""
        offset += len(data)
        before = reader.current
        now = time.time()
        for p in reader.feed(data.decode("utf-8", errors="replace"), now) if data else ():
            ctx.emit({"event": "ncu", "name": p.name, "id": p.id, "passes": p.passes, "seconds": p.seconds,
                      "done": True})
        if on_first_launch is not None and (reader.current is not None or reader.first_end is not None):
            on_first_launch()
        if reader.current is not None and (reader.current != before or now - last_tick[0] >= 1.0):
            last_tick[0] = now
            ctx.emit({"event": "ncu", "name": reader.current[0], "done": False, "elapsed": now - reader.current[1]})

    try:
        with proc.polling(pump, interval_s, "profctl-ncu-progress"):
            yield
    finally:
        if phases is not None:
            for k, v in (("connected_s", reader.connected), ("first_launch_s", reader.first_end),
                         ("last_launch_s", reader.last_end)):
                if v is not None:
                    phases[k] = round(v - t0, 3)


def _seen(ctx: PartContext, req: NcuRequest, target: NcuTarget, exe: Path) -> str:
    """What the program launched, from a cheap pass (one metric, the first launches, no filter): the NVTX
    ranges and kernel names a filter could have matched."""

    opts = tool.ProfileOptions(metrics=("gpu__time_duration.sum",), nvtx_include=(), launch_count=100,
                               clock_control=req.clock_control)
    scan = ctx.workdir / "scan.ncu-rep"
    try:
        ctx.run(tool.profile_argv(exe, scan, opts, target.argv()).copy(), log=ctx.workdir / "scan.log",
                timeout_s=req.timeout_s, env=target.env(), cwd=target.cwd)
        s = inputs.read_summary(inputs.file_input(scan), by_range=True)
    except ProfctlError as e:
        return f"a pass without filters to list what the program launched failed too ({e.one_line()})"
    if not s.kernels:
        return "the program launched no CUDA kernel (its first 100 launches, without filters, were none)"
    kernels = sorted({k.short_name for k in s.kernels})
    return (f"in its first 100 launches the program pushed ranges {', '.join(range_names(s)) or 'none'} and "
            f"launched kernels {', '.join(kernels[:10])}{' ...' if len(kernels) > 10 else ''}")


def _read(ctx: PartContext, req: NcuRequest, target: NcuTarget, res: proc.ProcResult, cc: tuple[int, int],
          argv: list[str], filters: list[str], ncu_wall: float) -> NcuPart:
    """The part's report read back and checked (every metric present, every case of the part profiled)."""

    report, log, rec = ctx.workdir / "profile.ncu-rep", ctx.workdir / "ncu.log", req.recipe
    warnings: list[str] = []
    if not report.exists():
        raise ToolFailed(f"ncu exited with status {res.returncode} and wrote no report", log=ctx.final(log))
    status = program_status(res) if target.foreign else 0
    if res.returncode != 0:
        what = f"the program exited with status {status}" if status else f"ncu exited with status {res.returncode}"
        warnings.append(f"{what}; the report was kept (see {ctx.final(log)})")
    # a report ncu finished just now is read in this process (no child: ~0.6 s); one it may have left half-written
    # (ncu or the program failed) in a child, where a damaged file cannot abort profctl
    profiles: list[KernelProfile] = []
    if rec.samples_warps:  # one load of the report for the summary and the launches in depth

        read, profiles = read_with_summary(report, by_range=True, isolate=res.returncode != 0)
        final = str(ctx.final(report))
        profiles = [replace(p, report=final) for p in profiles]
    else:
        read = inputs.read_summary(inputs.file_input(report), by_range=True, isolate=res.returncode != 0)
    summary = ctx.with_final_paths(read)
    launches = summary.meta.get("launches", [])
    _check_metrics(summary, tuple(rec.metric_names(cc)), rec, ctx.final_dir, ctx.final(log))
    events = run_store.read_events(ctx.workdir / "workload.jsonl")
    rows = run_store.rows_of(events)
    if target.case_ranges:
        specs = target.cases()
        warnings += _check_launches(launches, rows, specs if ctx.part.cases is None else
                                    [specs[i] for i in ctx.part.cases])
    elif not launches:
        raise NothingMatched("ncu wrote a report with no launch in it")
    return NcuPart(summary=summary, launches=launches, warnings=warnings, rows=rows, status=status, argv=argv,
                   filters=filters, ncu_wall_s=ncu_wall, device=run_store.device_of(events), report=report.name,
                   profiles=profiles)


def _combine(req: NcuRequest, target: NcuTarget, run_dir: Path, outs: list[PartOutcome[NcuPart]], cc: tuple[int, int],
             t0: float, *, parallel: bool, interrupted: bool, advice: str | None = None,
             phases: Sequence[dict[str, Any]] = (), t0_wall: float | None = None) -> NcuResult:
    """The run's result from its parts, diagnosed; summary.json in the run directory and the manifest's end."""

    ok = [o for o in outs if o.error is None and o.value and o.dir is not None]
    if not ok:
        if outs and outs[0].error is not None:
            raise outs[0].error
        raise KeyboardInterrupt
    rec, vals = req.recipe, [o.value for o in ok if o.value is not None]
    summary = vals[0].summary if not parallel else concat(v.summary for v in vals)
    launches = [ln for v in vals for ln in v.launches]
    rows = [r for v in vals for r in v.rows]
    warnings = [w for v in vals for w in v.warnings] + \
        [f"part {o.part.index} failed: {o.error}" for o in outs if o.error is not None]
    diag = diagnose(summary, rec, cc, backend_order=target.backends())
    ncu_wall = max(v.ncu_wall_s for v in vals)
    total = time.perf_counter() - t0
    # profctl's own time around ncu: before it (options, the run directory), reading the reports, the rest
    first = min((float(p["started"]) for p in phases if p.get("started")), default=None)
    timing = {"before_ncu_s": round(first - t0_wall, 3) if first is not None and t0_wall is not None else None,
              "ncu_s": round(ncu_wall, 3), "read_s": round(max(v.read_s for v in vals), 3),
              "ncu_phases": [{k: v for k, v in p.items() if k != "started"} for p in phases] or None}
    meta = dict(summary.meta)
    meta.update({"recipe": rec.name, "cc": f"{cc[0]}.{cc[1]}", "ncu_argv": vals[0].argv,
                 "nvtx_include": vals[0].filters, "ncu_wall_s": round(ncu_wall, 3), "total_wall_s": round(total, 3),
                 "run_dir": str(run_dir), "launches": launches,
                 "workload": [{k: r.get(k) for k in ("index", "spec", "status", "reason")} for r in rows],
                 "diagnosis": [d.to_dict() for d in diag], "warnings": warnings, "advice": advice})
    if parallel:
        meta["parts"] = [{"dir": o.dir.name, "ncu_argv": o.value.argv, "nvtx_include": o.value.filters}
                         for o in ok if o.dir is not None and o.value is not None]
    summary = replace(summary, meta=meta)
    atomic_write_text(run_dir / "summary.json", summary.to_json() + "\n")
    device = next((v.device for v in vals if v.device), None)
    status = "complete" if len(ok) == len(outs) and not interrupted else "incomplete"
    timing["after_s"] = round(time.perf_counter() - t0 - total, 3)
    run_store.finish(run_dir, status, launches=len(launches), ncu_wall_s=round(ncu_wall, 3),
                     total_wall_s=round(total, 3), warnings=warnings, device=device or None, advice=advice,
                     timing=timing, **({"reason": "interrupted"} if interrupted else {}))
    d = ok[0].dir
    assert d is not None
    return NcuResult(run_dir=run_dir, summary=summary, diagnosis=diag, recipe=rec, cc=cc, report=d / vals[0].report,
                     launches=len(launches), ncu_wall_s=ncu_wall, total_wall_s=total, warnings=warnings, status=status,
                     failed_cases=[r for r in rows if r.get("status") != "ok"],
                     returncode=max(v.status for v in vals), profiles=[p for v in vals for p in v.profiles])


_APP_STATUS = re.compile(r"application returned an error code \((\d+)\)", re.I)


def program_status(res: proc.ProcResult) -> int:
    """The profiled program's exit status: ncu reports it in its log ('The application returned an error code
    (N)') and exits with it."""
    m = _APP_STATUS.search(res.log_text(200_000))
    return int(m.group(1)) if m else res.returncode


# ------------------------------------------------------------ checks
def _case_word(row: dict[str, Any]) -> str:
    spec = row.get("spec") or {}
    return f"{spec.get('backend', '?')} {spec.get('pass', '')}".strip()


def _why_nothing(rows: list[dict[str, Any]], filters: list[str], req: NcuRequest, log_text: str) -> str:
    parts = []
    if "NVTX disabled" in log_text:
        parts.append("the workload ran without NVTX ranges (it printed 'NVTX disabled': install the nvtx package)")
    if req.target.case_ranges:
        bad = [r for r in rows if r.get("status") != "ok"]
        ok = [r for r in rows if r.get("status") == "ok"]
        for r in bad:
            parts.append(f"{_case_word(r)}: {r.get('status')}: {r.get('reason')}")
        if not rows:
            parts.append("the workload finished no case (see the log)")
        elif ok and not parts:
            parts.append(f"{len(ok)} case(s) ran but no launch matched the NVTX filter {' '.join(filters)}")
    elif not (req.range or req.kernel or req.launch_skip):
        parts.append("the program launched no CUDA kernel")
    if req.range:
        parts.append(f"--range {req.range!r} (tried as a push/pop and as a start/end range)")
    if req.kernel:
        parts.append(f"--kernel {req.kernel!r} must also match")
    if req.launch_skip:
        parts.append(f"--launch-skip {req.launch_skip}")
    if req.launch_count is not None:
        parts.append(f"--launch-count {req.launch_count}")
    return "; ".join(parts)


def _classify(res: proc.ProcResult, rec: Recipe, filters: list[str], jsonl: Path, req: NcuRequest
              ) -> ProfctlError | None:
    text = res.log_text()
    f = tool.diagnose_log(text, res.returncode)
    if f is None:
        return None
    if f.kind == "metric":
        where = [f"{m} ({rec.where(m)})" for m in f.metrics] or [rec.path]
        return RecipeError(f"ncu does not know metric {', '.join(where)}: {f.message}", log=res.log)
    if f.kind == "nothing":
        rows = run_store.rows_of(run_store.read_events(jsonl))
        return tool.failure_error(f, log=res.log, why_nothing=_why_nothing(rows, filters, req, text))
    if f.kind == "error" and res.returncode != 0 and (res.log.parent / "profile.ncu-rep").exists():
        return None  # the workload failed part-way; the launches profiled so far are kept
    return tool.failure_error(f, log=res.log)


def _check_metrics(summary: Summary, metrics: tuple[str, ...], rec: Recipe, run_dir: Path, log: Path) -> None:
    """A requested metric that no launch has is a name ncu does not know: ncu 2025.3 prints '(!) n/a' for it and
    exits 0, so this is where an unknown metric is caught, with the recipe line that names it."""
    if not summary.kernels:
        return
    present = {k for row in summary.kernels for k in row.metrics}
    missing = [m for m in metrics if m not in present]
    if missing:
        where = ", ".join(f"{m} ({rec.where(m)})" for m in missing)
        raise RecipeError(
            f"ncu does not know metric {where}: it reported n/a for every launch; report kept in {run_dir}", log=log
        )


def _check_launches(launches: list[dict[str, Any]], rows: list[dict[str, Any]], specs: Sequence[Any]) -> list[str]:
    """Every launch must sit in a measured range of a requested case; say which case profiled nothing."""

    if not launches:
        raise NothingMatched("ncu wrote a report with no launch in it")
    warnings = []
    outside = [ln for ln in launches if f"/{nvtx.MEASURE}/" not in (ln.get("nvtx_range") or "")]
    if outside:
        warnings.append(f"{len(outside)} launch(es) outside the measured NVTX ranges "
                        f"(ids {', '.join(str(x['id']) for x in outside[:10])})")
    seen = {backend_of(ln.get("nvtx_range")) for ln in launches}
    for spec in specs:
        for p in nvtx.passes_of(spec.pass_):
            if (spec.label, p, spec.shape_key) in seen:
                continue
            row = next((r for r in rows if (r.get("spec") or {}) == spec.to_dict()), None)
            why = f"{row.get('status')}: {row.get('reason')}" if row and row.get("status") != "ok" \
                else "no launch matched"
            warnings.append(f"{spec.case_id} {p}: nothing profiled ({why})")
    return warnings

