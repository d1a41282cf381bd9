"""`profctl report PATH...`: read reports any program produced and print the unified summary, or -- given bench
rows, run directories, several tools' reports or ``--format html`` -- the comparison of backends across tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from profctl.cli._command import conflict, given, typed_flags
from profctl.cli._executors import by_gpu_option
from profctl.cli._guard import guard
from profctl.cli._messages import note, warn
from profctl.cli._output import check_format, check_limit, check_outputs, emit, emit_summary
from profctl.cli._report_more import TABLE_HELP, other_view
from profctl.cli._report_source import source_view
from profctl.cli._timelines import timelines_first
from profctl.cli._workload_options import REPORTS_HELP
from profctl.errors import UsageError
from profctl.render.tables import console, display_path, markdown, print_table, text_console

if TYPE_CHECKING:
    from profctl.schema.bench import BenchRow

FORMATS = ("table", "markdown", "csv", "json", "html", "perfetto")


@guard
@by_gpu_option
@timelines_first
def report(
    paths: list[Path] = typer.Argument(..., help="nsys .sqlite/.nsys-rep, ncu .ncu-rep/.csv, torch trace .json[.gz], "
                                                 "Proton .chrome_trace/.hatchet, "
                                                 "profctl bench rows (.json), run directories (reports/<run-id>/), a "
                                                 "directory of them, or a run id / 'latest'"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown, csv, json, html or perfetto"),
    by_range: bool = typer.Option(False, "--by-range", help="break kernels down per NVTX range (summary view)"),
    limit: int = typer.Option(0, "--limit", help="show at most N rows per table (table, markdown, html) [default: "
                                                 "all]"),
    output: Path | None = typer.Option(None, "--output", "-o", help="write to this file (atomically)"),
    view: str = typer.Option("auto", "--view",
                             help="summary (per-kernel, one list), compare (backends across tools), source (hot "
                                  "source lines of .ncu-rep kernels), stalls (their warp-stall breakdown) or auto: "
                                  "compare for html, bench rows, run directories or reports of several tools"),
    kernel: str | None = typer.Option(None, "--kernel", "-k",
                                      help="regex: only these kernels (name or NVTX path; source and stalls views)"),
    baseline: str = typer.Option("eager", "--baseline", help="backend speedups are against (compare view)"),
    shape: str | None = typer.Option(None, "--shape",
                                     help="shape key for inputs that name none, e.g. "
                                          "b4,sq2048,skv2048,h16,kv16,d128,bf16,causal,bhsd"),
    gpu: str | None = typer.Option(None, "--gpu", help="GPU model for the peak table when the inputs do not say"),
    title: str | None = typer.Option(None, "--title", help="title of the HTML page"),
    pivot: str | None = typer.Option(None, "--pivot",
                                     help="comma list of ms, tflops, speedup, memory, pct_peak: one row per shape "
                                          "and pass, a column per backend (the published-table layout; table, "
                                          "markdown, csv)"),
    tokens: int | None = typer.Option(None, "--tokens",
                                      help="keep bench rows with batch x seqlen_q = N (strong scaling: fixed tokens)"),
    reports: Path | None = typer.Option(None, "--reports", help=REPORTS_HELP + " (where run ids are looked up)"),
    table: str | None = typer.Option(None, "--table", help=TABLE_HELP),
    range_: str | None = typer.Option(None, "--range", help="-f perfetto: only the window of this NVTX or "
                                                            "record_function range (NAME or DOMAIN@NAME)"),
) -> None:
    """Read reports and print one per-kernel summary, or compare backends across tools (tables, plots, HTML)."""
    check_format(format, FORMATS)
    if baseline != "none":
        from profctl.spec import BUILTIN_BACKENDS, canonical_backend, is_function_ref

        baseline = canonical_backend(baseline)
        if baseline not in BUILTIN_BACKENDS and not is_function_ref(baseline):
            raise UsageError(f"--baseline {baseline!r}: choose from {', '.join(BUILTIN_BACKENDS)} or 'none'")
    if view not in ("auto", "summary", "compare", "source", "stalls"):
        raise UsageError(f"--view {view!r}: choose auto, summary, compare, source or stalls")
    check_limit(limit, format)
    if format == "perfetto" or table is not None or range_ is not None:
        return other_view(paths, format=format, table=table, range_=range_, limit=limit, output=output,
                          reports=reports, baseline=baseline, gpu=gpu, title=title, tokens=tokens, view=view)
    if view in ("source", "stalls"):
        _deep_view(paths, view, format=format, limit=limit, output=output, reports=reports, kernel=kernel,
                   title=title)
        return
    if kernel is not None:
        raise conflict("--kernel", f"--view {view}", "--kernel picks kernels for --view source or stalls")
    fields = _check_options(format, view, pivot, tokens, title, shape, limit)
    check_outputs(("-o", output))
    from profctl import inputs as resolver

    inputs = resolver.resolve_all(paths, root=reports)
    tools = {i.tool for i in inputs}
    auto = format == "html" or pivot is not None or "bench" in tools or any(p.is_dir() for p in paths) \
        or len(tools - {"bench"}) > 1
    compare_view = view == "compare" or (view == "auto" and auto)
    if not compare_view:
        if "bench" in tools:
            raise UsageError("bench rows have no per-kernel summary; use --view compare (or auto)")
        for opt in ("baseline", "gpu"):
            if given(opt):
                flag = typed_flags().get(opt, f"--{opt}")
                raise conflict(flag, "--view summary" if view == "summary" else "this input (one report of one "
                               "tool: the per-kernel summary)", f"{flag} applies to the comparison view; give "
                               "--view compare")
        _summary(inputs, format, by_range=by_range, limit=limit, output=output, title=title)
        return
    if given("by_range"):
        why = "--view compare" if view == "compare" else f"these inputs ({_why_compare(format, pivot, tools, paths)})"
        raise conflict("--by-range", why, "--by-range breaks the per-kernel summary down per NVTX range; the "
                       "comparison view is per backend, pass and shape already (add --view summary for the "
                       "summary)")
    _compare(inputs, format, limit=limit, output=output, baseline=baseline, shape=shape, gpu=gpu, title=title,
             pivot=fields, tokens=tokens)


def _deep_view(paths: list[Path], view: str, **kw: Any) -> None:
    """--view source|stalls: refuse the options of the other views, then print (profctl.cli._report_source)."""
    for opt in ("by_range", "baseline", "gpu", "pivot", "tokens", "shape"):
        if given(opt):
            flag = typed_flags().get(opt, f"--{opt.replace('_', '-')}")
            raise conflict(flag, f"--view {view}", f"{flag} applies to the summary or comparison views")
    check_outputs(("-o", kw["output"]))
    source_view(paths, view, **kw)


def _check_options(format: str, view: str, pivot: str | None, tokens: int | None, title: str | None,
                   shape: str | None, limit: int) -> list[str]:
    """Option values and combinations that cannot work, refused before any report is read; the --pivot fields."""
    if shape is not None:
        from profctl.shapes import Shape

        try:
            Shape.parse(shape)
        except ValueError as e:
            raise UsageError(f"--shape: {e}") from None
    fields: list[str] = []
    if pivot is not None:
        from profctl.render.backend_table_view import PIVOT_FIELDS
        from profctl.spec import comma_items

        fields = comma_items(pivot, "--pivot")
        bad = [f for f in fields if f not in PIVOT_FIELDS]
        if bad or not fields:
            raise UsageError(f"--pivot {pivot!r}: choose from {', '.join(PIVOT_FIELDS)}")
        if format in ("json", "html"):
            raise conflict("--pivot", f"--format {format}", "--pivot makes a table: use --format table, markdown "
                           "or csv")
    if tokens is not None and tokens <= 0:
        raise UsageError(f"--tokens must be positive, got {tokens}")
    if view == "summary":
        for opt, val in (("--pivot", pivot), ("--tokens", tokens), ("--shape", shape)):
            if val is not None:
                raise conflict(opt, "--view summary", f"{opt} applies to the comparison view")
    if title is not None and format != "html":
        raise conflict("--title", f"--format {format}", "--title names the HTML page; add --format html")
    return fields


def _why_compare(format: str, pivot: str | None, tools: set[str], paths: list[Path]) -> str:
    if format == "html":
        return "--format html"
    if pivot is not None:
        return "--pivot"
    if "bench" in tools:
        return "bench rows"
    if any(p.is_dir() for p in paths):
        return "a run directory"
    return "reports of several tools"


def _summary(inputs: list[Any], format: str, *, by_range: bool, limit: int, output: Path | None,
             title: str | None = None) -> None:
    from profctl import inputs as resolver
    from profctl.render import summary_view
    from profctl.schema import concat

    summaries = [resolver.read_summary(i, by_range=by_range) for i in inputs]
    for s in summaries:
        for n in s.meta.get("notes", []):
            note(f"note: {n}")
        for w in s.warnings:
            if w not in s.meta.get("notes", []):  # said once, as a note
                warn(w)
    one = concat(summaries)
    if format == "html":  # the summary as a page: its plots, kernels (or CPU ops) and ranges
        emit(summary_view.to_html(one, title, limit or 200), output)
    else:
        emit_summary(one, format, output, limit=limit or None)


def _compare(inputs: list[Any], format: str, *, limit: int, output: Path | None, baseline: str,
             shape: str | None, gpu: str | None, title: str | None, pivot: list[str] | None = None,
             tokens: int | None = None) -> None:
    """The comparison of backends, with the model tables and the summaries of reports that name no backend
    (a user's program) beside it: every mix of inputs gets every part it holds (render.report)."""
    from profctl import inputs as resolver
    from profctl.render import report_view

    summaries: list[tuple[Any, Any]] = []
    rows: list[BenchRow] = []
    device = gpu
    for i in inputs:
        if i.kind == "bench-json":
            for r in resolver.read_rows(i):
                r.source = str(i.path)
                rows.append(r)
            device = device or resolver.device_of(i)
        else:
            summaries.append((i, resolver.read_for_join(i)))
    models = [r for r in rows if r.is_model]
    rows = [r for r in rows if not r.is_model]
    if models and not rows and not summaries and not pivot and tokens is None:
        _models(models, format, output, title)
        return
    if tokens is not None:
        rows = [r for r in rows if (r.batch or 0) * (r.seqlen_q or 0) == tokens]
        if not rows:
            raise UsageError(f"--tokens {tokens}: no bench row of the attention workload has batch x seqlen_q = "
                             f"{tokens}")
    named = {resolver.device_of(i) for i in inputs} - {None}
    if gpu and named and named != {gpu}:
        note(f"note: --gpu {gpu} is used for the peak figures; the inputs name {', '.join(sorted(map(str, named)))}")
    parts = _join(summaries, rows, device=device, shape=shape, baseline=baseline)
    parts.models = models
    if models:
        from profctl.render.bench_view import noise_lines

        for w in noise_lines(models):
            warn(w)
    if pivot:
        _pivot(parts, pivot, format, output)
        return
    if parts.table is None:
        what = ", ".join(t for t, _ in parts.summaries) or "model rows"
        note(f"note: no backend of profctl's attention workload in these inputs; shown as they are: {what}")
    if format == "html":
        emit(report_view.to_html(parts, title, limit or None), output)
    elif format == "json":
        emit(report_view.to_json(parts), output)
    elif format == "csv":
        emit(report_view.to_csv(parts), output)
    elif format == "markdown":
        emit(report_view.to_markdown(parts, limit or None), output)
    else:
        con, buf = text_console() if output is not None else (console(240), None)
        report_view.to_console(parts, con, limit or None)
        if buf is not None:
            emit(buf.getvalue(), output)


def _join(summaries: list[tuple[Any, Any]], rows: list[BenchRow], *, device: str | None, shape: str | None,
          baseline: str) -> Any:
    """The comparison of the inputs (None when it has no row), and the summaries none of whose kernels it
    placed (a user's program, a report without profctl's ranges), titled for their own section."""
    from profctl.analysis import backend_table, crosstool
    from profctl.render.report_view import ReportParts

    view = crosstool.join([s for _, s in summaries], rows, device=device, shape=shape)
    c = backend_table.build(view, baseline=None if baseline == "none" else baseline, device=device)
    if given("baseline") and baseline != "none" and c.baseline != baseline and c.rows:
        c.notes.insert(0, f"--baseline {baseline}: no row of {baseline} in these inputs; speedups are against "
                          f"{c.baseline or 'nothing'}")
    placed = {str(src.get("path")): int(src.get("kernels_placed") or 0) for src in view.sources}
    apart = [(i, s) for i, s in summaries if not any(placed.get(x.path, 0) for x in s.sources)]
    if c.rows and apart:  # the comparison's notes about what it could not place are said by the sections
        c.notes[:] = [n for n in c.notes if not any(x.tool in n and "could not" in n for _, s in apart
                                                    for x in s.sources)]
    return ReportParts(table=c if c.rows else None, view=view if c.rows else None,
                       summaries=[(_title(i, s), s) for i, s in apart])


def _title(inp: Any, s: Any) -> str:
    """A summary's section title: the program it profiled (from its run's manifest), else its file."""
    from profctl import run_store

    tool = s.sources[0].tool if s.sources else inp.tool
    where = display_path(inp.path)
    if inp.run_dir is not None:
        try:
            prog = (run_store.read_manifest(inp.run_dir).get("program") or {}).get("argv")
        except Exception:
            prog = None
        if isinstance(prog, list) and prog:
            return f"Your program: {' '.join(map(str, prog))} ({tool}, {where})"
    return f"{tool} summary: {where}"


def _pivot(parts: Any, pivot: list[str], format: str, output: Path | None) -> None:
    from profctl.render import backend_table_view

    if parts.table is None:
        raise UsageError("--pivot lays out the comparison of backends, and these inputs hold none (no bench row "
                         "or profile of profctl's attention workload)")
    if parts.models or parts.summaries:
        note("note: --pivot shows the comparison of backends only; the model rows and summaries of these inputs "
             "are left out")
    prow = backend_table_view.pivot_rows(parts.table, pivot)
    if format == "csv":
        emit(backend_table_view.pivot_csv(prow), output)
    elif format == "markdown":
        emit(markdown(prow), output)
    else:
        con, buf = text_console() if output is not None else (console(240), None)
        print_table(con, "profctl report --pivot " + ",".join(pivot), prow)
        if buf is not None:
            emit(buf.getvalue(), output)


def _models(rows: list[BenchRow], format: str, output: Path | None, title: str | None) -> None:
    """Model bench rows: the seeds' tables (step time, MFU, memory against context, tokens/s, samples/s)."""
    from profctl.pipelines.bench_pipeline import add_noise_warnings
    from profctl.render import model_tables_view
    from profctl.render.bench_view import noise_lines

    add_noise_warnings(rows)  # rows recorded before profctl flagged them get the same check
    for w in noise_lines(rows):
        warn(w)
    if format == "html":
        emit(model_tables_view.to_html(rows, title), output)
    elif format == "json":
        from profctl.analysis.model_tables import tables

        emit(json.dumps([{"title": t, "rows": r} for t, r in tables(rows)], indent=1) + "\n", output)
    elif format == "csv":
        emit(model_tables_view.to_csv(rows), output)
    elif format == "markdown" or output:
        emit(model_tables_view.to_markdown(rows), output)
    else:
        model_tables_view.to_console(rows)
