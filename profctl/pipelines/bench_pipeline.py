"""The bench pipeline (`profctl bench`): run a sweep in a child process, one case at a time, and turn its
events into rows.

The sweep runs in the target's program (``python -m profctl.workloads.attention``) so that a crash (a CUDA fault, a
segfault) or a hang in one backend costs only that point: the row records the point's status and a new child
starts at the next point. Every finished row is already on disk (the child appends it to events.jsonl), so an
interrupted sweep keeps what finished. NVML clocks, power and throttle reasons are sampled per point here.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from profctl import faults, memory, run_store
from profctl.analysis.compare.stats import PROCESSES
from profctl.errors import ProfctlError, UsageError, WorkloadFailed
from profctl.fsutil import atomic_write_json
from profctl.nvml import Sampler
from profctl.pipelines.base import OnProgress, Progress, Request, Result, Tally, Target
from profctl.pipelines.bench_rows import (
    NOISE_IQR,
    add_clock_warnings,
    add_host_warnings,
    add_noise_warnings,
    add_process_warnings,
    add_speedups,
    failed_row,
    make_row,
    merge_processes,
    where_fields,
)
from profctl.pipelines.executors import Part, PartContext, PartOutcome, where_label
from profctl.pipelines.targets import Model, Workload
from profctl.schema.bench import BenchRow, bench_rows
from profctl.spec import BUILTIN_BACKENDS, dtype_refusal

if TYPE_CHECKING:
    import pandas as pd

#: kept importable from here (tests, the CLI): they live in profctl.pipelines.bench_rows
__all__ = ["NOISE_IQR", "BenchPart", "BenchRequest", "BenchResult", "add_noise_warnings", "add_speedups", "check",
           "failed_row", "make_row", "parse_labels", "run", "where_fields"]

EVENTS = "events.jsonl"
LOG = "workload.log"
#: the most processes one run may time a point in (--processes): past this, separate runs say as much
MAX_PROCESSES = 64
#: exit statuses of a workload child that are not a crash: 0 ran, 1 no case ran, 3 a CUDA error broke the context
_CLEAN_EXITS = (0, 1, 3)


@dataclass(frozen=True, kw_only=True)
class BenchRequest(Request):
    """A sweep to time. `baseline` is added to the backends when missing (speedups are against it);
    `label` names what the run measures so `profctl compare` can pair runs of different backends."""

    baseline: str | None = "eager"
    point_timeout_s: float = 900.0
    label: str | dict[str, str] | None = None
    #: time every point in this many fresh processes, one after another (None: the device's default,
    #: profctl.analysis.compare.stats.PROCESSES, or PROFCTL_BENCH_PROCESSES)
    processes: int | None = None


@dataclass(kw_only=True)
class BenchResult(Result):
    """The rows of a sweep, the device it ran on and where its files are."""

    rows: list[BenchRow] = field(default_factory=list)
    device: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False
    baseline: str | None = None
    points: int | None = None  # the points the sweep planned (rows: those that finished)

    def __post_init__(self) -> None:  # rows given as JSON objects (the Python API, an old caller) become rows
        self.rows = bench_rows(self.rows)

    def to_dataframe(self) -> pd.DataFrame:
        import pandas as pd

        flat = []
        for r in self.rows:
            d = {k: v for k, v in r.items() if k not in ("clocks", "times_ms")}
            d.update({f"clock_{k}": v for k, v in (r.clocks or {}).items() if not isinstance(v, list)})
            flat.append(d)
        return pd.DataFrame(flat)

    @property
    def clock_warnings(self) -> list[str]:
        return [f"{r.backend} {r.shape_label()}: {r.clock_warning}" for r in self.rows if r.clock_warning]

    @property
    def noise_warnings(self) -> list[str]:
        return [f"{r.backend} {r.shape_label()}: {r.noise_warning}" for r in self.rows if r.noise_warning]

    @property
    def host_warnings(self) -> list[str]:
        return [f"{r.backend} {r.shape_label()}: {r.host_warning}" for r in self.rows if r.host_warning]


@dataclass
class BenchPart:
    """What one part of a sweep returns: its rows by case index (those its events brought already included),
    the device its workload child reported, and where its time went (`timing`: the manifest's part record)."""

    rows: dict[int, BenchRow] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, Any] = field(default_factory=dict)


