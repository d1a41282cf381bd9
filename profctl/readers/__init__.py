"""One reader per file format; `read(path)` picks it by content, not only by extension.

| format                               | module                         |
|--------------------------------------|--------------------------------|
| nsys SQLite export (.sqlite)         | profctl.readers.nsys_sqlite    |
| ncu report (.ncu-rep, .ncu-rep.gz)   | profctl.readers.ncu_report     |
| ncu CSV (--page raw / details)       | profctl.readers.ncu_csv        |
| torch.profiler trace (.json[.gz])    | profctl.readers.torch_trace    |
| profctl summary JSON                 | profctl.schema.Summary         |
| profctl bench rows (JSON list)       | profctl.readers.bench_json     |

Readers read files and nothing else: they never run a tool. A format that needs one first (an .nsys-rep is
exported to SQLite by nsys; an .ncu-rep without the ncu_report module is exported to CSV by ncu) is handled by
profctl.inputs, which every command and the Python API read through. Every reader opens users' files read-only
and raises BadReport with one line for anything it cannot read.
"""

from __future__ import annotations

import gzip
import importlib
import json
from pathlib import Path
from typing import Any

from profctl.errors import BadReport
from profctl.schema import SCHEMA_ID, Summary

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"


def sniff(path: Path) -> str:
    """The format of `path`: nsys-sqlite, nsys-rep, ncu-rep, ncu-csv, torch-trace or summary-json."""
    if not path.exists():
        raise BadReport(f"{path}: no such file")
    if path.is_dir():
        raise BadReport(f"{path}: is a directory, not a report")
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise BadReport(f"{path}: cannot read: {e.strerror}") from None
    if not head:
        raise BadReport(f"{path}: empty file")
    name = path.name.lower()
    if head.startswith(SQLITE_MAGIC):
        return "nsys-sqlite"
    if name.endswith(".nsys-rep") or name.endswith(".qdrep"):
        return "nsys-rep"
    if name.endswith(".ncu-rep") or name.endswith(".ncu-rep.gz"):
        return "ncu-rep"
    if head.startswith(GZIP_MAGIC):
        try:
            with gzip.open(path, "rb") as g:
                inner = g.read(4096)
        except (OSError, EOFError) as e:
            raise BadReport(f"{path}: gzip file that cannot be read ({e})") from None
        if inner.startswith(SQLITE_MAGIC):
            return "nsys-sqlite"
        return _sniff_text(path, inner)
    return _sniff_text(path, head)


def _sniff_text(path: Path, head: bytes) -> str:
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff").lstrip()
    if text.startswith("{") or text.startswith("["):
        if SCHEMA_ID in text[:400]:
            return "summary-json"
        if text.startswith("[") and '"backend"' in text and ('"status"' in text or '"median_ms"' in text):
            return "bench-json"
        return "torch-trace"
    first = text.splitlines()[0] if text else ""
    if first.startswith('"ID"') or first.startswith('"Process ID"') or "Kernel Name" in first:
        return "ncu-csv"
    if text.startswith("==PROF==") or "==PROF==" in text[:200]:
        return "ncu-csv"
    raise BadReport(f"{path}: not a report profctl knows (nsys .sqlite/.nsys-rep, ncu .ncu-rep/.csv, "
                    "torch.profiler .json[.gz], or a profctl summary)")


class NeedsTool(BadReport):
    """A report that must be converted by its tool before a reader can read it (an .nsys-rep)."""


_READERS = {
    "nsys-sqlite": "profctl.readers.nsys_sqlite",
    "ncu-rep": "profctl.readers.ncu_report",
    "ncu-csv": "profctl.readers.ncu_csv",
    "torch-trace": "profctl.readers.torch_trace",
}


def read(path: str | Path, *, kind: str | None = None, **options: Any) -> Summary:
    """Read a report file into a Summary. `options` go to the format's reader (e.g. by_range=True); `kind`
    skips sniffing when the caller already knows the format."""
    p = Path(path)
    kind = kind or sniff(p)
    if kind == "summary-json":
        return _read_summary_json(p)
    if kind == "nsys-rep":
        raise NeedsTool(f"{p}: an .nsys-rep is read through its SQLite export (nsys export --type sqlite)")
    if kind == "bench-json":
        raise BadReport(f"{p}: bench rows, not a kernel report: they have no per-kernel summary "
                        "(profctl report shows them as the backend comparison)")
    mod = importlib.import_module(_READERS[kind])
    if kind == "nsys-sqlite" and _is_gzip(p):
        return _read_gunzipped(p, mod, **options)
    summary: Summary = mod.read(p, **options)
    return summary


def _is_gzip(p: Path) -> bool:
    with open(p, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def _read_gunzipped(p: Path, mod: Any, **options: Any) -> Summary:
    """SQLite reads a file in place: a ``.sqlite.gz`` is decompressed into a temporary directory first (the
    user's file untouched); the summary names the file the user gave."""
    import dataclasses
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="profctl-gz-") as td:
        plain = Path(td) / (p.name[:-3] if p.name.endswith(".gz") else p.name)
        try:
            with gzip.open(p, "rb") as fi, open(plain, "wb") as fo:
                shutil.copyfileobj(fi, fo, 1 << 20)
        except (OSError, EOFError) as e:
            raise BadReport(f"{p}: truncated or corrupt gzip file ({e})") from None
        s: Summary = mod.read(plain, **options)
    sources = tuple(dataclasses.replace(x, path=str(p)) if x.path == str(plain) else x for x in s.sources)
    return dataclasses.replace(s, sources=sources)


def _read_summary_json(p: Path) -> Summary:
    opener: Any = gzip.open if p.read_bytes()[:2] == GZIP_MAGIC else open
    try:
        with opener(p, "rt", encoding="utf-8") as f:
            return Summary.from_dict(json.load(f))
    except (ValueError, TypeError, KeyError) as e:
        raise BadReport(f"{p}: not a valid {SCHEMA_ID} document: {e}") from None
