"""The timeline around named ranges, from an nsys SQLite export or a torch.profiler trace, for ``explain --range``
(profctl.analysis.range_explain): every range instance, and inside the chosen ranges' windows the GPU operations
with the CUDA API call that launched each, every CUDA API call, and (torch traces) the CPU ops and Python frames.

Times are integer nanoseconds on the host clock both tools share with the GPU timestamps (torch's microseconds
are converted). nsys: push/pop and start/end ranges of NVTX_EVENTS; the runtime table's calls; kernels, memcpy and
memset joined to their call on ``correlationId``. torch: ``user_annotation`` ranges, ``cpu_op``,
``cuda_runtime``/``cuda_driver``, ``kernel``/``gpu_memcpy``/``gpu_memset`` and ``python_function`` events (with
``with_stack=True``), joined on ``args.correlation``. Nothing is summarised here: the analysis does the arithmetic.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profctl.errors import BadReport
from profctl.kernels import readable
from profctl.readers import _torch_stream as stream
from profctl.readers._compressed import DAMAGED, plain_copy, read_head
from profctl.readers._nsys_export import NsysExport
from profctl.readers._nsys_schema import KERNEL, MEMCPY, MEMSET, NVTX, RANGE_EVENTS, RUNTIME, SQLITE_MAGIC, STRINGS


@dataclass(slots=True)
class Span:
    """A range instance, a CUDA API call, a CPU op or a Python frame: what ran on a host thread, when."""

    name: str
    tid: int
    start: int
    end: int
    corr: int = -1


@dataclass(slots=True)
class GpuOp:
    """A kernel, memcpy or memset, with the API call that launched it (None where the trace has none)."""

    name: str
    kind: str  # kernel | memcpy | memset
    start: int
    end: int
    stream: int
    corr: int = -1
    call: Span | None = None
    config: tuple[int, int] | None = None  # (threads blocks in the grid, threads per block) of a kernel, if known

    @property
    def dur(self) -> int:
        return self.end - self.start


@dataclass
class Timeline:
    """What explain --range reads: `ranges` holds every range instance of the file; the other lists only what
    lies in the chosen ranges' windows (all of the file when none was chosen)."""

    source: str  # nsys | torch
    path: str
    ranges: list[Span] = field(default_factory=list)
    ops: list[GpuOp] = field(default_factory=list)
    calls: list[Span] = field(default_factory=list)
    cpu_ops: list[Span] = field(default_factory=list)
    frames: list[Span] = field(default_factory=list)
    threads: dict[int, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what the file lacks that the explanation would name
    #: nsys CPU samples (--sample=process-tree|cpu) in the windows: (thread, time, the module of the sampled frame)
    samples: list[tuple[int, int, str]] = field(default_factory=list)

    def range_names(self) -> list[str]:
        return sorted({r.name for r in self.ranges})


def read(path: str | Path, names: Iterable[str] | None = None) -> Timeline:
    """The timeline of `path` (an nsys SQLite export, plain or compressed, or a torch.profiler trace) around the
    ranges named `names` (every event when None); BadReport with one line for anything else."""
    p = Path(path)
    head = read_head(p, 64)
    want = set(names) if names is not None else None
    if head.startswith(SQLITE_MAGIC):
        with plain_copy(p, default_name="report.sqlite") as plain:
            tl = _read_nsys(plain, want)
        tl.path = str(p)
        return tl
    if head.lstrip()[:1] in (b"{", b"["):
        return _read_torch(p, want)
    raise BadReport(f"{p}: not an nsys SQLite export nor a torch.profiler trace (explain --range reads those)")


# ------------------------------------------------------------------------------------------------ nsys
#: checked on the H200 with nsys 2025.3.1 (tests/data/ranges/ranges_pysample.sqlite.xz): with
#: --python-sampling=true the export holds the Python functions' names in StringIds but no table refers to them
PY_SAMPLES_NOT_EXPORTED = (
    "nsys sampled Python backtraces (--python-sampling), but its SQLite export holds no Python sample (nsys "
    "2025.3: the frames are only in the .nsys-rep's GUI), so host time is named by the launch it preceded; "
    "torch.profiler with with_stack=True names the Python frame that cost it")

def _windows(ranges: list[Span], want: set[str] | None) -> list[tuple[int, int]]:
    """The chosen ranges' [start, end], merged."""
    out: list[tuple[int, int]] = []
    for s, e in sorted((r.start, r.end) for r in ranges if want is None or r.name in want):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _within(col_s: str, col_e: str, wins: list[tuple[int, int]]) -> str:
    if not wins:
        return "0"
    return "(" + " OR ".join(f"({col_s} <= {e} AND {col_e} >= {s})" for s, e in wins) + ")"


def _read_nsys(p: Path, want: set[str] | None) -> Timeline:
    try:
        with NsysExport(p) as ex:
            tl = Timeline("nsys", str(p), threads=ex.thread_names())
            doms = ex.domains()
            if ex.schema.has(NVTX):
                for tid, s, e, _et, did, text in ex.nvtx_ranges(RANGE_EVENTS):
                    if isinstance(s, int) and isinstance(e, int) and e >= s:
                        dom = doms.get((int(did or 0), int(tid or 0) & 0x0000FFFFFF000000), "") if did else ""
                        tl.ranges.append(Span(f"{dom}:{text}" if dom else str(text), int(tid or 0), s, e))
            wins = _windows(tl.ranges, want)
            if ex.schema.has(RUNTIME):
                _nsys_calls(ex, tl, wins)
            _nsys_ops(ex, tl, wins)
            _nsys_samples(ex, tl, wins)
            if ex.q(f"SELECT 1 FROM {STRINGS} WHERE value LIKE 'Python backtrace sampling%' LIMIT 1").fetchone():
                tl.notes.append(PY_SAMPLES_NOT_EXPORTED)
    except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
        raise BadReport(f"{p}: damaged SQLite file ({str(e)[:200]})") from None
    _finish(tl)
    return tl


def _nsys_calls(ex: NsysExport, tl: Timeline, wins: list[tuple[int, int]]) -> None:
    rc = ex.schema.cols(RUNTIME)
    cond = _within(f'"{rc["start"]}"', f'"{rc["end"]}"', wins)
    for nid, tid, s, e, corr in ex.q(f'SELECT "{rc["nameId"]}", "{rc["globalTid"]}", "{rc["start"]}", '
                                     f'"{rc["end"]}", "{rc["correlationId"]}" FROM {RUNTIME} WHERE {cond}'):
        if isinstance(s, int) and isinstance(e, int):
            name = ex.string(nid).split("_v", 1)[0] if isinstance(nid, int) else str(nid)
            tl.calls.append(Span(name, int(tid or 0), s, e, int(corr) if isinstance(corr, int) else -1))


def _nsys_ops(ex: NsysExport, tl: Timeline, wins: list[tuple[int, int]]) -> None:
    """GPU operations launched by a call in the windows, or running during them."""
    corrs = {c.corr for c in tl.calls if c.corr >= 0}
    last = max((e for _, e in wins), default=0)
    labels = ex.memcpy_labels()
    s = ex.schema
    for kind, t in (("kernel", KERNEL), ("memcpy", MEMCPY), ("memset", MEMSET)):
        if not s.has(t):
            continue
        name = s.col(t, "demangledName") if t == KERNEL else (s.col(t, "copyKind") if t == MEMCPY else "NULL")
        cfg = ", ".join(s.col(t, c) if t == KERNEL else "NULL" for c in _CONFIG)
        ext = [(lo, 2 * last - lo) for lo, _ in wins[:1]] if wins else []
        cond = _within(s.col(t, "start"), s.col(t, "end"), ext)
        for gs, ge, stream_id, corr, nm, *dims in ex.q(
                f'SELECT {s.col(t, "start")}, {s.col(t, "end")}, {s.col(t, "streamId")}, '
                f'{s.col(t, "correlationId")}, {name}, {cfg} FROM {t} WHERE {cond}'):
            if not (isinstance(gs, int) and isinstance(ge, int)) or ge < gs:
                continue
            c = int(corr) if isinstance(corr, int) else -1
            if c not in corrs and not any(gs <= e and ge >= lo for lo, e in wins):
                continue
            if kind == "kernel":
                label = readable(ex.string(nm)) if isinstance(nm, int) else str(nm)
            elif kind == "memcpy":
                label = f"[memcpy {labels.get(int(nm), nm) if isinstance(nm, int) else nm}]"
            else:
                label = "[memset]"
            tl.ops.append(GpuOp(label, kind, gs, ge, int(stream_id or 0), c, config=_config(dims[:3], dims[3:])))


_CONFIG = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ")


def _config(grid: Any, block: Any) -> tuple[int, int] | None:
    """(blocks in the grid, threads per block), as ncu's launch__grid_size and launch__block_size; None unless
    every dimension is a positive integer."""
    dims = [*(grid or ()), *(block or ())]
    if len(dims) != 6 or not all(isinstance(d, int) and d > 0 for d in dims):
        return None
    return dims[0] * dims[1] * dims[2], dims[3] * dims[4] * dims[5]


def _nsys_samples(ex: NsysExport, tl: Timeline, wins: list[tuple[int, int]]) -> None:
    """The CPU samples in the windows with the module of their sampled (innermost) frame."""
    if not (ex.schema.has("COMPOSITE_EVENTS") and ex.schema.has("SAMPLING_CALLCHAINS")) or not wins:
        return
    cond = " OR ".join(f"(e.start BETWEEN {a} AND {b})" for a, b in wins)
    try:
        for tid, t, mod in ex.q(
                "SELECT e.globalTid, e.start, m.value FROM COMPOSITE_EVENTS AS e JOIN SAMPLING_CALLCHAINS AS c "
                f"ON c.id = e.id AND c.stackDepth = 0 JOIN {STRINGS} AS m ON m.id = c.module WHERE {cond}"):
            if isinstance(tid, int) and isinstance(t, int):
                tl.samples.append((tid, t, str(mod).rsplit("/", 1)[-1]))
    except (sqlite3.DatabaseError, BadReport):  # samples of another layout: the explanation goes without them
        tl.samples.clear()


# ------------------------------------------------------------------------------------------------ torch
_GPU_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset",
              "memset": "memset"}