def check(req: BenchRequest) -> None:
    """UsageError for options the sweep cannot honour, found before anything runs (or torch is imported)."""
    if req.baseline is not None and req.baseline not in BUILTIN_BACKENDS:
        raise UsageError(f"unknown baseline {req.baseline!r}; choose from {', '.join(BUILTIN_BACKENDS)} or 'none'")
    if req.point_timeout_s <= 0:
        raise UsageError(f"--timeout must be positive, got {req.point_timeout_s:g}")
    if req.processes is not None and not 1 <= req.processes <= MAX_PROCESSES:
        raise UsageError(f"--processes must be 1 to {MAX_PROCESSES}, got {req.processes}")
    if req.target.backends():
        parse_labels(req.label, list(req.target.backends()))


def run(req: BenchRequest, on_progress: OnProgress | None = None) -> BenchResult:
    """Run the sweep; return every point's row, failed ones included (a row per point, whatever happened)."""
    check(req)
    with req.executor.session() as ex:
        target = ex.ask(_resolve, req.target)
        backends = list(target.backends())
        labels = parse_labels(req.label, backends)
        if req.baseline and req.baseline not in backends and _refuses_all(req.baseline, target):
            req = replace(req, baseline=None)  # it would add only unsupported rows (eager in an fp8 sweep)
        if req.baseline and req.baseline not in backends:
            target = target.with_backends([*backends, req.baseline])
        n_proc = processes_for(req.processes, target.device)
        ex.prepare(target.device, points=len(target.cases()), warm=functools.partial(serve_command, target))
        run_dir = run_store.new_run("bench", root=req.reports, argv=list(req.command) if req.command else None,
                                    label=run_label(req.label, labels),
                                    extra={**target.manifest(), "labels": labels or None,
                                           "processes": n_proc if n_proc > 1 else None})
        specs = list(target.cases())
        tally = Tally(specs * n_proc, ex.parallel)
        legs: list[_Gather] = []
        error: BaseException | None = None
        interrupted = False
        try:
            with run_store.sigterm_as_interrupt():  # a cancelled CI job keeps its finished points too
                for leg in range(n_proc):  # process after process, each timing every point
                    sweep = _Gather(specs, run_dir, on_progress, tally=tally, leg=leg)
                    legs.append(sweep)
                    _leg(ex, sweep, target, run_dir, point_timeout_s=req.point_timeout_s, warm=n_proc == 1)
                    error = sweep.error()
                    if error is not None:
                        break
        except KeyboardInterrupt:
            interrupted = True
        except BaseException as e:
            error = e
        legs = legs or [_Gather(specs, run_dir, on_progress, tally=tally)]
        legs[-1].interrupted = interrupted
        parts = [{**p, "process": g.leg + 1} if n_proc > 1 else p for g in legs for p in g.parts]
        run_store.update_manifest(run_dir, executor=ex.describe(), parts=parts if ex.parallel or n_proc > 1 else None,
                                  timing=parts[0].get("timing") if parts and not ex.parallel else None)
    return _finish(req, legs, n_proc, run_dir, labels, error)


