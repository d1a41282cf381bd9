"""`profctl nsys`: run the workload under Nsight Systems, export the report to SQLite, print its summary."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from profctl.cli._command import command_line, conflict, given, typed_flags
from profctl.cli._executors import executor_options
from profctl.cli._guard import guard
from profctl.cli._output import check_format, check_limit, check_reports, emit_summary
from profctl.cli._program import PROGRAM_HELP, RF_NVTX_HELP, program_failed, target_of, with_range_hint
from profctl.cli._workload_options import REPORTS_HELP, validate_workload, workload_options
from profctl.errors import NothingMatched
from profctl.render.tables import console


@guard
@executor_options
@workload_options
def nsys(
    wl: Any,
    program: list[str] | None = typer.Argument(None, help=PROGRAM_HELP, show_default=False),
    range_: str | None = typer.Option(None, "--range",
                                      help="your program's NVTX range (NAME or DOMAIN@NAME): summarize only the "
                                           "kernels launched inside it"),
    record_function_nvtx: bool = typer.Option(False, "--record-function-nvtx", help=RF_NVTX_HELP),
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
    reports: Path | None = typer.Option(None, "--reports",
                                        help=REPORTS_HELP),
    by_range: bool = typer.Option(False, "--by-range", help="add the per-NVTX-range kernel breakdown"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown, csv or json"),
    limit: int = typer.Option(0, "--limit", help="show at most N rows per table, most total time first (table, "
                                                 "markdown) [default: all]"),
    executor: Any = None,  # from @executor_options (--workers, --gpus, --cluster)
) -> None:
    """Profile the attention workload, or your own program (-- CMD ARGS...), with Nsight Systems (nsys profile +
    export + summary)."""
    from profctl.pipelines import nsys_pipeline
    from profctl.render.summary_view import FORMATS

    check_format(format, FORMATS)
    check_limit(limit, format)
    from profctl.spec import comma_items

    traces = tuple(comma_items(trace, "--trace"))
    _check_nvtx(wl, traces, capture, by_range)
    target = target_of(wl, program, record_function_nvtx=record_function_nvtx)
    req = nsys_pipeline.NsysRequest(target=target, range=range_, trace=traces,
                                    capture=capture, sample=sample, timeout_s=timeout, reports=reports,
                                    by_range=by_range, all_work=all_work, command=command_line(), executor=executor)
    nsys_pipeline.check(req)
    validate_workload(wl)
    check_reports(reports)
    try:
        res = nsys_pipeline.run(req)
    except NothingMatched as e:
        raise with_range_hint(e, req.target) from None
    _show(res, format, limit or None)
    if res.returncode:
        from profctl import proc

        log = res.log
        text = log.read_text(errors="replace")[-50_000:] if log.is_file() else ""
        raise program_failed(res.returncode, proc.error_tail(text),
                             "what nsys recorded is summarized above and kept in", res.run_dir, log)


def _show(res: Any, format: str, limit: int | None) -> None:
    """The summary in `format` on stdout; the GPU time per pass under a table or Markdown; failed cases and
    where the files are on stderr."""
    from profctl.render.nsys_view import pass_time_lines

    ec = console(stderr=True)
    ec.print(f"[dim]nsys {res.tool_version} ({res.exe}); run directory {res.run_dir}[/dim]")
    emit_summary(res.summary, format, limit=limit)
    if format in ("table", "markdown"):
        for ln in pass_time_lines(res.pass_times):
            print(ln)
    for r in res.failed_cases:
        spec = r.get("spec", {})
        ec.print(f"[yellow]case {spec.get('backend')} {spec.get('seqlen_q')}: {r.get('status')}: "
                 f"{r.get('reason')}[/yellow]")
    ec.print(f"report: {res.report}  (open in the Nsight Systems GUI)")
    ec.print(f"sqlite: {res.sqlite}; log: {res.log}")
    sys.stdout.flush()


def _check_nvtx(wl: Any, traces: tuple[str, ...], capture: str | None, by_range: bool) -> None:
    """Options that need NVTX ranges, given together with options that leave none."""
    needs = [f for f, on in (("--capture nvtx", capture == "nvtx"), ("--by-range", by_range)) if on]
    if not needs:
        return
    if not wl.sweep.nvtx:
        raise conflict(needs[0], typed_flags().get("nvtx", "--no-nvtx"),
                       f"{needs[0]} needs the workload's NVTX ranges, which --no-nvtx turns off")
    if given("trace") and "nvtx" not in traces:
        raise conflict(needs[0], f"{typed_flags().get('trace', '--trace')} {','.join(traces)}",
                       f"{needs[0]} needs NVTX in the trace; add nvtx to --trace")
