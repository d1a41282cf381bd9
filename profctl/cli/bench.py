"""`profctl bench`: sweep backends and shapes; time, TFLOP/s, memory, clocks, speedup against a baseline."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from profctl.cli._common import command_line, emit, guard, workload_options
from profctl.cli._executors import executor_options


@guard
@executor_options(progress=False)
@workload_options
def bench(
    wl: Any,
    baseline: str = typer.Option("eager", "--baseline", help="backend to compute speedups against, or 'none'"),
    json_out: Path | None = typer.Option(None, "--json", help="write the rows as JSON ('-' for stdout)"),
    csv_out: Path | None = typer.Option(None, "--csv", help="write the rows as CSV ('-' for stdout)"),
    md_out: Path | None = typer.Option(None, "--markdown", help="write a Markdown table ('-' for stdout)"),
    reports: Path | None = typer.Option(None, "--reports", help="run directory root [default: ./reports]"),
    point_timeout: float = typer.Option(900.0, "--point-timeout", help="seconds before a point is killed"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no table, no progress bar"),
    strict: bool = typer.Option(False, "--strict", help="exit non-zero if any point did not run (CI)"),
    label: str | None = typer.Option(None, "--label",
                                     help="name what this run measures, so `profctl compare` pairs its rows with "
                                          "another run's rows of that name: NAME (one backend) or "
                                          "BACKEND=NAME,..."),
) -> None:
    """Benchmark attention backends over a sweep of shapes (every workload option takes a comma list)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from profctl.errors import ProfctlError
    from profctl.pipelines import bench as pipeline
    from profctl.render import bench as rb
    from profctl.shapes import label_of_row

    to_stdout = any(str(p) == "-" for p in (json_out, csv_out, md_out) if p is not None)
    show = not quiet and not to_stdout
    req = pipeline.BenchRequest(target=wl, baseline=None if baseline.lower() == "none" else baseline,
                                reports=reports, point_timeout_s=point_timeout, command=command_line(), label=label)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=True, disable=not show) as bar:
        task = bar.add_task("starting", total=None)

        def progress(p: Any) -> None:
            bar.update(task, total=p.total, completed=p.done, description=p.describe())

        res = pipeline.run(req, on_progress=progress)
    if show:
        rb.print_table(res)
        print(f"run: {res.run_dir}")
    for path, render in ((json_out, rb.to_json), (csv_out, rb.to_csv), (md_out, rb.to_markdown)):
        if path is not None:
            emit(render(res), path)
    if res.interrupted:
        print("profctl: interrupted; finished rows were kept in " + str(res.run_dir), file=sys.stderr)
        raise typer.Exit(130)
    failed = res.failed_cases
    if len(failed) == len(res.rows) or (strict and failed):
        r = failed[0]
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        raise ProfctlError(f"{'no point ran' if len(failed) == len(res.rows) else 'a point failed'}: "
                           f"{r['backend']} {label_of_row(r)} {r['pass']}: {r['status']}: {r.get('reason')}{more}")