def processes_for(asked: int | None, device: str) -> int:
    """The processes a run times each point in: `asked`, else PROFCTL_BENCH_PROCESSES, else the device's default
    (profctl.analysis.compare.stats.PROCESSES: 3 on a CPU, 1 on a GPU)."""
    if asked is not None:
        return asked
    env = os.environ.get("PROFCTL_BENCH_PROCESSES", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            raise UsageError(f"PROFCTL_BENCH_PROCESSES={env!r} is not a whole number of processes") from None
        if not 1 <= n <= MAX_PROCESSES:
            raise UsageError(f"PROFCTL_BENCH_PROCESSES must be 1 to {MAX_PROCESSES}, got {n}")
        return n
    return PROCESSES.get(device, 1)


def _leg(ex: Any, sweep: _Gather, target: Workload | Model, run_dir: Path, *, point_timeout_s: float,
         warm: bool) -> None:
    """Every point of the sweep once, in fresh processes (or the workers' warm children when `warm`): one
    process's share of a run."""
    part = functools.partial(_part, target=target, point_timeout_s=point_timeout_s, leg=sweep.leg)
    outcomes = ex.map_parts(part, range(len(sweep.specs)), run_dir=run_dir, device=target.device,
                            on_event=sweep.on_event, weights=target.costs(),
                            keys=[str(getattr(c, "backend", "")) for c in sweep.specs], warm=warm)
    with contextlib.closing(outcomes):
        for out in outcomes:
            sweep.take(out)


def serve_command(target: Workload | Model) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of the warm child (``--serve``) for `target`, as the machine that asks
    runs it (its own Python): a worker's kit starts it before the first part comes, and the parts find it."""
    t = target.for_worker(sys.executable)
    return t.argv(extra=["--serve"]), t.env()


def _refuses_all(backend: str, target: Workload | Model) -> bool:
    """Whether `backend` refuses the dtype (or pass) of every case of the sweep, known without running it."""
    return isinstance(target, Workload) and all(dtype_refusal(backend, c.dtype, c.pass_) for c in target.cases())


def _resolve(target: Target) -> Workload | Model:
    """The target resolved where the parts run (its device decided there); bench times the built-in workloads."""
    t = target.resolve()
    if t.foreign:
        raise UsageError(f"profctl bench times the attention and model workloads, not a {t.kind}")
    return cast("Workload | Model", t)


class _Gather:
    """The sweep as the submitting process sees it: rows as the parts report them, progress, the parts' ends."""

    def __init__(self, specs: list[Any], run_dir: Path, on_progress: OnProgress | None, *, tally: Tally,
                 leg: int = 0) -> None:
        self.specs, self.run_dir, self.on_progress = specs, run_dir, on_progress
        self.tally, self.leg = tally, leg  # the run's tally over every process's points; this process's number
        self.at = leg * len(specs)  # where this process's points start in the tally
        self.rows: dict[int, BenchRow] = {}
        self.device: dict[str, Any] = {}
        self.parts: list[dict[str, Any]] = []
        self.errors: list[BaseException] = []
        self.interrupted = False

    def on_event(self, part: Part, ev: dict[str, Any]) -> None:
        kind, i, where = ev.get("event"), ev.get("index"), ev.get("where") or {}
        if kind == "device":
            for k, v in (ev.get("device") or {}).items():
                self.device.setdefault(k, v)
        if i is None or not 0 <= int(i) < len(self.specs):
            return
        i = int(i)
        label = where_label(where) if self.tally.parallel else None
        at = self.at + i
        if kind == "start" and i not in self.rows:
            self._progress(self.tally.event(at, where=label, util=ev.get("util")))
        elif kind == "row" and i not in self.rows:
            self.rows[i] = row = BenchRow.from_dict(ev["row"])  # a worker's row arrives as its JSON object
            self._progress(self.tally.event(at, where=label, finished=True, ok=row.ok, util=ev.get("util"),
                                            row=row))
        elif kind == "lost" and i not in self.rows:
            self.rows[i] = lost = failed_row(self.specs[i], "crashed", ev["reason"])
            lost.update(where_fields(where))
            self._progress(self.tally.event(at, where=label, finished=True, ok=False, row=self.rows[i]))

    def _progress(self, p: Progress) -> None:
        if self.on_progress is not None:
            self.on_progress(p)

    def take(self, out: PartOutcome[BenchPart]) -> None:
        """A part ended: its rows (those its events did not bring), its device, and what it says of itself."""
        value = out.value or BenchPart()
        for i, row in value.rows.items():
            self.on_event(out.part, {"event": "row", "index": int(i), "row": row, "where": out.where})
        for k, v in value.device.items():
            self.device.setdefault(k, v)
        cases = out.part.cases if out.part.cases is not None else range(len(self.specs))
        info = {"part": out.part.index, "dir": out.dir.name if out.dir is not None and self.tally.parallel else None,
                "cases": len(cases), **{k: v for k, v in out.where.items() if k != "worker"},
                "worker": out.where.get("worker"), "retry": out.part.retry or None,
                "timing": value.timing or None}
        if out.error is not None:
            self.errors.append(out.error)
            info["error"] = _one_line(out.error)
            if self.tally.parallel:  # the other parts' rows stand; this part's unfinished points say why
                for i in cases:
                    if i not in self.rows:
                        self.on_event(out.part, {"event": "lost", "index": i, "where": out.where,
                                                 "reason": f"its part failed on {where_label(out.where)}: "
                                                           f"{_one_line(out.error)}"})
        self.parts.append({k: v for k, v in info.items() if v is not None})

    def error(self) -> BaseException | None:
        """The error that fails the run: a part's, when no point produced a row (serially: the part's error)."""
        if self.errors and (not self.tally.parallel or not any(r.ok for r in self.rows.values())):
            return self.errors[0]
        return None


def _one_line(e: BaseException) -> str:
    return e.one_line() if isinstance(e, ProfctlError) else f"{type(e).__name__}: {e}"


def _part(ctx: PartContext, *, target: Workload | Model, point_timeout_s: float, leg: int = 0) -> BenchPart:
    """One part: the serial loop over the part's cases, here or on a worker (rows as events while it runs);
    `leg`: which of the run's processes (bench --processes) this is, whose files get its number."""
    sweep = _Sweep(ctx, ctx.localize(target), point_timeout_s, leg)
    try:
        sweep.run_all()
    except BaseException:
        sweep.stop()
        raise
    finally:
        if sweep.own_sampler:
            sweep.sampler.stop()
    return BenchPart(rows=sweep.rows, device=sweep.device, timing=sweep.timing())


class _Sweep:
    """The state of one running part of a sweep: its points, the child process running them, the rows so far."""

    def __init__(self, ctx: PartContext, target: Workload | Model, point_timeout_s: float, leg: int = 0) -> None:
        self.ctx, self.target, self.point_timeout_s = ctx, target, point_timeout_s
        self.specs = target.cases()
        self.todo = list(ctx.part.cases) if ctx.part.cases is not None else list(range(len(self.specs)))
        self.events = run_store.EventTail(ctx.workdir / leg_file(EVENTS, leg))
        self.log = ctx.workdir / leg_file(LOG, leg)
        self.sampler: Any
        self.sampler, self.own_sampler = ctx.sampler() if target.device == "cuda" else (Sampler(-1), True)
        self.device: dict[str, Any] = {"nvml_name": self.sampler.name, "driver": self.sampler.driver}
        self.where = where_fields(ctx.where)
        self.rows: dict[int, BenchRow] = {}
        self.child: Any = None
        self.memory: dict[str, Any] | None = None  # the current point's memory estimate and budget (its start event)
        self.current: int | None = None
        self.started = 0.0
        self.idle = False  # a warm child said it finished the batch it was given
        self.t0 = time.time()
        self.clock: dict[str, Any] = {}  # where the part's time went (see timing())
        self.spans: dict[int, float] = {}  # case -> its start on the child's clock

    def run_all(self) -> None:
        """One child after another, each resuming after the last point seen, until every point has a row (on a
        worker running warm: the worker's warm child, fed this part's cases)."""
        if self.ctx.warm:
            self._run_warm()
            return
        last = -1
        while True:
            remaining = [i for i in self.todo if i > last]
            if not remaining or self.ctx.cancelled():
                return
            first = remaining[0]
            contiguous = remaining == list(range(first, len(self.specs)))
            argv = self.target.argv(jsonl=self.events.path, skip=first if contiguous else 0,
                                    only=None if contiguous else remaining, extra=["--exit-fast"])  # no profiler
            self.clock.setdefault("sent", time.time())  # a child of its own: its start is the part's wait
            self.child = self.ctx.spawn(argv, log=self.log, env=self.target.env(),
                                        timeout_s=self.point_timeout_s * len(remaining) + 300)
            self.ctx.record_tool("workload", list(argv), log=self.log, skip=first)
            self.current = None
            last = self._follow(first) - 1

    def _run_warm(self) -> None:
        """This part's cases in the worker's warm child (profctl.pipelines.warm): a batch at a time, a fresh
        child after one died (the case it died in is a ``crashed`` row), its output copied into the part's log."""
        argv = self.target.argv(extra=["--serve"])
        todo = list(self.todo)
        while todo and not self.ctx.cancelled():
            assert self.ctx.kit is not None
            child, new = self.ctx.kit.pool.child(argv, self.target.env())
            if new or child.batches == 0:  # its output goes into each part's workload.log, this one's first
                self.ctx.record_tool("workload", list(argv), log=self.log, warm=True)
            self.child, self.current, self.idle = child.running, None, False
            start = child.log_size()
            self.clock.setdefault("child_age_s", round(time.time() - child.spawned, 3))
            self.clock.setdefault("sent", time.time())
            child.send(todo, self.events.path)
            self._follow(todo[0])
            child.copy_log(start, self.log)
            todo = [i for i in todo if i not in self.rows]

    def _follow(self, start: int) -> int:
        """Follow the running child to its end (or kill it at a point's timeout, or when the run is cancelled;
        a warm child: to the end of its batch); the next point to run. Polls every few milliseconds after an
        event (a warm child's short points end in milliseconds), backing off to 50 ms while a point runs."""
        nap = 0.002
        while True:
            evs = self.events.read()
            self._take(evs)
            nap = 0.002 if evs else min(0.05, nap * 2)
            if self.idle:
                return len(self.specs)
            rc = self.child.proc.poll()
            if self.current is not None and time.monotonic() - self.started > self.point_timeout_s:
                self.child.kill()
                i = self.current
                self._row(i, failed_row(self.specs[i], "timeout", f"no result after {self.point_timeout_s:.0f} s; "
                                        f"killed (log: {self.ctx.final(self.log)})"))
                return i + 1
            if rc is not None:
                return self._on_exit(rc, start)
            if self.ctx.cancelled():
                self.child.kill()
                self._take(self.events.read(final=True))
                return len(self.specs)
            time.sleep(nap)

    def _on_exit(self, rc: int, start: int) -> int:
        """The next point after the child ended: past the point it died in, else past its last row."""
        self._take(self.events.read(final=True))  # rows written just before exit
        i = self.current
        if i is not None and i not in self.rows:
            self._row(i, self._died(i, rc))
            return i + 1
        mine = [j for j in self.rows if j >= start]
        if not mine:
            # ended before starting any point: a broken environment, not a backend failure
            how = f"exited with status {rc}" if rc not in _CLEAN_EXITS else f"ended (status {rc})"
            raise WorkloadFailed(f"the workload process {how} before running any case", log=self.ctx.final(self.log))
        return max(mine) + 1

    def _died(self, i: int, rc: int) -> BenchRow:
        """The row of point `i` whose child died with status `rc`: ``oom`` when the system killed it (SIGKILL,
        not sent by profctl) while the point's memory estimate was large for the memory it had, else
        ``crashed``."""
        log = self.ctx.final(self.log)
        if rc == -signal.SIGKILL:
            oom = memory.killed_for_memory(self.memory)
            if oom:
                return failed_row(self.specs[i], "oom", f"{oom}; see {log}")
            return failed_row(self.specs[i], "crashed", f"workload process killed (exit {rc}, SIGKILL, not sent by "
                              "profctl: on Linux most often the out-of-memory killer) during this point; see "
                              f"{log}")
        return failed_row(self.specs[i], "crashed", f"workload process died (exit {rc}) during this point; see {log}")

    def _take(self, evs: list[dict[str, Any]]) -> None:
        for ev in evs:
            kind = ev.get("event")
            if kind == "device":
                self.device.update({k: v for k, v in ev.items() if k != "event"})
                self.ctx.emit({"event": "device", "device": self.device})
            elif kind == "start":
                self.current, self.started = int(ev["index"]), time.monotonic()
                self.memory = ev.get("memory")
                self.sampler.take()  # drop samples from between points
                self.spans[self.current] = float(ev.get("t") or time.time())
                self.clock.setdefault("first_start", self.spans[self.current])
                self.ctx.emit({"event": "start", "index": self.current, "util": self.sampler.util,
                               "t": self.spans[self.current]})
                faults.on_worker(self.specs[self.current], worker=self.ctx.own_process)  # profctl's tests
            elif kind == "row":
                i = int(ev["index"])
                if i in self.spans and ev.get("t"):
                    self.clock["points_s"] = self.clock.get("points_s", 0.0) + float(ev["t"]) - self.spans[i]
                self._row(i, make_row(self.specs[i], ev, self.sampler.take(), self.device), t=ev.get("t"))
                self.current = None if self.current == i else self.current
            elif kind == "idle":
                self.idle = True
            elif kind == "ready":  # a warm child's start: its imports and CUDA (workloads/serve.py)
                self.clock["child_ready"] = {k: ev.get(k) for k in ("import_s", "cuda_s")}

    def _row(self, i: int, row: BenchRow, t: float | None = None) -> None:
        row.update(self.where)
        self.rows[i] = row
        self.ctx.emit({"event": "row", "index": i, "row": row, "util": self.sampler.util, "t": t or time.time()})

    def timing(self) -> dict[str, Any]:
        """Where the part's time went, for the manifest: its wall time; the seconds its points took (start to
        row, on the child's clock); for a warm child, how old it was when the part sent its batch and how long
        the batch waited for the child's first start event; the rest (``overhead_s``) is the part's own work."""
        wall = time.time() - self.t0
        out: dict[str, Any] = {"wall_s": round(wall, 3), "points_s": round(self.clock.get("points_s", 0.0), 3)}
        if "sent" in self.clock and "first_start" in self.clock:
            out["wait_s"] = round(self.clock["first_start"] - self.clock["sent"], 3)
        for k in ("child_age_s", "child_ready"):
            if k in self.clock:
                out[k] = self.clock[k]
        out["overhead_s"] = round(wall - out["points_s"] - out.get("wait_s", 0.0), 3)
        return out

    def stop(self) -> None:
        """Kill the child and keep every row it finished (read from the start: an interrupt may have come
        between reading a line and handling it)."""
        if self.child is not None:
            try:
                self.child.kill()
            except BaseException:  # a second Ctrl-C while stopping: the rows on disk are still read
                pass
        try:
            evs = run_store.read_events(self.events.path)
        except BaseException:
            return
        for ev in evs:
            if ev.get("event") == "device":
                for k, v in ev.items():
                    if k != "event":
                        self.device.setdefault(k, v)
                self.ctx.emit({"event": "device", "device": self.device})
            elif ev.get("event") == "row":
                i = int(ev.get("index", -1))
                if 0 <= i < len(self.specs) and i not in self.rows:
                    try:
                        self._row(i, make_row(self.specs[i], ev, {}, self.device))
                    except BaseException:
                        return


def leg_file(name: str, leg: int) -> str:
    """The file of the run's `leg`-th process (0: the first keeps the plain name): events-2.jsonl, workload-2.log."""
    if not leg:
        return name
    stem, dot, ext = name.partition(".")
    return f"{stem}-{leg + 1}{dot}{ext}"


def _finish(req: BenchRequest, legs: list[_Gather], n_proc: int, run_dir: Path, labels: dict[str, str],
            error: BaseException | None) -> BenchResult:
    """The processes' rows merged per point, speedups, clock and noise warnings, bench.json and the manifest's
    end; re-raise the error that stopped the sweep. A later process that failed to start leaves the earlier
    processes' rows standing, with a warning."""
    warnings: list[str] = []
    if error is not None and len(legs) > 1 and legs[0].rows:
        warnings.append(f"process {len(legs)} of the run failed ({_one_line(error)}): its rows are the first "
                        f"{len(legs) - 1} processes'")
        error = None
    sweep = legs[0]
    sweep.interrupted = any(g.interrupted for g in legs)
    for g in legs[1:]:
        for k, v in g.device.items():
            sweep.device.setdefault(k, v)
    ordered = [merge_processes([g.rows[i] for g in legs if i in g.rows]) if n_proc > 1 else sweep.rows[i]
               for i in sorted(sweep.rows)]
    for r in ordered:
        name = labels.get(r.backend) or labels.get(r.backend_ref or "")
        if name:
            r.label = name
    add_speedups(ordered, req.baseline)
    add_clock_warnings(ordered)
    add_noise_warnings(ordered)
    add_process_warnings(ordered)
    add_host_warnings(ordered)
    atomic_write_json(run_dir / "bench.json", ordered)
    done: dict[str, Any] = {"device": sweep.device, "points": len(sweep.specs), "rows": len(ordered),
                            "clocks": run_store.clocks_seen(ordered)}
    if error is not None:
        run_store.finish(run_dir, "failed", reason=_one_line(error), **done)
        raise error
    if sweep.interrupted:
        done["reason"] = "interrupted"
    status = "incomplete" if sweep.interrupted or len(ordered) < len(sweep.specs) else "complete"
    run_store.finish(run_dir, status, **done)
    failed: list[dict[str, Any]] = [r for r in ordered if not r.ok]
    return BenchResult(run_dir=run_dir, status=status, rows=ordered, device=sweep.device,
                       interrupted=sweep.interrupted, baseline=req.baseline, failed_cases=failed,
                       points=len(sweep.specs), warnings=interpreted(ordered) + warnings)


def interpreted(rows: list[BenchRow]) -> list[str]:
    """Under TRITON_INTERPRET=1 (the workload inherits it) Triton kernels run in Triton's interpreter, a CPU
    emulator: a row of profctl's Triton backend or of a user's function (which may launch Triton kernels) timed the
    emulator -- its ms are the emulator's and its TFLOP/s (0.000) say nothing of the kernel. One line saying so."""
    if os.environ.get("TRITON_INTERPRET", "0").strip() in ("", "0"):
        return []
    timed = sorted({r.backend for r in rows if r.ok and (r.backend == "triton" or r.backend_ref)})
    if not timed:
        return []
    return [f"TRITON_INTERPRET={os.environ['TRITON_INTERPRET']}: Triton kernels ran in Triton's interpreter (an "
            f"emulator on the CPU), so the times and TFLOP/s of {', '.join(timed)} are the emulator's, not a GPU "
            "kernel's (unset TRITON_INTERPRET to time the kernels)"]


def parse_labels(label: str | dict[str, str] | None, backends: list[str]) -> dict[str, str]:
    """{backend: label} from ``NAME`` (the run's only backend) or ``BACKEND=NAME,...``; a ``NAME`` in a run of
    several backends names the run only (:func:`run_label`), its rows keep their backends' names: {}. UsageError
    for a label that cannot be one."""
    if not label:
        return {}
    if isinstance(label, dict):
        pairs = dict(label)
    elif "=" in label:
        pairs = {}
        for part in label.split(","):
            b, sep, name = part.partition("=")
            if not sep:
                raise UsageError(f"--label {label!r}: mix of NAME and BACKEND=NAME; give BACKEND=NAME for each")
            pairs[b.strip()] = name.strip()
    elif len(backends) != 1:  # several backends: NAME names the run (its rows keep their backends' names)
        _check_label(label.strip())
        return {}
    else:
        pairs = {backends[0]: label.strip()}
    for b, name in pairs.items():
        if b not in backends:
            raise UsageError(f"--label: backend {b!r} is not in this run's backends ({', '.join(backends)})")
        _check_label(name)
    if len(set(pairs.values())) != len(pairs):
        raise UsageError(f"--label {label!r}: two backends under one label; a label names one backend in a run")
    return pairs


def _check_label(name: str) -> None:
    if not name or any(c in name for c in ",=[]"):
        raise UsageError(f"--label: {name!r} is not a usable label (non-empty, no ',', '=', '[', ']')")


def run_label(label: str | dict[str, str] | None, labels: dict[str, str]) -> str | None:
    """The run's own name (its manifest's ``label``: `profctl runs`, `show`): a plain ``--label NAME``, else the
    rows' labels (``BACKEND=NAME,...``) joined."""
    if isinstance(label, str) and label.strip() and "=" not in label:
        return label.strip()
    return ",".join(sorted(set(labels.values()))) or None
