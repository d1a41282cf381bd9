"""`profctl compare BASE NEW`: per case, the change in median time and TFLOP/s with a confidence interval, marked
faster / slower / unchanged / inconclusive; `--fail-if-slower 5%` turns it into a CI gate."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from profctl.cli._common import REPORTS_HELP, check_format, check_outputs, conflict, emit, given, guard
from profctl.errors import UsageError


@guard
def compare(
    base: str = typer.Argument(..., help="the reference: a run (directory, id, part of an id, 'latest'), a "
                                         "bench.json, or a profctl.summary/1 JSON file"),
    new: str = typer.Argument(..., help="the run or file to judge against BASE"),
    fail_if_slower: str | None = typer.Option(None, "--fail-if-slower",
                                              help="exit 1 when a case is slower than this (e.g. 5%) with "
                                                   "confidence, or stopped working (CI)"),
    threshold: str = typer.Option("2%", "--threshold",
                                  help="changes smaller than this count as unchanged"),
    confidence: float = typer.Option(0.95, "--confidence", help="confidence level of the intervals"),
    resamples: int = typer.Option(4000, "--resamples", help="bootstrap resamples per case"),
    by: str = typer.Option("label", "--by", help="pair bench rows by 'label' (else backend) or by 'backend'"),
    force: bool = typer.Option(False, "--force", help="compare runs that are not comparable (says why)"),
    strict: bool = typer.Option(False, "--strict",
                                help="with --fail-if-slower: an inconclusive case beyond the limit fails too"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown, csv or json"),
    output: Path | None = typer.Option(None, "--output", "-o", help="write to this file (atomically)"),
    reports: Path | None = typer.Option(None, "--reports", help=REPORTS_HELP),
) -> None:
    """Compare two runs or summaries: faster, slower, unchanged or inconclusive, per case (exit 1 on a
    regression past --fail-if-slower, 6 when the runs are not comparable)."""
    from profctl.analysis import regression as cm
    from profctl.render import regression as rr
    from profctl.render.tables import FORMATS, text_console

    check_format(format, FORMATS)
    if resamples < 100:
        raise UsageError(f"--resamples {resamples}: at least 100")
    if not 0 < confidence < 1:
        raise UsageError(f"--confidence {confidence:g}: a level between 0 and 1, e.g. 0.95")
    if by not in ("label", "backend"):
        raise UsageError(f"--by {by!r}: choose label or backend")
    delta = cm.parse_percent(threshold, "--threshold")
    limit = cm.parse_percent(fail_if_slower, "--fail-if-slower") if fail_if_slower is not None else None
    if strict and limit is None:
        raise conflict("--strict", "no --fail-if-slower", "--strict makes inconclusive cases fail the "
                       "--fail-if-slower gate; give --fail-if-slower too")
    if limit is not None and delta > limit:
        if given("threshold"):
            raise conflict(f"--threshold {threshold}", f"--fail-if-slower {fail_if_slower}",
                           "a slowdown between the two would count as unchanged and pass the gate; give a "
                           "--threshold no larger than --fail-if-slower")
        delta = limit  # the default band narrows to the gate
    check_outputs(("-o", output))
    b = cm.load_side(base, reports)
    n = cm.load_side(new, reports)
    result = cm.compare_runs(b, n, threshold=delta, confidence=confidence, resamples=resamples, by=by, force=force)
    if format == "table" and output is not None:
        con, buf = text_console()
        rr.render(result, "table", con=con)
        emit(buf.getvalue(), output)
    else:
        emit(rr.render(result, format), output)
    if limit is None:
        return
    bad = cm.regressions(result, limit, strict=strict)
    if bad:
        first = bad[0]
        what = (f"{cm.case_label(first)} {first.verdict}" if first.verdict == "failed" else
                f"{cm.case_label(first)} {first.change * 100:+.1f}%"  # type: ignore[operator]
                + (f" (CI {first.ci_lo * 100 - 100:+.1f}%..{first.ci_hi * 100 - 100:+.1f}%)"
                   if first.ci_lo is not None and first.ci_hi is not None else " (threshold only)"))
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        raise cm.Regression(f"regression beyond --fail-if-slower {limit * 100:g}%: {what}{more}")
    beyond = [r for r in result.rows if r.verdict == "inconclusive" and r.ratio is not None and r.ratio - 1 > limit]
    if beyond:
        print(f"profctl: warning: {len(beyond)} inconclusive case(s) with an estimate beyond "
              f"{limit * 100:g}% (e.g. {cm.case_label(beyond[0])}); --strict makes them fail", file=sys.stderr)
