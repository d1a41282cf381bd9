"""Parts of a run on Dask workers: one worker per GPU of this machine, N CPU workers, or the workers of a
running Dask scheduler (``--cluster tcp://HOST:8786``). See docs/cluster.md.

This machine: a ``distributed.SpecCluster`` of in-process workers (threads of profctl's process, talking
``inproc://``), one per GPU, each running one task at a time (one thread, a ``GPU`` resource) and giving its
children ``CUDA_VISIBLE_DEVICES=<uuid>``. A task is one part: the pipeline's own serial loop over a group of cases
(its workload and tool runs are child processes: the warm child, a child per run of cases, a new child after a
point that killed its child), so a point that crashes costs only its own row. On a cluster of yours a worker
process that dies (its Nanny starts a fresh one) loses its part: the cases it had not finished are tried once
more, the case it was running alone, and a case whose worker died twice while running it becomes a ``crashed``
row.

Progress and rows travel back as worker events (``log_event`` -> ``subscribe_topic``) while the parts run; a
part's files come back as bytes in its result unless the run directory is on a file system the worker shares.
Ctrl-C sets a ``distributed.Event`` that the parts poll: they kill their child processes and return what
finished. Dask is imported only here, and only when this executor runs (``pip install 'profctl[cluster]'``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import logging
import os
import queue
import secrets
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from profctl import nvml, proc, run_store
from profctl.errors import ProfctlError, UsageError
from profctl.pipelines.base import Progress, Tally
from profctl.pipelines.executors import (
    Local,
    OnEvent,
    Part,
    PartContext,
    PartFn,
    PartOutcome,
    tool_event,
    where_label,
)
from profctl.pipelines.ledger import DONE, Flight, Ledger
from profctl.pipelines.warm import Adoption, EarlyChildren, WarmCommand, key_of

T = TypeVar("T")
V = TypeVar("V")
EXTRA = "pip install 'profctl[cluster]'"
#: what a Nanny sets in its worker's environment by default (distributed.nanny.pre-spawn-environ): one thread
#: for OpenMP/MKL/OpenBLAS and an aggressive malloc trim, good for Dask's own compute, not for the workload
#: child; the child gets the submitting process's values of these instead (a cluster of yours has Nannies)
WORKER_ENV_KEYS = ("MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
#: scheduler settings of the local cluster: a task whose worker is lost fails at once, and profctl retries point by
#: point (a scheduler of yours retries whole parts up to `allowed-failures` times; set it to 0 there too)
_CONFIG = {"distributed.scheduler.allowed-failures": 0, "distributed.admin.system-monitor.gil.enabled": False}
CANCEL_GRACE_S = 15.0  # how long cancelled parts get to kill their children and answer


def dask_missing() -> bool:
    """Whether Dask's distributed is not installed (asked without importing it: that takes half a second, better
    spent later, while the warm children start)."""
    try:
        return importlib.util.find_spec("distributed") is None
    except (ImportError, ValueError):
        return True


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
    #: keep one warm workload child per worker and deal single cases to workers as they free up, longest first
    #: (issues 24, 31); PROFCTL_WARM=0 deals every case up front into a part per worker, a child per part
    warm: bool = field(default_factory=lambda: os.environ.get("PROFCTL_WARM", "1") != "0")
    connect_timeout_s: float = 30.0
    on_progress: Callable[[Progress], None] | None = field(default=None, compare=False)
    #: told what the user should know about the workers (fewer started than asked, and why); the CLI prints it
    on_note: Callable[[str], None] | None = field(default=None, compare=False)
    name: str = "dask"
    local: Local = field(default_factory=Local)

    def __getstate__(self) -> dict[str, Any]:  # callbacks stay in the submitting process
        return {**self.__dict__, "on_progress": None, "on_note": None}

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
        if self.cluster is not None:
            check_address(self.cluster)

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


def check_address(address: str) -> None:
    """UsageError unless `address` reads as a Dask scheduler's address (``tcp://HOST:PORT``, ``HOST:PORT``,
    ``tls://...``, ``inproc://...``): Dask's own parser, so what it accepts is what profctl accepts."""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, loc = parse_address(address, strict=False)
        if scheme in ("tcp", "tls", "ws", "wss", "ucx"):
            parse_host_port(loc)
    except (ValueError, TypeError) as e:
        raise UsageError(f"--cluster {address!r} is not a scheduler address ({e}); give tcp://HOST:PORT, "
                         f"e.g. tcp://10.0.0.5:8786") from None


