"""Where a command's work runs: ``--workers N`` (N worker processes here: one per GPU of ``--gpus``, or CPU
workers for a CPU workload) and ``--cluster tcp://HOST:8786`` (the workers of a running Dask scheduler). Without
them the work runs as before, serially in this process's children, and Dask is never imported. docs/cluster.md.

A command takes them with one line, ``@executor_options`` (under ``@guard``): the options are added to its
signature, and the command receives the executor they describe as its ``executor`` argument (`Local` without
them) and puts it in the requests it builds.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import typer

from profctl.cli._messages import warn
from profctl.cli._output import emit
from profctl.errors import UsageError
from profctl.render.tables import markdown, rich_table, to_csv

F = TypeVar("F", bound=Callable[..., Any])

_PANEL = "Workers"

EXECUTOR_OPTIONS: list[tuple[str, Any, Any]] = [
    ("workers", int | None, typer.Option(
        None, "--workers", rich_help_panel=_PANEL,
        help="spread the sweep's points over N worker processes on this machine: one per GPU (see --gpus), or N "
             "CPU workers for a CPU workload (needs Dask: the cluster extra of profctl)")),
    ("gpus", str | None, typer.Option(
        None, "--gpus", rich_help_panel=_PANEL,
        help="GPUs to put a worker on: all (the default: every visible GPU), or indices as nvidia-smi shows "
             "them (0,2,5)")),
    ("cluster", str | None, typer.Option(
        None, "--cluster", rich_help_panel=_PANEL,
        help="send the points to the workers of a running Dask scheduler (tcp://HOST:8786); docs/cluster.md")),
]


def executor_of(workers: int | None, gpus: str | None, cluster: str | None, *, progress: bool) -> Any:
    """The executor the options describe: `Local` (serial, the default) or a DaskExecutor; UsageError for options
    that do not go together, or when Dask is not installed (one line naming the extra)."""
    if workers is None and gpus is None and cluster is None:
        from profctl.pipelines.executors import Local

        return Local()
    from profctl.pipelines.dask_executor import DaskExecutor

    return DaskExecutor(workers=workers, gpus=gpus, cluster=cluster, on_progress=_bar() if progress else None,
                        on_note=warn)


def executor_options(fn: F | None = None, *, progress: bool = True) -> Any:
    """Add --workers, --gpus and --cluster to a command, which gets the executor they describe as its keyword
    argument ``executor``. `progress`: draw a bar over all workers from the executor's progress (a command that
    draws its own bar from its pipeline, like bench, passes False)."""

    def deco(f: F) -> F:
        sig = inspect.signature(f)
        own = [p for p in sig.parameters.values() if p.name != "executor"]
        extra = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=ann)
                 for n, ann, opt in EXECUTOR_OPTIONS]

        @functools.wraps(f)
        def wrapper(*args: Any, **kw: Any) -> Any:
            ex = executor_of(*(kw.pop(n, None) for n, _, _ in EXECUTOR_OPTIONS), progress=progress)
            with _drawing(ex):
                return f(*args, executor=ex, **kw)

        wrapper.__signature__ = sig.replace(parameters=[*own, *extra])  # type: ignore[attr-defined]
        ann = {k: v for k, v in getattr(f, "__annotations__", {}).items() if k != "executor"}
        wrapper.__annotations__ = {**ann, **{n: a for n, a, _ in EXECUTOR_OPTIONS}}
        return wrapper  # type: ignore[return-value]

    return deco(fn) if fn is not None else deco


class _Bar:
    """A rich progress bar over all workers, fed by the executor's Progress (cases done of all; running, failed
    and each GPU's utilisation in the description)."""

    def __init__(self) -> None:
        self.bar: Any = None
        self.task: Any = None

    def __call__(self, p: Any) -> None:
        if self.bar is None:
            return
        self.bar.update(self.task, total=p.total or None, completed=p.done, description=p.describe())


def _bar() -> _Bar:
    return _Bar()


@contextlib.contextmanager
def _drawing(ex: Any) -> Iterator[None]:
    bar = getattr(ex, "on_progress", None)
    if not isinstance(bar, _Bar):
        yield
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=True, disable=not sys.stderr.isatty()) as p:
        bar.bar, bar.task = p, p.add_task("starting workers", total=None)
        try:
            yield
        finally:
            bar.bar = None


# ------------------------------------------------------------------------------------- profctl report --by gpu
def by_gpu_option(fn: F) -> F:
    """Add ``--by gpu|model`` to `profctl report`: bench rows side by side per GPU (one column pair per GPU that
    ran them, from one run spread over workers or from runs gathered on different machines); per GPU model with
    ``model``. Without it the command runs as it was."""
    sig = inspect.signature(fn)
    opt = typer.Option(None, "--by", help="gpu: bench rows side by side per GPU (host:index), from one run "
                                          "spread over workers or runs of several machines; model: per GPU model")

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        by = kw.pop("by", None)
        if by is None:
            return fn(*args, **kw)
        return _report_by_gpu(kw["paths"], by, kw.get("format", "table"), kw.get("output"))

    extra = inspect.Parameter("by", inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=str | None)
    wrapper.__signature__ = sig.replace(parameters=[*sig.parameters.values(), extra])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {**getattr(fn, "__annotations__", {}), "by": str | None}
    return wrapper  # type: ignore[return-value]


def _report_by_gpu(paths: list[Any], by: str, fmt: str, output: Any) -> None:
    from profctl import inputs as resolver
    from profctl.analysis import by_gpu

    if by not in by_gpu.PER:
        raise UsageError(f"--by {by!r}: choose {' or '.join(by_gpu.PER)}")
    rows: list[dict[str, Any]] = []
    devices: list[str | None] = []
    for i in resolver.resolve_all(paths):
        if i.kind == "bench-json":
            got = resolver.read_rows(i)
            rows += got
            devices += [resolver.device_of(i)] * len(got)
    if not rows:
        raise UsageError("--by gpu compares bench rows: give bench runs (run directories, ids, bench JSON files)")
    gpus, table = by_gpu.table(rows, per="model" if by == "model" else "gpu", devices=devices)
    if fmt == "json":
        emit(json.dumps({"gpus": gpus, "rows": table}, indent=1), output)
        return
    shown = [{k: (f"{v:.4g}" if isinstance(v, float) else ("-" if v is None else v)) for k, v in r.items()}
             for r in table]
    if fmt == "csv":
        emit(to_csv(table), output)
    elif fmt == "markdown" or output:
        emit(markdown(shown), output)
    else:
        from rich.console import Console

        Console(width=240).print(rich_table(f"bench rows per {'GPU model' if by == 'model' else 'GPU'}", shown))
