"""The lines profctl says on standard error: an error, a note, a warning (one prefix each, for every command)."""

from __future__ import annotations

import os
import sys
import textwrap


def err(msg: str) -> None:
    print(f"profctl: error: {msg}", file=sys.stderr)


def note(msg: str, *, fit: bool = False) -> None:
    """`fit`: on a terminal, a long line is wrapped at words to its width (continued two spaces in), never cut; a
    pipe or a file gets it whole on one line."""
    print(fitted(f"profctl: {msg}") if fit else f"profctl: {msg}", file=sys.stderr)


def fitted(line: str) -> str:
    """`line` wrapped at words to the width of standard error's terminal (COLUMNS when set), each further line two
    spaces in; whole in a pipe or a file. Nothing is cut: a word longer than the width stays whole."""
    if not sys.stderr.isatty():
        return line
    width = _columns()
    if len(line) <= width:
        return line
    return "\n".join(textwrap.wrap(line, width=width, subsequent_indent="  ", break_long_words=False,
                                   break_on_hyphens=False))


def warn(msg: str) -> None:
    print(f"profctl: warning: {msg}", file=sys.stderr)



def _columns() -> int:
    """Standard error's terminal width: COLUMNS when set, else the terminal's (80 when it cannot be asked)."""
    given = os.environ.get("COLUMNS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 80
