"""Proton timelines in ``profctl report`` and ``profctl explain``, and the output of ``profctl proton``: Proton
traces and trees (any origin, or runs of profctl proton) read into per-scope figures and rendered.

A run of profctl proton keeps its figures beside each trace (``<name>.timeline.json``): they are read instead of
the trace unless the trace changed or another CTA is asked for (``--cta``). What Proton said it dropped
(``<name>.drops.json``) and the SM clock the run saw come from there too; a trace from elsewhere has neither.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

from profctl.cli._command import conflict, given, typed_flags
from profctl.cli._messages import note, warn
from profctl.cli._output import check_outputs, emit
from profctl.errors import BadReport, UsageError
from profctl.fsutil import atomic_open
from profctl.render.tables import console, text_console

F = TypeVar("F", bound=Callable[..., Any])
#: options of profctl report that do not apply to a Proton timeline (parameter names)
_NOT_FOR_TIMELINES = ("by_range", "kernel", "baseline", "shape", "gpu", "pivot", "tokens", "table", "range_")

PROTON_KINDS = ("proton-trace", "proton-tree")
FORMATS = ("table", "markdown", "json", "html", "perfetto")


def proton_inputs(paths: list[Any], reports: Path | None) -> list[Any] | None:
    """The inputs when every one is Proton's (None when none is; UsageError for a mix: a timeline of scopes
    and kernel summaries do not join)."""
    from profctl import inputs as resolver

    found = resolver.resolve_all(paths, root=reports)
    proton = [i for i in found if i.kind in PROTON_KINDS]
    if not proton:
        return None
    if len(proton) != len(found):
        others = ", ".join(sorted({i.tool for i in found if i.kind not in PROTON_KINDS}))
        raise UsageError(f"these inputs mix Proton timelines with {others} reports: give them to profctl report "
                         "separately (a timeline of scopes inside kernels does not join a per-kernel summary)")
    return proton


def load(inp: Any, *, cta: int | None = None) -> Any:
    """The figures of one Proton input (profctl.analysis.timeline.TimelineReport)."""
    from profctl.analysis import timeline
    from profctl.readers import proton_trace, proton_tree

    p = Path(inp.path)
    cache = _cache(p)
    if cache is not None and cta is None:
        try:
            d = json.loads(cache.read_text(encoding="utf-8"))
            # figures kept before the per-tile view (no "tiles" key) are made again from the trace
            if d.get("tree") or all("tiles" in k for k in d.get("kernels", [])):
                rep = timeline.TimelineReport.from_dict(d)
                rep.source = str(p)
                return rep
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass  # an unreadable cache: the trace is read instead
    clock = _run_clock(p)
    if inp.kind == "proton-tree":
        return timeline.from_tree(proton_tree.read(p), clock_mhz=clock)
    drops = _drops(p)
    rep = timeline.analyze(proton_trace.read(p, drops=drops), clock_mhz=clock, cta=cta)
    sampled = _run_sampled(p)
    if sampled is not None:  # a sampled trace of profctl proton, read again (another --cta): made whole again
        tree_file = _stem(p).with_name(_stem(p).name + ".hatchet")
        tree = None
        if tree_file.is_file():
            try:
                tree = proton_tree.read(tree_file)
            except BadReport as e:
                rep.warnings.append(f"Proton's tree of every CTA was not read: {e.one_line()}")
        timeline.apply_sample(rep, sampled, tree)
    if clock:
        rep.notes.append(f"times at the SM clock the run recorded ({clock} MHz)")
    return rep


def _run_sampled(p: Path) -> dict[str, Any] | None:
    """What profctl proton sampled for this trace (its run's manifest), None for a trace from elsewhere."""
    try:
        man = json.loads((p.parent / "manifest.json").read_text(encoding="utf-8"))
        got = (man.get("sampled") or {}).get(_stem(p).name)
    except (OSError, ValueError, AttributeError):
        return None
    return got if isinstance(got, dict) else None


def _stem(p: Path) -> Path:
    name = p.name
    for suffix in (".gz", ".xz"):
        name = name.removesuffix(suffix)
    return p.with_name(name.rsplit(".", 1)[0])


def _cache(p: Path) -> Path | None:
    """The figures profctl proton kept beside trace `p`, when they are not older than it."""
    c = _stem(p).with_name(_stem(p).name + ".timeline.json")
    try:
        return c if c.is_file() and c.stat().st_mtime >= p.stat().st_mtime else None
    except OSError:
        return None


def _drops(p: Path) -> Any:
    from profctl.readers.proton_trace import Drops

    d = _stem(p).with_name(_stem(p).name + ".drops.json")
    try:
        return Drops.from_dict(json.loads(d.read_text(encoding="utf-8"))) if d.is_file() else None
    except (OSError, ValueError, TypeError):
        return None


def _run_clock(p: Path) -> float | None:
    """The SM clock a run of profctl proton recorded for this trace (None for a trace from elsewhere)."""
    from profctl import run_store

    try:
        events = run_store.read_events(p.parent / "workload.jsonl")
    except Exception:
        return None
    clocks = [float(c) for e in events if e.get("event") in ("recorded", "exit") and (c := e.get("clock_mhz"))]
    return clocks[-1] if clocks else None


def show(inputs: list[Any], *, format: str, output: Path | None, limit: int, title: str | None,
         cta: int | None = None) -> None:
    """Each input's figures, one after another, in `format` (perfetto: one trace's every scope instance)."""
    if format == "perfetto":
        return _perfetto(inputs, output, cta)
    if format == "csv":
        raise UsageError("a Proton timeline is written as table, markdown, json, html or perfetto, not csv")
    reps = [load(i, cta=cta) for i in inputs]
    for r in reps:
        for n in r.notes:
            note(f"note: {n}")
        for w in r.warnings:
            warn(w)
    render(reps, format=format, output=output, limit=limit, title=title)
    return None


def render(reps: list[Any], *, format: str, output: Path | None, limit: int, title: str | None) -> None:
    from profctl.render import timeline_view

    if format == "json":
        docs = [r.to_dict() for r in reps]
        emit(json.dumps(docs[0] if len(docs) == 1 else docs, indent=1) + "\n", output)
    elif format == "markdown":
        emit("\n".join(timeline_view.to_markdown(r, limit or None) for r in reps), output)
    elif format == "html":
        if len(reps) > 1:
            from profctl.render.html import page

            emit(page(title or "profctl report: Proton timelines", [_body(timeline_view.to_html(r, None, limit or None))
                                                                    for r in reps]), output)
        else:
            emit(timeline_view.to_html(reps[0], title, limit or None), output)
    else:
        con, buf = text_console() if output is not None else (console(240), None)
        for r in reps:
            con.print(f"Proton timeline: {r.source}", style="bold")
            timeline_view.to_console(r, con, limit or None)
        if buf is not None:
            emit(buf.getvalue(), output)


def _body(page_html: str) -> str:
    start = page_html.find("</div>", page_html.find('<div class="meta">'))
    return page_html[start + 6: page_html.rfind("</body>")]


def _perfetto(inputs: list[Any], output: Path | None, cta: int | None) -> None:
    from profctl.readers import proton_trace
    from profctl.render import timeline_view

    traces = [i for i in inputs if i.kind == "proton-trace"]
    if len(traces) != 1:
        raise UsageError(f"--format perfetto writes one timeline: give one Proton trace (.chrome_trace); found "
                         f"{len(traces)}" + (" (a Proton tree has no timeline)" if len(inputs) > len(traces) else ""))
    if cta is not None:
        raise conflict("--cta", "--format perfetto", "the Perfetto file holds every CTA")

    def sink() -> contextlib.AbstractContextManager[IO[str]]:
        if output is None or str(output) == "-":
            return contextlib.nullcontext(sys.stdout)
        return atomic_open(output)

    p = Path(traces[0].path)
    said = timeline_view.write_perfetto(proton_trace.read(p), sink, clock_mhz=_run_clock(p))
    where = "" if output is None or str(output) == "-" else f"{output}: "
    note(f"{where}{said}; open it in ui.perfetto.dev or chrome://tracing")


def timelines_first(fn: F) -> F:
    """``profctl report`` of Proton inputs, before the report's own views (which are of kernel summaries and
    bench rows): a decorator, so the report command itself is unchanged."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        if report_view(kw["paths"], format=kw["format"], output=kw["output"], limit=kw["limit"], title=kw["title"],
                       reports=kw["reports"], view=kw["view"]):
            return None
        return fn(*args, **kw)

    return wrapper  # type: ignore[return-value]


def report_view(paths: list[Path], *, format: str, output: Path | None, limit: int, title: str | None,
                reports: Path | None, view: str) -> bool:
    """``profctl report`` of Proton inputs; False when the inputs are not Proton's (the caller goes on)."""
    found = proton_inputs(paths, reports)
    if found is None:
        return False
    for opt in _NOT_FOR_TIMELINES:
        if given(opt):
            flag = typed_flags().get(opt, "--" + opt.rstrip("_").replace("_", "-"))
            raise conflict(flag, "a Proton timeline", f"{flag} applies to kernel summaries and bench rows")
    if view not in ("auto", "summary"):
        raise conflict(f"--view {view}", "a Proton timeline", "a Proton timeline has its own view")
    if format not in FORMATS:
        raise UsageError(f"a Proton timeline is written as {', '.join(FORMATS)}, not {format}")
    check_outputs(("-o", output))
    show(found, format=format, output=output, limit=limit, title=title)
    return True


def explain_view(report: str, report2: str | None, *, kernel: str | None, vs: str | None, format: str,
                 output: Path | None, reports: Path | None) -> bool:
    """``profctl explain A B`` of two Proton timelines (or two kernels of one with --vs): which scope grew, which
    overlap was lost. False when the inputs are not Proton's."""
    a_in = _one(report, reports)
    if a_in is None:
        return False
    b_in = _one(report2, reports) if report2 is not None else a_in
    if b_in is None:
        raise UsageError(f"{report2}: not a Proton timeline, and {report} is: explain compares two of a kind")
    if report2 is None and vs is None:
        raise UsageError("give a second Proton timeline (before / after), or --vs B for another kernel of this one")
    if format not in ("table", "markdown", "json"):
        raise UsageError(f"unknown format {format!r}; choose from table, markdown, json")
    check_outputs(("-o", output))
    from profctl.analysis import timeline_diff
    from profctl.render import timeline_diff_view

    ra, rb = load(a_in), load(b_in)
    ka = ra.kernel(kernel)
    kb = rb.kernel(vs if vs is not None else kernel)
    if ka is kb:
        raise UsageError(f"--kernel {kernel!r} and --vs {vs!r} pick the same kernel ({ka.kernel})")
    d = timeline_diff.compare(ka, kb, a_label="A", b_label="B")
    d.notes[:0] = [f"A: {ka.kernel} in {ra.source}", f"B: {kb.kernel} in {rb.source}"]
    for w in ra.warnings + rb.warnings:
        warn(w)
    if format == "json":
        emit(timeline_diff_view.to_json(d), output)
    elif format == "markdown":
        emit(timeline_diff_view.to_markdown(d), output)
    else:
        con, buf = text_console() if output is not None else (console(), None)
        timeline_diff_view.to_console(d, con)
        if buf is not None:
            emit(buf.getvalue(), output)
    return True


def _one(ref: str | None, reports: Path | None) -> Any:
    """The one Proton input `ref` names, or None when it names no Proton output (an .ncu-rep, a run of ncu)."""
    if ref is None:
        return None
    from profctl import inputs as resolver

    try:
        found = resolver.resolve(ref, root=reports)
    except BadReport as e:
        if ref.endswith((".chrome_trace", ".hatchet")) or ".chrome_trace." in ref:
            raise
        del e
        return None
    proton = [i for i in found if i.kind in PROTON_KINDS]
    if not proton:
        return None
    if len(proton) > 1:
        names = ", ".join(Path(i.path).name for i in proton)
        raise UsageError(f"{ref} holds {len(proton)} Proton timelines ({names}): name one file")
    return proton[0]