def worker_count(asked: int | None, *, cores: int, points: int | None) -> tuple[int, str | None]:
    """CPU workers to start for `asked` (None: one) and `points` cases on `cores` cores: no more than either
    (a worker beyond them only waits, and starting it costs seconds); with the note to print when fewer than asked
    start."""
    want = asked or 1
    limits = [(cores, f"{cores} CPU core{'s' if cores != 1 else ''} here")]
    if points is not None:
        limits.append((max(1, points), f"{points} point{'s' if points != 1 else ''} to run"))
    n = min([want, *(k for k, _ in limits)])
    if asked is None or n >= asked:
        return n, None
    why = " and ".join(w for k, w in limits if k < asked)
    return n, f"--workers {asked}: {why}; starting {n} worker{'s' if n != 1 else ''}"


class DaskSession:
    """One run's use of Dask: the client (and the local cluster it started), the workers' kits (their warm
    children: owned here, closed at the end), the parts in flight."""

    parallel = True

    def __init__(self, ex: DaskExecutor) -> None:
        self.ex = ex
        self.client: Any = None
        self.cluster: Any = None
        self.workers: list[dict[str, Any]] = []
        self.started_s: float | None = None
        self.lost: list[dict[str, Any]] = []  # parts whose worker died
        self.notes: list[str] = []
        self.deal: dict[str, Any] | None = None
        #: the name of this session's worker plugin, which holds each worker's kit (profctl.pipelines.executors)
        self.kit_name = f"profctl-kit-{os.getpid()}-{secrets.token_hex(4)}"
        self._kit_on_scheduler = False
        self.early: EarlyChildren | None = None  # warm children started here, before the local workers
        #: the workload children's values of WORKER_ENV_KEYS (None: unset), whatever the worker has
        self.child_env: dict[str, str | None] = {k: os.environ.get(k) for k in WORKER_ENV_KEYS}
        self._log_levels: dict[str, int] = {}

    # ---- the cluster
    def _start(self, device: str, points: int | None = None, warm: WarmCommand | None = None) -> Any:
        if self.client is not None:
            return self.client
        t0 = time.monotonic()
        self._quiet()
        if self.ex.cluster is not None:
            from profctl.pipelines.dask_kit import KitPlugin

            self.client = self._connect()
            self.client.register_plugin(KitPlugin(self.kit_name, self.child_env, warm), name=self.kit_name)
            self._kit_on_scheduler = True
        else:
            self.cluster = self._local_cluster(device, points, warm)  # the warm children first, then Dask
            from distributed import Client

            self.client = Client(self.cluster)
        info = self.client.scheduler_info(n_workers=-1) if _takes_n_workers(self.client) else \
            self.client.scheduler_info()
        self.workers = [{"name": str(w.get("name")), "address": a, "host": w.get("host"),
                         "nthreads": w.get("nthreads")} for a, w in sorted(info.get("workers", {}).items())]
        self.started_s = round(time.monotonic() - t0, 3)
        return self.client

    def _connect(self) -> Any:
        from distributed import Client

        address = self.ex.cluster
        try:
            client = Client(address, timeout=self.ex.connect_timeout_s)
        except (OSError, TimeoutError, ValueError) as e:
            raise UsageError(f"--cluster {address}: cannot reach a Dask scheduler there ({e})") from None
        try:
            client.wait_for_workers(1, timeout=self.ex.connect_timeout_s)
        except TimeoutError:
            client.close()
            raise UsageError(f"--cluster {address}: the scheduler has no worker (start some: docs/cluster.md)"
                             ) from None
        return client

    def _note(self, msg: str) -> None:
        self.notes.append(msg)
        if self.ex.on_note is not None:
            self.ex.on_note(msg)

    def _local_cluster(self, device: str, points: int | None, warm: WarmCommand | None) -> Any:
        """One worker per GPU (or CPU worker), each a thread of this process with the session's kit and its own
        environment for its children (its GPU); with `warm`, each worker's warm child is started here first and
        handed to its worker to adopt. Worker threads, not processes: everything a part runs that could crash is
        a child process already (the workload, the tools), and worker processes took 2.8-4.2 s to start on an
        H200 pair -- as long as a warm child, so the first part often waited for Dask (issue 31; threads: 0.6 s
        with Dask's import)."""
        specs = self._worker_envs(device, points)
        adopt = self._spawn_early(specs, warm) if warm is not None and EarlyChildren.possible() else {}
        import dask
        from distributed import Scheduler, SpecCluster, Worker

        from profctl.pipelines.dask_kit import KitPlugin

        common = {"nthreads": 1, "memory_limit": 0, "silence_logs": logging.CRITICAL, "dashboard": False}
        workers = {name: {"cls": Worker, "options": {
            **common, **({"resources": {"GPU": 1}} if device == "cuda" else {}),
            "plugins": (KitPlugin(self.kit_name, {**env, **self.child_env}, warm, adopt.get(name),
                                  in_session=True),)}}
            for name, env in specs.items()}
        with dask.config.set(_CONFIG):
            return SpecCluster(workers=workers, scheduler={"cls": Scheduler, "options": {
                "dashboard": False, "dashboard_address": None, "protocol": "inproc://"}},
                silence_logs=logging.CRITICAL)

    def _worker_envs(self, device: str, points: int | None) -> dict[str, dict[str, str]]:
        """The local workers to start, by name, with the environment each gets (its GPU; CPU workers split the
        cores); no more than the points (and cores), said so when fewer than asked."""
        specs: dict[str, dict[str, str]] = {}
        if device == "cuda":
            gpus = select_gpus(self.ex.gpus, self.ex.workers)
            if points is not None and len(gpus) > max(1, points):
                if self.ex.workers is not None or self.ex.gpus is not None:
                    self._note(f"{len(gpus)} GPUs selected for {points} point{'s' if points != 1 else ''}; "
                               f"starting {max(1, points)} worker{'s' if points > 1 else ''}")
                gpus = gpus[:max(1, points)]
            for g in gpus:
                specs[f"gpu{g.index}"] = {"CUDA_VISIBLE_DEVICES": g.uuid or str(g.index)}
            return specs
        if self.ex.gpus is not None:
            raise UsageError("--gpus: the workload runs on the CPU here (--device cpu, or no GPU is visible)")
        n, note = worker_count(self.ex.workers, cores=os.cpu_count() or 1, points=points)
        if note:
            self._note(note)
        threads = str(max(1, (os.cpu_count() or 1) // n))  # the workers share the cores, as CPUs do
        self.child_env["OMP_NUM_THREADS"] = threads
        return {f"cpu{i}": {"OMP_NUM_THREADS": threads, "CUDA_VISIBLE_DEVICES": ""} for i in range(n)}

    def _spawn_early(self, specs: dict[str, dict[str, str]], warm: WarmCommand) -> dict[str, Adoption]:
        """Each local worker's warm child, started now by this process (the session owns it), with the
        environment the worker would give it; None of it when the command cannot be had here."""
        try:
            argv, env = warm()
        except Exception:  # the workers start their own (and say why they cannot)
            return {}
        self.early = EarlyChildren()
        return {name: self.early.spawn(name, argv, full, key_of(argv, full))
                for name, wenv in specs.items() for full in [{**wenv, **self.child_env, **env}]}

    def _quiet(self) -> None:
        """Dask's own log lines (a worker lost, a task failed) would tear the progress bar; profctl reports
        those itself. Restored at close."""
        for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.worker"):
            lg = logging.getLogger(name)
            self._log_levels.setdefault(name, lg.level)
            lg.setLevel(logging.CRITICAL)

    def close(self) -> None:
        """The workers' kits first (their warm children end: on a cluster of yours they would keep their GPU
        memory), then the client and the local cluster."""
        if self.client is not None:
            from profctl.pipelines.dask_kit import close_kit

            with contextlib.suppress(Exception):
                self.client.run(close_kit, self.kit_name)
            if self._kit_on_scheduler:
                with contextlib.suppress(Exception):
                    self.client.unregister_worker_plugin(self.kit_name)
        with contextlib.suppress(Exception):
            if self.client is not None:
                self.client.close()
        with contextlib.suppress(Exception):
            if self.cluster is not None:
                self.cluster.close()
        self.client = self.cluster = None
        if self.early is not None:
            self.early.close()
            self.early = None
        for name, level in self._log_levels.items():
            logging.getLogger(name).setLevel(level)

    def describe(self) -> dict[str, Any]:
        return {"name": "dask", "cluster": self.ex.cluster or "local", "workers": self.workers,
                "start_s": self.started_s, "lost_parts": self.lost or None, "notes": self.notes or None,
                "deal": self.deal}

    # ---- questions and parts
    def prepare(self, device: str, *, points: int | None = None, warm: WarmCommand | None = None) -> None:
        """Start the workers for a `device` workload (or connect), before the run directory exists: a bad --gpus
        leaves no run behind, and the workers -- and their warm children, when `warm` says how -- start while
        nothing else waits. No more workers than `points`."""
        warm = warm if self.ex.warm else None
        if self.client is not None and self._kit_on_scheduler and warm is not None:
            from profctl.pipelines.dask_kit import KitPlugin

            # connected already (a question asked on a worker): the kit again, now with its warm child
            self.client.register_plugin(KitPlugin(self.kit_name, self.child_env, warm), name=self.kit_name)
        self._start(device, points, warm)

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
                  on_event: OnEvent, weights: Sequence[float] | None = None, keys: Sequence[str] | None = None,
                  warm: bool = False) -> Generator[PartOutcome[V], None, None]:
        """Run `fn` over parts of `cases` on the workers (profctl.pipelines.ledger deals them); yield each part's
        outcome as it ends (a lost worker's cases retried). Ctrl-C cancels the parts in flight and is raised
        again once they answered."""
        client = self._start(device)
        warm = warm and self.ex.warm
        book = Ledger(cases, slots=max(1, len(self.workers)), warm=warm, models=weights, keys=keys,
                      parts_per_slot=self.ex.parts_per_worker)
        run = _Run(self, client, fn, run_dir, device, on_event, book, warm=warm)
        try:
            yield from run.results()
        except BaseException:
            run.cancel()
            raise
        finally:
            run.unsubscribe()
            self.deal = book.describe()


def _takes_n_workers(client: Any) -> bool:
    try:
        return "n_workers" in inspect.signature(client.scheduler_info).parameters
    except (TypeError, ValueError):
        return False


class _Run:
    """The parts of one run in flight on Dask: submitting what the ledger deals, passing the workers' events to
    the ledger and the pipeline, turning finished futures into outcomes and lost ones into retries."""

    def __init__(self, session: DaskSession, client: Any, fn: PartFn, run_dir: Path, device: str,
                 on_event: OnEvent, book: Ledger, warm: bool = False) -> None:
        self.session, self.client, self.fn, self.device, self.book = session, client, fn, device, book
        self.warm = warm
        self.pipeline_on_event = on_event
        self.tally = Tally(range(len(book.cases)), parallel=True)
        self.run_dir = Path(run_dir)  # as the pipeline named it: outcomes name their folders under it
        self.run_id = self.run_dir.name
        # a run may map its parts more than once (bench --processes: a pass a process): Dask keeps a finished
        # future's result under its key, so each pass's keys are its own or the second would get the first's
        self.pass_tag = uuid.uuid4().hex[:8]
        self.topic = f"profctl-{self.run_id}"
        self.cancel_name = f"profctl-cancel-{self.run_id}"
        self.events: queue.Queue[Any] = queue.Queue()
        self.pending: dict[Any, int] = {}  # future -> its part's index
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

    def submit(self, part: Part) -> None:
        key = f"profctl-{self.run_id}-{self.pass_tag}-part{part.index}"
        fut = self.client.submit(_run_part, self.fn, part, str(self.run_dir.resolve()), self.device, self.topic,
                                 self.cancel_name, self.session.kit_name, self.warm, key=key, pure=False,
                                 resources={"GPU": 1} if self.session.cluster is not None and self.device == "cuda"
                                 else None)
        self.pending[fut] = part.index

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
            if not isinstance(msg, dict) or not isinstance(msg.get("part"), int):
                continue
            flight = self.book.flight(msg["part"])
            if flight is None:
                continue
            msg = {k: v for k, v in msg.items() if k != "part"}
            self.book.event(flight.part.index, msg)
            if msg.get("event") == "tool":
                tool_event(self.run_dir, msg, flight.part.dirname(msg.get("where") or {}))
            self.on_event(flight.part, msg)

    # ---- results
    def results(self) -> Iterator[PartOutcome]:
        from distributed import wait

        for part in self.book.deal():
            self.submit(part)
        while self.pending:
            with contextlib.suppress(TimeoutError):
                wait(list(self.pending), timeout=0.05, return_when="FIRST_COMPLETED")
            self.pump()
            for fut in [f for f in self.pending if f.done()]:
                out = self._outcome(fut, self.pending.pop(fut))
                if out is not None:
                    yield out
            for part in self.book.deal():
                self.submit(part)
        deadline = time.monotonic() + 2.0  # the last events may come after the results that counted them
        while self.book.missing_events() and time.monotonic() < deadline:
            time.sleep(0.01)
            self.pump()

    def _outcome(self, fut: Any, index: int) -> PartOutcome | None:
        from distributed.scheduler import KilledWorker

        flight = self.book.flight(index)
        assert flight is not None
        if fut.status == "finished":
            res = fut.result()
            self.book.finished(index, res.get("events"))
            folder = self.run_dir / res["dir"]
            self._write(folder, res.get("files") or {})
            return PartOutcome(flight.part, value=res.get("value"), error=res.get("error"), where=res["where"],
                               dir=folder)
        exc = fut.exception() if fut.status == "error" else None
        if fut.status == "cancelled" or isinstance(exc, KilledWorker):
            self._lost(flight)
            return None
        self.book.finished(index)
        return PartOutcome(flight.part, error=exc, where=flight.where)

    def _write(self, folder: Path, files: dict[str, bytes]) -> None:
        root = self.run_dir.resolve()
        for rel, data in files.items():
            dest = folder / rel
            if root not in dest.resolve().parents:
                continue  # a part writes only inside its own folder
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)

    def _lost(self, flight: Flight) -> None:
        """A worker died under a part: the ledger says what goes again and what is given up (a ``lost`` event:
        the pipeline's crashed row)."""
        part, where = flight.part, flight.where
        unfinished = [c for c in part.cases or () if self.book.cases[c].state != DONE]
        loss = self.book.lost(part.index)
        self.session.lost.append({"part": part.index, "dir": part.dirname(where), "unfinished": len(unfinished),
                                  **where})
        for c, why in loss.given_up:
            self.on_event(part, {"event": "lost", "index": c, "where": where,
                                 "reason": f"{why} (last {where_label(where)} on {where.get('host', '?')}); see "
                                           f"{part.dirname(where)}/"})
        for p in loss.retry:
            self.submit(p)

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
def _shared(run_dir: Path) -> bool:
    """Whether this worker sees the submitting machine's run directory (this machine, or a shared file system):
    the same path holds a manifest of the same run."""
    try:
        return run_store.read_manifest(run_dir).get("run_id") == run_dir.name
    except Exception:
        return False


