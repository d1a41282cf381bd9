"""Where a target's processes run.

An executor starts processes (`spawn`, `run`: through profctl.proc -- an argument list, a timeout, the output in
a log beside the report, typed errors naming the log) and runs a pipeline's *parts*. A pipeline hands its
session's ``map_parts`` (the protocol: profctl.pipelines.base.Session) a part function and the indices of its
target's cases; the executor groups the cases into parts and calls the function once per part, with a
:class:`PartContext` saying where to write and how to report progress. The part function is the loop the
serial run runs: `Local` calls it once, over every case, in this process and in the run directory itself;
`DaskExecutor` (profctl.pipelines.dask_executor) calls it on worker processes, one per GPU, here or on a
cluster, and brings each part's files back into the run directory.

Events a part emits (``ctx.emit``) reach the pipeline's ``on_event`` in the submitting process, in its main
thread: ``start`` / ``row`` of a case index (the workload's own events, with the worker's GPU utilisation),
``tool`` (an external tool's argv and version: the executor adds it to the manifest) and ``lost`` (made by an
executor: a case whose worker died twice while running it).
"""

from __future__ import annotations

import contextlib
import platform
import sys
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeVar

from profctl import nvml, proc, run_store
from profctl.nvml import Sampler

if TYPE_CHECKING:
    from profctl.pipelines.warm import WarmPool

V = TypeVar("V")
T = TypeVar("T")


class _Movable(Protocol):
    """A target (profctl.pipelines.base.Target) as far as a part moves it to a worker."""

    def for_worker(self, python: str) -> Self: ...


M = TypeVar("M", bound=_Movable)


# ------------------------------------------------------------------------------------------------------ parts
@dataclass(frozen=True)
class Part:
    """Cases of a target run together, in one child-process loop, on one worker. `cases` None: every case (the
    serial path; the target's command line then carries no --only)."""

    index: int
    cases: tuple[int, ...] | None = None
    retry: bool = False  # a second try of cases whose worker was lost

    def dirname(self, where: dict[str, Any]) -> str:
        """The part's folder in the run directory: ``part-<i>-gpu<k>`` (``part-<i>-cpu`` without a GPU)."""
        gpu = where.get("gpu_index")
        return f"part-{self.index}-" + (f"gpu{gpu}" if gpu is not None else "cpu")


def where_label(where: dict[str, Any]) -> str:
    """A short name for a worker's place in progress lines: ``gpu1``, ``host:gpu1`` off this host, ``cpu``."""
    gpu = where.get("gpu_index")
    name = f"gpu{gpu}" if gpu is not None else str(where.get("worker") or "cpu")
    host = where.get("host")
    return name if not host or host == platform.node() else f"{host}:{name}"


class WorkerKit:
    """What a worker keeps for one session across its parts, owned by the session (made when it starts, closed
    when it ends): its warm workload children, an NVML sampler per GPU (started once), and where it runs."""

    def __init__(self, pool: WarmPool, *, in_session: bool = False) -> None:
        self.pool = pool
        #: the worker is a thread of the submitting process (a local cluster), not a process of its own: its
        #: children's GPU is in `pool.base_env`, and nothing in a part may end the process
        self.in_session = in_session
        self._samplers: dict[int, Any] = {}
        self._where: dict[str, dict[str, Any]] = {}

    def sampler(self, index: int) -> Any:
        if index not in self._samplers:
            self._samplers[index] = Sampler(index).start()
        return self._samplers[index]

    def where(self, device: str) -> dict[str, Any]:
        """Where a workload started here runs (profctl.nvml.here, asked once), a copy."""
        if device not in self._where:
            self._where[device] = dict(nvml.here(device, self.pool.base_env))
        return dict(self._where[device])

    def close(self) -> None:
        self.pool.close()
        for s in self._samplers.values():
            s.stop()
        self._samplers.clear()


