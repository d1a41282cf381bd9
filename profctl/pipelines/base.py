"""The one pipeline shape: ``run(Request) -> Result``, for bench, nsys, ncu and torch alike.

A request says *what* runs (its target: the built-in attention workload, a user's program, a model), *where* it
runs (its executor: one local subprocess, or worker processes on several GPUs and machines), where the run
directory goes and the command line to record. A pipeline launches the target under its tool, captures, exports,
parses and summarizes into a result; it prints nothing (progress goes to an optional callback) and raises a
profctl error for anything the user must fix. The CLI renders results and sets exit codes.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self, TypeVar, runtime_checkable

from profctl.pipelines.executors import Local, OnEvent, PartContext, PartOutcome
from profctl.proc import DEFAULT_TIMEOUT_S

if TYPE_CHECKING:
    from profctl.pipelines.warm import WarmCommand
    from profctl.tools.proton import ProtonOptions
    from profctl.tools.torchprof import TorchOptions

R = TypeVar("R")
V = TypeVar("V")


class Target(Protocol):
    """What runs: a program whose command line a tool wraps, and the cases (points) it runs. What differs
    between targets (the attention workload, the model workload, a user's program) is asked of the target here,
    never found out by its type (profctl.pipelines.targets). These are what every pipeline asks; what one tool
    alone needs is in that tool's protocol below (:class:`NcuTarget`, :class:`TorchTarget`,
    :class:`ProtonTarget`), and :class:`TargetDefaults` answers the questions a simple target has no news for:
    a new kind of target writes `kind`, `device`, `cases()`, `argv()` and the tool members it supports."""

    @property
    def kind(self) -> str: ...

    @property
    def device(self) -> str: ...

    @property
    def foreign(self) -> bool:
        """A user's program: profctl wrote neither its cases nor its ranges; what it did is learned from the
        tools (its exit status from their logs, its launches from their reports)."""
        ...

    @property
    def case_ranges(self) -> bool:
        """Each case runs inside profctl's own NVTX range of it (``<backend>[<shape>]/measure/...``): a tool
        selects the cases itself, a ``--range`` has nothing to name, and each case's launches can be checked."""
        ...

    @property
    def nvtx(self) -> bool:
        """Whether its runs push NVTX ranges (a program: whatever it pushes itself, taken as yes)."""
        ...

    @property
    def cwd(self) -> Path | None:
        """The folder the program runs in (None: the parent's)."""
        ...

    def resolve(self) -> Target:
        """Defaults filled and the device decided (may import torch); validate here, before any run starts."""
        ...

    def cases(self) -> Sequence[Any]:
        """The points the target runs, in order (a workload's AttentionSpecs)."""
        ...

    def argv(self, *, jsonl: Path | None = None, skip: int = 0, only: Sequence[int] | None = None,
             extra: Sequence[str] = ()) -> list[str]:
        """The command line of the program, writing its events to `jsonl`, starting at case `skip`, running only
        the cases `only` (indices into cases(), which keep their numbers in the events) when given."""
        ...

    def env(self) -> dict[str, str]:
        """Environment variables the program needs on top of the parent's."""
        ...

    def manifest(self) -> dict[str, Any]:
        """What the run's manifest records about the target."""
        ...

    def backends(self) -> tuple[str, ...]:
        """The backends its cases run (none for a program)."""
        ...

    def costs(self) -> list[float] | None:
        """A rough guess of each case's seconds, to deal cases into parts of about equal work (None: no cases)."""
        ...

    def runs_on_cpu(self) -> bool:
        """Resolved to run on the CPU (a program decides that itself: False)."""
        ...

    def for_worker(self, python: str) -> Self:
        """The target as a worker runs it, with the worker's own Python interpreter where it runs one."""
        ...