def _run_part(fn: PartFn, part: Part, run_dir_s: str, device: str, topic: str, cancel_name: str,
              kit_name: str = "", warm: bool = False) -> dict[str, Any]:
    """One part on a worker: its folder (in the run directory when shared, else a temporary one whose files go
    back as bytes), its events as worker events (each with the worker's clock; the result says how many), the
    run's cancel flag polled at most once a second. The children get the session's environment, passed to them:
    the worker's own is never changed."""
    from distributed import Event, get_worker

    from profctl.pipelines.dask_kit import kit_of

    worker = get_worker()
    kit, own = kit_of(worker, kit_name)
    run_dir = Path(run_dir_s)
    where: dict[str, Any] = {**kit.where(device), "worker": str(worker.name)}
    name = part.dirname(where)
    shared = _shared(run_dir)
    tmp = None if shared else Path(tempfile.mkdtemp(prefix="profctl-part-"))
    workdir = (run_dir if shared else tmp) / name  # type: ignore[operator]
    workdir.mkdir(parents=True, exist_ok=True)
    last = [0.0, False]
    sent = [0]

    def cancelled() -> bool:
        if not last[1] and time.monotonic() - last[0] > 1.0:
            last[0] = time.monotonic()
            with contextlib.suppress(Exception):
                last[1] = bool(Event(cancel_name).is_set())
        return bool(last[1])

    def emit(ev: dict[str, Any]) -> None:
        sent[0] += 1
        worker.log_event(topic, {"part": part.index, "t": time.time(), **ev, "where": where})

    ctx = PartContext(part, workdir=workdir, final_dir=run_dir / name, where=where, emit_fn=emit,
                      cancelled_fn=cancelled, warm=warm, kit=kit, env=dict(kit.pool.base_env))
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
        out["events"] = sent[0]
        return out
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if own:
            kit.close()
