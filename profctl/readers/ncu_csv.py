"""Read ncu's CSV exports into a Summary: ``--page raw`` (one row per launch, one column per metric,
optionally a units row from ``--print-units``) and ``--page details`` (one row per launch, section and metric
label, plus rule results). Values are normalised to base units, so the raw page, the details page and the
.ncu-rep they came from give the same numbers (to the precision ncu printed).
"""

from __future__ import annotations

import csv
import gzip
import io
import re
from pathlib import Path
from typing import Any

from profctl.errors import BadReport
from profctl.kernels import base_name
from profctl.nvtx import DEFAULT_DOMAIN, join_path
from profctl.readers._ncu import (
    DETAILS_LABELS,
    Launch,
    parse_number,
    summarize,
    to_base,
)
from profctl.schema import Summary

#: identity columns of the raw page (everything else is a metric)
_ID_COLS = {
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
    "Function Name",
    "Demangled Name",
    "Mangled Name",
}
_DIM = re.compile(r"\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")
_QUOTED = re.compile(r'"([^"]*)"')


def read(path: str | Path, *, by_range: bool = True, **_: Any) -> Summary:
    """The Summary of one ncu CSV export (raw or details page)."""
    p = Path(path)
    launches = read_launches(p)
    return summarize(launches, path=p, tool_version=None, by_range=by_range, reader="ncu csv")


def read_launches(path: Path, *, shown_as: Path | None = None) -> list[Launch]:
    """One Launch per ID in the file, in ID order."""
    shown = shown_as or path
    rows = _rows(path, shown)
    header = rows[0]
    if "Metric Name" in header and "Metric Value" in header:
        return _details(header, rows[1:], shown)
    return _raw(header, rows[1:], shown)


def _rows(path: Path, shown: Path) -> list[list[str]]:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise BadReport(f"{shown}: cannot read: {e.strerror}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise BadReport(f"{shown}: truncated or corrupt gzip file ({e})") from None
    text = raw.decode("utf-8", errors="replace").lstrip("\ufeff")
    lines = text.splitlines(keepends=True)
    # ncu's stdout may carry ==PROF==/==WARNING== lines (and proc logs a "$ argv" line) before the table
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise BadReport(f'{shown}: not an ncu CSV export (no header row starting with "ID")')
    body = "".join(
        ln for ln in lines[start:] if not ln.startswith("==PROF==") and not ln.startswith("==WARNING==")
    )
    try:
        rows = list(csv.reader(io.StringIO(body)))
    except csv.Error as e:
        raise BadReport(f"{shown}: malformed CSV: {e}") from None
    rows = [r for r in rows if r]
    n = len(rows[0])
    details = "Metric Name" in rows[0]
    last = len(rows) - 1
    for i, r in enumerate(rows[1:], start=1):
        if len(r) == n or (details and len(r) < n and i != last):
            continue
        if details and len(r) < n and i == last and text.endswith("\n"):
            continue
        what = "truncated" if i == last else "malformed"
        raise BadReport(f"{shown}:{start + i + 1}: {what} ncu CSV: {len(r)} fields where the header has {n}")
    if details:
        rows = [r + [""] * (n - len(r)) for r in rows]
    return rows


def _dims(text: str) -> tuple[int, int, int] | None:
    m = _DIM.search(text or "")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def parse_nvtx_cell(cell: str) -> tuple[str, ...]:
    """The NVTX cell of ncu's CSV: a thread id, then one quoted entry per range,
    ``"<domain>:<range>:<PL_Type>:<PL_Value>:<CLR_Type>:<Color>:<Msg_Type>:<Msg>"``; ranges of one domain are
    joined outermost first into ``domain@a/b/c`` (the default domain without a prefix)."""
    per_domain: dict[str, list[str]] = {}
    for entry in _QUOTED.findall(cell or ""):
        if entry.startswith(DEFAULT_DOMAIN + ":"):
            dom, rest = DEFAULT_DOMAIN, entry[len(DEFAULT_DOMAIN) + 1 :]
        else:
            dom, _, rest = entry.partition(":")
        parts = rest.rsplit(":", 6)
        name = parts[0] if len(parts) == 7 else rest
        per_domain.setdefault(dom, []).append(name)
    return tuple(join_path(d, rs) for d, rs in per_domain.items())


def _nvtx_columns(header: list[str]) -> list[int]:
    return [i for i, h in enumerate(header) if "Push/Pop_Range" in h or "Start/Stop_Range" in h]


def _new_launch(rec: dict[str, str], nvtx_cells: list[str], shown: Path, line: int) -> Launch:
    try:
        lid = int(rec["ID"].replace(",", ""))
    except (KeyError, ValueError):
        raise BadReport(f"{shown}:{line}: row without a numeric ID") from None
    name = rec.get("Demangled Name") or rec.get("Kernel Name") or ""
    nv: tuple[str, ...] = ()
    for c in nvtx_cells:
        nv += parse_nvtx_cell(c)
    return Launch(
        id=lid,
        name=name,
        base_name=rec.get("Function Name") or base_name(name),
        mangled=rec.get("Mangled Name") or None,
        nvtx=nv,
        grid=_dims(rec.get("Grid Size", "")),
        block=_dims(rec.get("Block Size", "")),
        device=rec.get("Device") or None,
        cc=rec.get("CC") or None,
    )


def _raw(header: list[str], rows: list[list[str]], shown: Path) -> list[Launch]:
    units: list[str] = [""] * len(header)
    if rows and not rows[0][0].strip():  # the units row printed by --print-units
        units, rows = rows[0], rows[1:]
    nvcols = _nvtx_columns(header)
    out = []
    for li, r in enumerate(rows, start=3):
        rec = dict(zip(header, r, strict=True))
        ln = _new_launch(rec, [r[i] for i in nvcols], shown, li)
        for i, (h, cell) in enumerate(zip(header, r, strict=True)):
            if h in _ID_COLS or i in nvcols:
                continue
            v = parse_number(cell)
            if v is None:
                continue
            val, unit = to_base(v, units[i])
            ln.metrics[h] = val
            if unit:
                ln.units[h] = unit
        ln.fill_launch_fields()
        out.append(ln)
    return out


def _details(header: list[str], rows: list[list[str]], shown: Path) -> list[Launch]:
    nvcols = _nvtx_columns(header)
    by_id: dict[int, Launch] = {}
    for li, r in enumerate(rows, start=2):
        rec = dict(zip(header, r, strict=True))
        ln = _new_launch(rec, [r[i] for i in nvcols], shown, li)
        ln = by_id.setdefault(ln.id, ln)
        section, label = rec.get("Section Name", ""), rec.get("Metric Name", "")
        if rec.get("Rule Name"):
            sp = parse_number(rec.get("Estimated Speedup", ""))
            ln.rules.append(
                {
                    "rule": rec["Rule Name"],
                    "section": section,
                    "type": rec.get("Rule Type", ""),
                    "title": "",
                    "message": rec.get("Rule Description", ""),
                    "speedup_type": rec.get("Estimated Speedup Type", ""),
                    "speedup": sp,
                }
            )
            continue
        if not label:
            continue
        v = parse_number(rec.get("Metric Value", ""))
        if v is None:
            continue
        val, unit = to_base(v, rec.get("Metric Unit", ""))
        metric = DETAILS_LABELS.get((section, label))
        if metric is None:
            ln.details[f"{section}/{label}"] = val
            continue
        ln.metrics[metric] = val
        if unit:
            ln.units[metric] = unit
    for ln in by_id.values():
        ln.fill_launch_fields()
    return [by_id[k] for k in sorted(by_id)]
