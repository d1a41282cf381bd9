"""`profctl ncu --recipe NAME [workload options]`: profile the measured iteration of each backend and pass
with Nsight Compute, read the report, print the launch list, the recipe's metrics and the diagnosis.

Only launches inside profctl's NVTX range ``<backend>[<shape>]/measure/<backend>.<pass>`` are profiled, and
the workload runs one measured iteration unless --iters is given, so each kernel of that iteration is
profiled once. See docs/ncu.md.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from profctl.cli._command import command_line
from profctl.cli._executors import executor_options
from profctl.cli._guard import guard
from profctl.cli._output import check_format, check_reports
from profctl.cli._program import PROGRAM_HELP, RF_NVTX_HELP, program_failed, target_of, with_range_hint
from profctl.cli._workload_options import REPORTS_HELP, validate_workload, workload_options
from profctl.errors import NothingMatched
from profctl.render.tables import console

if TYPE_CHECKING:
    from profctl.pipelines.targets import Workload

_PANEL = "Nsight Compute"
FORMATS = ("table", "markdown", "csv", "json")


@guard
@executor_options
@workload_options
def ncu(
    ctx: typer.Context,
    program: list[str] | None = typer.Argument(None, help=PROGRAM_HELP, show_default=False),
    range_: str | None = typer.Option(None, "--range", rich_help_panel=_PANEL,
                                      help="profile only launches inside your program's NVTX range (NAME or "
                                           "DOMAIN@NAME; push/pop or start/end)"),
    record_function_nvtx: bool = typer.Option(False, "--record-function-nvtx", rich_help_panel=_PANEL,
                                              help=RF_NVTX_HELP),
    launch_skip: int | None = typer.Option(None, "--launch-skip", rich_help_panel=_PANEL,
                                           help="skip this many matching launches before profiling (ncu -s)"),
    recipe: str = typer.Option("tensor-core", "--recipe", "-r", rich_help_panel=_PANEL,
                               help="recipe name (`profctl recipes` lists them) or path to a recipe .yaml"),
    kernel: str | None = typer.Option(None, "--kernel", "-k", rich_help_panel=_PANEL,
                                      help="also require the kernel's function name to match this regex"),
    launch_count: int | None = typer.Option(None, "--launch-count", "-c", rich_help_panel=_PANEL,
                                            help="profile at most this many launches in all (ncu -c)"),
    once: bool = typer.Option(False, "--once", rich_help_panel=_PANEL,
                              help="profile each distinct kernel once: the first launch of each kernel name that "
                                   "passes the other filters (ncu --kernel-id ::regex:RE:1); for a program that "
                                   "launches the same kernels many times (an autotuner, a training loop)"),
    replay_mode: str | None = typer.Option(None, "--replay-mode", rich_help_panel=_PANEL,
                                           help="kernel, application, range or app-range [default: ncu's]"),
    clock_control: str | None = typer.Option(None, "--clock-control", rich_help_panel=_PANEL,
                                             help="base, none or reset [default: ncu's (base)]; pass none where "
                                                  "clocks must not be touched"),
    cache_control: str | None = typer.Option(None, "--cache-control", rich_help_panel=_PANEL,
                                             help="all (flush caches between passes) or none [default: ncu's]"),
    timeout: float = typer.Option(1800.0, "--timeout", rich_help_panel=_PANEL,
                                  help="kill ncu after this many seconds"),
    reports: Path | None = typer.Option(None, "--reports", rich_help_panel=_PANEL,
                                        help=REPORTS_HELP),
    format: str = typer.Option("table", "--format", "-f", rich_help_panel=_PANEL,
                               help="table, markdown, csv (the kernels) or json"),
    *,
    wl: Workload,
    executor: Any = None,  # from @executor_options (--workers, --gpus, --cluster)
) -> None:
    """Profile the measured iteration of each backend, or your own program (-- CMD ARGS...), with Nsight
    Compute and diagnose every kernel."""
    from profctl import recipes
    from profctl.pipelines import ncu_pipeline

    check_format(format, FORMATS)
    # one measured iteration unless the user asked for more (a click ParameterSource, compared by name so it works
    # with typer's vendored click and the standalone one)
    if not program and getattr(ctx.get_parameter_source("iters"), "name", "DEFAULT") == "DEFAULT":
        wl = wl.with_iters(1)
    target = target_of(wl, program, record_function_nvtx=record_function_nvtx)
    req = ncu_pipeline.NcuRequest(target=target, recipe=recipes.get(recipe), kernel=kernel,
                                  launch_skip=launch_skip, launch_count=launch_count, range=range_, once=once,
                                  replay_mode=replay_mode, clock_control=clock_control, cache_control=cache_control,
                                  timeout_s=timeout, reports=reports, command=command_line(), executor=executor,
                                  prefetch=RENDERERS)
    ncu_pipeline.check(req)
    validate_workload(wl)
    check_reports(reports)
    req = replace(req, exe=ncu_pipeline.tool.find())
    try:
        with _showing_progress() as show:
            res = ncu_pipeline.run(req, on_progress=show)
    except NothingMatched as e:
        raise with_range_hint(e, req.target) from None
    _print(res, format)
    if res.returncode:
        from profctl import proc

        log = res.run_dir / "ncu.log"
        text = log.read_text(errors="replace")[-50_000:] if log.is_file() else ""
        raise program_failed(res.returncode, proc.error_tail(text),
                             "the launches profiled before are shown above and kept in", res.run_dir, log)


@contextlib.contextmanager
def _showing_progress(every_s: float = 60.0) -> Iterator[Callable[[Any], None]]:
    """What ncu has profiled, while it runs: a live line on a terminal (kernels so far, the last one's time, the
    one being profiled), a line every `every_s` seconds otherwise (a CI log); and, once ncu profiles far more
    launches than the recipe needs, how to narrow the run -- printed once, on a terminal or not."""
    lock = threading.Lock()
    said = {"advice": False, "at": time.monotonic()}
    status: Any = None
    if sys.stderr.isatty():
        from rich.console import Console

        status = Console(stderr=True).status("ncu: starting", spinner="dots")

    def show(p: Any) -> None:
        with lock:
            if p.advice and not said["advice"]:
                said["advice"] = True
                msg = f"profctl: note: {p.advice}"
                if status is not None:
                    status.console.print(msg, markup=False, highlight=False, soft_wrap=True)
                else:
                    print(msg, file=sys.stderr, flush=True)
            if status is not None:
                status.update(p.describe())
            elif time.monotonic() - said["at"] >= every_s and p.launches:
                said["at"] = time.monotonic()
                print(f"profctl: {p.describe()}", file=sys.stderr, flush=True)

    if status is None:
        yield show
        return
    with status:
        yield show


#: what printing the result imports (loaded while ncu runs: profctl.pipelines.ncu_pipeline.prefetch)
RENDERERS = ("profctl.render.ncu_view", "profctl.render.source_view", "profctl.analysis.source", "rich.console",
             "rich.table", "rich.markup")


def _print(result: Any, format: str) -> None:
    from profctl.render import ncu_view

    for w in result.warnings:
        print(f"profctl: warning: {w}", file=sys.stderr)
    s, ds = result.summary, result.diagnosis
    text: str | None = None
    if format == "csv":
        text = s.kernels_df().to_csv(index=False)
    elif format == "json":
        text = ncu_view.to_json(s, ds)
    elif format == "markdown":
        text = ncu_view.to_markdown(s, ds, recipe=result.recipe, cc=result.cc)
    else:
        ncu_view.to_console(s, ds, recipe=result.recipe, cc=result.cc)
    if format == "json" and text is not None and result.profiles:
        from profctl.analysis import source
        from profctl.render.source_view import to_dict

        doc = json.loads(text)
        doc["source"] = [to_dict(source.view(p, None), 20) for p in result.profiles if p.has_samples and p.pcs]
        text = json.dumps(doc, indent=1, default=str)
    if text is not None:
        print(text, end="" if text.endswith("\n") else "\n")
    if result.profiles and format in ("table", "markdown"):
        _print_source(result, format)
    print(
        f"profctl: {result.launches} launch(es) profiled; ncu ran {result.ncu_wall_s:.1f} s; "
        f"run directory {result.run_dir}",
        file=sys.stderr,
    )


def _print_source(result: Any, format: str) -> None:
    """The hot lines of each kernel the recipe sampled (profctl report RUN --view source has them all)."""
    from profctl.analysis import source
    from profctl.render import source_view

    views = [source.view(p, 5) for p in result.profiles if p.has_samples and p.pcs]
    if format == "markdown":
        print(source_view.to_markdown(views, "source", 5))
    else:
        source_view.to_console(views, "source", console(), 5)
    run = result.run_dir
    print(f"profctl: every line and instruction: profctl report {run} --view source [-f html -o source.html]; "
          f"stalls: --view stalls; two kernels side by side: profctl explain {run} --kernel A --vs B",
          file=sys.stderr)
