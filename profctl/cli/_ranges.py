"""`profctl explain RUN --range NAME [--vs NAME2 | RUN2]`: why a range of an nsys or torch.profiler timeline takes
its time (profctl.analysis.range_explain, drawn by profctl.render.range_view)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profctl.cli._output import check_format, check_outputs, emit
from profctl.errors import BadReport, UsageError

TIMELINE_KINDS = ("nsys-sqlite", "torch-trace")


def timeline_file(ref: str, reports: Path | None) -> Path:
    """The nsys SQLite export or torch trace `ref` names (a file, a run directory, a run id)."""
    from profctl import inputs

    found = [i for i in inputs.resolve(ref, root=reports) if i.kind in TIMELINE_KINDS]
    if found:
        return Path(found[0].path)
    p = Path(ref)
    if p.is_file() and p.name.endswith((".nsys-rep", ".qdrep")):
        for cand in (p.with_suffix(".sqlite"), p.with_suffix(".sqlite.gz"), p.with_suffix(".sqlite.xz")):
            if cand.is_file():
                return cand
        raise BadReport(f"{p}: explain --range reads the SQLite export: nsys export --type sqlite {p}")
    raise BadReport(f"{ref}: no nsys SQLite export nor torch.profiler trace there (explain --range reads those)")


def explain_range(report: str, name: str, *, vs: str | None = None, report2: str | None = None,
                  reports: Path | None = None) -> Any:
    """The range's explanation, or the pair's (B: range `vs` of the same report, or `name` in `report2`)."""
    from profctl.analysis import range_explain
    from profctl.readers import range_timeline

    def one(ref: str, query: str) -> range_explain.RangeExplanation:
        f = timeline_file(ref, reports)
        names = range_timeline.read(f, names=[]).range_names()
        full = range_explain.match_name(names, query)
        return range_explain.explain(range_timeline.read(f, names=[full]), full)

    a = one(report, name)
    if vs is None and report2 is None:
        return a
    b = one(report2 or report, vs or name)
    if b.name == a.name and report2 is None:
        raise UsageError(f"--range {name!r} and --vs {vs!r} pick the same range ({a.name})")
    return range_explain.compare(a, b)


def explain_range_view(report: str, report2: str | None, name: str, *, vs: str | None, format: str,
                       output: Path | None, reports: Path | None) -> None:
    from profctl.analysis.range_explain import RangePair
    from profctl.render import range_view

    check_format(format, ("table", "markdown", "json"))
    check_outputs(("-o", output))
    x = explain_range(report, name, vs=vs, report2=report2, reports=reports)
    if isinstance(x, RangePair):
        emit(range_view.pair_json(x) if format == "json" else range_view.pair_text(x), output)
    elif format == "json":
        emit(range_view.to_json(x), output)
    else:
        emit(range_view.to_markdown(x) if format == "markdown" else range_view.to_text(x), output)
