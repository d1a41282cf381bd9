"""`profctl report` outputs beyond the summary and the comparison: a seed's table layout from bench rows
(``--table NAME``: profctl.analysis.seed_tables, drawn by profctl.render.seed_tables_view) and a timeline for
Perfetto or chrome://tracing (``-f perfetto``: profctl.render.perfetto). Each refuses the options that do not
apply to it before anything is read."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import IO, Any

from profctl.cli._command import conflict, given, typed_flags
from profctl.cli._messages import note
from profctl.cli._output import check_outputs, emit
from profctl.errors import NothingMatched, UsageError
from profctl.fsutil import atomic_open
from profctl.render.tables import text_console

#: --table's help (the names are profctl.analysis.seed_tables.PRESETS, which `--help` does not import)
TABLE_HELP = ("lay bench rows out as a table (named after the design document, seed NNN, whose table it reproduces): "
              "seed-004-forward (ms, a row per sequence length, a column per backend, best speedup), "
              "seed-004-time-per-token (us per token, a row per backend, a column per sequence length), "
              "seed-004-memory-per-token (MiB per token, the same), "
              "seed-002-batch (ms, speedup and efficiency, a row per batch size), "
              "seed-003-torch-triton (forward, backward and total ms of torch and Triton and their speedups, a row "
              "per seq_len x d_model x precision); in table, markdown, csv, json or html")
#: options of `profctl report` that a seed table or a timeline does not use (parameter names)
_NOT_FOR_TABLE = ("by_range", "kernel", "shape", "pivot", "range_")
_NOT_FOR_TIMELINE = ("by_range", "kernel", "shape", "pivot", "tokens", "baseline", "gpu", "title", "limit", "table")


def _refuse(params: tuple[str, ...], what: str, view: str) -> None:
    for p in params:
        if given(p):
            flag = typed_flags().get(p, "--" + p.rstrip("_").replace("_", "-"))
            raise conflict(flag, what, f"{flag} does not apply to {what}")
    if view not in ("auto", "compare"):
        raise conflict(f"--view {view}", what, f"{what} is a view of its own")


def other_view(paths: list[Path], *, format: str, table: str | None, range_: str | None, **kw: Any) -> None:
    """-f perfetto (a timeline), else --table NAME (a seed's table); --range without -f perfetto is refused."""
    if format == "perfetto":
        timeline(paths, output=kw["output"], reports=kw["reports"], range_=range_, view=kw["view"])
    elif range_ is not None:
        raise conflict("--range", f"--format {format}", "--range picks the window of a timeline: add -f perfetto")
    elif table is not None:
        seed_table(paths, table, format=format, **kw)


def seed_table(paths: list[Path], name: str, *, format: str, limit: int, output: Path | None,
               reports: Path | None, baseline: str, gpu: str | None, title: str | None, tokens: int | None,
               view: str) -> None:
    """--table NAME: the seed's layout of the bench rows the inputs hold."""
    from profctl.analysis import seed_tables
    from profctl.render import seed_tables_view

    _refuse(_NOT_FOR_TABLE, f"--table {name}", view)
    if name not in seed_tables.PRESETS:
        raise UsageError(f"--table {name!r}: choose from {', '.join(seed_tables.PRESETS)}")
    if format not in seed_tables_view.FORMATS:
        raise conflict(f"--format {format}", "--table", f"a table is written as {', '.join(seed_tables_view.FORMATS)}")
    if title is not None and format != "html":
        raise conflict("--title", f"--format {format}", "--title names the HTML page; add --format html")
    check_outputs(("-o", output))
    from profctl import inputs as resolver

    rows: list[Any] = []
    device = gpu
    for i in resolver.resolve_all(paths, root=reports):
        if i.kind != "bench-json":
            note(f"note: {i.path}: {i.what} left out: --table lays out bench rows (profctl bench -f json)")
            continue
        rows += resolver.read_rows(i)
        device = device or resolver.device_of(i)
    if not rows:
        raise NothingMatched(f"--table {name}: no bench rows in {', '.join(map(str, paths))} (profctl bench -f json "
                        "-o rows.json writes them)")
    if tokens is not None:
        rows = [r for r in rows if (r.batch or 0) * (r.seqlen_q or 0) == tokens]
    t = seed_tables.build(name, rows, baseline="eager" if baseline == "none" else baseline, device=device)
    if format == "csv":
        emit(seed_tables_view.to_csv(t), output)
    elif format == "json":
        emit(seed_tables_view.to_json(t), output)
    elif format == "markdown":
        emit(seed_tables_view.to_markdown(t, limit or None), output)
    elif format == "html":
        emit(seed_tables_view.to_html(t, title, limit or None), output)
    elif output is not None:
        con, buf = text_console()
        seed_tables_view.to_console(t, con, limit or None)
        emit(buf.getvalue(), output)
    else:
        seed_tables_view.to_console(t, limit=limit or None)


def timeline(paths: list[Path], *, output: Path | None, reports: Path | None, range_: str | None,
             view: str) -> None:
    """-f perfetto: the Trace Event Format JSON of one nsys export or torch trace, streamed to `output`
    (atomically; gzip when it ends in .gz) or standard output."""
    from profctl import inputs as resolver
    from profctl.render import perfetto

    _refuse(_NOT_FOR_TIMELINE, "--format perfetto", view)
    check_outputs(("-o", output))
    inputs = resolver.resolve_all(paths, root=reports)
    timed = [i for i in inputs if i.tool in ("nsys", "torch")]
    for i in inputs:
        if i not in timed:
            note(f"note: {i.path}: {i.what}, no timeline: left out of the trace")
    if len(timed) != 1:
        found = ", ".join(str(i.path) for i in timed) or "none"
        raise UsageError(f"--format perfetto writes one timeline: give one nsys export (.sqlite, .nsys-rep) or "
                         f"torch trace (nsys exports and torch traces found: {found})")

    def sink() -> contextlib.AbstractContextManager[IO[str]]:
        if output is None or str(output) == "-":
            return contextlib.nullcontext(sys.stdout)
        return atomic_open(output)

    counts = perfetto.export(timed[0], sink, range_=range_)
    where = "" if output is None or str(output) == "-" else f"{output}: "
    note(f"{where}{counts.describe()}; open it in ui.perfetto.dev or chrome://tracing")
