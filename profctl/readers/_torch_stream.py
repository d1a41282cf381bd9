"""A streaming parser for Chrome/Kineto traces: the events of ``traceEvents`` one at a time, never the whole file.

``json.load`` of a 1 GB trace takes several GB; here the C decoder (``json.JSONDecoder.raw_decode``) parses one
event at a time over a sliding window of the text, so only one chunk (plus the event being decoded) is held.
The object format (``{"traceEvents": [...], ...}``, other top-level fields returned as a header) and Chrome's
array format (``[...]``, the closing bracket optional) are read. What is not a trace raises :class:`NotJSON`,
:class:`Truncated` or :class:`NotTrace`, which profctl.readers.torch_trace turns into one-line errors.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from profctl.readers._compressed import open_bytes

#: characters read at a time
CHUNK_CHARS = 1 << 20
#: one JSON value (an event, or a top-level field) larger than this is refused rather than buffered
MAX_VALUE_CHARS = 256 << 20
_WS = re.compile(r"[ \t\n\r]*")
#: what may come between two elements of an array: blanks and commas (extra commas are let pass, as always)
_SEP = re.compile(r"[ \t\n\r,]*")


class NotJSON(Exception):
    """The text is not JSON at `offset` (characters from the start)."""

    def __init__(self, msg: str, offset: int) -> None:
        super().__init__(msg)
        self.msg, self.offset = msg, offset


class Truncated(Exception):
    """The file ends inside `where` (a trace still being written, or cut off)."""

    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


class NotTrace(Exception):
    """JSON, but not a Chrome trace (no ``traceEvents``)."""


def open_text(p: Path) -> IO[str]:
    """The trace as text, decompressed on the fly when gzip- or xz-compressed (read-only)."""
    return io.TextIOWrapper(open_bytes(p), encoding="utf-8")


class Stream:
    """A sliding window over a text stream that decodes one JSON value at a time.

    ``raw_decode`` fails on a value cut by the window's end; the window is then extended and the value decoded
    again, so each event is parsed by the C decoder and only one chunk (plus the event) is held at a time.
    `chunk_chars` is how much is read at a time (tests make it tiny, so values straddle every window end).
    """

    def __init__(self, f: IO[str], *, chunk_chars: int = CHUNK_CHARS,
                 max_value_chars: int = MAX_VALUE_CHARS) -> None:
        self.f = f
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.dropped = 0  # characters before buf[0]
        self.chunk_chars, self.max_value_chars = chunk_chars, max_value_chars
        self._dec = json.JSONDecoder()

    def _fill(self, n: int) -> bool:
        if self.eof:
            return False
        data = self.f.read(n)
        if not data:
            self.eof = True
            return False
        if self.pos:
            self.dropped += self.pos
            self.buf = self.buf[self.pos :] + data
            self.pos = 0
        else:
            self.buf += data
        if len(self.buf) > self.max_value_chars:
            raise NotJSON(f"a single JSON value longer than {self.max_value_chars >> 20} Mi characters",
                          self.dropped)
        return True

    def peek(self, skip: re.Pattern[str] = _WS) -> str:
        """The next character that `skip` does not pass over ('' at the end of the file), without consuming it."""
        while True:
            self.pos = skip.match(self.buf, self.pos).end()  # type: ignore[union-attr]  # matches ''
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill(self.chunk_chars):
                return ""

    def value(self, where: str) -> Any:
        """The next JSON value; `where` names what it is part of, for the error of a file ending inside it."""
        self.peek()
        return self.value_here(where)

    def value_here(self, where: str) -> Any:
        """The JSON value that starts at the current position (just after :meth:`peek` found its first
        character)."""
        n = self.chunk_chars
        while True:
            try:
                obj, end = self._dec.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                cut = e.pos >= len(self.buf) - 64 or e.msg.startswith("Unterminated string")
                if cut and self._fill(n):
                    n = min(n * 2, 64 << 20)
                    continue
                if cut:
                    raise Truncated(where) from None
                raise NotJSON(e.msg, self.dropped + e.pos) from None
            if end >= len(self.buf) and not self.eof and self._fill(n):
                continue  # a number or literal may go on in the next chunk
            self.pos = end
            return obj

    def take(self, ch: str, where: str) -> None:
        """Consume the next non-blank character, which must be `ch`."""
        c = self.peek()
        if c != ch:
            if c == "":
                raise Truncated(where)
            raise NotJSON(f"expected {ch!r}, found {c!r}", self.dropped + self.pos)
        self.pos += 1


def events(s: Stream, header: dict[str, Any]) -> Iterator[Any]:
    """The elements of ``traceEvents`` (object format) or of the top-level array (Chrome's array format);
    the other top-level fields go to `header`."""
    c = s.peek()
    if c == "[":
        s.pos += 1
        yield from _array(s, "the event array", open_end=True)
        return
    if c != "{":
        if c == "":
            raise NotJSON("empty file", 0)
        raise NotJSON(f"unexpected {c!r}", s.dropped + s.pos)
    s.pos += 1
    found = False
    while True:
        c = s.peek()
        if c == "}":
            s.pos += 1
            break
        if c == ",":
            s.pos += 1
            continue
        if c == "":
            raise Truncated("the top-level object")
        if c != '"':
            raise NotJSON(f"expected a field name, found {c!r}", s.dropped + s.pos)
        key = s.value("a field name")
        s.take(":", "the top-level object")
        if key == "traceEvents" and s.peek() == "[":
            s.pos += 1
            found = True
            yield from _array(s, "traceEvents", open_end=False)
        else:
            header[key] = s.value(f"the field {key!r}")
    if not found:
        keys = ", ".join(sorted(header)[:6]) or "none"
        raise NotTrace(f"no traceEvents array (top-level fields: {keys})")


def _array(s: Stream, where: str, *, open_end: bool) -> Iterator[Any]:
    """The elements of an array whose ``[`` was consumed (the events: one peek per element, the hot path)."""
    while True:
        c = s.peek(_SEP)
        if c == "]":
            s.pos += 1
            return
        if c == "":
            if open_end:  # Chrome's array format may omit the closing bracket
                return
            raise Truncated(where)
        yield s.value_here(where)
