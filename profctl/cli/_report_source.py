"""`profctl report R.ncu-rep --view source|stalls`: the hot source lines (or instructions) and the warp-stall
breakdown of each kernel of Nsight Compute reports, with ncu's findings beside them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profctl.cli._messages import note
from profctl.cli._output import emit
from profctl.errors import BadReport, UsageError
from profctl.render.tables import console, text_console

FORMATS = ("table", "markdown", "json", "html")
#: how --view source|stalls says what a report lacks
NO_SAMPLES = ("no warp-state samples (its kernels were profiled without ncu's SourceCounters and WarpStateStats "
              "sections): record with profctl ncu --recipe stalls (or explain), or ncu --section SourceCounters "
              "--section WarpStateStats --import-source yes (or --set full)")


def source_view(paths: list[Path], view: str, *, format: str, limit: int, output: Path | None,
                reports: Path | None, kernel: str | None, title: str | None) -> None:
    """Read the reports in depth, keep the kernels `kernel` picks, print the view."""
    from profctl import inputs
    from profctl.analysis import source

    if format not in FORMATS:
        raise UsageError(f"--format {format!r} with --view {view}: choose {', '.join(FORMATS)}")
    if kernel is not None:
        from profctl.analysis.select import pattern_of

        pattern_of(kernel, "--kernel")  # before reading: the reader reads only what it picks in depth
    profiles: list[Any] = []
    for p in paths:
        profiles += inputs.read_profiles(p, root=reports, kernels=None if kernel is None else [kernel])
    if kernel is not None:
        profiles = _pick(profiles, kernel, ", ".join(map(str, paths)))
    with_samples = [p for p in profiles if p.has_samples and p.pcs]
    if not with_samples:
        where = ", ".join(map(str, paths))
        raise BadReport(f"{where}: {NO_SAMPLES}")
    for p in profiles:
        if p not in with_samples:
            note(f"{p.base_name}: {NO_SAMPLES}")
    top = limit or 10
    views = [source.view(p, None) for p in with_samples]
    _render(views, view, format, top, output, title)


def _pick(profiles: list[Any], pattern: str, where: str) -> list[Any]:
    from profctl.analysis.select import matching

    return matching(profiles, pattern, where, "--kernel")


def _render(views: list[Any], view: str, format: str, top: int, output: Path | None, title: str | None) -> None:
    from profctl.render import source_view

    if format == "json":
        emit(source_view.to_json(views, view, top), output)
    elif format == "markdown":
        emit(source_view.to_markdown(views, view, top), output)
    elif format == "html":
        emit(source_view.to_html(views, view, title, top), output)
    else:
        con, buf = text_console() if output is not None else (console(), None)
        source_view.to_console(views, view, con, top)
        if buf is not None:
            emit(buf.getvalue(), output)
