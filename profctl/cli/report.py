"""`profctl report PATH...`: read reports any program produced and print the unified summary, or -- given bench
rows, run directories, several tools' reports or ``--format html`` -- the comparison of backends across tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from profctl.cli._common import guard

#: the files of a run directory profctl reads, per tool, in order of preference
RUN_FILES = (("bench", ("bench.json",)), ("nsys", ("profile.sqlite",)), ("ncu", ("profile.ncu-rep",)),
             ("torch", ("trace.json.gz",)))


@guard
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
        from profctl.merge import parse_shape_key

        try:
            parse_shape_key(shape)
        except ValueError as e:
            raise UsageError(f"--shape: {e}") from None
    fields: list[str] = []
    if pivot is not None:
        from profctl.render.comparison import PIVOT_FIELDS

        fields = [f.strip() for f in pivot.split(",") if f.strip()]
        bad = [f for f in fields if f not in PIVOT_FIELDS]
        if bad or not fields:
            raise UsageError(f"--pivot {pivot!r}: choose from {', '.join(PIVOT_FIELDS)}")
        if format in ("json", "html"):
            raise UsageError("--pivot makes a table: use --format table, markdown or csv")
    if tokens is not None and tokens <= 0:
        raise UsageError(f"--tokens must be positive, got {tokens}")
    inputs = collect(paths)
    tools = {t for t, _ in inputs}
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


def collect(paths: list[Path]) -> list[tuple[str, Path]]:
    """(tool, file) for every input: files as given (bench JSON recognised by content), run directories by the
    files profctl writes there, a directory of run directories by its children."""
    from profctl.errors import BadReport
    from profctl.merge import is_bench_json

    out: list[tuple[str, Path]] = []
    for p in paths:
        if p.is_dir():
            found = _run_dir(p)
            if not found:
                for child in sorted(c for c in p.iterdir() if c.is_dir()):
                    found += _run_dir(child)
            if not found:
                raise BadReport(f"{p}: a directory with no bench.json, profile.sqlite, profile.ncu-rep or "
                                "trace.json.gz (nor run directories holding them)")
            out += found
        elif not p.exists():
            raise BadReport(f"{p}: no such file")
        elif p.suffix in (".json", ".gz") and is_bench_json(p):
            out.append(("bench", p))
        else:
            from profctl.readers import sniff

            kind = sniff(p)
            out.append((_KIND_TOOL.get(kind, kind), p))
    return out


_KIND_TOOL = {"nsys-sqlite": "nsys", "nsys-rep": "nsys", "ncu-rep": "ncu", "ncu-csv": "ncu", "torch-trace": "torch",
              "summary-json": "summary"}


def _run_dir(d: Path) -> list[tuple[str, Path]]:
    found = []
    for tool, names in RUN_FILES:
        for n in names:
            if (d / n).is_file():
                found.append((f"run-{tool}", d / n) if tool != "bench" else ("bench", d / n))
                break
    return found


def _emit(text: str, output: Path | None) -> None:
    from profctl.fsutil import atomic_write_text

    if output:
        atomic_write_text(output, text)
    else:
        print(text, end="" if text.endswith("\n") else "\n")


def _summary(inputs: list[tuple[str, Path]], format: str, *, by_range: bool, limit: int,
             output: Path | None) -> None:
    from profctl import readers
    from profctl.render.summary import render
    from profctl.schema import merge

    summary = merge(readers.read(p, by_range=by_range) for _, p in inputs)
    text = render(summary, format, limit=limit or None)
    if text is not None:
        _emit(text, output)


def _read_for_compare(tool: str, p: Path) -> Any:
    """A Summary with per-range rows; for an nsys run directory per range path (profctl.merge.read_nsys_paths:
    measured iterations, per shape and pass); an ncu run directory's summary.json when its report cannot be read."""
    from profctl import readers
    from profctl.errors import BadReport

    if tool == "run-nsys":
        from profctl.merge import nsys_first_case, read_nsys_paths

        s = read_nsys_paths(p, first_case=nsys_first_case(p.parent))
        if s.kernels:
            return s
        return readers.read(p, by_range=True, window="profiler-api")  # not profctl's NVTX scheme
    if tool == "run-ncu":
        try:
            return readers.read(p, by_range=True)
        except BadReport:
            alt = p.parent / "summary.json"
            if alt.exists():
                return readers.read(alt)
            raise
    return readers.read(p, by_range=True)


def _device_from_manifest(p: Path) -> str | None:
    import json

    m = p.parent / "manifest.json"
    try:
        d = json.loads(m.read_text(encoding="utf-8")).get("device") or {}
    except (OSError, ValueError, AttributeError):
        return None
    return (d.get("name") or d.get("nvml_name")) if isinstance(d, dict) else None


def _compare(inputs: list[tuple[str, Path]], format: str, *, limit: int, output: Path | None, baseline: str,
             shape: str | None, gpu: str | None, title: str | None, pivot: list[str] | None = None,
             tokens: int | None = None) -> None:
    from profctl.derive import compare
    from profctl.merge import merge_view, read_bench
    from profctl.render import comparison as rc

    summaries = []
    rows: list[dict[str, Any]] = []
    device = gpu
    for tool, p in inputs:
        if tool == "bench":
            rows += [dict(r, _source=str(p)) for r in read_bench(p)]
            device = device or _device_from_manifest(p)
        else:
            summaries.append(_read_for_compare(tool, p))
    if tokens is not None:
        rows = [r for r in rows if r["batch"] * r["seqlen_q"] == tokens]
        if not rows:
            from profctl.errors import UsageError

            raise UsageError(f"--tokens {tokens}: no bench row has batch x seqlen_q = {tokens}")
    view = merge_view(summaries, rows, device=device, shape=shape)
    c = compare(view, baseline=None if baseline == "none" else baseline, device=device)
    if pivot:
        prow = rc.pivot_rows(c, pivot)
        if format == "csv":
            _emit(rc.pivot_csv(prow), output)
        elif format == "markdown" or output:
            from profctl.render.summary import markdown

            _emit(markdown(prow), output)
        else:
            from rich.console import Console

            from profctl.render.summary import rich_table

            Console(width=240).print(rich_table("profctl report --pivot " + ",".join(pivot), prow))
        return
    if format == "html":
        from profctl.render import html

        _emit(html.render(c, view, title=title), output)
    elif format == "json":
        _emit(rc.to_json(c, view), output)
    elif format == "csv":
        _emit(rc.to_csv(c), output)
    elif format == "markdown":
        _emit(rc.to_markdown(c, view, limit or None), output)
    else:
        if output:
            _emit(rc.to_markdown(c, view, limit or None), output)
        else:
            rc.print_table(c, view, limit or None)
