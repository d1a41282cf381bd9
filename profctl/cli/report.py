"""`profctl report PATH...`: read reports any program produced and print the unified summary, or -- given bench
rows, run directories, several tools' reports or ``--format html`` -- the comparison of backends across tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from profctl.cli._common import emit, guard, note
from profctl.cli._executors import by_gpu_option


@guard
@by_gpu_option
def report(
    paths: list[Path] = typer.Argument(..., help="nsys .sqlite/.nsys-rep, ncu .ncu-rep/.csv, torch trace .json[.gz], "
                                                 "profctl bench --json files, run directories (reports/<run-id>/) "
                                                 "or a directory of them"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown, csv, json or html"),
    by_range: bool = typer.Option(False, "--by-range", help="break kernels down per NVTX range (summary view)"),
    limit: int = typer.Option(0, "--limit", help="show only the N kernels with most total time (table/markdown)"),
    output: Path | None = typer.Option(None, "--output", "-o", help="write to this file (atomically)"),
    view: str = typer.Option("auto", "--view",
                             help="summary (per-kernel, one list), compare (backends across tools) or auto: compare "
                                  "for html, bench rows, run directories or reports of several tools"),
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
) -> None:
    """Read reports and print one per-kernel summary, or compare backends across tools (tables, plots, HTML)."""
    from profctl.errors import UsageError

    formats = ("table", "markdown", "csv", "json", "html")
    if format not in formats:
        raise UsageError(f"unknown format {format!r}; choose from {', '.join(formats)}")
    if view not in ("auto", "summary", "compare"):
        raise UsageError(f"--view {view!r}: choose auto, summary or compare")
    if limit < 0:
        raise UsageError(f"--limit must be >= 0, got {limit}")
    if shape is not None:
        from profctl.shapes import Shape

        try:
            Shape.parse(shape)
        except ValueError as e:
            raise UsageError(f"--shape: {e}") from None
    fields: list[str] = []
    if pivot is not None:
        from profctl.render.backend_table import PIVOT_FIELDS

        fields = [f.strip() for f in pivot.split(",") if f.strip()]
        bad = [f for f in fields if f not in PIVOT_FIELDS]
        if bad or not fields:
            raise UsageError(f"--pivot {pivot!r}: choose from {', '.join(PIVOT_FIELDS)}")
        if format in ("json", "html"):
            raise UsageError("--pivot makes a table: use --format table, markdown or csv")
    if tokens is not None and tokens <= 0:
        raise UsageError(f"--tokens must be positive, got {tokens}")
    from profctl import inputs as resolver

    inputs = resolver.resolve_all(paths)
    tools = {i.tool for i in inputs}
    compare_view = view == "compare" or (view == "auto" and (
        format == "html" or pivot is not None or "bench" in tools or any(p.is_dir() for p in paths)
        or len(tools - {"bench"}) > 1))
    if not compare_view:
        if format == "html":
            raise UsageError("--format html is the comparison view; drop --view summary")
        if "bench" in tools:
            raise UsageError("bench rows have no per-kernel summary; use --view compare (or auto)")
        _summary(inputs, format, by_range=by_range, limit=limit, output=output)
        return
    _compare(inputs, format, limit=limit, output=output, baseline=baseline, shape=shape, gpu=gpu, title=title,
             pivot=fields, tokens=tokens)


def _summary(inputs: list[Any], format: str, *, by_range: bool, limit: int, output: Path | None) -> None:
    from profctl import inputs as resolver
    from profctl.render.summary import render
    from profctl.schema import concat

    summaries = [resolver.read_summary(i, by_range=by_range) for i in inputs]
    for s in summaries:
        for n in s.meta.get("notes", []):
            note(f"note: {n}")
    text = render(concat(summaries), format, limit=limit or None)
    if text is not None:
        emit(text, output)


def _compare(inputs: list[Any], format: str, *, limit: int, output: Path | None, baseline: str,
             shape: str | None, gpu: str | None, title: str | None, pivot: list[str] | None = None,
             tokens: int | None = None) -> None:
    from profctl import inputs as resolver
    from profctl.analysis import backend_table, crosstool
    from profctl.render import backend_table as rc

    summaries = []
    rows: list[dict[str, Any]] = []
    device = gpu
    for i in inputs:
        if i.kind == "bench-json":
            rows += [dict(r, _source=str(i.path)) for r in resolver.read_rows(i)]
            device = device or resolver.device_of(i)
        else:
            summaries.append(resolver.read_for_join(i))
    if tokens is not None:
        rows = [r for r in rows if r["batch"] * r["seqlen_q"] == tokens]
        if not rows:
            from profctl.errors import UsageError

            raise UsageError(f"--tokens {tokens}: no bench row has batch x seqlen_q = {tokens}")
    view = crosstool.join(summaries, rows, device=device, shape=shape)
    c = backend_table.build(view, baseline=None if baseline == "none" else baseline, device=device)
    if pivot:
        prow = rc.pivot_rows(c, pivot)
        if format == "csv":
            emit(rc.pivot_csv(prow), output)
        elif format == "markdown" or output:
            from profctl.render.tables import markdown

            emit(markdown(prow), output)
        else:
            from rich.console import Console

            from profctl.render.tables import rich_table

            Console(width=240).print(rich_table("profctl report --pivot " + ",".join(pivot), prow))
        return
    if format == "html":
        from profctl.render import html

        emit(html.render(c, view, title=title), output)
    elif format == "json":
        emit(rc.to_json(c, view), output)
    elif format == "csv":
        emit(rc.to_csv(c), output)
    elif format == "markdown" or output:
        emit(rc.to_markdown(c, view, limit or None), output)
    else:
        rc.print_table(c, view, limit or None)
