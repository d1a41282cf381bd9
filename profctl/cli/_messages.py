"""The lines profctl says on standard error: an error, a note, a warning (one prefix each, for every command)."""

from __future__ import annotations

import sys


def err(msg: str) -> None:
    print(f"profctl: error: {msg}", file=sys.stderr)


def note(msg: str) -> None:
    print(f"profctl: {msg}", file=sys.stderr)


def warn(msg: str) -> None:
    print(f"profctl: warning: {msg}", file=sys.stderr)

