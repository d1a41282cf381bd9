"""Compressed reports: every format reads the same gzip- (``.gz``) or xz-compressed (``.xz``), recognised by
content, not by name. Readers that stream (torch traces, CSV) decompress on the fly; readers that need a file
(SQLite, ncu_report) get a decompressed copy in a temporary directory, the user's file untouched.
"""

from __future__ import annotations

import gzip
import lzma
import shutil
import tempfile
import zlib
from pathlib import Path
from typing import IO

from profctl.errors import BadReport, ProfctlError

GZIP_MAGIC = b"\x1f\x8b"
XZ_MAGIC = b"\xfd7zXZ\x00"
#: what a damaged or truncated compressed stream raises
DAMAGED = (OSError, EOFError, lzma.LZMAError, zlib.error)
_SUFFIXES = (".gz", ".xz")


def compression(head: bytes) -> str | None:
    """'gzip', 'xz' or None, from a file's first bytes."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(XZ_MAGIC):
        return "xz"
    return None


def file_compression(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            return compression(f.read(6))
    except OSError as e:
        raise BadReport(f"{path}: cannot read: {e.strerror}") from None


def open_bytes(path: Path) -> IO[bytes]:
    """The file's bytes, decompressed when it is compressed (read-only)."""
    kind = file_compression(path)
    if kind == "gzip":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if kind == "xz":
        return lzma.open(path, "rb")
    return open(path, "rb")


def read_head(path: Path, n: int = 4096) -> bytes:
    """The first `n` decompressed bytes; BadReport for a compressed file that cannot be read."""
    try:
        with open_bytes(path) as f:
            return f.read(n)
    except DAMAGED as e:
        raise BadReport(f"{path}: {file_compression(path) or 'compressed'} file that cannot be read ({e})") from None


def plain_name(path: Path) -> str:
    name = path.name
    for s in _SUFFIXES:
        if name.lower().endswith(s):
            return name[: -len(s)] or "report"
    return name


class plain_copy:
    """Context manager: `path` itself when it is not compressed, else a decompressed copy in a temporary
    directory (named as the file without its .gz/.xz, or `default_name`)."""

    def __init__(self, path: Path, default_name: str | None = None) -> None:
        self.path, self.default_name = Path(path), default_name
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> Path:
        kind = file_compression(self.path)
        if kind is None:
            return self.path
        self._tmp = tempfile.TemporaryDirectory(prefix="profctl-unpack-")
        name = plain_name(self.path)
        if name == self.path.name and self.default_name:
            name = self.default_name
        out = Path(self._tmp.name) / name
        self._out = out
        try:
            with open_bytes(self.path) as fi, open(out, "wb") as fo:
                shutil.copyfileobj(fi, fo, 1 << 20)
        except DAMAGED as e:
            self.__exit__()
            raise BadReport(f"{self.path}: truncated or corrupt {kind} file ({e})") from None
        return out

    def __exit__(self, *exc: object) -> None:
        if self._tmp is not None:
            if len(exc) > 1 and isinstance(exc[1], ProfctlError):
                self._shown_as_given(exc[1])
            self._tmp.cleanup()
            self._tmp = None

    def _shown_as_given(self, e: ProfctlError) -> None:
        """An error met while reading the decompressed copy names the user's file, not a temporary folder that is
        gone by the time the error is read."""
        tmp = self._tmp.name if self._tmp else ""
        for old, new in ((str(self._out), str(self.path)), (tmp, str(self.path.parent))):
            if old:
                e.message = e.message.replace(old, new)
                e.hint = e.hint.replace(old, new) if e.hint else e.hint
        if e.log is not None and self._tmp is not None and str(e.log).startswith(self._tmp.name):
            e.log = None  # removed with the folder
        e.args = (e.message,)
