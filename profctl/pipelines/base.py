"""The one pipeline shape: ``run(Request) -> Result``, for bench, nsys, ncu and torch alike.

A request says *what* runs (its target: the built-in attention workload now; a user's program or a model next),
*where* it runs (its executor: one local subprocess now; workers next), where the run directory goes and the
command line to record. A pipeline launches the target under its tool, captures, exports, parses and summarizes
into a result; it prints nothing (progress goes to an optional callback) and raises a profctl error for anything
the user must fix. The CLI renders results and sets exit codes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    """Where a target's processes run (profctl.pipelines.executors)."""

    @property
    def name(self) -> str: ...

    def spawn(self, argv: Sequence[str], *, log: Path, timeout_s: float, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> Any: ...

    def run(self, argv: Sequence[str], *, log: Path, timeout_s: float, env: dict[str, str] | None = None,
            cwd: Path | None = None, check: bool = False, classify: Any = None) -> Any: ...


def _local() -> Executor:
    from profctl.pipelines.executors import Local

    return Local()


@dataclass(frozen=True, kw_only=True)
class Request:
    """What every pipeline takes. Tool-specific requests add their options."""

    target: Target
    executor: Executor = field(default_factory=_local)
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
    """A pipeline's progress: case `index` of `total` started (row None) or finished (its row)."""

    index: int
    total: int
    case: Any
    row: dict[str, Any] | None = None


OnProgress = Callable[[Progress], None]
