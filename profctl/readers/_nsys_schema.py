"""Opening an Nsight Systems SQLite export and knowing its schema: the tables and columns profctl reads (and the
spellings other nsys versions use), the checks that refuse what is not an nsys export, and the one-line errors
for a damaged file. profctl.readers.nsys_sqlite queries what this module opens.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

from profctl.errors import BadReport

SQLITE_MAGIC = b"SQLite format 3\x00"

EVENT_PUSHPOP, EVENT_STARTEND, EVENT_T_PUSHPOP, EVENT_T_STARTEND, EVENT_DOMAIN_CREATE = 59, 60, 70, 71, 75
RANGE_EVENTS = (EVENT_PUSHPOP, EVENT_STARTEND, EVENT_T_PUSHPOP, EVENT_T_STARTEND)
STYLE = {EVENT_PUSHPOP: "push_pop", EVENT_T_PUSHPOP: "push_pop", EVENT_STARTEND: "start_end",
         EVENT_T_STARTEND: "start_end"}
PID_MASK = 0xFFFFFFFFFF000000  # globalTid -> globalPid, as nsys' own scripts derive it
PID_MASK_SQL = -(1 << 24)  # the same mask as a signed 64-bit SQLite integer
DOMAIN_PID_MASK = 0x0000FFFFFF000000

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
STRINGS = "StringIds"

#: logical column -> accepted physical names, first present wins ("?" suffix: optional). Exports of other nsys
#: versions spell some columns differently or lack newer ones; anything else missing is named in the error.
COLUMNS: dict[str, dict[str, tuple[str, ...]]] = {
    KERNEL: {
        "start": ("start",), "end": ("end",), "correlationId": ("correlationId",),
        "globalPid?": ("globalPid", "globalProcessId"), "deviceId?": ("deviceId",), "streamId?": ("streamId",),
        "demangledName": ("demangledName", "name", "nameId"), "shortName?": ("shortName",),
        "mangledName?": ("mangledName",),
        "gridX?": ("gridX",), "gridY?": ("gridY",), "gridZ?": ("gridZ",),
        "blockX?": ("blockX",), "blockY?": ("blockY",), "blockZ?": ("blockZ",),
        "registersPerThread?": ("registersPerThread", "registers"),
        "staticSharedMemory?": ("staticSharedMemory", "staticSharedMemoryBytes"),
        "dynamicSharedMemory?": ("dynamicSharedMemory", "dynamicSharedMemoryBytes"),
    },
    MEMCPY: {
        "start": ("start",), "end": ("end",), "correlationId": ("correlationId",),
        "globalPid?": ("globalPid", "globalProcessId"), "streamId?": ("streamId",), "bytes?": ("bytes",),
        "copyKind?": ("copyKind",), "deviceId?": ("deviceId",),
    },
    MEMSET: {
        "start": ("start",), "end": ("end",), "correlationId": ("correlationId",),
        "globalPid?": ("globalPid", "globalProcessId"), "streamId?": ("streamId",), "bytes?": ("bytes",),
        "deviceId?": ("deviceId",),
    },
    RUNTIME: {
        "start": ("start",), "end": ("end",), "correlationId": ("correlationId",),
        "globalTid": ("globalTid", "globalThreadId"), "nameId": ("nameId", "name"),
    },
    NVTX: {
        "start": ("start",), "end": ("end",), "eventType": ("eventType",), "text?": ("text",),
        "textId?": ("textId",), "globalTid": ("globalTid", "globalThreadId"), "endGlobalTid?": ("endGlobalTid",),
        "domainId?": ("domainId",),
    },
    STRINGS: {"id": ("id",), "value": ("value",)},
}

#: CAPTURE_EVENT_TYPE values in META_DATA_CAPTURE -> the `nsys profile --trace` option that records them
TRACE_OPTION = {"Cuda": "cuda", "NvtxEvents": "nvtx", "OSRuntime": "osrt", "CuBLAS": "cublas", "CuDNN": "cudnn"}

#: API names that can launch GPU work; a cheap pre-filter of the runtime table, checked afterwards (see _launches)
LAUNCH_LIKE = ("%Launch%", "%Memcpy%", "%Memset%", "%Prefetch%", "%memcpy%", "%memset%")


# ---------------------------------------------------------------------------------------------------- opening
def connect(path: Path) -> sqlite3.Connection:
    """Open `path` read-only and immutable (SQLite never writes or locks the user's file)."""
    path = Path(path)
    if not path.exists():
        raise BadReport(f"{path}: no such file")
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError as e:
        raise BadReport(f"{path}: cannot read: {e.strerror}") from None
    if not head.startswith(SQLITE_MAGIC):
        raise BadReport(f"{path}: not an SQLite file (an nsys export starts with 'SQLite format 3')")
    _check_not_truncated(path, head)
    uri = f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"
    try:
        con = sqlite3.connect(uri, uri=True)
        con.text_factory = _text  # a damaged export may hold text that is not UTF-8
        con.execute("PRAGMA temp_store=FILE")
        con.execute("PRAGMA cache_size=-32768")  # 32 MiB page cache, whatever the file's size
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as e:  # a damaged schema's text may not even decode
        raise BadReport(f"{path}: unreadable SQLite file ({str(e)[:200]})") from None
    return con


def _text(b: bytes) -> str:
    return b.decode("utf-8", errors="replace")


def _check_not_truncated(path: Path, head: bytes) -> None:
    """The header records the page size and (when valid) the page count; a shorter file was cut off."""
    if len(head) < 100:
        raise BadReport(f"{path}: truncated SQLite file ({len(head)} bytes, shorter than its header)")
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    valid = head[24:28] == head[92:96]  # "in-header database size" is valid when these counters agree
    size = path.stat().st_size
    if valid and pages and page * pages > size:
        raise BadReport(f"{path}: truncated SQLite file: its header says {page * pages} bytes, the file has {size}")


# ---------------------------------------------------------------------------------------------------- schema
class Schema:
    """Tables and resolved column names of one export; raises BadReport naming what is missing."""

    def __init__(self, con: sqlite3.Connection, path: Path) -> None:
        self.con, self.path = con, path
        self.tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        self._cols: dict[str, dict[str, str | None]] = {}
        # nsys 2024+ writes META_DATA_EXPORT; 2023.x exports keep the same pairs in EXPORT_META_DATA
        self.meta_export = self._kv("META_DATA_EXPORT") or self._kv("EXPORT_META_DATA")
        self.version = self.meta_export.get("EXPORT_PRODUCT_VERSION")
        self.schema_version = self.meta_export.get("EXPORT_SCHEMA_VERSION")

    def _kv(self, table: str) -> dict[str, str]:
        if table not in self.tables:
            return {}
        try:
            return {str(k): str(v) for k, v in self.con.execute(f'SELECT name, value FROM "{table}"')}
        except sqlite3.DatabaseError:
            return {}

    def capture_traces(self) -> list[str]:
        """The CAPTURE_EVENT_TYPE values recorded in META_DATA_CAPTURE (e.g. Cuda, NvtxEvents)."""
        if "META_DATA_CAPTURE" not in self.tables:
            return []
        return [str(r[0]) for r in self.con.execute(
            "SELECT value FROM META_DATA_CAPTURE WHERE name = 'CAPTURE_EVENT_TYPE'")]

    def has(self, table: str) -> bool:
        return table in self.tables

    def cols(self, table: str) -> dict[str, str | None]:
        """Logical column -> physical column (None for an absent optional one)."""
        if table in self._cols:
            return self._cols[table]
        if table not in self.tables:  # a caller that did not ask has(): name the table, not its first column
            raise BadReport(f"{self.path}: this export has no {table} table (recorded without that trace?)")
        present = {r[1] for r in self.con.execute(f'PRAGMA table_info("{table}")')}
        out: dict[str, str | None] = {}
        for logical, names in COLUMNS[table].items():
            optional = logical.endswith("?")
            key = logical.rstrip("?")
            found = next((n for n in names if n in present), None)
            if found is None and not optional:
                ver = f"nsys {self.version}, export schema {self.schema_version}" if self.version else "unknown version"
                raise BadReport(f"{self.path}: table {table} has no column {key!r} "
                                f"(looked for {', '.join(names)}); this export ({ver}) uses a schema profctl does "
                                "not know")
            out[key] = found
        self._cols[table] = out
        return out

    def col(self, table: str, key: str, alias: str = "", default: str = "NULL") -> str:
        """A SQL expression for a logical column (`default` when absent)."""
        c = self.cols(table)[key]
        if c is None:
            return default
        return f'{alias + "." if alias else ""}"{c}"'


def check_nsys_export(schema: Schema) -> None:
    """Refuse SQLite files that are not nsys exports, and exports without CUDA kernels, with one line."""
    path = schema.path
    if STRINGS not in schema.tables or not (schema.meta_export or {KERNEL, RUNTIME, NVTX} & schema.tables):
        raise BadReport(f"{path}: an SQLite file, but not an Nsight Systems export (no StringIds/META_DATA_EXPORT "
                        "tables); export a report with: nsys export --type sqlite REPORT.nsys-rep")
    schema.cols(STRINGS)
    if KERNEL not in schema.tables:
        traces = schema.capture_traces()
        if traces and "Cuda" not in traces:
            have = ", ".join(TRACE_OPTION.get(t, t) for t in traces)
            raise BadReport(f"{path}: no CUDA kernels: the report was recorded without CUDA trace (traced: {have}); "
                            "record with nsys profile --trace=cuda,nvtx,...")
        if RUNTIME not in schema.tables:
            raise BadReport(f"{path}: no CUDA trace data (no CUPTI_ACTIVITY_KIND_KERNEL/RUNTIME tables): record with "
                            "nsys profile --trace=cuda,...")
        raise BadReport(f"{path}: no GPU kernel ran inside the captured range (CUDA trace was on, "
                        "CUPTI_ACTIVITY_KIND_KERNEL is absent): an empty capture range?")


def db_error(path: Path, e: Exception) -> BadReport:
    """The one line for an SQLite error met while reading `path` (damaged, truncated, or an unknown schema)."""
    msg = str(e)[:300]
    if isinstance(e, UnicodeDecodeError):
        return BadReport(f"{path}: damaged SQLite file (text that is not UTF-8 where SQLite keeps its own)")
    if any(w in msg for w in ("malformed", "not a database", "disk I/O", "file is")):
        return BadReport(f"{path}: damaged or truncated SQLite file ({msg})")
    return BadReport(f"{path}: this export cannot be read ({msg}); its schema may come from an nsys version "
                     "profctl does not know")
