"""`profctl proton`: warp timelines inside Triton kernels, recorded by Proton (Triton's own profiler), and what
overlaps what. Named after the tool it runs, as `profctl nsys`, `ncu` and `torch` are (a timeline of kernels is
what nsys and `report -f perfetto` already give: this is the timeline *inside* one)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from profctl.cli._command import command_line, given
from profctl.cli._guard import guard
from profctl.cli._messages import note, warn
from profctl.cli._output import check_format, check_limit, check_outputs, check_reports
from profctl.cli._program import PROGRAM_HELP, program_failed, target_of
from profctl.cli._timelines import render
from profctl.cli._workload_options import REPORTS_HELP, validate_workload, workload_options
from profctl.errors import UnsupportedShape, UsageError

_FORMATS = ("table", "markdown", "json", "html")


@guard
@workload_options
def proton(
    wl: Any,
    program: list[str] | None = typer.Argument(None, help=PROGRAM_HELP + " (python SCRIPT.py or python -m MODULE; "
                                                                           "its @triton.jit code opens pl.scope)",
                                               show_default=False),
    buffer: str | None = typer.Option(None, "--buffer",
                                      help="where each CTA keeps its records: shared (memory; Proton's default) or "
                                           "global [default: global for --backend triton, whose kernel leaves no "
                                           "shared memory over; shared for your program]"),
    buffer_size: int = typer.Option(0, "--buffer-size", help="bytes of buffer per CTA [default: Proton's]"),
    warps: str | None = typer.Option(None, "--warps",
                                     help="record only these warps (comma list of warp ids, e.g. 0,4: one per "
                                          "warpgroup): more room in the buffer for each [default: all]"),
    granularity: str = typer.Option("warp", "--granularity",
                                    help="what one record stands for: warp, warp_2/4/8, warp_group(_2/4/8), cta"),
    clock: int = typer.Option(64, "--clock", help="bits of the clock each record reads: 64, or 32 (cheaper; "
                                                  "wraps after ~2 s)"),
    time_shift: bool = typer.Option(False, "--time-shift/--no-time-shift",
                                    help="take Proton's estimate of its own cost off every record (its "
                                         "time_shift)"),
    data: str = typer.Option("trace", "--data", help="trace (the per-warp timeline) or tree (cycles per scope)"),
    overhead: int = typer.Option(20, "--overhead",
                                 help="--backend triton: time N launches of the kernel with and without scopes "
                                      "(the cost of looking; 0: skip)"),
    ctas: str | None = typer.Option(None, "--ctas",
                                    help="how many CTAs of each launch the timeline keeps: N (every CTA of a few "
                                         "SMs, and the longest; counts and totals stay those of every CTA) or "
                                         "all [default: 16]"),
    cta: int | None = typer.Option(None, "--cta", help="the CTA whose critical path and timeline are shown "
                                                        "[default: each kernel's longest]"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown, json or html"),
    output: Path | None = typer.Option(None, "--output", "-o", help="write to this file (atomically)"),
    limit: int = typer.Option(0, "--limit", help="show at most N rows per table [default: all]"),
    reports: Path | None = typer.Option(None, "--reports", help=REPORTS_HELP),
    timeout: float = typer.Option(1800.0, "--timeout", help="seconds before a Proton child is killed"),
) -> None:
    """Record warp timelines inside Triton kernels with Proton (profctl's Triton forward with its steps in scopes,
    or your program's kernels) and say, per scope, its count and cycles, each warp's share, the critical path
    through a CTA and what overlaps what."""
    from profctl.pipelines import proton_pipeline
    from profctl.tools.proton import ProtonOptions, parse_ctas, parse_warps

    check_format(format, _FORMATS)
    check_limit(limit, format)
    check_outputs(("-o", output))
    if timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {timeout:g}")
    opts = ProtonOptions(buffer=buffer, buffer_size=buffer_size, warps=parse_warps(warps), granularity=granularity,
                         clock=clock, time_shift=time_shift, data=data, ctas=parse_ctas(ctas))
    if ctas is not None and data == "tree":
        raise UsageError("--ctas picks the CTAs of a timeline (--data trace); Proton's tree (--data tree) sums "
                         "every CTA")
    if program and given("overhead"):
        raise UsageError("--overhead times profctl's Triton forward with and without its scopes; your program's "
                         "kernels have no version without them")
    if not program and not given("backend"):
        wl = wl.with_backends(["triton"])  # the one built-in backend with scopes
    try:
        validate_workload(wl)
    except UnsupportedShape:  # no point can run here: without a GPU, proton's own reason (what else to do), not
        proton_pipeline.check_gpu(target_of(wl, program))  # the backend's (a CPU mode proton then refuses)
        raise
    check_reports(reports)
    req = proton_pipeline.ProtonRequest(target=target_of(wl, program), options=opts, overhead_iters=overhead, cta=cta,
                                        reports=reports, timeout_s=timeout, command=command_line())
    res = proton_pipeline.run(req, on_progress=_show_phase)
    for n in res.notes:
        note(f"note: {n}")
    for w in res.warnings:
        warn(w)
    reps = [r.report for r in res.recordings]
    for r in reps:
        for w in r.warnings:
            warn(w)
    render(reps, format=format, output=output, limit=limit, title=None)
    files = ", ".join(str(r.output) for r in res.recordings)
    print(f"run: {res.run_dir}\nproton: {files}", file=sys.stderr)
    if res.program_status:
        raise program_failed(res.program_status, res.program_error, "its timeline up to then is shown above and "
                             "kept in", res.run_dir, res.recordings[0].log if res.recordings else None)


def _show_phase(ev: dict[str, Any]) -> None:
    """One line per step of a case as it ends (the children's compile, run and dump; profctl's reading)."""
    name, phase, what = ev.get("name"), str(ev.get("phase")), ev.get("what")
    if phase.endswith("-start"):
        note(f"{name}: {what} ...")
    else:
        note(f"{name}: {phase} {float(ev.get('seconds') or 0):.1f} s" + (f" ({what})" if what else ""))
