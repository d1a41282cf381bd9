"""Atomic writes and read-only opening: a crash never leaves a half-written file, and users' files stay untouched.

Every file profctl writes (run manifests, summaries, bench rows, reports, HTML) goes through here, so every one
gets the same two promises: the file is whole or absent (a temporary file beside it, fsynced, renamed over it),
and it has the mode any file the user writes has (0666 less the umask: 0644 under umask 022), not the 0600 of a
temporary file. A write that cannot happen (a read-only directory, a directory where the file
should be, a full disk) raises :class:`profctl.errors.CannotWrite` naming the path, and leaves nothing behind.
A path that is a symbolic link is written through: its target is replaced, atomically, and the link stays. A path
that is no regular file (a FIFO, /dev/null, /dev/full, /dev/stdout) is never replaced: it is opened and written
to, as a shell's `>` does, and a failed write is CannotWrite all the same.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from profctl.errors import CannotWrite

_umask_lock = threading.Lock()


def current_umask() -> int:
    """The process's umask (read from /proc where it can be, else set and restored under a lock)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _umask_lock:
        old = os.umask(0o022)
        os.umask(old)
    return old


def new_file_mode() -> int:
    """The mode of a new file, as `open()` or a shell's `>` would create it: 0666 less the umask."""
    return 0o666 & ~current_umask()


def why(e: OSError) -> str:
    """An OSError's reason in words, lower-case ('permission denied', 'no space left on device')."""
    text = e.strerror or str(e) or type(e).__name__
    return text[:1].lower() + text[1:]


def write_problem(path: Path | str) -> str | None:
    """Why a file cannot be written at `path` (it is a directory, its folder is a file, the folder does not let
    us create a file: tried for real, then removed), or None when it can."""
    path = Path(path)
    if path.is_dir():
        return "it is a directory"
    kind = special_kind(path)
    if kind is not None:  # written to in place, never replaced: it must take writes
        if kind in _REFUSED:
            return f"it is a {kind}; profctl writes files, FIFOs and character devices"
        return None if os.access(path, os.W_OK) else "permission denied"
    path = write_target(path)
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is not a directory"
    if parent != path.parent:  # the missing folders will be made: the first existing one must take them
        return None if os.access(parent, os.W_OK | os.X_OK) else f"{parent} is not writable"
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    except OSError as e:
        return f"{why(e)} (in {parent})"
    os.close(fd)
    os.unlink(tmp)
    return None


def check_writable(path: Path | str, what: str = "") -> Path:
    """CannotWrite now, before minutes of work, when a file cannot be written at `path` (see write_problem);
    `what` names the option it came from."""
    problem = write_problem(path)
    if problem:
        label = f"{what} {path}".strip()
        hint = f"name a file in it, e.g. {Path(path) / 'out'}" if problem == "it is a directory" else None
        raise CannotWrite(f"cannot write {label}: {problem}", hint=hint)
    return Path(path)


@contextlib.contextmanager
def _atomic_binary(path: Path) -> Iterator[IO[bytes]]:
    """A binary file that becomes `path` whole or not at all: a temporary file beside it (the umask's mode),
    fsynced and renamed over `path` when the block ends, removed when it raises; an OSError is CannotWrite. A
    symbolic link's target is what is replaced; a FIFO or a character device is written to in place
    (special_kind)."""
    if path.is_dir():
        raise CannotWrite(f"cannot write {path}: it is a directory")
    kind = special_kind(path)
    if kind is not None:
        with _streamed(path, kind) as f:
            yield f
        return
    shown, path = path, write_target(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise CannotWrite(f"cannot write {shown}: {why(e)}") from None
    try:
        os.fchmod(fd, new_file_mode())
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise CannotWrite(f"cannot write {shown}: {why(e)}") from None
        raise


#: what special_kind names, by the file type bits
_KINDS = ((stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
          (stat.S_ISSOCK, "socket"))
#: kinds never written to (a disk's device node; a socket cannot be opened)
_REFUSED = ("block device", "socket")
#: paths that name an open file of this process (/dev/stdout, /proc/self/fd/1): written to, never replaced
_FD_PATHS = ("/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/")


def special_kind(path: Path | str) -> str | None:
    """What `path` is when it is no regular file to replace, following links: "FIFO", "character device" (/dev/null,
    /dev/full, a terminal), "block device", "socket", or "open file" (/dev/stdout, /proc/self/fd/N, whatever they
    point at); None for a regular file, a directory or nothing yet."""
    text = os.path.abspath(str(path))
    try:
        st = os.stat(text)
    except OSError:
        return None
    for test, kind in _KINDS:
        if test(st.st_mode):
            return kind
    if text.startswith(_FD_PATHS) and not stat.S_ISDIR(st.st_mode):
        return "open file"
    return None


def write_target(path: Path | str) -> Path:
    """The file a write to `path` replaces: the final target of a symbolic link (which may not exist yet), else
    `path` itself."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


@contextlib.contextmanager
def _streamed(path: Path, kind: str) -> Iterator[IO[bytes]]:
    """`path` (a FIFO, a character device, an open file) opened and written to in place, as `>` would: never
    replaced, so a reader of the FIFO gets the text and a device node stays one; a failed open or write (ENOSPC on
    /dev/full) is CannotWrite."""
    if kind in _REFUSED:
        raise CannotWrite(f"cannot write {path}: it is a {kind}; profctl writes files, FIFOs and character devices")
    try:
        with open(path, "wb") as f:
            yield f
            f.flush()
    except OSError as e:
        raise CannotWrite(f"cannot write {path}: {why(e)}") from None


def atomic_write_bytes(path: Path | str, data: bytes) -> Path:
    """Write to a temporary file in the same directory, fsync, then rename over `path`; CannotWrite (and no
    file, not even the temporary one) when any step fails."""
    path = Path(path)
    with _atomic_binary(path) as f:
        f.write(data)
    return path


@contextlib.contextmanager
def atomic_open(path: Path | str) -> Iterator[IO[str]]:
    """A text file (UTF-8) to write into a piece at a time, which is at `path` whole or not at all: a temporary
    file beside it, gzip-compressed when the name ends in ``.gz``, fsynced and renamed over `path` when the block
    ends without an error, removed when it raises. For outputs too large to build in memory first (a timeline of
    millions of events); CannotWrite names the path."""
    import gzip

    path = Path(path)
    with _atomic_binary(path) as raw:
        inner: Any = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) if path.name.endswith(".gz") else raw
        text = io.TextIOWrapper(inner, encoding="utf-8", newline="\n")
        try:
            yield text
        finally:
            text.detach()  # flushed into `inner`; closing stays with us
            if inner is not raw:
                inner.close()


def atomic_write_text(path: Path | str, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path | str, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=False, default=_json_default) + "\n")


def _json_default(o: Any) -> Any:
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    raise TypeError(f"cannot serialise {type(o).__name__}")
