"""`profctl bench`: sweep backends and shapes; time, TFLOP/s, memory, clocks, speedup against a baseline."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from profctl.cli import _bench_ab
from profctl.cli._command import command_line
from profctl.cli._executors import executor_options
from profctl.cli._guard import guard
from profctl.cli._messages import note, warn
from profctl.cli._output import check_format, check_outputs, check_reports, emit
from profctl.cli._workload_options import REPORTS_HELP, validate_workload, workload_options
from profctl.errors import ProfctlError, UsageError
from profctl.render.tables import console

FORMATS = ("table", "markdown", "csv", "json")


@guard
@executor_options(progress=False)
@workload_options
def bench(
    wl: Any,
    baseline: str = typer.Option("eager", "--baseline", help="backend to compute speedups against, or 'none' "
                                                             "(added to the run when --backend leaves it out)"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown, csv or json (the rows)"),
    output: Path | None = typer.Option(None, "--output", "-o", help="write --format to this file (atomically) "
                                                                  "instead of standard output"),
    json_out: Path | None = typer.Option(None, "--json", hidden=True, help="old spelling of -f json -o FILE"),
    csv_out: Path | None = typer.Option(None, "--csv", hidden=True, help="old spelling of -f csv -o FILE"),
    md_out: Path | None = typer.Option(None, "--markdown", hidden=True, help="old spelling of -f markdown -o FILE"),
    reports: Path | None = typer.Option(None, "--reports", help=REPORTS_HELP),
    timeout: float = typer.Option(900.0, "--timeout", help="seconds before a point is killed"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no table, no progress bar"),
    strict: bool = typer.Option(False, "--strict", help="exit 1 if any point did not run or gave a wrong result "
                                                        "(CI); with --ab --fail-if-slower, an inconclusive case "
                                                        "beyond the limit fails too"),
    label: str | None = typer.Option(None, "--label",
                                     help="NAME: the run's name (profctl runs, show); with one backend also its "
                                          "rows' name, so `profctl compare` pairs them with another run's rows of "
                                          "that name; BACKEND=NAME,...: names rows per backend"),
    ab: str | None = typer.Option(None, "--ab", help="A,B: time two backends or file.py:fn functions in alternating "
                                                     "rounds in one process; say whether B is faster or slower "
                                                     "than A, with an interval"),
    ab_env: str | None = typer.Option(None, "--ab-env", help="'VAR=x|VAR=y': the one --backend under two "
                                                             "environment settings, alternating in one process "
                                                             "(settings the function reads at call time)"),
    rounds: int = typer.Option(20, "--rounds", help="--ab: rounds, each timing --iters iterations of A and of B"),
    fail_if_slower: str | None = typer.Option(None, "--fail-if-slower",
                                              help="--ab: exit 1 when B is slower than A by more than this "
                                                   "(e.g. 5%; 2x or 100%: twice as slow) with confidence (CI)"),
    threshold: str | None = typer.Option(None, "--threshold", help="--ab: changes smaller than this count as "
                                                                   "unchanged [default: 2%; 10% on a CPU]"),
    processes: int | None = typer.Option(None, "--processes", help="time every point in N fresh processes, one "
                                                                   "after another: the row is their middle, and "
                                                                   "`profctl compare` takes each as a run (a "
                                                                   "process keeps its speed for its life) "
                                                                   "[default: 3 on a CPU, 1 on a GPU]"),
    executor: Any = None,  # from @executor_options (--workers, --gpus, --cluster)
) -> None:
    """Benchmark attention backends over a sweep of shapes (every workload option takes a comma list); with --ab,
    two variants against each other, interleaved in one process."""
    from profctl.pipelines import bench_pipeline

    check_format(format, FORMATS)
    if ab is not None or ab_env is not None:
        if processes is not None:
            raise UsageError("--processes is for sweeps; --ab pairs A and B inside one process, round by round")
        return _bench_ab.run_ab(wl, ab=ab, ab_env=ab_env, rounds=rounds, threshold=threshold,
                                fail_if_slower=fail_if_slower, strict=strict, format=format, output=output,
                                reports=reports, timeout=timeout, quiet=quiet, label=label, executor=executor)
    _bench_ab.refuse_without_ab(fail_if_slower, threshold)
    for flag, p, fmt in (("--json", json_out, "json"), ("--csv", csv_out, "csv"), ("--markdown", md_out, "markdown")):
        if p is not None:
            note(f"note: {flag} FILE is now -f {fmt} -o FILE; the old spelling goes in 0.3")
    outputs: list[tuple[str, str, Path | None]] = [("--json", "json", json_out), ("--csv", "csv", csv_out),
                                                   ("--markdown", "markdown", md_out)]
    if output is not None or format != "table":
        outputs.append(("-o" if output is not None else "--format", format, output or Path("-")))
    check_outputs(*((flag, p) for flag, _, p in outputs))
    if timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {timeout:g}")
    validate_workload(wl)
    requested = list(wl.sweep.backends)
    req = bench_pipeline.BenchRequest(target=wl, baseline=None if baseline.lower() == "none" else baseline,
                                      reports=reports, point_timeout_s=timeout, command=command_line(), label=label,
                                      executor=executor, processes=processes)
    bench_pipeline.check(req)
    check_reports(reports)
    to_stdout = any(str(p) == "-" for _, _, p in outputs if p is not None)
    to_file = output is not None and str(output) != "-"  # (the old spellings --json FILE... kept their table)
    res = _run(bench_pipeline, req, show=not quiet and not to_stdout)
    # the rows went where -o said: standard output gets no table then, standard error the notes (what ran, where)
    _report(res, outputs, requested, show=not quiet and not to_stdout and not to_file, strict=strict)


def _run(pipeline: Any, req: Any, *, show: bool) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    con = console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=True, disable=not show or not con.is_terminal, console=con) as bar:
        task = bar.add_task("starting", total=None)

        def progress(p: Any) -> None:
            bar.update(task, total=p.total, completed=p.done, description=p.describe())

        return pipeline.run(req, on_progress=progress)


def _report(res: Any, outputs: list[tuple[str, str, Path | None]], requested: list[str], *, show: bool,
            strict: bool) -> None:
    from profctl.render import bench_view

    if show:
        bench_view.to_console(res)
    renderers = {"json": bench_view.to_json, "csv": bench_view.to_csv, "markdown": bench_view.to_markdown,
                 "table": bench_view.to_text}
    for _, fmt, path in outputs:
        if path is not None:
            emit(renderers[fmt](res), path)
    if not show:  # the table printed them; without it they still belong on stderr: -q never hides a problem
        for w in bench_view.warning_lines(res):
            warn(w)
        for kind, line in bench_view.problem_lines(res):
            note(f"{kind}: {line}")
    for line in bench_view.failure_lines(res):
        if not show or len(line) > 80:  # the table cuts a reason: the whole of it, once
            note(f"failed: {line}", fit=True)
    for line in bench_view.what_ran(res, requested):
        note(line, fit=True)
    note(f"run: {res.run_dir}")
    if res.interrupted:
        kept = f"{len(res.rows)} finished row(s) were kept in" if res.rows else "no point had finished; the run is"
        print(f"profctl: interrupted; {kept} {res.run_dir}", file=sys.stderr)
        raise typer.Exit(130)
    failed = [r for r in res.rows if not r.ok]  # res.failed_cases, as bench rows
    wrong = [r for r in res.rows if r.ok and r.check == "fail"]
    if (res.rows and len(failed) == len(res.rows)) or (strict and failed):
        r = failed[0]
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        what = " ".join(x for x in (r.backend, r.shape_label(), r.pass_) if x)
        raise ProfctlError(f"{'no point ran' if len(failed) == len(res.rows) else 'a point failed'}: "
                           f"{what}: {r.status}: {r.reason}{more}")
    if strict and wrong:
        r = wrong[0]
        more = f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
        raise ProfctlError(f"--strict: a wrong result: {r.backend} {r.shape_label()}: the output does not match "
                           f"the float64 reference{more}")
