"""`profctl explain REPORT [REPORT2] --kernel A [--vs B]`: the causes of kernel A's time, or of its gap to kernel B
(what to change, where, what it saves), ranked by predicted saving; then the mechanisms: the two side by side,
the gap split into parts (instructions, each stall reason, resident warps, idle SMs, clock), hot lines, ncu's
findings and the speed-of-light headroom."""

from __future__ import annotations

from pathlib import Path

import typer

from profctl.cli._explain_build import build, kernel_names, shape_key
from profctl.cli._guard import guard
from profctl.cli._output import check_format, check_outputs, emit
from profctl.cli._ranges import explain_range_view
from profctl.cli._timelines import explain_view
from profctl.cli._workload_options import REPORTS_HELP
from profctl.errors import UsageError
from profctl.render.tables import console_fitted, fitted_console


@guard
def explain(
    report: str = typer.Argument(..., help="an .ncu-rep (plain, .gz, .xz), a run directory, a run id or 'latest'"),
    report2: str | None = typer.Argument(None, help="a second report: B comes from it (the same kernel before and "
                                                    "after a change)"),
    kernel: str | None = typer.Option(None, "--kernel", "-k",
                                      help="regex picking kernel A (name, base name or NVTX path)"),
    range_: str | None = typer.Option(None, "--range", help="explain this NVTX/record_function range of an nsys "
                                                            "export or torch trace instead of a kernel"),
    ncu: str | None = typer.Option(None, "--ncu", help="with --range: an ncu report of the same program (a file, "
                                                       "run directory or run id): each kernel's verdict and floor "
                                                       "[default: the store's latest ncu run of the same program]"),
    vs: str | None = typer.Option(None, "--vs", help="regex picking kernel B [default: --kernel's, in REPORT2; "
                                                     "neither: A alone, against its roofs]"),
    shape: str | None = typer.Option(None, "--shape", help="the attention shape for the roofs when the NVTX range "
                                                           "does not say it, e.g. b1,s4096,h32,d128,bf16[,causal]"),
    changed: bool = typer.Option(False, "--changed", help="B is A after a change that renamed it (a rewrite, or "
                                                        "the other launch of one report): set A's kept prediction "
                                                        "against B's time and tally it"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown or json"),
    output: Path | None = typer.Option(None, "--output", "-o", help="write to this file (atomically)"),
    reports: Path | None = typer.Option(None, "--reports", help=REPORTS_HELP),
) -> None:
    """What makes kernel A slow, or slower than kernel B: the causes ranked by the time fixing each would save
    (with the lines, the evidence and the fix), then the mechanisms (side by side, the gap in parts)."""
    if range_ is not None:  # a range of a timeline: profctl.cli._ranges (issue 49)
        return explain_range_view(report, report2, range_, vs=vs, ncu=ncu, format=format, output=output,
                                  reports=reports)
    if ncu is not None:
        raise UsageError("--ncu goes with --range (the kernels of a range against an ncu report of the same "
                         "program); for a kernel, give the ncu report itself as REPORT")
    if kernel is None:
        names = kernel_names(report, reports)
        raise UsageError("--kernel (a kernel of an ncu report) or --range (a range of a timeline) is required"
                         + (f"; the kernels of {report}: {names}" if names else ""))
    if explain_view(report, report2, kernel=kernel, vs=vs, format=format, output=output, reports=reports):
        return  # two Proton timelines: which scope grew, which overlap was lost (profctl.cli._timelines)
    check_format(format, ("table", "markdown", "json"))
    if shape is not None:
        shape = shape_key(shape)
    check_outputs(("-o", output))
    from profctl.render import explanation_view

    e = build(report, kernel, vs=vs, report2=report2, shape=shape, reports=reports, changed=changed)
    if format == "json":
        emit(explanation_view.to_json(e), output)
    elif format == "markdown":
        emit(explanation_view.to_markdown(e), output)
    else:
        con, buf = fitted_console() if output is not None else (console_fitted(), None)
        explanation_view.to_console(e, con)
        if buf is not None:
            emit(buf.getvalue(), output)