@runtime_checkable
class NcuTarget(Target, Protocol):
    """A target `profctl ncu` profiles: how ncu selects its measured launches."""

    def ncu_filters(self, range_: str | None, cases: Sequence[int] | None = None) -> list[list[str]]:
        """The ncu --nvtx-include expressions to try, in order, to profile the measured launches of `cases` (all:
        None); `range_` names a range of a program or a part of a model step."""
        ...


@runtime_checkable
class TorchTarget(Target, Protocol):
    """A target `profctl torch` runs under torch.profiler."""

    def torch_argv(self, trace: Path, jsonl: Path, options: TorchOptions, only: Sequence[int] | None = None
                   ) -> list[str]:
        """The command line that runs the cases `only` under torch.profiler, writing `trace` and the events."""
        ...


@runtime_checkable
class ProtonTarget(Target, Protocol):
    """A target `profctl proton` runs under Proton's instrumentation."""

    def proton_argv(self, out: Path, jsonl: Path, options: ProtonOptions, case: int | None = None,
                    time_iters: int = 0) -> list[str]:
        """The command line that runs case `case` (a program: itself) under Proton's instrumentation, writing
        Proton's output at `out` (its suffix added by Proton) and the events; `time_iters`: time that many plain
        and scoped launches instead (profctl.workloads.proton_run). UsageError for what Proton cannot record."""
        ...


class TargetDefaults:
    """The answers of a target that has nothing to say beyond its program and its cases: profctl's own (not
    foreign), no case ranges of profctl's, NVTX ranges taken as pushed, run in the parent's folder with the
    parent's environment, no backends, no cost model, not on the CPU, the same on every worker."""

    foreign: ClassVar[bool] = False
    case_ranges: ClassVar[bool] = False

    @property
    def nvtx(self) -> bool:
        return True

    @property
    def cwd(self) -> Path | None:
        return None

    def resolve(self) -> Self:
        return self

    def env(self) -> dict[str, str]:
        return {}

    def manifest(self) -> dict[str, Any]:
        return {}

    def backends(self) -> tuple[str, ...]:
        return ()

    def costs(self) -> list[float] | None:
        return None

    def runs_on_cpu(self) -> bool:
        return False

    def for_worker(self, python: str) -> Self:
        return self


class Session(Protocol):
    """One run's use of an executor (``Executor.session()``): questions asked where the parts run, and the
    parts themselves. `Local` is its own session (profctl.pipelines.executors); `DaskSession` runs the parts on
    Dask workers (profctl.pipelines.dask_executor)."""

    @property
    def parallel(self) -> bool:
        """Whether parts run side by side (each in a folder of its own) rather than one part in the run
        directory itself."""
        ...

    def prepare(self, device: str, *, points: int | None = None, warm: WarmCommand | None = None) -> None:
        """Get ready to run parts of a `device` workload (start the workers), before the run directory exists:
        `points` the cases to run (no more workers than that), `warm` the command of the warm workload child a
        worker may start now (profctl.pipelines.warm), so that it is ready when the first part comes."""
        ...

    def ask(self, fn: Callable[..., R], *args: Any) -> R:
        """`fn(*args)` run where the parts run (the target resolved, a tool found), and its value."""
        ...

    def map_parts(self, fn: Callable[[PartContext], V], cases: Sequence[int], *, run_dir: Path, device: str,
                  on_event: OnEvent, weights: Sequence[float] | None = None, keys: Sequence[str] | None = None,
                  warm: bool = False) -> Generator[PartOutcome[V], None, None]:
        """`fn` over parts of `cases` (one part serially), each part's outcome as it ends; its events go to
        `on_event` in this process. `weights`: each case's cost model, `keys`: what its time is learnt with (the
        backend; profctl.pipelines.ledger). `warm`: `fn` keeps a warm child per worker (``PartContext.warm``), so an
        executor of workers may cut the cases into single-case parts dealt to workers as they free up, longest
        first."""
        ...

    def describe(self) -> dict[str, Any]:
        """What the run's manifest records of the executor (its name; workers, their start time, lost parts)."""
        ...


