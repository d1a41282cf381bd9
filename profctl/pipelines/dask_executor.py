"""Parts of a run on Dask workers: one worker process per GPU of this machine, N CPU worker processes, or the
workers of a running Dask scheduler (``--cluster tcp://HOST:8786``). See docs/cluster.md.

This machine: a ``distributed.SpecCluster`` with one ``Nanny`` per GPU, each worker process pinned to its GPU
with ``CUDA_VISIBLE_DEVICES=<uuid>`` and running one task at a time (one thread, a ``GPU`` resource). A task is
one part: the pipeline's own serial loop over a group of cases (a child process per run of cases, a new child
after a point that killed its child), so a point that crashes costs only its own row. A worker process that dies
(the Nanny starts a fresh one) loses its part: the cases it had not finished are tried once more, the case it was
running alone, and a case whose worker died twice while running it becomes a ``crashed`` row.

Progress and rows travel back as worker events (``log_event`` -> ``subscribe_topic``) while the parts run; a
part's files come back as bytes in its result unless the run directory is on a file system the worker shares.
Ctrl-C sets a ``distributed.Event`` that the parts poll: they kill their child processes and return what
finished. Dask is imported only here, and only when this executor runs (``pip install 'profctl[cluster]'``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from profctl import nvml, proc, runs
from profctl.errors import ProfctlError, UsageError
from profctl.pipelines.base import Progress, Tally
from profctl.pipelines.executors import (
    Local,
    OnEvent,
    Part,
    PartContext,
    PartFn,
    PartOutcome,
    split,
    tool_event,
    where_label,
)

T = TypeVar("T")
V = TypeVar("V")
EXTRA = "pip install 'profctl[cluster]'"
#: scheduler settings of the local cluster: a lost worker fails its task at once, so profctl retries point by
#: point (a scheduler of yours retries whole parts up to `allowed-failures` times; set it to 0 there too)
#: what a Nanny sets in its worker's environment by default (distributed.nanny.pre-spawn-environ): one thread
#: for OpenMP/MKL/OpenBLAS and an aggressive malloc trim, good for Dask's own compute, not for the workload
#: child; the child gets the submitting process's values of these instead
WORKER_ENV_KEYS = ("MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
_CONFIG = {"distributed.scheduler.allowed-failures": 0, "distributed.worker.daemon": True,
           "distributed.nanny.pre-spawn-environ": {},
           "distributed.admin.system-monitor.gil.enabled": False}
CANCEL_GRACE_S = 15.0  # how long cancelled parts get to kill their children and answer


def dask_missing() -> bool:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return True
    return False


def parse_gpus(spec: str | None) -> list[int] | None:
    """``all``/None -> None (every visible GPU); ``0,2,5`` -> [0, 2, 5] (NVML indices, as nvidia-smi shows)."""
    if spec is None or spec.strip().lower() in ("", "all"):
        return None
    try:
        out = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--gpus {spec!r}: give 'all' or GPU indices as nvidia-smi shows them, e.g. 0,2,5") from None
    if not out or len(set(out)) != len(out) or min(out) < 0:
        raise UsageError(f"--gpus {spec!r}: give 'all' or distinct GPU indices, e.g. 0,2,5")
    return out


def select_gpus(spec: str | None, workers: int | None) -> list[nvml.Gpu]:
    """The GPUs to put a worker on: those --gpus names (default: every visible one), the first `workers` of
    them; UsageError for an index that is not there or more workers than GPUs."""
    want = parse_gpus(spec)
    every = nvml.gpus() if want is not None else nvml.visible_gpus()
    if every is None:
        raise UsageError("cannot list the GPUs: NVML's Python bindings (nvidia-ml-py) are missing")
    if want is not None:
        known = {g.index: g for g in every}
        bad = [i for i in want if i not in known]
        if bad:
            raise UsageError(f"--gpus: no GPU {', '.join(map(str, bad))} here (GPUs: "
                             f"{', '.join(str(g.index) for g in every) or 'none'})")
        every = [known[i] for i in want]
    if not every:
        raise UsageError("no GPU is visible for the workers (CUDA_VISIBLE_DEVICES, or no driver)")
    if workers is not None and workers > len(every):
        raise UsageError(f"--workers {workers}: one worker per GPU, and {len(every)} GPU(s) are selected "
                         f"({', '.join(str(g.index) for g in every)})")
    return every[:workers] if workers is not None else every


@dataclass(frozen=True)
class DaskExecutor:
    """Runs the parts of a run on Dask workers: `workers` worker processes here (one per GPU of `gpus` for a
    CUDA workload, else CPU workers), or the workers of the scheduler at `cluster`. `parts_per_worker` > 1 cuts
    the cases finer (better balance, a child process start more per part)."""

    workers: int | None = None
    gpus: str | None = None
    cluster: str | None = None
    parts_per_worker: int = 1
    #: keep one warm workload child per worker and deal single cases to workers as they free up (issue 24);
    #: PROFCTL_WARM=0 starts a child per part as before
    warm: bool = field(default_factory=lambda: os.environ.get("PROFCTL_WARM", "1") != "0")
    connect_timeout_s: float = 30.0
    on_progress: Callable[[Progress], None] | None = field(default=None, compare=False)
    name: str = "dask"
    local: Local = field(default_factory=Local)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "on_progress": None}  # a progress bar stays in the submitting process

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)

    def __post_init__(self) -> None:
        if dask_missing():
            raise UsageError(f"--workers/--gpus/--cluster need Dask, an optional extra: {EXTRA}")
        if self.workers is not None and self.workers < 1:
            raise UsageError(f"--workers must be at least 1, got {self.workers}")
        if self.cluster is not None and (self.workers is not None or self.gpus is not None):
            raise UsageError("--cluster sends the work to that scheduler's workers; --workers and --gpus start "
                             "workers here: give one or the other")
        if self.parts_per_worker < 1:
            raise UsageError(f"parts_per_worker must be at least 1, got {self.parts_per_worker}")
        parse_gpus(self.gpus)

    def spawn(self, argv: Sequence[str], **kw: Any) -> proc.Running:
        return self.local.spawn(argv, **kw)

    def run(self, argv: Sequence[str], **kw: Any) -> proc.ProcResult:
        return self.local.run(argv, **kw)

    @contextlib.contextmanager
    def session(self) -> Iterator[DaskSession]:
        s = DaskSession(self)
        try:
            yield s
        finally:
            s.close()


class DaskSession:
    """One run's use of Dask: the client (and the local cluster it started), the parts in flight."""

    parallel = True

    def __init__(self, ex: DaskExecutor) -> None:
        self.ex = ex
        self.client: Any = None
        self.cluster: Any = None
        self.workers: list[dict[str, Any]] = []
        self.started_s: float | None = None
        self.lost: list[dict[str, Any]] = []  # parts whose worker died
        #: the workload children's values of WORKER_ENV_KEYS (None: unset), whatever the worker has
        self.child_env: dict[str, str | None] = {k: os.environ.get(k) for k in WORKER_ENV_KEYS}
        self._log_levels: dict[str, int] = {}

    # ---- the cluster
    def _start(self, device: str) -> Any:
        if self.client is not None:
            return self.client
        t0 = time.monotonic()
        self._quiet()
        from distributed import Client

        if self.ex.cluster is not None:
            try:
                self.client = Client(self.ex.cluster, timeout=self.ex.connect_timeout_s)
            except (OSError, TimeoutError) as e:
                raise UsageError(f"--cluster {self.ex.cluster}: cannot reach a Dask scheduler there ({e})") from None
            try:
                self.client.wait_for_workers(1, timeout=self.ex.connect_timeout_s)
            except TimeoutError:
                raise UsageError(f"--cluster {self.ex.cluster}: the scheduler has no worker "
                                 f"(start some: docs/cluster.md)") from None
        else:
            self.cluster = self._local_cluster(device)
            self.client = Client(self.cluster)
        info = self.client.scheduler_info(n_workers=-1) if _takes_n_workers(self.client) else \
            self.client.scheduler_info()
        self.workers = [{"name": str(w.get("name")), "address": a, "host": w.get("host"),
                         "nthreads": w.get("nthreads")} for a, w in sorted(info.get("workers", {}).items())]
        self.started_s = round(time.monotonic() - t0, 3)
        return self.client

    def _local_cluster(self, device: str) -> Any:
        import dask
        from distributed import Nanny, Scheduler, SpecCluster

        common = {"nthreads": 1, "memory_limit": 0, "silence_logs": logging.CRITICAL, "dashboard": False,
                  "preload": [__name__]}
        specs: dict[str, Any] = {}
        if device == "cuda":
            for g in select_gpus(self.ex.gpus, self.ex.workers):
                specs[f"gpu{g.index}"] = {"cls": Nanny, "options": {
                    **common, "resources": {"GPU": 1}, "env": {"CUDA_VISIBLE_DEVICES": g.uuid or str(g.index)}}}
        else:
            if self.ex.gpus is not None:
                raise UsageError("--gpus: the workload runs on the CPU here (--device cpu, or no GPU is visible)")
            n = self.ex.workers or 1
            threads = str(max(1, (os.cpu_count() or 1) // n))  # the workers share the cores, as CPUs do
            self.child_env["OMP_NUM_THREADS"] = threads
            for i in range(n):
                specs[f"cpu{i}"] = {"cls": Nanny, "options": {
                    **common, "env": {"OMP_NUM_THREADS": threads, "CUDA_VISIBLE_DEVICES": ""}}}
        with dask.config.set(_CONFIG):
            return SpecCluster(workers=specs, scheduler={"cls": Scheduler, "options": {
                "dashboard": False, "dashboard_address": None}}, silence_logs=logging.CRITICAL)

    def _quiet(self) -> None:
        """Dask's own log lines (a worker lost, a task failed) would tear the progress bar; profctl reports
        those itself. Restored at close."""
        for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.worker"):
            lg = logging.getLogger(name)
            self._log_levels.setdefault(name, lg.level)
            lg.setLevel(logging.CRITICAL)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.client is not None:
                self.client.close()
        with contextlib.suppress(Exception):
            if self.cluster is not None:
                self.cluster.close()
        self.client = self.cluster = None
        for name, level in self._log_levels.items():
            logging.getLogger(name).setLevel(level)

    def describe(self) -> dict[str, Any]:
        return {"name": "dask", "cluster": self.ex.cluster or "local", "workers": self.workers,
                "start_s": self.started_s, "lost_parts": self.lost or None}

    # ---- questions and parts
    def prepare(self, device: str) -> None:
        """Start the workers for a `device` workload (or connect), before the run directory exists: a bad --gpus
        leaves no run behind, and the workers start while nothing else waits."""
        self._start(device)

    def ask(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a small function where the parts run: here for a local cluster (the same machine), else on one
        of the cluster's workers (they are taken to be alike)."""
        if self.ex.cluster is None:
            return fn(*args)
        client = self._start("cuda")
        fut = client.submit(fn, *args, pure=False)
        try:
            return fut.result()
        except BaseException:
            with contextlib.suppress(Exception):
                fut.cancel()
            raise

    def map_parts(self, fn: Callable[[PartContext], V], cases: Sequence[int], *, run_dir: Path, device: str,
                  on_event: OnEvent, weights: Sequence[float] | None = None, warm: bool = False
                  ) -> Generator[PartOutcome[V], None, None]:
        """Run `fn` over groups of `cases` on the workers; yield each part's outcome as it ends (a lost worker's
        cases retried as above). Ctrl-C cancels the parts in flight and is raised again once they answered."""
        client = self._start(device)
        warm = warm and self.ex.warm
        run = _Run(self, client, fn, run_dir, device, on_event, len(cases), warm=warm)
        # warm: a part per case, dealt to workers as they free up (a child start no longer costs a part seconds)
        groups = [(c,) for c in cases] if warm and cases else \
            split(cases, len(self.workers) * self.ex.parts_per_worker, weights) if cases else [()]
        for g in groups:
            run.submit(Part(run.next_index(), g or None))
        try:
            yield from run.results()
        except BaseException:
            run.cancel()
            raise
        finally:
            run.unsubscribe()


def _takes_n_workers(client: Any) -> bool:
    import inspect

    try:
        return "n_workers" in inspect.signature(client.scheduler_info).parameters
    except (TypeError, ValueError):
        return False


class _Run:
    """The parts of one run in flight: submitting, following their events, retrying a lost worker's cases."""

    def __init__(self, session: DaskSession, client: Any, fn: PartFn, run_dir: Path, device: str,
                 on_event: OnEvent, n_cases: int, warm: bool = False) -> None:
        self.session, self.client, self.fn, self.device = session, client, fn, device
        self.warm = warm
        self.pipeline_on_event = on_event
        self.tally = Tally(range(n_cases), parallel=True)
        self.run_dir = Path(run_dir).resolve()
        self.run_id = self.run_dir.name
        self.topic = f"profctl-{self.run_id}"
        self.cancel_name = f"profctl-cancel-{self.run_id}"
        self.events: queue.Queue[Any] = queue.Queue()
        self.pending: dict[Any, Part] = {}
        self.parts: dict[int, Part] = {}
        self.started: dict[int, int] = {}  # part -> the case it last started
        self.finished: set[int] = set()
        self.losses: dict[int, float] = {}  # case -> how often its worker died while running it (a third of one
        # for a part that had not started: three such losses give the case up)
        self.where: dict[int, dict[str, Any]] = {}
        self._n = 0
        client.subscribe_topic(self.topic, lambda ev: self.events.put(ev[1] if isinstance(ev, tuple) else ev))

    def on_event(self, part: Part, ev: dict[str, Any]) -> None:
        """To the pipeline; and, when the executor has its own progress callback (the CLI's bar for commands
        whose pipelines draw none), as Progress over all workers."""
        self.pipeline_on_event(part, ev)
        progress = self.session.ex.on_progress
        i, kind = ev.get("index"), ev.get("event")
        if progress is None or i is None or kind not in ("start", "row", "lost"):
            return
        where = where_label(ev.get("where") or {})
        row_ok = (ev.get("row") or {}).get("status", ev.get("status")) == "ok"
        progress(self.tally.event(int(i), where=where, finished=kind != "start", ok=kind == "row" and row_ok,
                                  util=ev.get("util")))

    def next_index(self) -> int:
        self._n += 1
        return self._n - 1

    def submit(self, part: Part) -> None:
        self.parts[part.index] = part
        key = f"profctl-{self.run_id}-part{part.index}"
        fut = self.client.submit(_run_part, self.fn, part, str(self.run_dir), self.device, self.topic,
                                 self.cancel_name, self.session.child_env, self.warm, key=key, pure=False,
                                 resources={"GPU": 1} if self.session.cluster is not None and self.device == "cuda"
                                 else None)
        self.pending[fut] = part

    def unsubscribe(self) -> None:
        with contextlib.suppress(Exception):
            self.client.unsubscribe_topic(self.topic)

    # ---- events
    def pump(self) -> None:
        while True:
            try:
                msg = self.events.get_nowait()
            except queue.Empty:
                return
            if not isinstance(msg, dict) or msg.get("part") not in self.parts:
                continue
            part = self.parts[int(msg.pop("part"))]
            kind, i = msg.get("event"), msg.get("index")
            if "where" in msg:
                self.where[part.index] = msg["where"]
            if kind == "start" and i is not None:
                self.started[part.index] = int(i)
            elif kind in ("row", "lost") and i is not None:
                self.finished.add(int(i))
            elif kind == "tool":
                tool_event(self.run_dir, msg, part.dirname(msg.get("where") or {}))
            self.on_event(part, msg)

    # ---- results
    def results(self) -> Iterator[PartOutcome]:
        while self.pending:
            self.pump()
            done = [f for f in self.pending if f.done()]
            if not done:
                time.sleep(0.05)
                continue
            time.sleep(0.1)  # events sent just before the result
            self.pump()
            for fut in done:
                part = self.pending.pop(fut)
                out = self._outcome(fut, part)
                if out is not None:
                    yield out

    def _outcome(self, fut: Any, part: Part) -> PartOutcome | None:
        from distributed.scheduler import KilledWorker

        if fut.status == "finished":
            res = fut.result()
            folder = self.run_dir / res["dir"]
            self._write(folder, res.get("files") or {})
            return PartOutcome(part, value=res.get("value"), error=res.get("error"), where=res["where"], dir=folder)
        exc = fut.exception() if fut.status == "error" else None
        if fut.status == "cancelled" or isinstance(exc, KilledWorker):
            self._lost(part)
            return None
        return PartOutcome(part, error=exc, where=self.where.get(part.index, {}))

    def _write(self, folder: Path, files: dict[str, bytes]) -> None:
        for rel, data in files.items():
            dest = folder / rel
            if self.run_dir not in dest.resolve().parents:
                continue  # a part writes only inside its own folder
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)

    def _lost(self, part: Part) -> None:
        """A worker died under `part`: its unfinished cases go once more, the one it was running alone; a case
        whose worker died twice while running it is given up (a ``lost`` event: the pipeline's crashed row)."""
        cases = part.cases if part.cases is not None else ()
        todo = [c for c in cases if c not in self.finished]
        self.session.lost.append({"part": part.index, "dir": part.dirname(self.where.get(part.index, {})),
                                  "unfinished": len(todo), **self.where.get(part.index, {})})
        running = self.started.get(part.index)
        # a part that had not started a case was only queued on the worker that died (parts of one point each,
        # warm workers): its cases are not suspects, unless that keeps happening (a worker dying at every start)
        suspects = [running] if running in todo else todo
        where = self.where.get(part.index, {})
        for c in suspects:
            self.losses[c] = self.losses.get(c, 0) + (1.0 if running is not None else 0.67)
            if self.losses[c] >= 2:
                todo.remove(c)
                self.finished.add(c)
                self.on_event(part, {"event": "lost", "index": c, "where": where,
                                     "reason": "its worker process died twice while running this point (last "
                                               f"{where_label(where)} on {where.get('host', '?')}); see "
                                               f"{part.dirname(where)}/"})
        if running in todo:
            todo.remove(running)
            self.submit(Part(self.next_index(), (running,), retry=True))
        if todo:
            self.submit(Part(self.next_index(), tuple(todo), retry=True))

    def cancel(self) -> None:
        """Ask the parts in flight to stop (they kill their children and return what finished), wait for them
        a little, then drop the rest. Events that arrive meanwhile still reach the pipeline."""
        from distributed import Event

        with contextlib.suppress(BaseException):
            Event(self.cancel_name, client=self.client).set()
            deadline = time.monotonic() + CANCEL_GRACE_S
            while self.pending and time.monotonic() < deadline:
                self.pump()
                for fut in [f for f in self.pending if f.done()]:
                    self.pending.pop(fut)
                    if fut.status == "finished":
                        res = fut.result()
                        self._write(self.run_dir / res["dir"], res.get("files") or {})
                time.sleep(0.05)
            self.pump()
        with contextlib.suppress(BaseException):
            self.client.cancel(list(self.pending))
        self.pending.clear()


# ------------------------------------------------------------------------------------------- on the workers
def dask_setup(worker: Any) -> None:
    """Preloaded into each local worker process: ignore SIGINT. Ctrl-C in the terminal reaches the whole
    process group; the submitting process cancels the parts itself, so that they kill their child processes
    (which run in sessions of their own) instead of dying and leaving them behind."""
    with contextlib.suppress(ValueError, OSError):
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _shared(run_dir: Path) -> bool:
    """Whether this worker sees the submitting machine's run directory (this machine, or a shared file system):
    the same path holds a manifest of the same run."""
    try:
        return runs.read_manifest(run_dir).get("run_id") == run_dir.name
    except Exception:
        return False


def _run_part(fn: PartFn, part: Part, run_dir_s: str, device: str, topic: str, cancel_name: str,
              child_env: dict[str, str | None] | None = None, warm: bool = False) -> dict[str, Any]:
    """One part on a worker: its folder (in the run directory when shared, else a temporary one whose files go
    back as bytes), its events as worker events, the run's cancel flag polled at most once a second."""
    from distributed import Event, get_worker

    worker = get_worker()
    for k, v in (child_env or {}).items():  # what the children inherit: the worker runs one part at a time
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    run_dir = Path(run_dir_s)
    where: dict[str, Any] = {**nvml.here(device), "worker": str(worker.name)}
    name = part.dirname(where)
    shared = _shared(run_dir)
    tmp = None if shared else Path(tempfile.mkdtemp(prefix="profctl-part-"))
    workdir = (run_dir if shared else tmp) / name  # type: ignore[operator]
    workdir.mkdir(parents=True, exist_ok=True)
    last = [0.0, False]

    def cancelled() -> bool:
        if not last[1] and time.monotonic() - last[0] > 1.0:
            last[0] = time.monotonic()
            with contextlib.suppress(Exception):
                last[1] = bool(Event(cancel_name).is_set())
        return bool(last[1])

    def emit(ev: dict[str, Any]) -> None:
        worker.log_event(topic, {"part": part.index, **ev, "where": where})

    ctx = PartContext(part, workdir=workdir, final_dir=run_dir / name, where=where, emit_fn=emit,
                      cancelled_fn=cancelled, warm=warm)
    t0 = time.monotonic()
    out: dict[str, Any] = {"dir": name, "where": where}
    try:
        out["value"] = fn(ctx)
    except (Exception, KeyboardInterrupt) as e:  # KeyboardInterrupt: the run was cancelled
        if isinstance(e, ProfctlError) and e.log is not None:
            e.log = ctx.final(e.log)  # the log comes back into the part's folder
        out["error"] = e if isinstance(e, Exception) else None
    try:
        where["wall_s"] = round(time.monotonic() - t0, 3)
        out["files"] = {} if shared else {str(p.relative_to(workdir)): p.read_bytes()
                                         for p in sorted(workdir.rglob("*")) if p.is_file()}
        return out
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
