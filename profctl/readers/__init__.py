"""One reader per file format; `read(path)` picks it by content, not only by extension.

| format                               | module                         |
|--------------------------------------|--------------------------------|
| nsys SQLite export (.sqlite)         | profctl.readers.nsys_sqlite    |
| nsys report (.nsys-rep)              | exported with nsys, then above |
| ncu report (.ncu-rep, .ncu-rep.gz)   | profctl.readers.ncu_report     |
| ncu CSV (--page raw / details)       | profctl.readers.ncu_csv        |
| torch.profiler trace (.json[.gz])    | profctl.readers.torch_trace    |
| profctl summary JSON                 | profctl.schema.Summary         |

Every reader opens users' files read-only and raises BadReport with one line for anything it cannot read.
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
        return _sniff_text(path, inner)
    return _sniff_text(path, head)


def _sniff_text(path: Path, head: bytes) -> str:
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff").lstrip()
    if text.startswith("{") or text.startswith("["):
        if SCHEMA_ID in text[:400]:
            return "summary-json"
        return "torch-trace"
    first = text.splitlines()[0] if text else ""
    if first.startswith('"ID"') or first.startswith('"Process ID"') or "Kernel Name" in first:
        return "ncu-csv"
    if text.startswith("==PROF==") or "==PROF==" in text[:200]:
        return "ncu-csv"
    raise BadReport(f"{path}: not a report profctl knows (nsys .sqlite/.nsys-rep, ncu .ncu-rep/.csv, "
                    "torch.profiler .json[.gz], or a profctl summary)")


_READERS = {
    "nsys-sqlite": "profctl.readers.nsys_sqlite",
    "nsys-rep": "profctl.readers.nsys_sqlite",
    "ncu-rep": "profctl.readers.ncu_report",
    "ncu-csv": "profctl.readers.ncu_csv",
    "torch-trace": "profctl.readers.torch_trace",
}


def read(path: str | Path, **options: Any) -> Summary:
    """Read any supported report into a Summary. `options` go to the format's reader (e.g. by_range=True)."""
    p = Path(path)
    kind = sniff(p)
    if kind == "summary-json":
        return _read_summary_json(p)
    modname = _READERS[kind]
    try:
        mod = importlib.import_module(modname)
    except ModuleNotFoundError as e:
        if e.name == modname:
            raise BadReport(f"{p}: reading {kind} files is not implemented yet") from None
        raise
    fn = mod.read_rep if kind == "nsys-rep" else mod.read
    summary: Summary = fn(p, **options)
    return summary


def _read_summary_json(p: Path) -> Summary:
    opener: Any = gzip.open if p.read_bytes()[:2] == GZIP_MAGIC else open
    try:
        with opener(p, "rt", encoding="utf-8") as f:
            return Summary.from_dict(json.load(f))
    except (ValueError, TypeError, KeyError) as e:
        raise BadReport(f"{p}: not a valid {SCHEMA_ID} document: {e}") from None
