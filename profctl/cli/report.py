"""`profctl report PATH...`: read reports any program produced and print the unified summary."""

from __future__ import annotations

from pathlib import Path

import typer

from profctl.cli._common import guard


@guard
def report(
    paths: list[Path] = typer.Argument(..., help="nsys .sqlite/.nsys-rep, ncu .ncu-rep/.csv, torch trace .json[.gz]"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown, csv or json"),
    by_range: bool = typer.Option(False, "--by-range", help="break kernels down per NVTX range"),
    limit: int = typer.Option(0, "--limit", help="show only the N kernels with most total time (table/markdown)"),
    output: Path | None = typer.Option(None, "--output", "-o", help="write to this file (atomically)"),
) -> None:
    """Read reports and print one per-kernel summary (kernels, NVTX ranges)."""
    from profctl import readers
    from profctl.errors import UsageError
    from profctl.fsutil import atomic_write_text
    from profctl.render.summary import FORMATS, render
    from profctl.schema import merge

    if format not in FORMATS:
        raise UsageError(f"unknown format {format!r}; choose from {', '.join(FORMATS)}")
    summary = merge(readers.read(p, by_range=by_range) for p in paths)
    text = render(summary, format, limit=limit or None)
    if text is not None:
        if output:
            atomic_write_text(output, text)
        else:
            print(text, end="" if text.endswith("\n") else "\n")
