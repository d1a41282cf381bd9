"""@guard: what a command raises becomes one line on standard error and an exit code (a ProfctlError, a bad
option value, an output that cannot be written, Ctrl-C, a bug), and standard output is watched so a failed write to
it is told apart from a file that cannot be written."""

from __future__ import annotations

import errno
import functools
import io
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from profctl.cli._command import translate
from profctl.cli._messages import err, note
from profctl.errors import ProfctlError, ProgramFailed, SpecError
from profctl.fsutil import why

F = TypeVar("F", bound=Callable[..., Any])


class StdoutFailed(Exception):
    """Writing to standard output failed (a full disk under `> file`, /dev/full, a closed pipe)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class _GuardedStdout:
    """Standard output as the command sees it: a failed write or flush is a StdoutFailed, so it is told apart
    from a file that cannot be read or written."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        try:
            raw = getattr(self._inner, "buffer", None)
            if not isinstance(raw, io.RawIOBase):
                return int(self._inner.write(text))
            # unbuffered (PYTHONUNBUFFERED, python -u): the text layer drops the rest of a short write silently,
            # so write the bytes here until all are out or the write fails
            self._inner.flush()
            view = memoryview(text.encode(self._inner.encoding or "utf-8", self._inner.errors or "strict"))
            while view:
                n = raw.write(view)
                view = view[n or 0:]
            return len(text)
        except OSError as e:
            raise StdoutFailed(e) from None

    def flush(self) -> None:
        try:
            self._inner.flush()
        except OSError as e:
            raise StdoutFailed(e) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def guard(fn: F) -> F:
    """Turn ProfctlError (and bad option values, and an output that cannot be written) into one line on stderr,
    naming flags as typed, and the error's exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        real = sys.stdout
        t0 = time.time()
        sys.stdout = _GuardedStdout(real)
        try:
            out = fn(*args, **kw)
            sys.stdout.flush()
            return out
        except ProfctlError as e:
            _error_lines(e)
            err(translate(e.one_line()))
            raise typer.Exit(e.exit_code) from None
        except SpecError as e:
            err(translate(str(e)))
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            err(_interrupted(t0))
            raise typer.Exit(130) from None
        except (StdoutFailed, OSError) as e:
            oserr = e.error if isinstance(e, StdoutFailed) else e
            if oserr.errno == errno.EPIPE:  # `| head` closed the pipe: not an error
                _silence_stdout(real)
                raise typer.Exit(0) from None
            if isinstance(e, StdoutFailed):
                _silence_stdout(real)
                err(f"cannot write to standard output: {why(oserr)}")
            else:
                err(f"{oserr.filename}: {why(oserr)}" if oserr.filename else why(oserr))
            raise typer.Exit(1) from None
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except Exception as e:  # a bug of profctl's: still one line for the user, the traceback on request
            if os.environ.get("PROFCTL_DEBUG"):
                raise
            err(f"internal error: {type(e).__name__}: {e} (set PROFCTL_DEBUG=1 for the traceback, and please "
                "report it)")
            raise typer.Exit(70) from None
        finally:
            sys.stdout = real

    return wrapper  # type: ignore[return-value]


def _interrupted(t0: float) -> str:
    """The line for Ctrl-C: the run directory this command made (it keeps what had finished), or that none was
    made yet. profctl.run_store is asked only if it was imported: a command that never loaded it made no run."""
    rs = sys.modules.get("profctl.run_store")
    made = rs.made_since(t0) if rs is not None else []
    if not made:
        return "interrupted before any run directory was made"
    return f"interrupted; what had finished is kept in {made[-1]} (profctl show {made[-1].name})"


def _silence_stdout(stream: Any) -> None:
    """Point standard output at /dev/null and drop what is still buffered, so Python's own flush at exit does
    not print a second error."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, stream.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass


def _error_lines(e: ProfctlError) -> None:
    """A failed program's last error lines, indented, above the one-line error (ProgramFailed.lines)."""
    lines = getattr(e, "lines", None)
    if isinstance(e, ProgramFailed) and lines:
        note(f"the program's last error lines ({e.log}):" if e.log else "the program's last error lines:")
        for ln in lines:
            print(f"    {ln}", file=sys.stderr)