class Executor(Protocol):
    """Where a target's processes run (profctl.pipelines.executors): `Local`, or `DaskExecutor`
    (profctl.pipelines.dask_executor). A pipeline opens a session, asks it small questions where the parts run
    (the target resolved, a tool found) and has it run the part function over the target's cases."""

    @property
    def name(self) -> str: ...

    def session(self) -> AbstractContextManager[Session]:
        """The session of one run: started when the pipeline begins, closed (workers stopped) when it ends."""
        ...

    def spawn(self, argv: Sequence[str], *, log: Path, timeout_s: float, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> Any: ...

    def run(self, argv: Sequence[str], *, log: Path, timeout_s: float, env: dict[str, str] | None = None,
            cwd: Path | None = None, check: bool = False, classify: Any = None) -> Any: ...


@dataclass(frozen=True, kw_only=True)
class Request:
    """What every pipeline takes. Tool-specific requests add their options; `executor` says where the target
    runs (the CLI's --workers / --cluster, the Python API's ``executor=``), serially here unless given."""

    target: Target
    executor: Executor = field(default_factory=Local)
    reports: Path | None = None  # the run store's root; None: $PROFCTL_REPORTS or ./reports
    command: tuple[str, ...] | None = None  # the command line recorded in the manifest
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass(kw_only=True)
class Result:
    """What every pipeline returns: where its files are, how it ended, what the user should know."""

    run_dir: Path
    status: str = "complete"  # complete | incomplete (interrupted; finished work kept) | failed
    warnings: list[str] = field(default_factory=list)
    failed_cases: list[dict[str, Any]] = field(default_factory=list)  # workload rows whose status is not ok


@dataclass(frozen=True)
class Progress:
    """A pipeline's progress: case `index` of `total` started (row None) or finished (its row); over all workers,
    the cases `done` (failed ones included), `running` and `failed` so far, and where this case runs (`where`,
    e.g. ``gpu1``) with each worker's last GPU utilisation in percent (`util`, {} on the serial path)."""

    index: int
    total: int
    case: Any
    row: dict[str, Any] | None = None
    done: int = 0
    running: int = 0
    failed: int = 0
    where: str | None = None
    util: dict[str, int] = field(default_factory=dict)
    parallel: bool = False

    def describe(self) -> str:
        """One line for a progress bar: the case; spread over workers, also the counts and utilisation."""
        case = self.case
        what = f"{getattr(case, 'label', getattr(case, 'backend', case))} {getattr(case, 'shape_key', '')} " \
               f"{getattr(case, 'pass_', '')}".strip()
        if not self.parallel:
            return what
        util = " ".join(f"{k} {v}%" for k, v in sorted(self.util.items()))
        return (f"{self.running} running, {self.failed} failed" + (f" | {util}" if util else "")
                + f" | {what}" + (f" on {self.where}" if self.where else ""))


class Tally:
    """Cases started, finished and failed over every worker, turned into :class:`Progress`."""

    def __init__(self, cases: Sequence[Any], parallel: bool) -> None:
        self.cases, self.parallel = cases, parallel
        self.running: dict[int, str] = {}
        self.finished: set[int] = set()
        self.failed: set[int] = set()
        self.util: dict[str, int] = {}

    def event(self, index: int, *, where: str | None, finished: bool = False, ok: bool = True,
              util: int | None = None, row: dict[str, Any] | None = None) -> Progress:
        if where is not None and util is not None:
            self.util[where] = int(util)
        if finished:
            self.running.pop(index, None)
            self.finished.add(index)
            if not ok:
                self.failed.add(index)
        elif index not in self.finished:
            self.running[index] = where or ""
        case = self.cases[index] if 0 <= index < len(self.cases) else index
        return Progress(index, len(self.cases), case, row, done=len(self.finished), running=len(self.running),
                        failed=len(self.failed), where=where, util=dict(self.util), parallel=self.parallel)


OnProgress = Callable[[Progress], None]
