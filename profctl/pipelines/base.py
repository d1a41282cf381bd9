"""The one pipeline shape: ``run(Request) -> Result``, for bench, nsys, ncu and torch alike.

A request says *what* runs (its target: the built-in attention workload, a user's program, a model), *where* it
runs (its executor: one local subprocess, or worker processes on several GPUs and machines), where the run
directory goes and the command line to record. A pipeline launches the target under its tool, captures, exports,
parses and summarizes into a result; it prints nothing (progress goes to an optional callback) and raises a
profctl error for anything the user must fix. The CLI renders results and sets exit codes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from profctl.proc import DEFAULT_TIMEOUT_S


class Target(Protocol):
    """What runs: a program whose command line a tool wraps, and the cases (points) it runs."""

    @property
    def kind(self) -> str: ...

    @property
    def device(self) -> str: ...

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


class Executor(Protocol):
    """Where a target's processes run (profctl.pipelines.executors): `Local`, or `DaskExecutor`
    (profctl.pipelines.dask_executor). A pipeline opens a session, asks it small questions where the parts run
    (the target resolved, a tool found) and has it run the part function over the target's cases."""

    @property
    def name(self) -> str: ...

    def session(self) -> AbstractContextManager[Any]:
        """A context whose value has ``prepare(device)``, ``ask(fn, *args)``, ``map_parts(fn, cases, run_dir=,
        device=, on_event=, weights=)``, ``parallel`` and ``describe()`` (profctl.pipelines.executors.Local shows
        the shape)."""
        ...

    def spawn(self, argv: Sequence[str], *, log: Path, timeout_s: float, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> Any: ...

    def run(self, argv: Sequence[str], *, log: Path, timeout_s: float, env: dict[str, str] | None = None,
            cwd: Path | None = None, check: bool = False, classify: Any = None) -> Any: ...


def _default_executor() -> Executor:
    """`Local`, unless the caller runs inside ``executors.using(...)`` (the CLI's --workers / --cluster)."""
    from profctl.pipelines.executors import current

    return current()


@dataclass(frozen=True, kw_only=True)
class Request:
    """What every pipeline takes. Tool-specific requests add their options."""

    target: Target
    executor: Executor = field(default_factory=_default_executor)
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
