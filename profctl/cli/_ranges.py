"""`profctl explain RUN --range NAME [--vs NAME2 | RUN2]`: why a range of an nsys or torch.profiler timeline takes
its time (profctl.analysis.range_explain, drawn by profctl.render.range_view)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from profctl.cli._output import check_format, check_outputs, emit
from profctl.errors import BadReport, ProfctlError, UsageError

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


def same_program_ncu(ref: str, reports: Path | None) -> Path | None:
    """The .ncu-rep of the store's latest finished ncu run of the program the run `ref` profiled (same argv and
    working directory); None for a loose file or when there is none."""
    from profctl import inputs, run_store

    try:
        found = inputs.resolve(ref, root=reports)
    except ProfctlError:
        return None
    run_dir = next((i.run_dir for i in found if i.run_dir is not None), None)
    if run_dir is None:
        return None
    m = run_store.read_manifest(run_dir)
    prog = run_store.Manifest.from_dict(m).program
    if not prog:
        return None
    cwd = (m.get("program") or {}).get("cwd")
    for r in reversed(run_store.list_runs(reports if reports is not None else run_dir.parent)):
        mm = run_store.Manifest.from_dict(r.manifest)
        if (mm.kind != "ncu" or r.status not in ("complete", "partial") or mm.program != prog
                or (r.manifest.get("program") or {}).get("cwd") != cwd):
            continue
        reps = [i.path for i in inputs.run_inputs(r.path) if i.kind == "ncu-rep"]
        if reps:
            return Path(reps[0])
    return None


def kernel_profiles(ncu: str, names: list[str], reports: Path | None) -> list[Any]:
    """The launches of the ncu report `ncu` whose base names the range's kernels have, read in depth."""
    from profctl import inputs
    from profctl.kernels import base_name

    pats = sorted({re.escape(base_name(n)) for n in names if not n.startswith("[")})
    return inputs.read_profiles(ncu, root=reports, kernels=pats or ["(?!)"])


def explain_range(report: str, name: str, *, vs: str | None = None, report2: str | None = None,
                  ncu: str | None = None, reports: Path | None = None) -> Any:
    """The range's explanation, or the pair's (B: range `vs` of the same report, or `name` in `report2`); with
    `ncu` (else the store's ncu run of the same program, if any) each kernel's verdict and floor."""
    from profctl.analysis import range_explain, range_kernels
    from profctl.readers import range_timeline

    def one(ref: str, query: str) -> range_explain.RangeExplanation:
        f = timeline_file(ref, reports)
        names = range_timeline.read(f, names=[]).range_names()
        full = range_explain.match_name(names, query)
        ex = range_explain.explain(range_timeline.read(f, names=[full]), full)
        rep = ncu if ncu is not None else same_program_ncu(ref, reports)
        if rep is not None:
            range_kernels.attach(ex, kernel_profiles(str(rep), [n for n, *_ in ex.configs], reports), str(rep))
            if ncu is None:
                ex.notes.append(f"the ncu report is the store's run of the same program: {rep}")
        return ex

    a = one(report, name)
    if vs is None and report2 is None:
        return a
    b = one(report2 or report, vs or name)
    if b.name == a.name and report2 is None:
        raise UsageError(f"--range {name!r} and --vs {vs!r} pick the same range ({a.name})")
    return range_explain.compare(a, b)


def explain_range_view(report: str, report2: str | None, name: str, *, vs: str | None, ncu: str | None = None,
                       format: str, output: Path | None, reports: Path | None) -> None:
    from profctl.analysis.range_explain import RangePair
    from profctl.render import range_view

    check_format(format, ("table", "markdown", "json"))
    check_outputs(("-o", output))
    x = explain_range(report, name, vs=vs, report2=report2, ncu=ncu, reports=reports)
    if isinstance(x, RangePair):
        emit(range_view.pair_json(x) if format == "json" else range_view.pair_text(x), output)
    elif format == "json":
        emit(range_view.to_json(x), output)
    else:
        emit(range_view.to_markdown(x) if format == "markdown" else range_view.to_text(x), output)
