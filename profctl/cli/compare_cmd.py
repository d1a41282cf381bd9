"""`profctl compare BASE NEW`: per case, the change in median time and TFLOP/s with a confidence interval, marked
faster / slower / unchanged / inconclusive; `--fail-if-slower 5%` turns it into a CI gate. Each side may be
several runs of the same thing (`A1,A2,A3 B1,B2,B3`): their scatter measures the noise between runs, which one
run per side can only assume (`--run-noise`)."""

from __future__ import annotations

import filecmp
import sys
from pathlib import Path
from typing import Any

import typer

from profctl.cli._common import REPORTS_HELP, check_format, check_outputs, conflict, emit, guard, percent, warn
from profctl.errors import UsageError
from profctl.render.tables import FORMATS, text_console


@guard
def compare(
    base: str = typer.Argument(..., help="the reference: a run (directory, id, part of an id, 'latest'), a "
                                         "bench.json, or a profctl.summary/1 JSON file; several runs of it as a "
                                         "comma list (A1,A2,A3) measure the noise between runs"),
    new: str = typer.Argument(..., help="the run or file to judge against BASE (a comma list: several runs)"),
    fail_if_slower: str | None = typer.Option(None, "--fail-if-slower",
                                              help="exit 1 when a case is slower than this (e.g. 5%; 2x or 100%: "
                                                   "twice as slow) with confidence, or stopped working (CI)"),
    threshold: str | None = typer.Option(None, "--threshold",
                                         help="changes smaller than this count as unchanged [default: 2%; 10% when "
                                              "both sides were timed on a CPU; --fail-if-slower if smaller]"),
    min_total_ms: float = typer.Option(0.05, "--min-total-ms",
                                       help="summaries: a kernel or op with less total time (ms) is not judged"),
    min_samples: int = typer.Option(5, "--min-samples",
                                    help="summaries: a kernel or op with fewer instances is not judged"),
    run_noise: str | None = typer.Option(None, "--run-noise",
                                         help="how much one run's median moves between processes of an unchanged "
                                              "program (e.g. 3%; 0 leaves it out) [default: CPU bench rows 10% "
                                              "when every run recorded a quiet machine, else 20%; 6% for CPU ops, "
                                              "0.6% for GPU timings; several runs per side measure it too]"),
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
    from profctl import inputs
    from profctl.analysis.compare import compare_runs, gate
    from profctl.render import compare_view

    check_format(format, FORMATS)
    if resamples < 100:
        raise UsageError(f"--resamples {resamples}: at least 100")
    if not 0 < confidence < 1:
        raise UsageError(f"--confidence {confidence:g}: a level between 0 and 1, e.g. 0.95")
    if by not in ("label", "backend"):
        raise UsageError(f"--by {by!r}: choose label or backend")
    delta = percent(threshold, "--threshold") if threshold is not None else None
    limit = slower_limit(fail_if_slower) if fail_if_slower is not None else None
    if strict and limit is None:
        raise conflict("--strict", "no --fail-if-slower", "--strict makes inconclusive cases fail the "
                       "--fail-if-slower gate; give --fail-if-slower too")
    if limit is not None and delta is not None and delta > limit:
        raise conflict(f"--threshold {threshold}", f"--fail-if-slower {fail_if_slower}",
                       "a slowdown between the two would count as unchanged and pass the gate; give a "
                       "--threshold no larger than --fail-if-slower")
    floors = _floors(min_total_ms, min_samples)
    noise = _run_noise(run_noise)
    check_outputs(("-o", output))
    b = inputs.load_sides(base, reports)
    n = inputs.load_sides(new, reports)
    _warn_same_data(b, n)
    result = compare_runs(b, n, threshold=delta, confidence=confidence, resamples=resamples, by=by, force=force,
                             floors=floors, limit=limit, noise=noise)
    _predicted(result, b, reports)
    if format == "table" and output is not None:
        con, buf = text_console()
        compare_view.to_console(result, con)
        emit(buf.getvalue(), output)
    elif format == "table":
        compare_view.to_console(result)
    else:
        emit({"json": compare_view.to_json, "csv": compare_view.to_csv, "markdown": compare_view.to_markdown}[format](
            result), output)
    if limit is None:
        return
    verdict = gate(result, limit, strict=strict)
    if verdict.warning():
        print(f"profctl: warning: {verdict.warning()}", file=sys.stderr)
    failure = verdict.error()
    if failure is not None:
        raise failure


def _predicted(result: Any, b: Any, reports: Path | None) -> None:
    """What explain predicted for BASE's kernels (one summary side), said beside what the change realized."""
    if b.kind == "summary" and not b.members:
        from profctl import predictions, run_store

        result.warnings += predictions.in_comparison(run_store.reports_root(reports), Path(b.path), result.rows)


def _warn_same_data(b: Any, n: Any) -> None:
    """A warning when the two sides read the same data (`compare X X`): the answer then says nothing about a
    change. With several runs a side, a run on both sides is named."""
    runs_b = [m.path for m in b.members] or [b.path]
    runs_n = [m.path for m in n.members] or [n.path]
    shared = [x for x in runs_b if any(_same_data(Path(x), Path(y)) for y in runs_n)]
    if shared and len(shared) == len(runs_b) == len(runs_n):
        one = len(runs_b) == 1 and Path(runs_b[0]).resolve() == Path(runs_n[0]).resolve()
        what = f" (one run, {Path(runs_b[0]).name}, on both sides)" if one else ""
        warn(f"BASE {b.ref} and NEW {n.ref} are the same data{what}: every case is compared with itself, so the "
             "answer says nothing about a change (give two runs)")
    elif shared:
        warn(f"{', '.join(map(str, shared))} on both sides: a run compared with itself understates the change")


def _same_data(a: Path, b: Path) -> bool:
    """Whether two runs or files are the same data: one path (a run named twice, by id and by folder), a run and
    a file of its own, or two files with the same bytes (a copy)."""
    a, b = a.resolve(), b.resolve()
    if a == b or (a.is_dir() and b.parent == a) or (b.is_dir() and a.parent == b):
        return True
    return a.is_file() and b.is_file() and a.stat().st_size == b.stat().st_size and filecmp.cmp(a, b, shallow=False)


def _run_noise(text: str | None) -> Any:
    """--run-noise: a percentage (3%, read as every threshold is: the percent sign needed), or 0 to leave the
    noise between runs out; None: the default."""
    if text is None:
        return None
    v = percent(text, "--run-noise", zero=True)
    from profctl.analysis.compare.stats import NO_RUN_NOISE, RunNoise

    return NO_RUN_NOISE if v == 0 else RunNoise(v, "given with --run-noise")


def _floors(min_total_ms: float, min_samples: int) -> Any:
    """The floors below which a summary row is not judged, from the options (checked before anything is read)."""
    if min_total_ms < 0:
        raise UsageError(f"--min-total-ms {min_total_ms:g}: must be >= 0")
    if min_samples < 3:
        raise UsageError(f"--min-samples {min_samples}: at least 3 (an interval needs a few instances)")
    from profctl.analysis.compare.rows import Floors

    return Floors(total_ns=min_total_ms * 1e6, samples=min_samples)


def slower_limit(text: str, flag: str = "--fail-if-slower") -> float:
    """--fail-if-slower's value (compare and bench --ab) as the fraction a case may be slower: a percentage as
    `percent` reads it (`5%` -> 0.05), and also one of 100 % or more, or a factor (`2x`: twice as slow, as 100 %)
    -- a slowdown of 2x is a change of +100 %, which a percentage below 100 cannot say."""
    t = text.strip()
    if t[-1:].lower() == "x":
        try:
            factor = float(t[:-1])
        except ValueError:
            raise UsageError(f"{flag} {t}: give a factor such as 2x, or a percentage such as 5%") from None
        if not factor > 1:
            raise UsageError(f"{flag} {t}: a factor more than 1x (2x: twice as slow)")
        return factor - 1.0
    if t.endswith("%"):
        try:
            v = float(t[:-1])
        except ValueError:
            v = 0.0
        if v >= 100:
            return v / 100.0
    return percent(text, flag)
