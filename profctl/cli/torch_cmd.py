"""`profctl torch`: profile the workload's measured iterations with torch.profiler and print the summary."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from profctl.cli._command import command_line
from profctl.cli._executors import executor_options
from profctl.cli._guard import guard
from profctl.cli._messages import note, warn
from profctl.cli._output import check_format, check_limit, check_reports, emit_summary
from profctl.cli._program import PROGRAM_HELP, program_failed, target_of
from profctl.cli._workload_options import REPORTS_HELP, validate_workload, workload_options
from profctl.errors import UsageError


@guard
@executor_options
@workload_options
def torch_cmd(
    wl: Any,
    program: list[str] | None = typer.Argument(None, show_default=False,
                                               help=PROGRAM_HELP + " (python SCRIPT.py, python -m MODULE or "
                                                                   "python -c CODE)"),
    range_: str | None = typer.Option(None, "--range",
                                      help="your program's record_function or NVTX range (NAME): keep only what "
                                           "ran inside it"),
    shapes: bool = typer.Option(False, "--shapes/--no-shapes", help="record operator input shapes"),
    memory: bool = typer.Option(False, "--memory/--no-memory", help="record memory allocations"),
    stacks: bool = typer.Option(False, "--stacks/--no-stacks", help="record Python stacks of the ops"),
    by_range: bool = typer.Option(True, "--by-range/--no-by-range",
                                  help="break kernels down per range (case / measure / pass)"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown, csv or json"),
    limit: int = typer.Option(0, "--limit", help="show at most N rows per table, most total time first (table, "
                                                 "markdown) [default: all]"),
    reports: Path | None = typer.Option(None, "--reports", help=REPORTS_HELP),
    timeout: float = typer.Option(1800.0, "--timeout", help="seconds before the workload is killed"),
    executor: Any = None,  # from @executor_options (--workers, --gpus, --cluster)
) -> None:
    """Profile with torch.profiler (CPU and CUDA activity; the workload's measured iterations, or your Python
    program given after --); write the trace
    (.json.gz, for Perfetto) and the key_averages table into a run directory; print the kernel summary."""
    from profctl.pipelines import torchprof_pipeline
    from profctl.render.summary_view import FORMATS
    from profctl.tools.torchprof import TorchOptions

    check_format(format, FORMATS)
    check_limit(limit, format)
    if timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {timeout:g}")
    validate_workload(wl)
    check_reports(reports)
    req = torchprof_pipeline.TorchRequest(target=target_of(wl, program), range=range_,
                                          options=TorchOptions(shapes=shapes, memory=memory, stacks=stacks),
                                          by_range=by_range, reports=reports, timeout_s=timeout, command=command_line(),
                                          executor=executor)
    res = torchprof_pipeline.run(req)
    for n in res.notes:
        note(f"note: {n}")
    for w in res.summary.warnings:
        if w not in res.notes:  # said once, as a note
            warn(w)
    emit_summary(res.summary, format, limit=limit or None)
    for r in res.failed_cases:
        spec = r.get("spec") or {}
        note(f"{spec.get('backend')} {spec.get('pass')}: {r.get('status')}: {r.get('reason')}")
    print(f"run: {res.run_dir}\ntrace: {res.trace}\nkey_averages: {res.table}", file=sys.stderr)
    if res.program_status:
        raise program_failed(res.program_status, res.program_error, "its trace up to then is summarized above and "
                             "kept in", res.run_dir, res.log)
