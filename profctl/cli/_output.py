"""Where a command's output goes: checks before any work (the format, --limit, every output file, the run
store), and the text written to standard output or to -o's file (atomically; through a link to its target; a FIFO
or a device written to in place)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from profctl.cli._command import conflict, format_from_extension, given, typed_flags
from profctl.cli._messages import note
from profctl.errors import CannotWrite, UsageError
from profctl.fsutil import atomic_write_text, check_writable, special_kind, write_problem, write_target
from profctl.render.tables import console, text_console


def check_format(format: str, allowed: Sequence[str]) -> None:
    """A --format the command writes; one taken from -o's file name (`-o x.html`) that it does not write is an
    error naming the file and the formats it does write."""
    if format not in allowed:
        named = format_from_extension()
        if named is not None:
            raise UsageError(f"{named}: the file's name asks for {format}, which this command does not write; "
                             f"give -f with one of {', '.join(allowed)} (and a name to match)", hint=None)
        raise UsageError(f"unknown format {format!r}; choose from {', '.join(allowed)}", hint=None)


def check_limit(limit: int, format: str) -> None:
    """--limit is a count of rows for the tables a person reads; csv and json are data and always whole."""
    if limit < 0:
        raise UsageError(f"--limit must be >= 0, got {limit}")
    if given("limit") and format in ("csv", "json"):
        raise conflict(typed_flags().get("limit", "--limit"), f"--format {format}",
                       "csv and json are always whole; --limit shortens tables (table, markdown, html)")


def check_outputs(*paths: tuple[str, Path | str | None]) -> None:
    """Before any work: every output file can be written (not a directory, a folder that takes files), and no
    two outputs are the same file or both standard output. `paths`: (flag, path) pairs."""
    seen: dict[str, str] = {}
    for flag, p in paths:
        if p is None:
            continue
        key = "-" if str(p) == "-" else str(Path(p).resolve())
        if key in seen:
            where = "standard output" if key == "-" else str(p)
            raise UsageError(f"{seen[key]} and {flag} both write to {where}: give each its own file")
        seen[key] = flag
        if key != "-" and _said_special(flag, p):
            continue
        if key != "-":
            try:
                check_writable(p, flag)
            except CannotWrite as e:  # found before any work: a bad option value (exit 2, as docs/bench.md says)
                raise UsageError(e.message, hint=e.hint) from None
            missing = Path(p).parent
            if not missing.exists():
                while not missing.parent.exists():
                    missing = missing.parent
                note(f"note: {flag} {p}: the folder {missing} does not exist; it will be made")


def _said_special(flag: str, p: Path | str) -> bool:
    """A note for an output that is no plain file path (a link, a FIFO, a device, /dev/stdout): how it will be
    written. True for one written in place (checked here: never replaced, so its folder need not take files)."""
    kind = special_kind(p)
    if kind is not None:
        problem = write_problem(p)
        if problem:
            raise UsageError(f"cannot write {flag} {p}: {problem}")
        a = "an" if kind[0] in "aeiou" else "a"
        note(f"note: {flag} {p} is {a} {kind}: written to as it is (not replaced, not atomically)")
        return True
    target = write_target(p)
    if target != Path(p):
        note(f"note: {flag} {p} is a link: its target {target} is written")
    return False


def check_reports(reports: Path | str | None) -> None:
    """Before any work: the run store's root takes a new run directory (a read-only --reports fails now, not
    after the sweep)."""
    from profctl import run_store

    root = run_store.reports_root(reports)
    problem = write_problem(root / "run")
    if problem:
        problem = problem.replace(f" (in {root})", "")
        raise UsageError(f"cannot create a run directory under {root}: {problem}",
                         hint="pass --reports DIR (or set PROFCTL_REPORTS) to a folder you can write")


def emit(text: str | None, output: Any = None) -> None:
    """Text to stdout, or atomically to `output` (a path; '-' is stdout)."""
    if text is None:
        return
    if output is not None and str(output) != "-":
        atomic_write_text(output, text)
        return
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def emit_summary(s: Any, format: str, output: Any = None, *, limit: int | None = None) -> None:
    """A Summary in `format` (profctl.render.summary_view: table, markdown, csv, json or html) to `output` or
    stdout; `limit` shortens the table, Markdown and HTML."""
    from profctl.render import summary_view

    if format == "table":
        con, buf = text_console() if output is not None else (console(), None)
        summary_view.to_console(s, con, limit)
        if buf is not None:
            emit(buf.getvalue(), output)
    elif format == "markdown":
        emit(summary_view.to_markdown(s, limit), output)
    elif format == "html":
        emit(summary_view.to_html(s, limit=limit), output)
    else:
        emit(summary_view.to_csv(s) if format == "csv" else summary_view.to_json(s), output)
