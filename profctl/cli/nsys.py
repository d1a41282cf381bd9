"""`profctl nsys`: run the workload under Nsight Systems, export the report to SQLite, print its summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from profctl.cli._common import PROGRAM_HELP, command_line, guard, target_of, workload_options
from profctl.cli._executors import executor_options


@guard
@executor_options
@workload_options
def nsys(
    wl: Any,
    program: list[str] | None = typer.Argument(None, help=PROGRAM_HELP, show_default=False),
    range_: str | None = typer.Option(None, "--range",
                                      help="your program's NVTX range (NAME or DOMAIN@NAME): summarize only the "
                                           "kernels launched inside it"),
    trace: str = typer.Option("cuda,nvtx,osrt,cublas,cudnn", "--trace", "-t",
                              help="nsys --trace list (cuda is needed for the kernel table)"),
    capture: str | None = typer.Option(None, "--capture",
                                       help="cudaProfilerApi: between cudaProfilerStart and Stop (the workload's "
                                            "measured iterations, one report); nvtx: from the first 'measure' range "
                                            "on; none: the whole process [default: cudaProfilerApi for the "
                                            "workload, none for your program]"),
    all_work: bool = typer.Option(False, "--all-work",
                                  help="summarize everything captured, not only the work launched between "
                                       "cudaProfilerStart and Stop"),
    sample: bool = typer.Option(False, "--sample/--no-sample", help="CPU sampling and context switches"),
    timeout: float = typer.Option(1800.0, "--timeout", help="seconds before nsys profile is killed"),
    reports_dir: Path | None = typer.Option(None, "--reports", "--reports-dir",
                                            help="run directory root [default: $PROFCTL_REPORTS or ./reports]"),
    by_range: bool = typer.Option(False, "--by-range", help="add the per-NVTX-range kernel breakdown"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown, csv or json"),
    limit: int = typer.Option(25, "--limit", help="kernels shown in the table (0: all)"),
) -> None:
    """Profile the attention workload, or your own program (-- CMD ARGS...), with Nsight Systems (nsys profile +
    export + summary)."""
    from profctl.errors import UsageError
    from profctl.pipelines import nsys as pipeline
    from profctl.render import nsys as rn
    from profctl.render.summary import FORMATS

    if format not in FORMATS:
        raise UsageError(f"unknown format {format!r}; choose from {', '.join(FORMATS)}")
    req = pipeline.NsysRequest(target=target_of(wl, program), range=range_,
                               trace=tuple(t.strip() for t in trace.split(",") if t.strip()),
                               capture=capture, sample=sample, timeout_s=timeout, reports=reports_dir,
                               by_range=by_range, all_work=all_work, command=command_line())
    pipeline.check(req)
    res = pipeline.run(req)
    rn.print_result(res, format, limit=limit or None)
    if res.returncode:
        from profctl.errors import ProgramFailed

        raise ProgramFailed(f"the program exited with status {res.returncode}; what nsys recorded is summarized "
                            f"above and kept in {res.run_dir}")
