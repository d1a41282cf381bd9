"""Read ncu's CSV exports into a Summary:

* ``--page raw`` (one row per launch, one column per metric, optionally a units row from ``--print-units``);
* ``--page details`` (one row per launch, section and metric label, plus rule results);
* the command-line metrics form, ``ncu --csv --metrics a,b ./app`` (details layout: one row per launch and
  metric, section ``Command line profiler metrics``, the metric's own name as label), with ncu's log lines and
  the application's output around the table.

Values are normalised to base units whatever ncu printed (``us``/``Kbyte`` or ``--print-units base`` ``ns``/
``byte``, thousands separators), so the raw page, the details page and the .ncu-rep they came from give the same
numbers (to the precision ncu printed). Kernel names go through profctl.kernels (mangled names demangled) and
NVTX cells through profctl.nvtx.canonical_parts, so the CSV and its report give the same keys.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

from profctl.errors import BadReport
from profctl.nvtx import DEFAULT_DOMAIN, canonical_parts
from profctl.readers._compressed import DAMAGED, open_bytes
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
#: the columns that name a launch's kernel, one of which every ncu CSV page has
_NAME_COLS = {"Kernel Name", "Function Name", "Demangled Name", "Mangled Name"}
_DIM = re.compile(r"\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")
_QUOTED = re.compile(r'"((?:[^"]|"")*)"')
#: a metric's own name (``gpu__time_duration.sum``), as the command-line metrics form prints in "Metric Name"
_METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*__[A-Za-z0-9_.]+$")
#: ncu's own log lines (==PROF==, ==WARNING==, ==ERROR==, ==INFO==), which may come between table rows
_NCU_LOG = re.compile(r"^==[A-Z]+==")
MAX_CSV_BYTES = 1 << 30
csv.field_size_limit(1 << 28)


def read(path: str | Path, *, by_range: bool = True, **_: Any) -> Summary:
    """The Summary of one ncu CSV export (raw or details page, or the command-line metrics form)."""
    p = Path(path)
    launches = read_launches(p)
    return summarize(launches, path=p, tool_version=None, by_range=by_range, reader="ncu csv")


def read_launches(path: Path, *, shown_as: Path | None = None) -> list[Launch]:
    """One Launch per ID in the file, in ID order."""
    shown = shown_as or path
    rows = _rows(path, shown)
    header = rows[0]
    if len(set(header)) != len(header):
        dup = sorted({h for h in header if header.count(h) > 1})
        raise BadReport(f"{shown}: ncu CSV header repeats column(s) {', '.join(dup[:3])}")
    if not _NAME_COLS & set(header):  # ncu always writes one: a renamed or damaged header, not nameless kernels
        raise BadReport(f"{shown}: ncu CSV without a kernel name column ({', '.join(sorted(_NAME_COLS))}): a "
                        "damaged or edited export")
    if "Metric Name" in header and "Metric Value" in header:
        out = _details(header, rows[1:], shown)
    else:
        out = _raw(header, rows[1:], shown)
    if not out:
        raise BadReport(f"{shown}: ncu CSV with a header but no launch rows")
    return out


def _text_of(path: Path, shown: Path) -> str:
    try:
        with open_bytes(path) as f:
            raw = f.read(MAX_CSV_BYTES + 1)
    except DAMAGED as e:
        raise BadReport(f"{shown}: cannot read, or a truncated or corrupt compressed file ({e})") from None
    if len(raw) > MAX_CSV_BYTES:
        raise BadReport(f"{shown}: an ncu CSV over {MAX_CSV_BYTES >> 30} GiB; export fewer launches or metrics")
    if b"\x00" in raw[:65536]:
        raise BadReport(f"{shown}: binary data, not an ncu CSV export")
    return raw.decode("utf-8", errors="replace").lstrip("\ufeff")


def _rows(path: Path, shown: Path) -> list[list[str]]:
    text = _text_of(path, shown)
    lines = text.splitlines(keepends=True)
    # ncu's stdout carries ==PROF==/==WARNING== lines (and the application's own output; proc logs a "$ argv"
    # line) before, and with --csv on stdout sometimes inside, the table
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise BadReport(f'{shown}: not an ncu CSV export (no header row starting with "ID")')
    body = "".join(ln for ln in lines[start:] if not _NCU_LOG.match(ln))
    try:
        rows = [r for r in csv.reader(io.StringIO(body)) if r]
    except csv.Error as e:
        raise BadReport(f"{shown}: malformed CSV: {e}") from None
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


def _entry_name(rest: str) -> str:
    """The range text of one NVTX entry after its domain: ``<text>:<PL_Type>:<PL_Value>:<CLR_Type>:<Color>:
    <Msg_Type>:<Msg>``. The text may hold ':' itself; ncu repeats it as the message, which decides the split."""
    for i, ch in enumerate(rest):
        if ch != ":":
            continue
        name, tail = rest[:i], rest[i + 1 :]
        if tail.endswith(":" + name) and tail[: len(tail) - len(name) - 1].count(":") == 4:
            return name
    parts = rest.rsplit(":", 6)
    return parts[0] if len(parts) == 7 else rest


def _split_domain(entry: str) -> tuple[str, str]:
    if entry.startswith(DEFAULT_DOMAIN + ":"):
        return DEFAULT_DOMAIN, entry[len(DEFAULT_DOMAIN) + 1 :]
    dom, _, rest = entry.partition(":")
    return dom, rest


def parse_nvtx_cells(push_pop: str, start_end: str = "") -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """ncu's two NVTX cells -> (push/pop stack, open start/end ranges) per domain.

    Push/pop: a thread id, then one quoted entry per range, outermost first,
    ``"<domain>:<range>:<PL_Type>:<PL_Value>:<CLR_Type>:<Color>:<Msg_Type>:<Msg>"``. Start/end: one quoted entry
    per open range, ``"<id>:<domain>:<range>:..."``."""
    pp: dict[str, list[str]] = {}
    for raw in _QUOTED.findall(push_pop or ""):
        dom, rest = _split_domain(raw.replace('""', '"'))
        pp.setdefault(dom, []).append(_entry_name(rest))
    se: dict[str, list[str]] = {}
    for raw in _QUOTED.findall(start_end or ""):
        entry = raw.replace('""', '"')
        rid, sep, rest = entry.partition(":")
        if not sep or not rid.strip().isdigit():
            rest = entry
        dom, rest = _split_domain(rest)
        se.setdefault(dom, []).append(_entry_name(rest))
    return pp, se


def parse_nvtx_cell(cell: str) -> tuple[str, ...]:
    """The canonical path parts of one push/pop cell (kept for callers of the old name)."""
    return canonical_parts(*parse_nvtx_cells(cell))


def _nvtx_columns(header: list[str]) -> tuple[list[int], list[int]]:
    return ([i for i, h in enumerate(header) if "Push/Pop_Range" in h],
            [i for i, h in enumerate(header) if "Start/Stop_Range" in h or "Start/End_Range" in h])


def _new_launch(rec: dict[str, str], cells: tuple[list[str], list[str]], shown: Path, line: int) -> Launch:
    try:
        lid = int(rec["ID"].replace(",", "").strip())
    except (KeyError, ValueError):
        raise BadReport(f"{shown}:{line}: row without a numeric ID") from None
    ln = Launch(id=lid, name="", base_name=(rec.get("Function Name") or "").strip(),
                grid=_dims(rec.get("Grid Size", "")), block=_dims(rec.get("Block Size", "")),
                device=(rec.get("Device") or "").strip() or None, cc=(rec.get("CC") or "").strip() or None)
    ln.set_name(rec.get("Demangled Name") or rec.get("Kernel Name") or "", (rec.get("Mangled Name") or "").strip()
                or None)
    pp: dict[str, list[str]] = {}
    se: dict[str, list[str]] = {}
    for c in cells[0]:
        for d, xs in parse_nvtx_cells(c)[0].items():
            pp.setdefault(d, []).extend(xs)
    for c in cells[1]:
        for d, xs in parse_nvtx_cells("", c)[1].items():
            se.setdefault(d, []).extend(xs)
    ln.set_nvtx(pp, se)
    return ln


def _raw(header: list[str], rows: list[list[str]], shown: Path) -> list[Launch]:
    units: list[str] = [""] * len(header)
    if rows and not rows[0][0].strip():  # the units row printed by --print-units
        units, rows = rows[0], rows[1:]
    pp_cols, se_cols = _nvtx_columns(header)
    nvcols = set(pp_cols) | set(se_cols)
    out = []
    for li, r in enumerate(rows, start=3):
        rec = dict(zip(header, r, strict=True))
        ln = _new_launch(rec, ([r[i] for i in pp_cols], [r[i] for i in se_cols]), shown, li)
        for i, (h, cell) in enumerate(zip(header, r, strict=True)):
            if h in _ID_COLS or i in nvcols:
                continue
            if h == "device__attribute_display_name" and cell.strip():
                ln.device = cell.strip()
                continue
            v = parse_number(cell)
            if v is None:
                continue
            val, unit = to_base(v, units[i])
            ln.metrics[h] = val
            if unit:
                ln.units[h] = unit
        ln.fill_launch_fields()
        _cc_from_metrics(ln)
        out.append(ln)
    return out


def _cc_from_metrics(ln: Launch) -> None:
    ma = ln.metrics.get("device__attribute_compute_capability_major")
    mi = ln.metrics.get("device__attribute_compute_capability_minor")
    if ln.cc is None and ma is not None and mi is not None:
        ln.cc = f"{int(ma)}.{int(mi)}"


def _details(header: list[str], rows: list[list[str]], shown: Path) -> list[Launch]:
    pp_cols, se_cols = _nvtx_columns(header)
    by_id: dict[int, Launch] = {}
    for li, r in enumerate(rows, start=2):
        rec = dict(zip(header, r, strict=True))
        ln = _new_launch(rec, ([r[i] for i in pp_cols], [r[i] for i in se_cols]), shown, li)
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
        if label == "device__attribute_display_name" and rec.get("Metric Value", "").strip():
            ln.device = rec["Metric Value"].strip()
            continue
        v = parse_number(rec.get("Metric Value", ""))
        if v is None:
            continue
        val, unit = to_base(v, rec.get("Metric Unit", ""))
        metric = DETAILS_LABELS.get((section, label))
        if metric is None and _METRIC_NAME.match(label.strip()):
            metric = label.strip()  # the command-line metrics form: the metric's own name
        if metric is None:
            ln.details[f"{section}/{label}"] = val
            continue
        ln.metrics[metric] = val
        if unit:
            ln.units[metric] = unit
    for ln in by_id.values():
        ln.fill_launch_fields()
        _cc_from_metrics(ln)
    return [by_id[k] for k in sorted(by_id)]