def _ns(v: Any) -> int:
    return round(float(v) * 1000.0)


def _read_torch(p: Path, want: set[str] | None) -> Timeline:
    tl = Timeline("torch", str(p))
    header: dict[str, Any] = {}
    try:
        with stream.open_text(p) as f:
            for ev in stream.events(stream.Stream(f), header):
                _torch_event(tl, ev)
    except (stream.Truncated, stream.NotJSON, stream.NotTrace, UnicodeDecodeError, *DAMAGED) as e:
        raise BadReport(f"{p}: not a readable torch.profiler trace ({str(e)[:200]})") from None
    if want is not None:
        wins = _windows(tl.ranges, want)
        lo, hi = (wins[0][0], wins[-1][1]) if wins else (0, -1)
        tl.calls = [c for c in tl.calls if c.end >= lo and c.start <= hi]
        tl.cpu_ops = [c for c in tl.cpu_ops if c.end >= lo and c.start <= hi]
        tl.frames = [c for c in tl.frames if c.end >= lo and c.start <= hi]
        corrs = {c.corr for c in tl.calls}
        tl.ops = [o for o in tl.ops if o.corr in corrs or (o.end >= lo and o.start <= hi)]
    _finish(tl)
    return tl


def _torch_event(tl: Timeline, ev: Any) -> None:
    if not isinstance(ev, dict) or ev.get("ph") != "X":
        if isinstance(ev, dict) and ev.get("ph") == "M" and ev.get("name") == "thread_name":
            name = (ev.get("args") or {}).get("name")
            if isinstance(ev.get("tid"), int) and name:
                tl.threads[ev["tid"]] = str(name)
        return
    cat, ts, dur = ev.get("cat"), ev.get("ts"), ev.get("dur")
    if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)):
        return
    s = _ns(ts)
    e = s + _ns(dur)
    tid = ev.get("tid")
    tid = tid if isinstance(tid, int) else hash(str(tid)) & 0xFFFFFFFF
    args = ev.get("args") or {}
    corr = args.get("correlation", -1)
    corr = corr if isinstance(corr, int) else -1
    name = str(ev.get("name", ""))
    if cat == "user_annotation":
        tl.ranges.append(Span(name, tid, s, e))
    elif cat == "cpu_op":
        tl.cpu_ops.append(Span(name, tid, s, e))
    elif cat == "python_function":
        tl.frames.append(Span(name, tid, s, e))
    elif cat in ("cuda_runtime", "cuda_driver"):
        tl.calls.append(Span(name, tid, s, e, corr))
    elif cat in _GPU_KINDS:
        kind = _GPU_KINDS[str(cat)]
        label = name if kind == "kernel" else f"[{name}]"
        tl.ops.append(GpuOp(label, kind, s, e, int(args.get("stream", tid) or 0), corr,
                            config=_config(args.get("grid"), args.get("block")) if kind == "kernel" else None))


def _finish(tl: Timeline) -> None:
    """Sort everything by start; join each GPU operation to the call that launched it."""
    for xs in (tl.ranges, tl.calls, tl.cpu_ops, tl.frames):
        xs.sort(key=lambda x: (x.start, -x.end))
    tl.samples.sort(key=lambda x: x[1])
    tl.ops.sort(key=lambda o: o.start)
    by_corr = {c.corr: c for c in tl.calls if c.corr >= 0}
    for o in tl.ops:
        o.call = by_corr.get(o.corr)
