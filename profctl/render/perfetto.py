"""Timelines to open in Perfetto (ui.perfetto.dev) or chrome://tracing: the Trace Event Format JSON of an nsys
export or a torch.profiler trace (``profctl report FILE -f perfetto -o trace.json``).

What is on it:

* a process per GPU and a track (thread) per CUDA stream, with every kernel (its demangled name; grid, block,
  registers and shared memory where the report has them), memcpy (kind, bytes) and memset;
* on the CPU threads, the NVTX push/pop ranges (nsys; start/end ranges, which belong to no thread, as async
  slices of their process) or the ``record_function`` ranges and CPU ops (torch);
* with a range (``--range NAME``, ``DOMAIN@NAME`` in nsys), only its window: the instances of the range, the CPU
  events that overlap one, and the GPU work launched during one (any thread of the process), at its GPU time.

Events come through the readers' own access -- :class:`~profctl.readers.nsys_sqlite.NsysExport`'s queries
(``gpu_activities``, ``nvtx_ranges``, ``domains``, ``thread_names``, ``gpu_info``) and
:func:`profctl.readers.torch_trace.collect`'s column groups -- and are written one at a time: an nsys export
streams out of SQLite (what is held is names and tracks), a torch trace is held as its reader holds it (compact
columns). Times are in µs, as the format has them, with the nanoseconds as decimals.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from profctl import inputs
from profctl._version import __version__
from profctl.errors import BadReport, NothingMatched
from profctl.readers import torch_trace
from profctl.readers._nsys_schema import DOMAIN_PID_MASK, EVENT_PUSHPOP, EVENT_T_PUSHPOP, RANGE_EVENTS
from profctl.readers._torch_collect import Category
from profctl.readers.nsys_sqlite import NsysExport

#: pids of the GPU processes (one per device), above any real process id
GPU_PID = 1 << 30
#: nsys globalTid: process and thread id bits
_PID_SHIFT, _ID_MASK = 24, 0xFFFFFF
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
Sink = Callable[[], AbstractContextManager[IO[str]]]


@dataclass
class Counts:
    """What went into a trace: kernels per GPU track (pid, tid) and per name, memcpy and memset, range
    instances per name (``domain@text`` for a named nsys domain), CPU ops."""

    kernels: Counter[tuple[int, int]] = field(default_factory=Counter)
    kernel_names: Counter[str] = field(default_factory=Counter)
    memcpy: int = 0
    memset: int = 0
    ranges: Counter[str] = field(default_factory=Counter)
    cpu_ops: int = 0
    skipped: int = 0

    def describe(self) -> str:
        out = (f"{sum(self.kernels.values())} kernels on {len(self.kernels)} GPU stream(s), {self.memcpy} memcpy, "
               f"{self.memset} memset, {sum(self.ranges.values())} range instances")
        out += f", {self.cpu_ops} CPU ops" if self.cpu_ops else ""
        return out + (f"; {self.skipped} event(s) without valid times left out" if self.skipped else "")


class TraceWriter:
    """Trace Event Format JSON (the object form), one event at a time."""

    def __init__(self, f: IO[str]) -> None:
        self.f = f
        self.n = 0
        f.write('{"displayTimeUnit":"ns","traceEvents":[\n')

    def add(self, ev: dict[str, Any]) -> None:
        self.raw(_dumps(ev))

    def raw(self, text: str) -> None:
        """One event already in JSON."""
        self.f.write((",\n" if self.n else "") + text)
        self.n += 1

    def finish(self, other: dict[str, Any]) -> None:
        self.f.write('\n],\n"otherData":' + _dumps(other) + "}\n")


class Tracks:
    """The names of the processes and threads events were put on, written as metadata at the end."""

    def __init__(self) -> None:
        self.procs: dict[int, tuple[str, int]] = {}
        self.threads: dict[tuple[int, int], str] = {}

    def process(self, pid: int, name: str, sort: int) -> None:
        self.procs.setdefault(pid, (name, sort))

    def thread(self, pid: int, tid: int, name: str) -> None:
        self.threads.setdefault((pid, tid), name)

    def write(self, w: TraceWriter) -> None:
        for pid, (name, sort) in self.procs.items():
            w.add({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
            w.add({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}})
        for (pid, tid), name in self.threads.items():
            w.add({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})


class Window:
    """The union of the instances of a range: which times and intervals lie in it."""

    def __init__(self, spans: Iterable[tuple[float, float]]) -> None:
        merged: list[list[float]] = []
        for s, e in sorted(spans):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        self.starts = [m[0] for m in merged]
        self.ends = [m[1] for m in merged]

    def holds(self, t: float) -> bool:
        i = bisect.bisect_right(self.starts, t) - 1
        return i >= 0 and t <= self.ends[i]

    def overlaps(self, s: float, e: float) -> bool:
        i = bisect.bisect_right(self.starts, e) - 1
        return i >= 0 and self.ends[i] >= s


def _want(name: str) -> tuple[str | None, str]:
    dom, sep, text = name.partition("@")
    return (dom, text) if sep else (None, name)


def _no_range(name: str, seen: Counter[str], what: str) -> NothingMatched:
    names = ", ".join(n for n, _ in seen.most_common(12)) or "none"
    return NothingMatched(f"--range {name!r}: no {what} of that name in this report; ranges seen: {names}")


def _us(ns: float) -> float:
    return ns / 1000.0


# ------------------------------------------------------------------------------------------------ nsys
def _nsys_window(ex: Any, name: str) -> Window:
    """The instances of NVTX range `name` (``text`` or ``domain@text``) in the export."""
    dom, want = _want(name)
    domains = ex.domains()
    spans: list[tuple[float, float]] = []
    seen: Counter[str] = Counter()
    for tid, start, end, _, did, text in ex.nvtx_ranges(RANGE_EVENTS):
        d = domains.get((int(did or 0), int(tid or 0) & DOMAIN_PID_MASK), "") if did else ""
        seen[f"{d}@{text}" if d else str(text)] += 1
        if text == want and (dom is None or d == dom) and isinstance(start, int) and isinstance(end, int):
            spans.append((start, end))
    if not spans:
        raise _no_range(name, seen, "NVTX range")
    return Window(spans)


def _nsys_gpu(ex: Any, w: TraceWriter, tracks: Tracks, counts: Counts, win: Window | None) -> None:
    """Every kernel, memcpy and memset (launched in the window) on its device's stream track. Millions of
    kernels share a few names and launch configurations: their JSON is made once per distinct one."""
    by_id = ex.name_is_string_id()
    labels = ex.memcpy_labels()
    procs: dict[Any, int] = {}
    heads: dict[tuple[Any, ...], tuple[str, tuple[int, int], str]] = {}
    args_of: dict[tuple[Any, ...], str] = {}
    for kind, gs, ge, dev, stream, gpid, key, nbytes, ltid, lstart, *cfg in ex.gpu_activities():
        if win is not None and not (win.holds(lstart) if lstart is not None else win.overlaps(gs, ge)):
            continue
        hk = (kind, key, dev, stream, gpid)
        head = heads.get(hk)
        if head is None:
            head = heads[hk] = _gpu_head(ex, by_id, labels, procs, tracks, hk)
        text, track, name = head
        if kind == 0:
            counts.kernels[track] += 1
            counts.kernel_names[name] += 1
        counts.memcpy += kind == 1
        counts.memset += kind == 2
        ak = (dev, stream, ltid, nbytes, *cfg)
        args = args_of.get(ak)
        if args is None:
            d: dict[str, Any] = {"device": dev, "stream": stream}
            if ltid is not None:
                d["launched by"] = {"pid": int(ltid) >> _PID_SHIFT & _ID_MASK, "tid": int(ltid) & _ID_MASK}
            if kind == 0 and cfg[0] is not None:
                d.update({"grid": cfg[0:3], "block": cfg[3:6], "registers per thread": cfg[6],
                          "static shared memory": cfg[7], "dynamic shared memory": cfg[8]})
            elif kind != 0:
                d["bytes"] = nbytes
            args = args_of[ak] = _dumps(d)
        w.raw(f'{text},"ts":{_us(gs)!r},"dur":{_us(ge - gs)!r},"args":{args}}}')


def _gpu_head(ex: Any, by_id: bool, labels: dict[int, str], procs: dict[Any, int], tracks: Tracks,
              hk: tuple[Any, ...]) -> tuple[str, tuple[int, int], str]:
    """(the JSON of a GPU event up to its time, its track, its name) for one (kind, name key, device, stream,
    process); names the track."""
    kind, key, dev, stream, gpid = hk
    pid = GPU_PID + int(dev or 0)
    i = procs.setdefault(gpid, len(procs))
    tid = i * 1_000_000 + int(stream or 0)
    tracks.process(pid, f"GPU {int(dev or 0)}", pid)
    tracks.thread(pid, tid, f"stream {stream}" + (f" (process {int(gpid) >> _PID_SHIFT & _ID_MASK})"
                                                  if i and gpid is not None else ""))
    if kind == 0:
        name, cat = ex.kernel_name(key, by_id), "kernel"
    elif kind == 1:
        name, cat = f"[CUDA memcpy {labels.get(int(key), str(key)) if key is not None else 'Unknown'}]", "memcpy"
    else:
        name, cat = "[CUDA memset]", "memset"
    text = f'{{"ph":"X","cat":"{cat}","name":{_dumps(name)},"pid":{pid},"tid":{tid}'
    return text, (pid, tid), name


def _nsys_nvtx(ex: Any, w: TraceWriter, tracks: Tracks, counts: Counts, win: Window | None) -> None:
    """NVTX push/pop ranges on their threads, start/end ranges as async slices of their process."""
    domains = ex.domains()
    thread_names = ex.thread_names()
    n_async = 0
    for gtid, start, end, etype, did, text in ex.nvtx_ranges(RANGE_EVENTS):
        if not (isinstance(start, int) and isinstance(end, int) and end >= start and isinstance(gtid, int)):
            counts.skipped += 1
            continue
        if win is not None and not win.overlaps(start, end):
            continue
        d = domains.get((int(did or 0), gtid & DOMAIN_PID_MASK), "") if did else ""
        counts.ranges[f"{d}@{text}" if d else str(text)] += 1
        pid, tid = gtid >> _PID_SHIFT & _ID_MASK, gtid & _ID_MASK
        tracks.process(pid, f"process {pid}", pid)
        ev: dict[str, Any] = {"cat": "nvtx", "name": str(text), "pid": pid, "ts": _us(start),
                              "args": {"domain": d or "<default>"}}
        if etype in (EVENT_PUSHPOP, EVENT_T_PUSHPOP):
            tracks.thread(pid, tid, thread_names.get(gtid, f"thread {tid}"))
            w.add({**ev, "ph": "X", "tid": tid, "dur": _us(end - start)})
        else:  # start/end: no thread owns it, and instances may overlap
            n_async += 1
            w.add({**ev, "ph": "b", "tid": tid, "id": n_async})
            w.add({"ph": "e", "cat": "nvtx", "name": str(text), "pid": pid, "tid": tid, "ts": _us(end),
                   "id": n_async})


def write_nsys(ex: Any, f: IO[str], win: Window | None, other: dict[str, Any]) -> Counts:
    """The timeline of the open export `ex` (an NsysExport) into `f`."""
    counts, tracks = Counts(), Tracks()
    w = TraceWriter(f)
    _nsys_gpu(ex, w, tracks, counts, win)
    _nsys_nvtx(ex, w, tracks, counts, win)
    gpus = {g.get("id"): g.get("name") for g in ex.gpu_info().get("gpus", [])}
    for pid, (name, sort) in list(tracks.procs.items()):
        dev = pid - GPU_PID
        if dev >= 0 and gpus.get(dev):
            tracks.procs[pid] = (f"{name}: {gpus[dev]}", sort)
    tracks.write(w)
    w.finish({**other, "tool": "nsys", "version": ex.schema.version})
    return counts


# ------------------------------------------------------------------------------------------------ torch
def _torch_window(tr: Any, name: str) -> Window:
    """The instances of record_function range `name` (``domain@`` is dropped when no range has the whole text:
    a torch trace has no NVTX domains)."""
    iv = tr.intervals
    seen: Counter[str] = Counter(tr.name_list[iv.name[x]] for x in range(len(iv)) if iv.is_range[x])
    for want in (name, _want(name)[1]):
        nid = tr.names.get(want)
        if nid is not None:
            spans = [(iv.start[x], iv.start[x] + iv.dur[x]) for x in range(len(iv)) if iv.is_range[x]
                     and iv.name[x] == nid]
            if spans:
                return Window(spans)
    raise _no_range(name, seen, "record_function range")


class _Ids:
    """Process and thread ids as integers (Kineto writes ints, sometimes text): text gets a number of its own."""

    def __init__(self) -> None:
        self.other: dict[Any, int] = {}

    def __call__(self, v: Any) -> int:
        if isinstance(v, int) and not isinstance(v, bool) and -(1 << 31) < v < (1 << 31):
            return v
        return self.other.setdefault(v, (1 << 29) + len(self.other))


def _torch_gpu(tr: Any, w: TraceWriter, tracks: Tracks, counts: Counts, win: Window | None, ids: _Ids) -> None:
    g, rt = tr.gpu, tr.runtime
    launch = {rt.corr[i]: rt.start[i] for i in range(len(rt))} if win is not None else {}
    details: dict[int, dict[str, Any]] = {}
    for x in range(len(g)):
        ts, dur = g.start[x], g.dur[x]
        if win is not None:
            t0 = launch.get(g.corr[x])
            if not (win.holds(t0) if t0 is not None else win.overlaps(ts, ts + dur)):
                continue
        key = tr.thread_keys[g.stream[x]]
        pid, tid = ids(key[0]), ids(key[1])
        tracks.process(pid, f"GPU {key[0]}", GPU_PID + pid)
        tracks.thread(pid, tid, tr.thread_names.get(key) or f"stream {key[1]}")
        d = g.detail[x] if len(g.detail) > x else -1
        args = details.get(d)
        if args is None:
            args = details[d] = json.loads(tr.name_list[d]) if d >= 0 else {}
        kind = g.kind[x]
        name = tr.name_list[g.name[x]]
        cat = {Category.KERNEL: "kernel", Category.MEMCPY: "memcpy"}.get(kind, "memset")
        if kind == Category.KERNEL:
            counts.kernels[(pid, tid)] += 1
            counts.kernel_names[name] += 1
        counts.memcpy += kind == Category.MEMCPY
        counts.memset += kind == Category.MEMSET
        w.add({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args})


#: µs by which a torch event may overrun its parent and still count as nested (the trace's times are rounded)
NEST_SLACK_US = 1e-3


def _crossing_threads(iv: Any) -> set[int]:
    """The threads on which a range and an op overlap without nesting (profctl's backward markers open inside
    autograd's BeginBackward op and close after it): their ranges go on a track of their own, so each track
    nests as the viewers need."""
    import numpy as np

    if len(iv) == 0:
        return set()
    tid = np.frombuffer(iv.thread, dtype=np.int32)
    ts = np.frombuffer(iv.start, dtype=np.float64)
    dur = np.frombuffer(iv.dur, dtype=np.float64)
    bad: set[int] = set()
    stack: list[float] = []
    last = -1
    for x in np.lexsort((-dur, ts, tid)).tolist():
        t = int(tid[x])
        if t in bad:
            continue
        if t != last:
            stack, last = [], t
        s, e = float(ts[x]), float(ts[x] + dur[x])
        while stack and stack[-1] <= s + NEST_SLACK_US:
            stack.pop()
        if stack and e > stack[-1] + NEST_SLACK_US:
            bad.add(t)
        stack.append(e)
    return bad


def _torch_cpu(tr: Any, w: TraceWriter, tracks: Tracks, counts: Counts, win: Window | None, ids: _Ids) -> None:
    """CPU ops and record_function ranges on their threads (ranges on a track of their own where they cross
    an op)."""
    iv = tr.intervals
    apart = _crossing_threads(iv)
    for x in range(len(iv)):
        ts, dur = iv.start[x], iv.dur[x]
        if win is not None and not win.overlaps(ts, ts + dur):
            continue
        key = tr.thread_keys[iv.thread[x]]
        pid, tid = ids(key[0]), ids(key[1])
        tracks.process(pid, f"process {key[0]}", pid)
        name = tr.name_list[iv.name[x]]
        thread = tr.thread_names.get(key) or f"thread {key[1]}"
        if iv.is_range[x]:
            counts.ranges[name] += 1
            if iv.thread[x] in apart:
                tid = ids(("ranges", key))
                thread += " (record_function ranges)"
        else:
            counts.cpu_ops += 1
        tracks.thread(pid, tid, thread)
        w.add({"ph": "X", "cat": "user_annotation" if iv.is_range[x] else "cpu_op", "name": name, "pid": pid,
               "tid": tid, "ts": ts, "dur": dur})


def write_torch(tr: Any, f: IO[str], win: Window | None, other: dict[str, Any]) -> Counts:
    """The timeline of a collected torch trace `tr` (profctl.readers.torch_trace.collect) into `f`."""
    counts, tracks, ids = Counts(), Tracks(), _Ids()
    w = TraceWriter(f)
    _torch_gpu(tr, w, tracks, counts, win, ids)
    _torch_cpu(tr, w, tracks, counts, win, ids)
    tracks.write(w)
    w.finish({**other, "tool": "torch"})
    counts.skipped = tr.skipped
    return counts


# ------------------------------------------------------------------------------------------------ entry point
def export(inp: Any, sink: Sink, *, range_: str | None = None) -> Counts:
    """Write the timeline of `inp` (a profctl.inputs.Input: an nsys export or a torch trace) into the file
    `sink()` opens, only the window of range `range_` when given. The range is looked up before anything is
    written (NothingMatched names the ranges seen); BadReport for an input without a timeline."""
    other = {"source": Path(inp.path).name, "range": range_, "made by": f"profctl {__version__}"}
    if inp.tool == "torch":
        tr, _ = torch_trace.collect(inp.path, details=True)
        if len(tr.intervals) == 0 and len(tr.gpu) == 0:
            raise BadReport(f"{inp.path}: JSON without torch.profiler events (no cpu_op, "
                            f"user_annotation or kernel among its {tr.n_events} events): not a torch.profiler trace")
        win = _torch_window(tr, range_) if range_ else None
        with sink() as f:
            return write_torch(tr, f, win, other)
    if inp.tool == "nsys":
        with inputs.nsys_sqlite_of(inp) as db, NsysExport(db) as ex:
            win = _nsys_window(ex, range_) if range_ else None
            with sink() as f:
                return write_nsys(ex, f, win, other)
    raise BadReport(f"{inp.path}: {inp.what}, no timeline: -f perfetto reads nsys exports (.sqlite, "
                    ".nsys-rep) and torch.profiler traces")
