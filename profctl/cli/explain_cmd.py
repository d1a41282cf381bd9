"""`profctl explain REPORT [REPORT2] --kernel A [--vs B]`: the causes of kernel A's time, or of its gap to kernel B
(what to change, where, what it saves), ranked by predicted saving; then the mechanisms: the two side by side,
the gap split into parts (instructions, each stall reason, resident warps, idle SMs, clock), hot lines, ncu's
findings and the speed-of-light headroom."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from profctl.cli._common import REPORTS_HELP, check_format, check_outputs, emit, guard
from profctl.cli._ranges import explain_range_view
from profctl.cli._timelines import explain_view
from profctl.errors import UsageError
from profctl.render.tables import console_fitted, fitted_console


@guard
def explain(
    report: str = typer.Argument(..., help="an .ncu-rep (plain, .gz, .xz), a run directory, a run id or 'latest'"),
    report2: str | None = typer.Argument(None, help="a second report: B comes from it (the same kernel before and "
                                                    "after a change)"),
    kernel: str | None = typer.Option(None, "--kernel", "-k", help="regex picking kernel A (name, base name or NVTX path)"),
    range_: str | None = typer.Option(None, "--range", help="explain this NVTX/record_function range of an nsys "
                                                            "export or torch trace instead of a kernel"),
    vs: str | None = typer.Option(None, "--vs", help="regex picking kernel B [default: --kernel's, in REPORT2; "
                                                     "neither: A alone, against its roofs]"),
    shape: str | None = typer.Option(None, "--shape", help="the attention shape for the roofs when the NVTX range "
                                                           "does not say it, e.g. b1,s4096,h32,d128,bf16[,causal]"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown or json"),
    output: Path | None = typer.Option(None, "--output", "-o", help="write to this file (atomically)"),
    reports: Path | None = typer.Option(None, "--reports", help=REPORTS_HELP),
) -> None:
    """What makes kernel A slow, or slower than kernel B: the causes ranked by the time fixing each would save
    (with the lines, the evidence and the fix), then the mechanisms (side by side, the gap in parts)."""
    if range_ is not None:  # a range of a timeline: profctl.cli._ranges (issue 49)
        return explain_range_view(report, report2, range_, vs=vs, format=format, output=output, reports=reports)
    if kernel is None:
        raise UsageError("--kernel (a kernel of an ncu report) or --range (a range of a timeline) is required")
    if explain_view(report, report2, kernel=kernel, vs=vs, format=format, output=output, reports=reports):
        return  # two Proton timelines: which scope grew, which overlap was lost (profctl.cli._timelines)
    check_format(format, ("table", "markdown", "json"))
    if shape is not None:
        shape = _shape_key(shape)
    check_outputs(("-o", output))
    from profctl import inputs
    from profctl.analysis import explanation
    from profctl.analysis import select as kernel_select
    from profctl.render import explanation_view

    for flag, pattern in (("--kernel/--vs", kernel), ("--kernel/--vs", vs)):
        if pattern is not None:
            kernel_select.pattern_of(pattern, flag)
    # only the kernels --kernel and --vs pick are read in depth (the others by name, for a message naming them)
    pa = inputs.read_profiles(report, root=reports, kernels=[kernel] if report2 is not None or vs is None
                              else [kernel, vs])
    a, note_a = kernel_select.select(pa, kernel, report)
    if report2 is None and vs is None:
        e = explanation.explain_one(a, explanation.kernel_roofs(a, shape), shape_given=shape is not None)
        e.chosen += [n for n in (note_a,) if n]
    else:
        pb = inputs.read_profiles(report2, root=reports, kernels=[vs or kernel]) if report2 is not None else pa
        b, note_b = kernel_select.select(pb, vs or kernel, report2 or report, like=a)
        if a is b:
            raise UsageError(f"--kernel {kernel!r} and --vs {vs!r} pick the same launch ({kernel_select.describe(a)})")
        roofs = {"a": explanation.kernel_roofs(a, shape), "b": explanation.kernel_roofs(b, shape)}
        e = explanation.explain(a, b, roofs=roofs, shape_given=shape is not None)
        e.chosen += [n for n in (note_a, note_b) if n]
    _close_the_loop(e, report, report2, reports, same_kernel=report2 is not None and e.b is not None
                    and e.b.base_name == e.a.base_name)
    if format == "json":
        emit(explanation_view.to_json(e), output)
    elif format == "markdown":
        emit(explanation_view.to_markdown(e), output)
    else:
        con, buf = fitted_console() if output is not None else (console_fitted(), None)
        explanation_view.to_console(e, con)
        if buf is not None:
            emit(buf.getvalue(), output)


def _close_the_loop(e: Any, report: str, report2: str | None, reports: Path | None, *, same_kernel: bool) -> None:
    """Keep A's prediction with its run (or in the store), and where the same kernel is explained before and after a
    change, set what was predicted against what the change realized and tally it (profctl.predictions)."""
    from profctl import inputs, predictions, run_store
    from profctl.analysis.causes import diagnose_one

    root = run_store.reports_root(reports)

    def run_dir(ref: str | None) -> Path | None:
        """The profctl run `ref` names (a run id, 'latest', a run directory); None for a report file, which is the
        user's and stays untouched (its prediction goes to the store's predictions folder)."""
        if not ref or Path(ref).is_file():
            return None
        try:
            found = inputs.resolve(ref, root=reports)
            d = found[0].run_dir if len(found) == 1 else None
            return d if d is not None and run_store.read_manifest(d).get("run_id") else None
        except Exception:  # it was read above: a second look that fails only means no run directory
            return None

    a, b = e.a, e.b
    da = e.diagnoses.get("a") or diagnose_one(a)  # the diagnosis printed is the one kept
    kept = predictions.load(root, a, run_dir(report))
    _, why = predictions.keep(root, a, da, run_dir(report))
    notes = [why] if why else []
    if same_kernel and b is not None and a.duration_ns and b.duration_ns:
        db = e.diagnoses.get("b") or diagnose_one(b, e.roofs.get("b"), e.floors.get("b"))
        _, why_b = predictions.keep(root, b, db, run_dir(report2))
        outs, lines = predictions.close_loop(kept or predictions.prediction(a, da), a.duration_ns / 1e3,
                                             b.duration_ns / 1e3, db)
        e.loop += lines + (["(what explain predicts for BEFORE now; no prediction was kept from an earlier "
                            "explain of it)"] if kept is None and outs else [])
        key = f"{Path(str(a.report)).resolve()}|{Path(str(b.report)).resolve()}|{a.name}"
        why_t = predictions.add(root, a.device, outs, key)
        notes += [n for n in (why_b, why_t) if n]
    for c in [*e.causes, *e.slack]:
        c.track = predictions.track_record(root, a.device, c.id)
    e.notes += notes


def _shape_key(text: str) -> str:
    """``b1,s4096,h32,d128`` -> a shape key profctl.shapes reads (``s`` is both sequence lengths)."""
    from profctl.shapes import Shape

    parts = []
    for p in text.split(","):
        p = p.strip()
        if p.startswith("s") and p[1:].isdigit():
            parts += [f"sq{p[1:]}", f"skv{p[1:]}"]
        else:
            parts.append(p)
    key = ",".join(parts)
    try:
        Shape.parse(key)
    except ValueError as e:
        raise UsageError(f"--shape {text!r}: {e}") from None
    return key
