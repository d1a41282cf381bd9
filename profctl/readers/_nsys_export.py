"""An Nsight Systems SQLite export opened for reading: :class:`NsysExport`, whose methods are the queries every
part of the nsys reader uses (profctl.readers.nsys_sqlite), and :class:`RangeInstance`, one NVTX range instance
with its GPU projection. Everything heavy runs inside SQLite (temporary tables in a temporary file, never in the
user's file, which is opened read-only and immutable); the export's temporary tables are its own: the modules
beside it (profctl.readers._nsys_paths, profctl.readers._nsys_summary) use its public methods only.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profctl.errors import BadReport
from profctl.kernels import is_generic, readable
from profctl.readers._nsys_schema import (
    DOMAIN_PID_MASK,
    EVENT_DOMAIN_CREATE,
    KERNEL,
    LAUNCH_LIKE,
    MEMCPY,
    MEMSET,
    NVTX,
    PID_MASK,
    PID_MASK_SQL,
    RANGE_EVENTS,
    RUNTIME,
    STRINGS,
    STYLE,
    Schema,
    check_nsys_export,
    connect,
    db_error,
)


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
    busy: int = 0  # the union of its GPU operations' intervals (overlaps merged, gaps left out)
    level: int = 0
    children: int = 0

    @property
    def label(self) -> str:
        return f"{self.domain}:{self.text}" if self.domain else self.text


class NsysExport:
    """One open export. Queries are methods (raw ids, durations and tuples; rows are made in _nsys_summary);
    temporary tables live in the connection's temp schema only."""

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
            raise db_error(self.path, e) from None

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
            self._generic = []
            if self.schema.cols(KERNEL)["mangledName"] is not None and self.name_is_string_id():
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
        if not by_id:
            return str(nid)
        if isinstance(nid, int) and nid < 0:
            return readable("", self.string(-1 - nid))
        return readable(self.string(nid))

    def name_is_string_id(self) -> bool:
        """Kernel names are StringIds references in every export seen; very old ones stored text."""
        t = self.q(f'SELECT typeof({self.schema.col(KERNEL, "demangledName")}) FROM {KERNEL} LIMIT 1').fetchone()
        return t is None or t[0] == "integer"

    def kernel_names(self, keys: Iterable[Any]) -> dict[Any, str]:
        """Kernel name key -> name, for each of `keys`."""
        by_id = self.name_is_string_id()
        return {nid: self.kernel_name(nid, by_id) for nid in keys}

    def missing_strings(self) -> int:
        """How many string ids looked up so far are missing from StringIds (shown as ``<string N>``)."""
        return len(self._missing)

    def invalid_time_rows(self, table: str) -> int:
        """How many rows of `table` have no valid times (see :meth:`valid_times`)."""
        (n,) = self.q(f"SELECT count(*) FROM {table} WHERE NOT ({self.valid_times(table)})").fetchone()
        return int(n)

    def gpu_info(self) -> dict[str, Any]:
        """The GPUs of the report (TARGET_INFO_GPU) and their names, for ``meta``."""
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

    def kernel_launches(self, *, by_thread: bool = False) -> Iterator[tuple[Any, ...]]:
        """(thread, API call start, API call end, kernel name key, GPU duration) of every kernel launch, inside a
        profiler window when the export has one; in thread and call-start order with `by_thread`."""
        self._build_launches()
        win = f"AND {self._window_sql('l.rs', 'l.re', 'l.gpid')}" if (self.window and self.windows()) else ""
        order = "ORDER BY l.tid, l.rs" if by_thread else ""
        return self.q(f"SELECT l.tid, l.rs, l.re, l.name, l.ge - l.gs FROM launches AS l WHERE l.kind = 0 {win} "
                      f"{order}")

    def gpu_activities(self) -> Iterator[tuple[Any, ...]]:
        """Every kernel, memcpy and memset with valid times, one row at a time (one table after the other):
        (kind: 0 kernel, 1 memcpy, 2 memset; GPU start; GPU end; device; stream; globalPid; the kernel name key
        (:meth:`kernel_name`) or the copy kind; bytes; launching thread (globalTid); the launch call's start;
        grid x, y, z; block x, y, z; registers per thread; static and dynamic shared memory). The launch is None
        where no API call of the export launched the operation; the launch configuration None but for kernels.
        Nothing is held but the cursor (a timeline writer streams it)."""
        launches = self.schema.has(RUNTIME)
        if launches:
            self._build_launches()
        s = self.schema
        for kind, t in ((0, KERNEL), (1, MEMCPY), (2, MEMSET)):
            if not s.has(t):
                continue
            name = self._kname("o") if t == KERNEL else (s.col(t, "copyKind", "o") if t == MEMCPY else "NULL")
            cfg = ", ".join(s.col(KERNEL, c, "o") if t == KERNEL else "NULL" for c in self._CFG)
            join, who = "", "NULL, NULL"
            if launches:
                join = (f"LEFT JOIN (SELECT corr, gs, min(tid) AS tid, min(rs) AS rs FROM launches WHERE kind = "
                        f"{kind} GROUP BY corr, gs) AS l ON l.corr = {s.col(t, 'correlationId', 'o')} AND "
                        f"l.gs = {s.col(t, 'start', 'o')}")
                who = "l.tid, l.rs"
            cur = self.q(f"SELECT {kind}, {s.col(t, 'start', 'o')}, {s.col(t, 'end', 'o')}, "
                         f"{s.col(t, 'deviceId', 'o')}, {s.col(t, 'streamId', 'o')}, {s.col(t, 'globalPid', 'o')}, "
                         f"{name}, {s.col(t, 'bytes', 'o') if t != KERNEL else 'NULL'}, {who}, {cfg} "
                         f"FROM {t} AS o {join} WHERE {self.valid_times(t, 'o')}")
            try:
                while rows := cur.fetchmany(4096):
                    yield from rows
            except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
                raise db_error(self.path, e) from None

    # ------------------------------------------------------------------------------------------------ kernels
    _CFG = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread", "staticSharedMemory",
            "dynamicSharedMemory")

    def kernel_source(self) -> str:
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
        """(name id, durations in launch order) per kernel name, one name at a time (SQLite sorts; Python
        streams): the first duration of each name is its first launch in the export."""
        s = self.schema
        name, start, end = self._kname(), s.col(KERNEL, "start"), s.col(KERNEL, "end")
        cur = self.q(f"SELECT {name}, {end} - {start} AS d FROM {source} WHERE {self.valid_times(KERNEL)} "
                     f"ORDER BY 1, {start}")
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
            raise db_error(self.path, e) from None
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

    def short_names(self, source: str = KERNEL) -> dict[Any, Any]:
        """Kernel name key -> the export's short name (a string id, or text in very old exports); empty when the
        export has no short names."""
        s = self.schema
        if s.cols(KERNEL)["shortName"] is None:
            return {}
        return dict(self.q(f'SELECT DISTINCT {self._kname()}, {s.col(KERNEL, "shortName")} FROM {source}').fetchall())

    # ------------------------------------------------------------------------------------------------ memcpy, memset
    def memcpy_labels(self) -> dict[int, str]:
        """Copy kind -> nsys' label for it ('Host-to-Device', ...), when the export has the enum table."""
        if not self.schema.has("ENUM_CUDA_MEMCPY_OPER"):
            return {}
        try:
            return {int(i): str(lab) for i, lab in self.q("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER")}
        except BadReport:
            return {}

    def memop_durations(self, table: str) -> Iterator[tuple[Any, Any, Any]]:
        """(copy kind or None, duration, bytes) of every row of MEMCPY or MEMSET with valid times (launched inside
        a profiler window when the export has one), by copy kind and duration."""
        s = self.schema
        c = s.cols(table)
        key = s.col(table, "copyKind", "m", "NULL") if table == MEMCPY else "NULL"
        if self.window and self.windows():
            self._build_launches()
            kind = 1 if table == MEMCPY else 2
            sql = (f"SELECT l.name, l.ge - l.gs, l.bytes FROM launches AS l WHERE l.kind = {kind} AND "
                   "l.ge >= l.gs AND "
                   f"{self._window_sql('l.rs', 'l.re', 'l.gpid')} ORDER BY 1, 2")
        else:
            sql = (f'SELECT {key}, m."{c["end"]}" - m."{c["start"]}", {s.col(table, "bytes", "m", "0")} '
                   f"FROM {table} AS m WHERE {self.valid_times(table, 'm')} ORDER BY 1, 2")
        return self.q(sql)

    # ------------------------------------------------------------------------------------------------ NVTX
    def domains(self) -> dict[tuple[int, int], str]:
        """(domainId, process bits) -> domain name, from the domain-create events (none without an NVTX table:
        an export recorded without NVTX trace, as nsys 2023.x writes it, has none)."""
        if not self.schema.has(NVTX):
            return {}
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
        domains = self.domains()
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
            self._busy(out, win)
        _hierarchy([r for r in out.values() if r.proj_start is not None])
        return list(out.values())

    def _busy(self, out: dict[int, RangeInstance], win: str) -> None:
        """Each projected range's GPU-busy time: its operations' intervals merged, one pass in start order."""
        rid0, end, busy = None, 0, 0
        for rid, gs, ge in self.q(
                "SELECT n.rid, l.gs, l.ge FROM rng AS n JOIN launches AS l ON l.tid = n.tid AND l.rs >= n.start "
                f'AND l.rs <= n."end" AND l.re <= n."end" {win} ORDER BY n.rid, l.gs'):
            if rid != rid0:
                if rid0 is not None:
                    out[int(rid0)].busy = busy
                rid0, end, busy = rid, 0, 0
            gs, ge = max(int(gs), end), int(ge)
            if ge > gs:
                busy += ge - gs
                end = ge
        if rid0 is not None:
            out[int(rid0)].busy = busy

    def nvtx_ranges(self, event_types: Sequence[int]) -> Iterator[tuple[Any, ...]]:
        """(thread, start, end, event type, domain id, text) of every NVTX event of `event_types` with a start
        and an end (as stored: a damaged export may hold anything there). Nothing without an NVTX table."""
        if not self.schema.has(NVTX):
            return iter(())
        n = self.schema.cols(NVTX)
        events = ",".join(map(str, event_types))
        return self.q(
            f'SELECT e."{n["globalTid"]}", e."{n["start"]}", e."{n["end"]}", e."{n["eventType"]}", '
            f'{self.schema.col(NVTX, "domainId", "e", "0")}, {self._text_expr("e")} FROM {NVTX} AS e '
            f'{self._text_join("e")} WHERE e."{n["eventType"]}" IN ({events}) AND e."{n["start"]}" IS NOT NULL '
            f'AND e."{n["end"]}" IS NOT NULL')

    def thread_names(self) -> dict[int, str]:
        """globalTid -> thread name, from ThreadNames (absent or unreadable: none)."""
        if "ThreadNames" not in self.schema.tables:
            return {}
        try:
            cols = {r[1] for r in self.q('PRAGMA table_info("ThreadNames")')}
            if not {"nameId", "globalTid"} <= cols:
                return {}
            return {int(t): str(v) for t, v in self.q(
                f"SELECT t.globalTid, s.value FROM ThreadNames AS t JOIN {STRINGS} AS s ON s.id = t.nameId")
                if isinstance(t, int)}
        except BadReport:
            return {}

    def api_rows(self, limit: int = 50) -> list[dict[str, Any]]:
        """CUDA runtime/driver API calls per name: count and total time (a full scan of the runtime table)."""
        if not self.schema.has(RUNTIME):
            return []
        rc = self.schema.cols(RUNTIME)
        rows = self.q(f'SELECT "{rc["nameId"]}", count(*), sum("{rc["end"]}" - "{rc["start"]}") FROM {RUNTIME} '
                      f"GROUP BY 1 ORDER BY 3 DESC LIMIT {int(limit)}").fetchall()
        return [{"name": self.string(n), "count": int(c), "total_ns": float(t or 0)} for n, c, t in rows]


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
