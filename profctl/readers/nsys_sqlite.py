"""Read any Nsight Systems SQLite export (``nsys export --type sqlite``) into a Summary.

Two groupings, with nsys' own definitions (docs/nsys.md says how each was checked):

* per kernel name, as ``nsys stats --report cuda_gpu_kern_sum``: instances, total, avg, median (mean of the
  middle two for even counts), min, max and sample standard deviation of ``end - start`` of every row of
  CUPTI_ACTIVITY_KIND_KERNEL with that demangled name; memcpy and memset rows are added per copy kind;
* per NVTX range, as ``nvtx_gpu_proj_sum``: push/pop and start/end ranges that start and end on the same thread
  are projected onto the GPU. A GPU operation (kernel, memcpy, memset) belongs to a range when the CUDA API call
  that launched it (joined on ``correlationId`` within the process) lies inside the range on the range's own
  thread; the projection of one range instance spans from the start of its first GPU operation to the end of
  its last. Instances with no GPU operation are not projected. Per range name and style: projected instances,
  total/avg/med/min/max/std of the projected durations, total range time of the projected instances, GPU ops,
  average stack level and children of the projected ranges.

Bounded memory and time on large exports: everything heavy runs inside SQLite (temporary tables in a temporary
file, never in the user's file, which is opened read-only and immutable); Python only streams sorted durations
one kernel name at a time and holds one small tuple per NVTX range instance.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from profctl.errors import BadReport
from profctl.schema import KernelRow, RangeRow, Source, Summary, durations_stats, warn

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
        "copyKind?": ("copyKind",),
    },
    MEMSET: {
        "start": ("start",), "end": ("end",), "correlationId": ("correlationId",),
        "globalPid?": ("globalPid", "globalProcessId"), "streamId?": ("streamId",), "bytes?": ("bytes",),
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


# ---------------------------------------------------------------------------------------------------- results
@dataclass(slots=True)
class RangeInstance:
    """One NVTX range instance and its GPU projection (proj_* are None when it launched no GPU work)."""

    rid: int
    tid: int
    start: int
    end: int
    style: str
    domain: str
    text: str
    proj_start: int | None = None
    proj_end: int | None = None
    ops: int = 0
    streams: frozenset[int] = field(default_factory=frozenset)
    level: int = 0
    children: int = 0

    @property
    def label(self) -> str:
        return f"{self.domain}:{self.text}" if self.domain else self.text


class NsysExport:
    """One open export. Queries are methods; temporary tables live in the connection's temp schema only."""

    def __init__(self, path: str | Path, *, window: str | None = None) -> None:
        """`window='profiler-api'` keeps only GPU work launched, and NVTX ranges lying, between
        cudaProfilerStart and cudaProfilerStop (the measured iterations of a capture that ignores range ends)."""
        self.path = Path(path)
        self.con = connect(self.path)
        try:
            self.schema = Schema(self.con, self.path)
            check_nsys_export(self.schema)
            for t in (KERNEL, RUNTIME):
                if self.schema.has(t):
                    self.schema.cols(t)
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            self.close()
            raise BadReport(f"{self.path}: damaged SQLite file ({str(e)[:200]})") from None
        except BaseException:
            self.close()
            raise
        if window not in (None, "profiler-api"):
            raise ValueError(f"unknown window {window!r}")
        self.window = window
        self._strings: dict[int, str] = {}
        self._missing: set[int] = set()
        self._generic: list[int] | None = None
        self._launches_ready = False
        self._windows: list[tuple[int, int, int | None]] | None = None

    def close(self) -> None:
        try:
            self.con.close()
        except Exception:
            pass

    def __enter__(self) -> NsysExport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------------ helpers
    def q(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self.con.execute(sql, params)
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            raise _db_error(self.path, e) from None

    def string(self, sid: int | None) -> str:
        if sid is None:
            return ""
        s = self._strings.get(sid)
        if s is None:
            row = self.q(f'SELECT "{self.schema.cols(STRINGS)["value"]}" FROM {STRINGS} WHERE '
                         f'"{self.schema.cols(STRINGS)["id"]}" = ?', (sid,)).fetchone()
            if row is None or row[0] is None:
                self._missing.add(int(sid) if isinstance(sid, int) else -1)
            s = str(row[0]) if row and row[0] is not None else f"<string {sid}>"
            self._strings[sid] = s
        return s

    def valid_times(self, table: str, alias: str = "") -> str:
        """SQL: the row's start and end are integers and the end is not before the start (a damaged export may
        hold anything; such rows are left out and counted in a warning)."""
        a, b = self.schema.col(table, "start", alias), self.schema.col(table, "end", alias)
        return f"(typeof({a}) = 'integer' AND typeof({b}) = 'integer' AND {b} >= {a})"

    def _generic_ids(self) -> list[int]:
        """String ids of demangled kernel names that are only a generic base (CUTLASS ``Kernel``), when the export
        also has mangled names to tell those kernels apart."""
        if self._generic is None:
            from profctl.kernels import is_generic

            self._generic = []
            if self.schema.cols(KERNEL)["mangledName"] is not None and self._name_is_string_id():
                d = self.schema.col(KERNEL, "demangledName")
                ids = [int(r[0]) for r in self.q(f"SELECT DISTINCT {d} FROM {KERNEL}") if isinstance(r[0], int)]
                self._generic = [i for i in ids if is_generic(self.string(i))]
        return self._generic

    def _kname(self, alias: str = "") -> str:
        """SQL for a kernel's name key: the demangled name's id, or -1 - the mangled name's id where the demangled
        name is a generic base (:meth:`kernel_name` reads both)."""
        d = self.schema.col(KERNEL, "demangledName", alias)
        g = self._generic_ids()
        if not g:
            return d
        m = self.schema.col(KERNEL, "mangledName", alias)
        return f"(CASE WHEN {d} IN ({','.join(map(str, g))}) AND {m} IS NOT NULL THEN -1 - {m} ELSE {d} END)"

    def kernel_name(self, nid: Any, by_id: bool) -> str:
        """The name of a kernel name key (see :meth:`_kname`)."""
        from profctl.kernels import readable

        if not by_id:
            return str(nid)
        if isinstance(nid, int) and nid < 0:
            return readable("", self.string(-1 - nid))
        return readable(self.string(nid))

    def _name_is_string_id(self) -> bool:
        """Kernel names are StringIds references in every export seen; very old ones stored text."""
        t = self.q(f'SELECT typeof({self.schema.col(KERNEL, "demangledName")}) FROM {KERNEL} LIMIT 1').fetchone()
        return t is None or t[0] == "integer"

    def gpu_info(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.schema.has("TARGET_INFO_GPU"):
            try:
                rows = self.q("SELECT * FROM TARGET_INFO_GPU").fetchall()
                cols = [d[0] for d in self.q("SELECT * FROM TARGET_INFO_GPU LIMIT 0").description]
                out["gpus"] = [{k: r[cols.index(k)] for k in ("id", "name", "smCount", "clockRate", "chipName")
                                if k in cols} for r in rows]
            except BadReport:
                pass
        names = sorted({str(g["name"]) for g in out.get("gpus", []) if g.get("name")})
        if names:
            out["devices"] = names
        return out

    def _check(self, kernels: list[KernelRow], meta: dict[str, Any]) -> None:
        """Warnings for what the export holds that is odd: records ending before they start (left out), string
        ids missing from StringIds (names shown as ``<string N>``), no version."""
        for t in (KERNEL, MEMCPY, MEMSET):
            if not self.schema.has(t):
                continue
            (n,) = self.q(f"SELECT count(*) FROM {t} WHERE NOT ({self.valid_times(t)})").fetchone()
            if n:
                warn(meta, f"{n} record(s) of {t} have no valid times (not numbers, or the end before the start): "
                           "left out")
        if self._missing:
            warn(meta, f"{len(self._missing)} string id(s) missing from StringIds (names shown as <string N>)")
        if not self.schema.version:
            warn(meta, "the export names no nsys version (no META_DATA_EXPORT/EXPORT_META_DATA)")

    # ------------------------------------------------------------------------------------------------ windows
    def windows(self) -> list[tuple[int, int, int | None]]:
        """(start, end, globalPid) of every cudaProfilerStart..Stop stretch, per process, from the runtime table."""
        if self._windows is not None:
            return self._windows
        out: list[tuple[int, int, int | None]] = []
        if self.schema.has(RUNTIME):
            rc = self.schema.cols(RUNTIME)
            ids = {int(i): str(v) for i, v in self.q(
                f'SELECT id, value FROM {STRINGS} WHERE typeof(id) = \'integer\' AND '
                f'(value LIKE "cudaProfilerSt%" OR value LIKE "cuProfilerSt%")')}
            if ids:
                marks = ",".join(str(i) for i in ids)
                rows = self.q(f'SELECT "{rc["start"]}", "{rc["end"]}", "{rc["globalTid"]}", "{rc["nameId"]}" '
                              f'FROM {RUNTIME} WHERE "{rc["nameId"]}" IN ({marks}) AND {self.valid_times(RUNTIME)} '
                              f"AND typeof(\"{rc['globalTid']}\") IN ('integer', 'null') ORDER BY 1").fetchall()
                open_at: dict[int | None, int] = {}
                seen: set[int | None] = set()
                lo, hi = -(2**62), 2**62
                for st, en, tid, nid in rows:
                    pid = (int(tid) & PID_MASK) if tid is not None else None
                    if "Start" in ids[int(nid)]:
                        open_at.setdefault(pid, int(en))
                    elif pid in open_at:
                        out.append((open_at.pop(pid), int(st), pid))
                    elif pid not in seen:  # the capture began inside the first Start call: no record of it
                        out.append((lo, int(st), pid))
                    seen.add(pid)
                out += [(begin, hi, pid) for pid, begin in open_at.items()]
        self._windows = sorted(out)
        return self._windows

    def _window_sql(self, start: str, end: str, pid: str | None) -> str:
        """A SQL condition: [start, end] lies inside one profiler window (of the same process when known)."""
        ws = self.windows()
        if not ws:
            return "1"
        parts = []
        for lo, hi, wpid in ws:
            cond = f"({start} >= {lo} AND {end} <= {hi}"
            if wpid is not None and pid is not None:
                cond += f" AND {pid} = {wpid}"
            parts.append(cond + ")")
        return "(" + " OR ".join(parts) + ")"

    # ------------------------------------------------------------------------------------------------ launches
    def _build_launches(self) -> None:
        """temp.ops: every GPU operation; temp.launches: each one joined to the API call that launched it.

        A plain join of the kernel table to the runtime table makes SQLite index the whole runtime table (tens of
        millions of rows in long runs). Instead the few GPU operations are indexed, and only runtime rows whose API
        name can launch GPU work are probed; operations still unmatched after that are looked up once more
        among all other runtime rows, so the result equals the full join.
        """
        if self._launches_ready:
            return
        s = self.schema
        parts = []
        for kind, t in ((0, KERNEL), (1, MEMCPY), (2, MEMSET)):
            if not s.has(t):
                continue
            name = self._kname() if t == KERNEL else (s.col(t, "copyKind") if t == MEMCPY else "NULL")
            parts.append(f'SELECT {s.col(t, "correlationId")} AS corr, {s.col(t, "globalPid")} AS gpid, '
                         f'{s.col(t, "start")} AS gs, {s.col(t, "end")} AS ge, {kind} AS kind, {name} AS name, '
                         f'{s.col(t, "streamId")} AS stream, {s.col(t, "bytes") if t != KERNEL else "NULL"} AS bytes '
                         f"FROM {t} WHERE {self.valid_times(t)}")
        self.q("DROP TABLE IF EXISTS temp.ops")
        self.q("DROP TABLE IF EXISTS temp.launches")
        self.q("CREATE TEMP TABLE ops AS " + " UNION ALL ".join(parts))
        self.q("CREATE INDEX temp.ops_corr ON ops(corr)")
        rc = s.cols(RUNTIME)
        cand = [int(r[0]) for r in self.q(
            f"SELECT id FROM {STRINGS} WHERE typeof(id) = 'integer' AND (" +
            " OR ".join("value LIKE ?" for _ in LAUNCH_LIKE) + ")", LAUNCH_LIKE)]
        in_cand = f'r."{rc["nameId"]}" IN ({",".join(map(str, cand)) or "NULL"})'
        same_pid = f'AND (o.gpid IS NULL OR o.gpid = (r."{rc["globalTid"]}" & {PID_MASK_SQL}))'
        select = (f'SELECT r."{rc["globalTid"]}" AS tid, r."{rc["start"]}" AS rs, r."{rc["end"]}" AS re, '
                  f"o.corr AS corr, o.gpid AS gpid, o.gs AS gs, o.ge AS ge, o.kind AS kind, o.name AS name, "
                  f"o.stream AS stream, o.bytes AS bytes "
                  f'FROM {RUNTIME} AS r CROSS JOIN ops AS o ON o.corr = r."{rc["correlationId"]}" {same_pid} '
                  f'AND typeof(r."{rc["start"]}") = \'integer\' AND typeof(r."{rc["end"]}") = \'integer\'')
        self.q(f"CREATE TEMP TABLE launches AS {select} WHERE {in_cand}")
        n_ops = self.q("SELECT count(*) FROM ops WHERE corr IS NOT NULL").fetchone()[0]
        n_l = self.q("SELECT count(*) FROM launches").fetchone()[0]
        if n_l < n_ops:  # some operation's launch has another API name (or none is recorded): look for it
            self.q("CREATE INDEX temp.launches_corr ON launches(corr)")
            self.q("DROP TABLE IF EXISTS temp.ops_miss")
            self.q("CREATE TEMP TABLE ops_miss AS SELECT * FROM ops AS o WHERE o.corr IS NOT NULL AND NOT EXISTS "
                   "(SELECT 1 FROM launches AS l WHERE l.corr = o.corr AND l.gs = o.gs AND l.kind = o.kind)")
            self.q("CREATE INDEX temp.ops_miss_corr ON ops_miss(corr)")
            self.q(f"INSERT INTO launches {select.replace('CROSS JOIN ops AS o', 'CROSS JOIN ops_miss AS o')} "
                   f"WHERE NOT {in_cand}")
        self.q("CREATE INDEX temp.launches_tid ON launches(tid, rs)")
        self._launches_ready = True

    # ------------------------------------------------------------------------------------------------ kernels
    _CFG = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread", "staticSharedMemory",
            "dynamicSharedMemory")

    def _kernel_source(self) -> str:
        """The kernel rows to summarize: the whole table, or (window) those launched inside a profiler window."""
        if not (self.window and self.windows()):
            return KERNEL
        self._build_launches()
        k = self.schema.cols(KERNEL)
        self.q("DROP TABLE IF EXISTS temp.wk")
        self.q(f'CREATE TEMP TABLE wk AS SELECT * FROM {KERNEL} WHERE ("{k["correlationId"]}", "{k["start"]}") IN '
               f"(SELECT corr, gs FROM launches AS l WHERE l.kind = 0 AND "
               f"{self._window_sql('l.rs', 'l.re', 'l.gpid')})")
        return "temp.wk"

    def kernel_durations(self, source: str = KERNEL) -> Iterator[tuple[Any, list[float]]]:
        """(name id, ascending durations) per kernel name, one name at a time (SQLite sorts; Python streams)."""
        s = self.schema
        name, start, end = self._kname(), s.col(KERNEL, "start"), s.col(KERNEL, "end")
        cur = self.q(f"SELECT {name}, {end} - {start} AS d FROM {source} WHERE {self.valid_times(KERNEL)} "
                     "ORDER BY 1, 2")
        cur_name: Any = None
        durs: list[float] = []
        try:
            while True:
                rows = cur.fetchmany(65536)
                if not rows:
                    break
                for nm, d in rows:
                    if nm != cur_name:
                        if durs:
                            yield cur_name, durs
                        cur_name, durs = nm, []
                    durs.append(float(d))
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            raise _db_error(self.path, e) from None
        if durs:
            yield cur_name, durs

    def launch_configs(self, source: str = KERNEL) -> dict[Any, list[tuple[tuple[Any, ...], int]]]:
        """Name id -> [(grid xyz, block xyz, registers, static smem, dynamic smem), launches] (most used first)."""
        s = self.schema
        name = self._kname()
        cfg = ", ".join(s.col(KERNEL, c, "", "0") for c in self._CFG)
        distinct: dict[Any, list[tuple[Any, ...]]] = defaultdict(list)
        for r in self.q(f"SELECT DISTINCT {name}, {cfg} FROM {source}"):
            distinct[r[0]].append(tuple(r[1:]))
        out: dict[Any, list[tuple[tuple[Any, ...], int]]] = {}
        multi = [n for n, cs in distinct.items() if len(cs) > 1]
        if multi:
            names = ",".join("?" * len(multi))
            counts: dict[Any, list[tuple[tuple[Any, ...], int]]] = defaultdict(list)
            group = ", ".join(["1"] + [s.col(KERNEL, c) for c in self._CFG if s.cols(KERNEL)[c] is not None])
            for r in self.q(f"SELECT {name}, {cfg}, count(*) FROM {source} WHERE {name} IN ({names}) "
                            f"GROUP BY {group}", multi):
                counts[r[0]].append((tuple(r[1:-1]), int(r[-1])))
            out.update({n: sorted(v, key=lambda x: -x[1]) for n, v in counts.items()})
        for n, cs in distinct.items():
            if len(cs) == 1:
                out[n] = [(cs[0], -1)]  # count filled in by the caller (all launches of the name)
        return out

    def kernel_rows(self) -> list[KernelRow]:
        from profctl import kernels as kn

        s = self.schema
        by_id = self._name_is_string_id()
        source = self._kernel_source()
        shorts: dict[Any, Any] = {}
        if s.cols(KERNEL)["shortName"] is not None:
            shorts = dict(self.q(f'SELECT DISTINCT {self._kname()}, {s.col(KERNEL, "shortName")} '
                                 f"FROM {source}").fetchall())
        configs = self.launch_configs(source)
        out = []
        for nid, durs in self.kernel_durations(source):
            name = self.kernel_name(nid, by_id)
            sid = shorts.get(nid)
            short = (self.string(sid) if by_id else str(sid)) if sid is not None else ""
            if not short or kn.is_generic(short) or short.startswith("<string "):
                short = kn.short_name(name)
            st = durations_stats(durs)
            cfgs = [(c, len(durs) if n < 0 else n) for c, n in configs.get(nid, [])]
            extra: dict[str, Any] = {"kind": "kernel", "launch_configs": [
                {"grid": list(c[0:3]), "block": list(c[3:6]), "registers_per_thread": c[6],
                 "static_smem_bytes": c[7], "dynamic_smem_bytes": c[8], "count": n} for c, n in cfgs[:8]]}
            if len(cfgs) > 8:
                extra["launch_configs_more"] = len(cfgs) - 8
            out.append(KernelRow(tool="nsys", name=name, short_name=short, kernel_class=kn.classify(name),
                                 nvtx_range=None, count=int(st["count"]), total_ns=st["total_ns"],
                                 avg_ns=st["avg_ns"], med_ns=st["med_ns"], min_ns=st["min_ns"],
                                 max_ns=st["max_ns"], std_ns=st["std_ns"], extra=extra))
        return out

    def memop_rows(self) -> list[KernelRow]:
        """Memcpy per copy kind and memset, as nsys names them ('[CUDA memcpy Host-to-Device]', '[CUDA memset]')."""
        s = self.schema
        labels: dict[int, str] = {}
        if s.has("ENUM_CUDA_MEMCPY_OPER"):
            try:
                labels = {int(i): str(lab) for i, lab in self.q("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER")}
            except BadReport:
                labels = {}
        out = []
        for t, cls in ((MEMCPY, "memcpy"), (MEMSET, "memset")):
            if not s.has(t):
                continue
            c = s.cols(t)
            key = s.col(t, "copyKind", "m", "NULL") if t == MEMCPY else "NULL"
            if self.window and self.windows():
                self._build_launches()
                kind = 1 if t == MEMCPY else 2
                sql = (f"SELECT l.name, l.ge - l.gs, l.bytes FROM launches AS l WHERE l.kind = {kind} AND "
                       "l.ge >= l.gs AND "
                       f"{self._window_sql('l.rs', 'l.re', 'l.gpid')} ORDER BY 1, 2")
            else:
                sql = (f'SELECT {key}, m."{c["end"]}" - m."{c["start"]}", {s.col(t, "bytes", "m", "0")} '
                       f"FROM {t} AS m WHERE {self.valid_times(t, 'm')} ORDER BY 1, 2")
            groups: dict[Any, tuple[list[float], int]] = {}
            for k, d, b in self.q(sql):
                durs, nbytes = groups.get(k, ([], 0))
                durs.append(float(d))
                groups[k] = (durs, nbytes + int(b or 0))
            for k, (durs, nbytes) in groups.items():
                if t == MEMCPY:
                    name = f"[CUDA memcpy {labels.get(int(k), str(k)) if k is not None else 'Unknown'}]"
                else:
                    name = "[CUDA memset]"
                st = durations_stats(durs)
                out.append(KernelRow(tool="nsys", name=name, short_name=name, kernel_class=cls, nvtx_range=None,
                                     count=int(st["count"]), total_ns=st["total_ns"], avg_ns=st["avg_ns"],
                                     med_ns=st["med_ns"], min_ns=st["min_ns"], max_ns=st["max_ns"],
                                     std_ns=st["std_ns"], extra={"kind": cls, "bytes": nbytes}))
        return out

    # ------------------------------------------------------------------------------------------------ NVTX
    def _domains(self) -> dict[tuple[int, int], str]:
        """(domainId, process bits) -> domain name, from the domain-create events."""
        n = self.schema.cols(NVTX)
        text = self._text_expr("e")
        out: dict[tuple[int, int], str] = {}
        if n["domainId"] is None:
            return out
        for did, tid, name in self.q(
                f'SELECT e."{n["domainId"]}", e."{n["globalTid"]}", {text} FROM {NVTX} AS e '
                f'{self._text_join("e")} WHERE e."{n["eventType"]}" = {EVENT_DOMAIN_CREATE} ORDER BY e."{n["start"]}"'):
            key = (int(did), int(tid or 0) & DOMAIN_PID_MASK)
            out.setdefault(key, str(name or ""))
        return out

    def _text_expr(self, alias: str) -> str:
        n = self.schema.cols(NVTX)
        parts = []
        if n["textId"] is not None:
            parts.append("sid.value")
        if n["text"] is not None:
            parts.append(f'{alias}."{n["text"]}"')
        if not parts:
            return "''"
        return f"coalesce({', '.join(parts)}, '')" if len(parts) > 1 else f"coalesce({parts[0]}, '')"

    def _text_join(self, alias: str) -> str:
        n = self.schema.cols(NVTX)
        if n["textId"] is None:
            return ""
        return f'LEFT JOIN {STRINGS} AS sid ON sid.id = {alias}."{n["textId"]}"'

    def _build_ranges(self) -> bool:
        """temp.rng: the NVTX ranges that start and end on one thread (nsys projects only those)."""
        if not self.schema.has(NVTX):
            return False
        n = self.schema.cols(NVTX)
        same = (f'AND (e."{n["endGlobalTid"]}" IS NULL OR e."{n["endGlobalTid"]}" = e."{n["globalTid"]}")'
                if n["endGlobalTid"] else "")
        win = ""
        if self.window and self.windows():
            win = "AND " + self._window_sql(f'e."{n["start"]}"', f'e."{n["end"]}"',
                                             f'(e."{n["globalTid"]}" & {PID_MASK_SQL})')
        self.q("DROP TABLE IF EXISTS temp.rng")
        self.q(f'CREATE TEMP TABLE rng AS SELECT e.rowid AS rid, e."{n["globalTid"]}" AS tid, '
               f'e."{n["start"]}" AS start, e."{n["end"]}" AS "end", e."{n["eventType"]}" AS etype, '
               f'{self.schema.col(NVTX, "domainId", "e", "0")} AS did, {self._text_expr("e")} AS text '
               f'FROM {NVTX} AS e {self._text_join("e")} '
               f'WHERE e."{n["eventType"]}" IN ({",".join(map(str, RANGE_EVENTS))}) AND {self.valid_times(NVTX, "e")} '
               f"AND typeof(e.\"{n['globalTid']}\") IN ('integer', 'null') {same} {win}")
        return True

    def range_instances(self) -> list[RangeInstance]:
        """Every same-thread NVTX range with its projection, stack level and children (projected ranges only)."""
        if not self._build_ranges():
            return []
        domains = self._domains()
        out: dict[int, RangeInstance] = {}
        for rid, tid, start, end, etype, did, text in self.q(
                'SELECT rid, tid, start, "end", etype, did, text FROM rng'):
            dom = domains.get((int(did or 0), int(tid or 0) & DOMAIN_PID_MASK), "") if did else ""
            out[int(rid)] = RangeInstance(int(rid), int(tid or 0), int(start), int(end), STYLE[int(etype)], dom,
                                          str(text))
        if self.schema.has(RUNTIME) and out:
            self._build_launches()
            win = f"AND {self._window_sql('l.rs', 'l.re', 'l.gpid')}" if (self.window and self.windows()) else ""
            for rid, ps, pe, nops, streams in self.q(
                    "SELECT n.rid, min(l.gs), max(l.ge), count(*), group_concat(DISTINCT l.stream) FROM rng AS n "
                    "JOIN launches AS l ON l.tid = n.tid AND l.rs >= n.start AND l.rs <= n.\"end\" "
                    f"AND l.re <= n.\"end\" {win} GROUP BY n.rid"):
                r = out[int(rid)]
                r.proj_start, r.proj_end, r.ops = int(ps), int(pe), int(nops)
                r.streams = frozenset(int(x) for x in str(streams).split(",") if x) if streams else frozenset()
        _hierarchy([r for r in out.values() if r.proj_start is not None])
        return list(out.values())

    def range_rows(self, instances: list[RangeInstance] | None = None) -> list[RangeRow]:
        insts = self.range_instances() if instances is None else instances
        groups: dict[tuple[str, str, str], list[RangeInstance]] = defaultdict(list)
        for r in insts:
            groups[(r.domain, r.text, r.style)].append(r)
        out = []
        for (dom, text, style), rs in groups.items():
            proj = [r for r in rs if r.proj_start is not None]
            durs = [float(r.proj_end - r.proj_start) for r in proj]  # type: ignore[operator]
            st = durations_stats(durs)
            n = len(proj)
            extra: dict[str, Any] = {
                "proj_instances": n,
                "proj_range_total_ns": float(sum(r.end - r.start for r in proj)),
                "proj_avg_ns": st["avg_ns"], "proj_med_ns": st["med_ns"], "proj_min_ns": st["min_ns"],
                "proj_max_ns": st["max_ns"], "proj_std_ns": st["std_ns"],
                "avg_gpu_ops": (sum(r.ops for r in proj) / n) if n else 0.0,
                "avg_level": (sum(r.level for r in proj) / n) if n else None,
                "avg_children": (sum(r.children for r in proj) / n) if n else None,
                "nsys_name": f"{dom}:{text}",
            }
            out.append(RangeRow(name=text, domain=dom or None, style=style, count=len(rs),
                                range_total_ns=float(sum(r.end - r.start for r in rs)),
                                gpu_proj_total_ns=st["total_ns"] if n else 0.0,
                                gpu_ops=sum(r.ops for r in proj), extra=extra))
        return out

    def kernels_by_range(self, meta: dict[str, Any] | None = None) -> list[KernelRow]:
        """Per (canonical NVTX path, kernel name): each launch in the path of the ranges open at its API call, as
        ncu records it (profctl.readers._nsys_paths; launches of autograd's worker thread outside any range take
        the ranges of the thread that called backward()). How launches were attributed goes into `meta`."""
        from profctl import kernels as kn
        from profctl.readers import _nsys_paths

        if not self.schema.has(NVTX) or not self.schema.has(RUNTIME):
            return []
        self._build_launches()
        by_id = self._name_is_string_id()
        win = f"AND {self._window_sql('l.rs', 'l.re', 'l.gpid')}" if (self.window and self.windows()) else ""
        rows, idx = _nsys_paths.kernel_paths(self, win)
        out = []
        for (path, nid), durs in rows.durs.items():
            name = self.kernel_name(nid, by_id)
            st = durations_stats(durs)
            extra: dict[str, Any] = {"kind": "kernel", "nvtx_instances": len(rows.instances[(path, nid)])}
            if rows.borrowed.get((path, nid)):
                extra["borrowed_launches"] = rows.borrowed[(path, nid)]
            out.append(KernelRow(tool="nsys", name=name, short_name=kn.short_name(name),
                                 kernel_class=kn.classify(name), nvtx_range=path, count=int(st["count"]),
                                 total_ns=st["total_ns"], avg_ns=st["avg_ns"], med_ns=st["med_ns"],
                                 min_ns=st["min_ns"], max_ns=st["max_ns"], std_ns=st["std_ns"], extra=extra))
        if meta is not None:
            if rows.borrowed_from:
                meta["nvtx_borrowed"] = [
                    {"launches": n, "thread": idx.names.get(t, str(t)), "from_thread": idx.names.get(u, str(u))}
                    for (t, u), n in sorted(rows.borrowed_from.items())]
                meta.setdefault("notes", []).append(
                    f"{sum(rows.borrowed_from.values())} kernel launch(es) on autograd's worker thread, outside "
                    "any range there, are placed in the ranges open on the thread that called backward()")
            if idx.inverted:
                warn(meta, f"{idx.inverted} NVTX range(s) end before they start; left out of the ranges")
        return out

    def api_rows(self, limit: int = 50) -> list[dict[str, Any]]:
        """CUDA runtime/driver API calls per name: count and total time (a full scan of the runtime table)."""
        if not self.schema.has(RUNTIME):
            return []
        rc = self.schema.cols(RUNTIME)
        rows = self.q(f'SELECT "{rc["nameId"]}", count(*), sum("{rc["end"]}" - "{rc["start"]}") FROM {RUNTIME} '
                      f"GROUP BY 1 ORDER BY 3 DESC LIMIT {int(limit)}").fetchall()
        return [{"name": self.string(n), "count": int(c), "total_ns": float(t or 0)} for n, c, t in rows]

    # ------------------------------------------------------------------------------------------------ summary
    def _kernels_and_memops(self) -> list[KernelRow]:
        return self.kernel_rows() + self.memop_rows()

    def summary(self, *, by_range: bool = False, api: bool = False) -> Summary:
        if self.window:
            kernels = self._kernels_and_memops()
            ranges = self.range_rows()
        else:
            # The kernel summary and the NVTX projection read disjoint work; SQLite releases the GIL while it
            # steps, so the two run on two cores, each on its own read-only connection.
            kernels, ranges = _in_parallel(lambda: _with_export(self.path, NsysExport._kernels_and_memops),
                                           self.range_rows)
        return self._finish(kernels, ranges, by_range=by_range, api=api)

    def _finish(self, kernels: list[KernelRow], ranges: list[RangeRow], *, by_range: bool,
                api: bool) -> Summary:
        if not any(k.extra.get("kind") == "kernel" for k in kernels):
            (n,) = self.q(f"SELECT count(*) FROM {KERNEL} WHERE NOT ({self.valid_times(KERNEL)})").fetchone()
            if n:
                raise BadReport(f"{self.path}: no kernel record has valid times ({n} end before they start or are "
                                "not numbers): damaged timestamps")
            if self.window and self.windows():
                raise BadReport(f"{self.path}: no GPU kernel was launched between cudaProfilerStart and "
                                "cudaProfilerStop (an empty measured range)")
            raise BadReport(f"{self.path}: the kernel table is empty: no GPU kernel ran inside the captured range")
        meta: dict[str, Any] = {"reader": "nsys_sqlite", "export_schema": self.schema.schema_version,
                                "traces": [TRACE_OPTION.get(t, t) for t in self.schema.capture_traces()]}
        if by_range:
            kernels += self.kernels_by_range(meta)
        meta.update(self.gpu_info())
        self._check(kernels, meta)
        if self.window:
            meta["window"] = self.window
            meta["windows"] = len(self.windows())
        if api:
            meta["cuda_api"] = self.api_rows()
        return Summary(sources=(Source(path=str(self.path), tool="nsys", tool_version=self.schema.version),),
                       kernels=tuple(kernels), ranges=tuple(ranges), meta=meta)


def _db_error(path: Path, e: Exception) -> BadReport:
    msg = str(e)[:300]
    if isinstance(e, UnicodeDecodeError):
        return BadReport(f"{path}: damaged SQLite file (text that is not UTF-8 where SQLite keeps its own)")
    if any(w in msg for w in ("malformed", "not a database", "disk I/O", "file is")):
        return BadReport(f"{path}: damaged or truncated SQLite file ({msg})")
    return BadReport(f"{path}: this export cannot be read ({msg}); its schema may come from an nsys version "
                     "profctl does not know")


T = TypeVar("T")
U = TypeVar("U")


def _with_export(path: Path, fn: Callable[[NsysExport], T]) -> T:
    with NsysExport(path) as ex:
        return fn(ex)


def _in_parallel(a: Callable[[], T], b: Callable[[], U]) -> tuple[T, U]:
    """Run `a` on a worker thread and `b` here; re-raise the first error of either."""
    import threading

    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["a"] = a()
        except BaseException as e:
            box["err"] = e

    t = threading.Thread(target=run, name="profctl-nsys-kernels", daemon=True)
    t.start()
    try:
        rb = b()
    finally:
        t.join()
    if "err" in box:
        raise box["err"]
    return box["a"], rb


def _hierarchy(proj: list[RangeInstance]) -> None:
    """Stack level and children count of projected ranges, per thread, as nsys nests projected intervals:
    sorted by start (longer first), a range is inside the previous ones that end no earlier and share a stream."""
    by_tid: dict[int, list[RangeInstance]] = defaultdict(list)
    for r in proj:
        by_tid[r.tid].append(r)
    for rs in by_tid.values():
        rs.sort(key=lambda r: (r.proj_start, -(r.proj_end or 0), r.rid))
        stack: list[RangeInstance] = []
        for r in rs:
            while stack and (r.proj_end or 0) > (stack[-1].proj_end or 0):
                stack.pop()
            stack.append(r)
            cur = [x for x in stack if x is r or (x.streams & r.streams) or not (x.streams and r.streams)]
            r.level = len(cur) - 1
            if len(cur) > 1:
                cur[-2].children += 1


# ---------------------------------------------------------------------------------------------------- entry points
def read(path: str | Path, *, by_range: bool = False, window: str | None = None, api: bool = False,
         **_ignored: Any) -> Summary:
    """Read an nsys SQLite export (any program's) into a Summary; BadReport with one line if it cannot."""
    with NsysExport(path, window=window) as ex:
        try:
            return ex.summary(by_range=by_range, api=api)
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            raise _db_error(ex.path, e) from None


def read_paths(path: str | Path, *, first_case: str | None = None) -> Summary:
    """An export of a profctl run summarised per measured range path ``profctl@<backend>[<shape>]/measure/
    <backend>.<pass>`` (the profctl domain's part of the canonical path), measured iterations only, so several
    shapes and passes of one run stay apart.

    Unlike the per-path rows of :func:`read`, other domains are left out and a launch is placed in the innermost
    ``<backend>.fwd|bwd`` range around it on the launching thread, within its ``measure`` and case ranges (the
    workload pushes the same stack on autograd's thread). With capture by cudaProfilerStart the first case's
    range was pushed before the capture began: `first_case` (``<backend>[<shape>]``) names it
    (profctl.nvtx.measured_leaf_path).
    """
    import bisect

    from profctl import nvtx

    with NsysExport(path) as ex:
        insts = [i for i in ex.range_instances() if i.domain == nvtx.DOMAIN]
        leaf_path: dict[int, str] = {}
        leaves: dict[int, list[RangeInstance]] = defaultdict(list)
        for i, parents in nvtx.nest(insts):
            p = nvtx.measured_leaf_path(i, parents, first_case)
            if p is not None:
                leaf_path[i.rid] = nvtx.join_path(nvtx.DOMAIN, p.split("/"))
                leaves[i.tid].append(i)
        starts: dict[int, list[int]] = {}
        for tid, ls in leaves.items():
            ls.sort(key=lambda i: i.start)
            starts[tid] = [x.start for x in ls]
        ex._build_launches()
        by_id = ex._name_is_string_id()
        durs: dict[tuple[str, Any], list[float]] = defaultdict(list)
        rids: dict[tuple[str, Any], set[int]] = defaultdict(set)
        for tid, rs_, re_, nid, d in ex.q("SELECT tid, rs, re, name, ge - gs FROM launches WHERE kind = 0"):
            ls = leaves.get(int(tid or 0)) or []
            if not ls:
                continue
            j = bisect.bisect_right(starts[int(tid or 0)], rs_) - 1
            if j < 0 or not (ls[j].start <= rs_ <= ls[j].end and re_ <= ls[j].end):
                continue
            k = (leaf_path[ls[j].rid], nid)
            durs[k].append(float(d))
            rids[k].add(ls[j].rid)
        names = {nid: ex.kernel_name(nid, by_id) for _, nid in durs}
        version = ex.schema.version
        gpus = ex.gpu_info()
    from profctl.kernels import classify, short_name

    kernels = []
    for (p, nid), ds in durs.items():
        st = durations_stats(ds)
        name = names[nid]
        kernels.append(KernelRow(tool="nsys", name=name, short_name=short_name(name), kernel_class=classify(name),
                                 nvtx_range=p, count=int(st["count"]), total_ns=st["total_ns"], avg_ns=st["avg_ns"],
                                 med_ns=st["med_ns"], min_ns=st["min_ns"], max_ns=st["max_ns"], std_ns=st["std_ns"],
                                 extra={"kind": "kernel", "nvtx_instances": len(rids[(p, nid)])}))
    spans: dict[str, list[float]] = defaultdict(list)
    for i in insts:
        if i.rid in leaf_path and i.proj_start is not None:
            spans[leaf_path[i.rid]].append(float((i.proj_end or 0) - i.proj_start))
    ranges = [RangeRow(name=p, domain=nvtx.DOMAIN, style="push_pop", count=len(v), range_total_ns=0.0,
                       gpu_proj_total_ns=sum(v), gpu_ops=None, extra={"proj_instances": len(v), "path": True})
              for p, v in spans.items()]
    return Summary(sources=(Source(path=str(path), tool="nsys", tool_version=version),), kernels=tuple(kernels),
                   ranges=tuple(ranges), meta={"reader": "profctl.readers.nsys_sqlite.read_paths", **gpus})