@dataclass
class PartContext:
    """What a part function gets: its part, where to write (`workdir`), where those files end up on the
    submitting machine (`final_dir`: the same folder on the serial path and on a shared file system), the place
    it runs (`where`: host and GPU facts), and how to report (`emit`) and to notice a cancelled run."""

    part: Part
    workdir: Path
    final_dir: Path
    where: dict[str, Any]
    emit_fn: Callable[[dict[str, Any]], None]
    cancelled_fn: Callable[[], bool] = field(default=lambda: False)
    #: run the workload in this worker's warm child (``kit.pool``), not a child of its own
    warm: bool = False
    #: what the worker keeps for the session across parts (its warm children, NVML samplers); None serially
    kit: WorkerKit | None = None
    #: environment every child of the part gets on top of this process's (None: unset), e.g. the submitting
    #: process's thread settings instead of a Dask worker's
    env: dict[str, str | None] = field(default_factory=dict)

    def emit(self, event: dict[str, Any]) -> None:
        self.emit_fn(event)

    def cancelled(self) -> bool:
        return bool(self.cancelled_fn())

    def final(self, p: Path) -> Path:
        """The path a file written at `p` will have in the run directory (for messages that name it)."""
        try:
            return self.final_dir / Path(p).relative_to(self.workdir)
        except ValueError:
            return Path(p)

    @property
    def gpu_index(self) -> int | None:
        g = self.where.get("gpu_index")
        return int(g) if g is not None else None

    def record_tool(self, name: str, argv: Sequence[str], *, log: Path | None = None, **more: Any) -> None:
        """An external tool's invocation, for the run's manifest (the submitting process writes it); `log`
        named relative to the part's folder."""
        rel = None
        if log is not None:
            try:
                rel = str(Path(log).relative_to(self.workdir))
            except ValueError:
                rel = str(log)
        self.emit({"event": "tool", "name": name, "argv": [str(a) for a in argv], "log": rel, **more})

    def child_env(self, env: Mapping[str, str] | None) -> dict[str, str | None] | None:
        """The environment a child of this part gets on top of this process's: the part's, then `env`."""
        if not self.env:
            return dict(env) if env is not None else None
        return {**self.env, **(env or {})}

    def spawn(self, argv: Sequence[str], *, log: Path, timeout_s: float, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> proc.Running:
        """Start `argv` without waiting; on a worker it dies with the worker."""
        return proc.spawn(argv, log=log, timeout_s=timeout_s, env=self.child_env(env), cwd=cwd,
                          die_with_parent=self.on_worker)

    def run(self, argv: Sequence[str], *, log: Path, timeout_s: float, env: dict[str, str] | None = None,
            cwd: Path | None = None, check: bool = False,
            classify: Callable[[proc.ProcResult], Exception | None] | None = None) -> proc.ProcResult:
        """Run `argv` to its end; a cancelled run kills it (KeyboardInterrupt, as Ctrl-C on the serial path)."""
        return proc.run(argv, log=log, timeout_s=timeout_s, env=self.child_env(env), cwd=cwd, check=check,
                        classify=classify, cancelled=self.cancelled, die_with_parent=self.on_worker)

    def sampler(self) -> tuple[Any, bool]:
        """An NVML sampler of this part's GPU, started, and whether the part must stop it: on a worker the kit
        keeps one per GPU for the whole session (NVML's start is not free)."""
        if self.kit is not None:
            return self.kit.sampler(self.gpu_index or 0), False
        return Sampler(self.gpu_index or 0).start(), True

    def localize(self, target: M) -> M:
        """The target as this machine runs it: on a worker, its Python is the worker's own interpreter (the
        submitting machine's path may not exist there)."""
        return target.for_worker(sys.executable) if self.on_worker else target

    @property
    def on_worker(self) -> bool:
        """Whether this part runs on a worker of an executor (not the serial loop of the submitting process)."""
        return self.where.get("worker") is not None

    @property
    def own_process(self) -> bool:
        """Whether this part runs in a worker process of its own (a cluster's), not in the submitting process
        (the serial loop, or a local cluster's worker threads)."""
        return self.on_worker and not (self.kit is not None and self.kit.in_session)

    def with_final_paths(self, summary: Any) -> Any:
        """A Summary read here, its sources named where their files will be in the run directory."""
        return replace(summary, sources=tuple(replace(s, path=str(self.final(Path(s.path)))) for s in summary.sources))

    @contextlib.contextmanager
    def follow(self, events: Path, *, sampler: Any = None) -> Iterator[None]:
        """While the block runs (a tool wrapping the workload), pass the workload's ``start`` and ``row`` events
        from its JSON-lines file on as progress (the row's status only; `sampler` adds the GPU's utilisation)."""
        tail = run_store.EventTail(events)

        def pump(final: bool = False) -> None:
            for ev in tail.read(final=final):
                if ev.get("event") in ("start", "row") and "index" in ev:
                    out = {"event": ev["event"], "index": int(ev["index"])}
                    if ev["event"] == "row":
                        out["status"] = ev.get("status")
                        out["reason"] = ev.get("reason")
                    if sampler is not None and getattr(sampler, "util", None) is not None:
                        out["util"] = sampler.util
                    self.emit(out)

        with proc.polling(pump, 0.25, "profctl-follow", final=lambda: pump(final=True)):
            yield


@dataclass
class PartOutcome(Generic[V]):
    """How a part ended: the part function's return value (each pipeline's part result: ``BenchPart``,
    ``NsysPart``, ``NcuPart``, ``TorchPart``), or the error it raised; where it ran and the folder that holds its
    files in the run directory."""

    part: Part
    value: V | None = None
    error: BaseException | None = None
    where: dict[str, Any] = field(default_factory=dict)
    dir: Path | None = None


def gather(outcomes: Generator[PartOutcome[V], None, None]) -> tuple[list[PartOutcome[V]], bool]:
    """Every part's outcome, and whether Ctrl-C (or SIGTERM) stopped the run; the parts that ended by then are
    kept (a parallel executor has cancelled the rest). Serially, an interrupt with nothing finished goes through."""
    got: list[PartOutcome[V]] = []
    try:
        with run_store.sigterm_as_interrupt(), contextlib.closing(outcomes):
            for out in outcomes:
                got.append(out)
    except KeyboardInterrupt:
        if not got:
            raise
        return got, True
    return got, False


def part_records(outs: Sequence[PartOutcome[Any]]) -> list[dict[str, Any]]:
    """What the manifest says of each part: its number, folder, cases, where it ran, how long, how it ended."""
    recs = []
    for o in outs:
        rec = {"part": o.part.index, "dir": o.dir.name if o.dir is not None else None,
               "cases": len(o.part.cases) if o.part.cases is not None else None, **o.where,
               "retry": o.part.retry or None}
        if o.error is not None:
            rec["error"] = str(o.error)
        recs.append({k: v for k, v in rec.items() if v is not None})
    return recs


PartFn = Callable[[PartContext], Any]
OnEvent = Callable[[Part, dict[str, Any]], None]


def split(cases: Sequence[int], n_parts: int, weights: Sequence[float] | None = None) -> list[tuple[int, ...]]:
    """`cases` dealt into at most `n_parts` groups of about equal weight: heaviest first, each to the least
    loaded group; between groups loaded alike, in a snake order (0, 1, .., n-1, n-1, .., 0, ...) so that cases of
    equal weight (one shape's backends) spread over the groups instead of lining up by backend. Each group in
    case order."""
    cases = list(cases)
    n = max(1, min(n_parts, len(cases)))
    w = {c: (float(weights[c]) if weights is not None and c < len(weights) else 1.0) for c in cases}
    order = sorted(cases, key=lambda c: -w[c])  # stable: equal weights keep their order
    groups: list[list[int]] = [[] for _ in range(n)]
    loads = [0.0] * n
    for k, c in enumerate(order):
        lap, pos = divmod(k, n)
        prefer = pos if lap % 2 == 0 else n - 1 - pos
        low = min(loads)
        tied = [i for i in range(n) if loads[i] <= low * (1 + 1e-9)]
        g = prefer if prefer in tied else tied[0]
        groups[g].append(c)
        loads[g] += w[c]
    return [tuple(sorted(g)) for g in groups if g]


def tool_event(run_dir: Path, ev: dict[str, Any], part_dir: str | None = None) -> None:
    """Record a part's ``tool`` event in the manifest (with the part's folder when it ran as one of many)."""
    more = {k: v for k, v in ev.items() if k not in ("event", "name", "argv", "log", "where", "util")}
    log = ev.get("log")
    if part_dir is not None:
        more["part"] = part_dir
        log = f"{part_dir}/{log}" if log else None
    run_store.record_tool(run_dir, ev["name"], ev["argv"], log=log, **more)


# --------------------------------------------------------------------------------------------------- Local
@dataclass(frozen=True)
class Local:
    """One local subprocess per launch: the serial path, and what every other executor runs on its workers."""

    name: str = "local"

    def spawn(self, argv: Sequence[str], *, log: Path, timeout_s: float, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> proc.Running:
        """Start `argv` without waiting (the bench sweep follows its events while it runs)."""
        return proc.spawn(argv, log=log, timeout_s=timeout_s, env=env, cwd=cwd)

    def run(self, argv: Sequence[str], *, log: Path, timeout_s: float, env: dict[str, str] | None = None,
            cwd: Path | None = None, check: bool = False,
            classify: Callable[[proc.ProcResult], Exception | None] | None = None) -> proc.ProcResult:
        """Run `argv` to its end (a tool wrapping the workload)."""
        return proc.run(argv, log=log, timeout_s=timeout_s, env=env, cwd=cwd, check=check, classify=classify)

    @contextlib.contextmanager
    def session(self) -> Iterator[Local]:
        yield self

    @property
    def parallel(self) -> bool:
        return False

    def prepare(self, device: str, *, points: int | None = None, warm: Any = None) -> None:
        """Nothing to start: the parts run here (one child runs every point: nothing to keep warm)."""

    def ask(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a small function where the parts run (here) and return its value."""
        return fn(*args)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def map_parts(self, fn: Callable[[PartContext], V], cases: Sequence[int], *, run_dir: Path, device: str,
                  on_event: OnEvent, weights: Sequence[float] | None = None, keys: Sequence[str] | None = None,
                  warm: bool = False) -> Generator[PartOutcome[V], None, None]:
        """One part over every case, run here, writing into the run directory itself (one child runs them all:
        `warm` changes nothing here). An exception of the part comes back as the outcome's error;
        KeyboardInterrupt goes through."""
        part = Part(0, None)
        where = dict(nvml.here(device))

        def emit(ev: dict[str, Any]) -> None:
            if ev.get("event") == "tool":
                tool_event(run_dir, ev)
            on_event(part, {**ev, "where": where})

        ctx = PartContext(part, workdir=run_dir, final_dir=run_dir, where=where, emit_fn=emit)
        t0 = time.monotonic()
        try:
            value = fn(ctx)
        except Exception as e:
            yield PartOutcome(part, error=e, where={**where, "wall_s": time.monotonic() - t0}, dir=run_dir)
            return
        yield PartOutcome(part, value=value, where={**where, "wall_s": time.monotonic() - t0}, dir=run_dir)
