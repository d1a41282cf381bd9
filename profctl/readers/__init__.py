"""One reader per file format; `read(path)` picks it by content, not only by extension.

| format                               | module                         |
|--------------------------------------|--------------------------------|
| nsys SQLite export (.sqlite)         | profctl.readers.nsys_sqlite    |
| ncu report (.ncu-rep, .ncu-rep.gz)   | profctl.readers.ncu_rep        |
| ncu CSV (--page raw / details)       | profctl.readers.ncu_csv        |
| torch.profiler trace (.json[.gz])    | profctl.readers.torch_trace    |
| profctl summary JSON                 | profctl.schema.Summary         |
| profctl bench rows (JSON list)       | profctl.readers.bench_json     |
| Proton trace (.chrome_trace)         | profctl.readers.proton_trace   |
| Proton tree (.hatchet)               | profctl.readers.proton_tree    |

Every format may also be gzip- or xz-compressed (profctl.readers._compressed), found by content.

Readers read files and nothing else: they never run a tool. A format that needs one first (an .nsys-rep is
exported to SQLite by nsys; an .ncu-rep without the ncu_report module is exported to CSV by ncu) is handled by
profctl.inputs, which every command and the Python API read through. Every reader opens users' files read-only
and raises BadReport with one line for anything it cannot read; what a reader does not name becomes a one-line
ReaderFault here, never a traceback (tests/unit/test_reader_fuzz.py). Every reader writes the same kernel identity
(profctl.kernels.kernel_id) and NVTX path (profctl.nvtx.canonical_path); docs/summary-schema.md.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
from pathlib import Path
from typing import Any

from profctl.errors import BadReport, NeedsTool, ProfctlError, ReaderFault
from profctl.readers._compressed import DAMAGED, GZIP_MAGIC, compression, open_bytes, plain_copy, plain_name, read_head
from profctl.schema import SCHEMA_ID, Summary, validate, warn

SQLITE_MAGIC = b"SQLite format 3\x00"
NCU_REP_MAGIC = b"NVR\x00"
__all__ = ["GZIP_MAGIC", "KIND_WORDS", "read", "sniff"]

#: what each kind sniff() returns is, in a user's words (a message never says "nsys-sqlite": any SQLite file is
#: that kind until its tables are read)
KIND_WORDS = {"nsys-sqlite": "an SQLite file", "nsys-rep": "an Nsight Systems report (.nsys-rep)",
              "ncu-rep": "an Nsight Compute report (.ncu-rep)", "ncu-csv": "an ncu CSV export",
              "torch-trace": "JSON read as a torch.profiler trace", "summary-json": "a profctl summary (JSON)",
              "bench-json": "bench rows (JSON)"}
#: the first key of a JSON list of objects: profctl's bench rows begin with "backend"
_FIRST_KEY = re.compile(r'^\[\s*\{\s*"([^"]+)"')


def sniff(path: Path) -> str:
    """The format of `path`: nsys-sqlite, nsys-rep, ncu-rep, ncu-csv, torch-trace, summary-json, bench-json,
    proton-trace or proton-tree."""
    if not path.exists():
        raise BadReport(f"{path}: no such file")
    if path.is_dir():
        raise BadReport(f"{path}: is a directory, not a report")
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise BadReport(f"{path}: cannot read: {e.strerror}") from None
    name = path.name.lower()
    if not head:
        if plain_name(Path(name)).endswith((".chrome_trace", ".hatchet")):
            raise BadReport(f"{path}: empty Proton output: Proton writes nothing when no launched kernel had a scope "
                            "(pl.scope / pl.enter_scope in @triton.jit code, after pl.enable_semantic('triton'))")
        raise BadReport(f"{path}: empty file")
    if compression(head):
        name = plain_name(Path(name))
        head = read_head(path)
        if not head:
            raise BadReport(f"{path}: empty once decompressed")
    if head.startswith(SQLITE_MAGIC):
        return "nsys-sqlite"
    if name.endswith(".nsys-rep") or name.endswith(".qdrep"):
        return "nsys-rep"
    if name.endswith(".ncu-rep") or head.startswith(NCU_REP_MAGIC):
        return "ncu-rep"
    return _sniff_text(path, head)


def _sniff_text(path: Path, head: bytes) -> str:
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff").lstrip()
    if text.startswith("{") or text.startswith("["):
        if SCHEMA_ID in text[:400]:
            return "summary-json"
        key = _FIRST_KEY.match(text)
        if text.startswith("[") and '"backend"' in text and ('"status"' in text or '"median_ms"' in text
                                                             or (key is not None and key.group(1) == "backend")):
            return "bench-json"
        from profctl.readers import proton_trace, proton_tree  # a format's reader where the format is met

        if proton_trace.looks_like(text):
            return "proton-trace"
        if proton_tree.looks_like(text):
            return "proton-tree"
        return "torch-trace"
    first = text.splitlines()[0] if text else ""
    if first.startswith('"ID"') or first.startswith('"Process ID"') or "Kernel Name" in first:
        return "ncu-csv"
    if text.startswith("==PROF==") or "==PROF==" in text[:200] or '\n"ID","Process ID"' in text:
        return "ncu-csv"
    raise BadReport(f"{path}: not a report profctl knows (nsys .sqlite/.nsys-rep, ncu .ncu-rep/.csv, "
                    "torch.profiler .json[.gz], Proton .chrome_trace/.hatchet, or a profctl summary)")


_READERS = {
    "nsys-sqlite": "profctl.readers.nsys_sqlite",
    "ncu-rep": "profctl.readers.ncu_rep",
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
    if kind in ("proton-trace", "proton-tree"):
        raise BadReport(f"{p}: a Proton timeline of scopes inside kernels, not a per-kernel summary: profctl report "
                        "shows it on its own (profctl report FILE), profctl explain compares two")
    mod = importlib.import_module(_READERS[kind])
    try:
        summary: Summary = _read_unpacked(p, mod, **options) if kind == "nsys-sqlite" else mod.read(p, **options)
    except ProfctlError:
        raise
    except RecursionError:
        raise BadReport(f"{p}: nested too deeply to be read") from None
    except Exception as e:  # no report may end in a traceback
        raise ReaderFault(f"{p}: cannot be read ({type(e).__name__}: {str(e)[:160]}); the file is damaged in a way "
                          "profctl does not recognise") from None
    _say_when_empty_or_zero(summary)
    return summary


def _say_when_empty_or_zero(s: Summary) -> None:
    """The checks every format shares: a summary with no kernels and no CPU ops, or whose kernels all took 0 ns,
    says so in ``meta["warnings"]`` (a reader may have said it already, in its own words)."""
    said = " ".join(s.warnings)
    kernels = [k for k in s.kernels if k.extra.get("kind", "kernel") == "kernel"]
    if not s.kernels and not s.cpu_ops and not said:
        warn(s.meta, "the report holds no kernels and no CPU ops")
    elif kernels and not any(k.total_ns for k in kernels) and "kernel times are 0" not in said:
        warn(s.meta, "every kernel's time is 0: kernel times are 0 in this report")


def _read_unpacked(p: Path, mod: Any, **options: Any) -> Summary:
    """SQLite reads a file in place: a ``.sqlite.gz``/``.xz`` is decompressed into a temporary directory first
    (the user's file untouched); the summary names the file the user gave."""
    with plain_copy(p, default_name="report.sqlite") as plain:
        s: Summary = mod.read(plain, **options)
    if plain == p:
        return s
    sources = tuple(dataclasses.replace(x, path=str(p)) if x.path == str(plain) else x for x in s.sources)
    return dataclasses.replace(s, sources=sources)


MAX_SUMMARY_BYTES = 1 << 30


def _read_summary_json(p: Path) -> Summary:
    try:
        with open_bytes(p) as f:
            raw = f.read(MAX_SUMMARY_BYTES + 1)
    except DAMAGED as e:
        raise BadReport(f"{p}: truncated or corrupt compressed file ({e})") from None
    if len(raw) > MAX_SUMMARY_BYTES:
        raise BadReport(f"{p}: a summary over {MAX_SUMMARY_BYTES >> 30} GiB; not read")
    try:
        s = Summary.from_dict(json.loads(raw.decode("utf-8"), parse_constant=_no_constant))
        validate(s)
    except RecursionError:
        raise BadReport(f"{p}: JSON nested too deeply to be a {SCHEMA_ID} document") from None
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise BadReport(f"{p}: not a valid {SCHEMA_ID} document: {str(e)[:200]}") from None
    if not s.kernels and not s.cpu_ops and not s.warnings:
        s.meta["warnings"] = ["the summary holds no kernels and no CPU ops"]
    return s


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a summary may hold")
