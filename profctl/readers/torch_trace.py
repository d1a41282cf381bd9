"""Read any torch.profiler / Kineto Chrome trace (``.json`` or ``.json.gz``) into a :class:`Summary`.

What is read: GPU kernels, memcpy and memset (``kernel``, ``gpu_memcpy``, ``gpu_memset``), the CUDA runtime and
driver calls that launched them (``args.correlation`` is shared by the call and the GPU activity), CPU ops
(``cpu_op``) and ``user_annotation`` ranges (``torch.profiler.record_function``; profctl names them like its NVTX
ranges, so kernels are attributed the same way as in nsys), ``fwdbwd`` flows, thread names and ``[memory]``
events.

Attribution, per GPU activity: correlation -> the launching runtime call -> by time containment on the
launching thread, the CPU ops and ranges open around it. Backward kernels are launched by autograd's worker
thread, where the caller's ranges are not open; the ``fwdbwd`` flow from the backward node to its forward op
names the forward thread, and the ranges open on that thread at the launch time are used (the thread that
called ``backward()`` waits inside its own range meanwhile). CPU ops (self time, per name and range path) go to
``Summary.cpu_ops``, never among the kernels; a trace without GPU activity has no kernels and says that it holds
CPU ops only (``meta.holds``, a warning).

The file is streamed: ``traceEvents`` is decoded one event at a time (``json.JSONDecoder.raw_decode`` over a
sliding window of the text), and only compact columns (``array``) of what the summary needs are kept, so memory
grows with the number of ops and kernels, not with the size of their JSON (benchmarks/torch_trace_scale.py).
"""

from __future__ import annotations

import gzip
import json
import lzma
import math
import re
import zlib
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from profctl.errors import BadReport
from profctl.kernels import classify, short_name
from profctl.readers._compressed import open_bytes
from profctl.schema import CpuOpRow, KernelRow, RangeRow, Source, Summary, durations_stats

GZIP_MAGIC = b"\x1f\x8b"
CHUNK_CHARS = 1 << 20
#: one JSON value (an event, or a top-level field) larger than this is refused rather than buffered
MAX_VALUE_CHARS = 256 << 20
#: ranges torch.profiler adds itself, one per schedule step; kept out of range paths, summed as one range row
STEP_PREFIX = "ProfilerStep#"
BWD_PREFIX = "autograd::engine::evaluate_function: "

# event categories (Kineto's names, legacy capitalised ones and other runtimes mapped onto them)
OP, ANN, RT, KERNEL, MEMCPY, MEMSET, GPU_ANN, PYFN, OTHER = range(9)
_CATS: dict[str, int] = {
    "cpu_op": OP, "operator": OP, "user_annotation": ANN, "cuda_runtime": RT, "cuda_driver": RT,
    "runtime": RT, "privateuse1_runtime": RT, "privateuse1_driver": RT, "xpu_runtime": RT, "mtia_runtime": RT,
    "kernel": KERNEL, "gpu_memcpy": MEMCPY, "memcpy": MEMCPY, "gpu_memset": MEMSET, "memset": MEMSET,
    "gpu_user_annotation": GPU_ANN, "python_function": PYFN,
}
_KIND_NAMES = {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset"}
_MEMCPY_DIR = {"HtoD": "Host-to-Device", "DtoH": "Device-to-Host", "DtoD": "Device-to-Device",
               "HtoH": "Host-to-Host", "PtoP": "Peer-to-Peer", "DtoA": "Device-to-Array",
               "AtoD": "Array-to-Device", "HtoA": "Host-to-Array", "AtoH": "Array-to-Host"}
_MEMCPY_RX = re.compile(r"Memcpy\s+(\w+)")
_WS = re.compile(r"[ \t\n\r]*")
_CPU_GEMM = re.compile(r"aten::_?(?:add|badd)?b?mm(?:_out)?")


def read(path: str | Path, *, by_range: bool = False, notes: list[str] | None = None) -> Summary:
    """Summarise the trace at `path`; per kernel name, or per kernel name and range path with `by_range`.

    Notes for the user (a trace without GPU activity, launches that could not be attributed) are in
    ``summary.meta["notes"]``, and appended to `notes` when given; a reader prints nothing.
    """
    p = Path(path)
    col = _Collector()
    header: dict[str, Any] = {}
    try:
        with _open_text(p) as f:
            for ev in _events(_Stream(f), header):
                col.add(ev)
    except _Truncated as e:
        raise BadReport(f"{p}: truncated trace: the file ends inside {e.where} after {col.n_events} events "
                        "(was it still being written?)") from None
    except _NotJSON as e:
        raise BadReport(f"{p}: not JSON: {e.msg} at character {e.offset}") from None
    except _NotTrace as e:
        raise BadReport(f"{p}: JSON, but not a torch.profiler/Chrome trace: {e}") from None
    except RecursionError:
        raise BadReport(f"{p}: JSON nested too deeply to be a trace (after {col.n_events} events)") from None
    except (EOFError, zlib.error, lzma.LZMAError) as e:
        raise BadReport(f"{p}: truncated or damaged compressed file after {col.n_events} events ({e})") from None
    except gzip.BadGzipFile as e:
        raise BadReport(f"{p}: damaged gzip file ({e})") from None
    except UnicodeDecodeError:
        raise BadReport(f"{p}: not a text (UTF-8) JSON file") from None
    except OSError as e:
        raise BadReport(f"{p}: cannot read: {e.strerror or e}") from None
    summary = _summarise(p, col, header, by_range=by_range)
    if notes is not None:
        notes.extend(summary.meta.get("notes", []))
    return summary


# ---------------------------------------------------------------------------------------------- streaming JSON
class _NotJSON(Exception):
    def __init__(self, msg: str, offset: int) -> None:
        super().__init__(msg)
        self.msg, self.offset = msg, offset


class _Truncated(Exception):
    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


class _NotTrace(Exception):
    pass


def _open_text(p: Path) -> IO[str]:
    """The trace as text, decompressed on the fly when gzip- or xz-compressed (read-only)."""
    import io

    return io.TextIOWrapper(open_bytes(p), encoding="utf-8")


class _Stream:
    """A sliding window over a text stream that decodes one JSON value at a time.

    ``raw_decode`` fails on a value cut by the window's end; the window is then extended and the value decoded
    again, so each event is parsed by the C decoder and only one chunk (plus the event) is held at a time.
    """

    def __init__(self, f: IO[str]) -> None:
        self.f = f
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.dropped = 0  # characters before buf[0]
        self._dec = json.JSONDecoder()

    def _fill(self, n: int = CHUNK_CHARS) -> bool:
        if self.eof:
            return False
        data = self.f.read(n)
        if not data:
            self.eof = True
            return False
        if self.pos:
            self.dropped += self.pos
            self.buf = self.buf[self.pos :] + data
            self.pos = 0
        else:
            self.buf += data
        if len(self.buf) > MAX_VALUE_CHARS:
            raise _NotJSON(f"a single JSON value longer than {MAX_VALUE_CHARS >> 20} Mi characters",
                           self.dropped)
        return True

    def peek(self) -> str:
        """The next non-blank character ('' at the end of the file), without consuming it."""
        while True:
            m = _WS.match(self.buf, self.pos)
            self.pos = m.end() if m else self.pos
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill():
                return ""

    def value(self, where: str) -> Any:
        self.peek()
        n = CHUNK_CHARS
        while True:
            try:
                obj, end = self._dec.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                cut = e.pos >= len(self.buf) - 64 or e.msg.startswith("Unterminated string")
                if cut and self._fill(n):
                    n = min(n * 2, 64 << 20)
                    continue
                if cut:
                    raise _Truncated(where) from None
                raise _NotJSON(e.msg, self.dropped + e.pos) from None
            if end >= len(self.buf) and not self.eof and self._fill(n):
                continue  # a number or literal may go on in the next chunk
            self.pos = end
            return obj

    def take(self, ch: str, where: str) -> None:
        c = self.peek()
        if c != ch:
            if c == "":
                raise _Truncated(where)
            raise _NotJSON(f"expected {ch!r}, found {c!r}", self.dropped + self.pos)
        self.pos += 1


def _events(s: _Stream, header: dict[str, Any]) -> Iterator[Any]:
    """The elements of ``traceEvents`` (object format) or of the top-level array (Chrome's array format);
    the other top-level fields go to `header`."""
    c = s.peek()
    if c == "[":
        s.pos += 1
        yield from _array(s, "the event array", open_end=True)
        return
    if c != "{":
        if c == "":
            raise _NotJSON("empty file", 0)
        raise _NotJSON(f"unexpected {c!r}", s.dropped + s.pos)
    s.pos += 1
    found = False
    while True:
        c = s.peek()
        if c == "}":
            s.pos += 1
            break
        if c == ",":
            s.pos += 1
            continue
        if c == "":
            raise _Truncated("the top-level object")
        if c != '"':
            raise _NotJSON(f"expected a field name, found {c!r}", s.dropped + s.pos)
        key = s.value("a field name")
        s.take(":", "the top-level object")
        if key == "traceEvents" and s.peek() == "[":
            s.pos += 1
            found = True
            yield from _array(s, "traceEvents", open_end=False)
        else:
            header[key] = s.value(f"the field {key!r}")
    if not found:
        keys = ", ".join(sorted(header)[:6]) or "none"
        raise _NotTrace(f"no traceEvents array (top-level fields: {keys})")


def _array(s: _Stream, where: str, *, open_end: bool) -> Iterator[Any]:
    while True:
        c = s.peek()
        if c == "]":
            s.pos += 1
            return
        if c == ",":
            s.pos += 1
            continue
        if c == "":
            if open_end:  # Chrome's array format may omit the closing bracket
                return
            raise _Truncated(where)
        yield s.value(where)


# ---------------------------------------------------------------------------------------------- collection
class _Collector:
    """Keeps, per event kind, only the columns the summary needs, in compact arrays."""

    def __init__(self) -> None:
        self.n_events = 0
        self.names: dict[str, int] = {}
        self.name_list: list[str] = []
        self.threads: dict[tuple[Any, Any], int] = {}
        self.thread_keys: list[tuple[Any, Any]] = []
        self.thread_names: dict[tuple[Any, Any], str] = {}
        self.cats: Counter[str] = Counter()
        self.skipped = 0
        # intervals: CPU ops and user annotations
        self.iv_tid = array("i")
        self.iv_ts = array("d")
        self.iv_dur = array("d")
        self.iv_name = array("i")
        self.iv_ann = array("b")
        # runtime calls with a correlation id
        self.rt_corr = array("q")
        self.rt_tid = array("i")
        self.rt_ts = array("d")
        # GPU activities
        self.g_name = array("i")
        self.g_ts = array("d")
        self.g_dur = array("d")
        self.g_corr = array("q")
        self.g_kind = array("b")
        self.g_stream = array("i")
        # fwdbwd flows: id -> {"s": (tid, ts), "f": (tid, ts)}
        self.flows: dict[Any, dict[str, tuple[int, float]]] = {}
        self.mem_peak: dict[str, float] = {}
        self.ts_min = float("inf")
        self.ts_max = float("-inf")

    def name_id(self, s: Any) -> int:
        s = s if isinstance(s, str) else str(s)
        i = self.names.get(s)
        if i is None:
            i = self.names[s] = len(self.name_list)
            self.name_list.append(s)
        return i

    def thread_id(self, pid: Any, tid: Any) -> int:
        key = (_key(pid), _key(tid))
        i = self.threads.get(key)
        if i is None:
            i = self.threads[key] = len(self.thread_keys)
            self.thread_keys.append(key)
        return i

    def add(self, e: Any) -> None:
        self.n_events += 1
        if type(e) is not dict:
            self.skipped += 1
            return
        ph = e.get("ph")
        cat = e.get("cat")
        if ph == "X":
            k = _CATS.get(cat) if isinstance(cat, str) else None
            if k is None:
                k = _CATS.get(cat.lower(), OTHER) if isinstance(cat, str) else OTHER
            self.cats[cat if isinstance(cat, str) else str(cat)] += 1
            if k in (OTHER, GPU_ANN, PYFN):
                return
            ts, dur = _time(e.get("ts")), _time(e.get("dur", 0.0))
            if ts is None or dur is None or dur < 0 or dur > MAX_TIME_US:
                self.skipped += 1
                return
            if k in (OP, ANN):
                self.iv_tid.append(self.thread_id(e.get("pid"), e.get("tid")))
                self.iv_ts.append(ts)
                self.iv_dur.append(dur)
                self.iv_name.append(self.name_id(e.get("name", "")))
                self.iv_ann.append(k == ANN)
            elif k == RT:
                args = e.get("args")
                corr = args.get("correlation") if isinstance(args, dict) else None
                if isinstance(corr, int) and _is_corr(corr) and corr > 0:
                    self.rt_corr.append(corr)
                    self.rt_tid.append(self.thread_id(e.get("pid"), e.get("tid")))
                    self.rt_ts.append(ts)
            else:
                args = e.get("args")
                corr = args.get("correlation", -1) if isinstance(args, dict) else -1
                self.g_name.append(self.name_id(e.get("name", "")))
                self.g_ts.append(ts)
                self.g_dur.append(dur)
                self.g_corr.append(corr if _is_corr(corr) else -1)
                self.g_kind.append(k)
                self.g_stream.append(self.thread_id(e.get("pid"), e.get("tid")))
                if ts < self.ts_min:
                    self.ts_min = ts
                if ts + dur > self.ts_max:
                    self.ts_max = ts + dur
        elif ph == "s" or ph == "f":
            if cat == "fwdbwd":
                fid, ts = e.get("id"), _time(e.get("ts"))
                if ts is None or not isinstance(fid, (int, str)):
                    self.skipped += 1
                    return
                self.flows.setdefault(fid, {})[ph] = (self.thread_id(e.get("pid"), e.get("tid")), ts)
        elif ph == "M":
            if e.get("name") == "thread_name" and isinstance(e.get("args"), dict):
                self.thread_names[(_key(e.get("pid")), _key(e.get("tid")))] = str(e["args"].get("name", ""))
        elif (ph == "i" or ph == "I") and e.get("name") == "[memory]":
            args = e.get("args")
            if isinstance(args, dict) and _time(args.get("Total Allocated")) is not None:
                dev = f"{args.get('Device Type', '?')}:{args.get('Device Id', '?')}"
                self.mem_peak[dev] = max(self.mem_peak.get(dev, 0.0), float(args["Total Allocated"]))


#: a time (microseconds) beyond this is not one: ~300 years; a damaged number, whose products would overflow
MAX_TIME_US = 1e16


def _time(v: Any) -> float | None:
    """A finite number of microseconds, or None (a string, NaN, infinity, a list, an absurd value: the event is
    skipped and counted)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) and abs(f) <= MAX_TIME_US else None


def _plain(v: Any) -> bool:
    """True when `v` is JSON without NaN or infinity (it goes into the summary as it is)."""
    try:
        json.dumps(v, allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        return False
    return True


def _is_corr(v: Any) -> bool:
    """A correlation id that fits the 64-bit columns."""
    return isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < (1 << 63)


def _key(v: Any) -> Any:
    """A process or thread id usable as a key (Kineto writes ints or strings; anything else, as text)."""
    return v if isinstance(v, (int, str)) or v is None else repr(v)[:80]


# ---------------------------------------------------------------------------------------------- analysis
def _summarise(p: Path, col: _Collector, header: dict[str, Any], *, by_range: bool) -> Summary:
    """The Summary of what `col` kept: attribute every GPU activity to its launching op and ranges, then
    aggregate per kernel (and range path), per CPU op, and per range."""
    a = _Analysis(p, col, by_range)
    a.nest_ops_and_launches()
    a.place_launches()
    groups, inst_iv, unattributed = a.gpu_groups()
    kernels = a.kernel_rows(groups)
    cpu_rows, cpu_top = a.cpu_rows()
    notes: list[str] = []
    warnings: list[str] = []
    if not a.gpu:
        notes.append(f"{p.name}: no GPU activity in this trace (no kernel, memcpy or memset events): it holds "
                     f"CPU ops only, {len(cpu_rows)} op row(s) by self time in cpu_ops, no kernels")
        warnings.append(notes[-1])
    elif unattributed:
        notes.append(f"{p.name}: {unattributed} of {a.n_gpu} GPU activities have no launching call in the trace "
                     "(CPU activity not recorded?); they count per kernel but not per range")
    kernels.sort(key=lambda k: (-k.total_ns, k.name, k.nvtx_range or ""))
    meta = a.meta(header, cpu_top, unattributed, notes)
    meta["holds"] = "gpu_and_cpu" if a.gpu else "cpu_ops_only"
    if col.skipped:
        warnings.append(f"{col.skipped} event(s) that are not trace events (wrong types or fields) were skipped")
    if warnings:
        meta["warnings"] = warnings
    tv = header.get("torch_version")
    cpu_rows.sort(key=lambda c: (-c.total_ns, c.name, c.nvtx_range or ""))
    return Summary(sources=(Source(path=str(p), tool="torch", tool_version=str(tv) if tv else None),),
                   kernels=tuple(kernels), ranges=tuple(a.range_rows(inst_iv)), meta=meta, cpu_ops=tuple(cpu_rows))


class _Analysis:
    """The attribution of one trace, step by step (each step's loops work on local names: they run once per
    event of a trace of millions)."""

    def __init__(self, p: Path, col: _Collector, by_range: bool) -> None:
        import numpy as np

        self.col, self.by_range = col, by_range
        self.n_iv, self.n_gpu = len(col.iv_ts), len(col.g_ts)
        if col.n_events == 0:
            raise BadReport(f"{p}: trace has no events")
        if self.n_iv == 0 and self.n_gpu == 0:
            raise BadReport(f"{p}: a Chrome trace without torch.profiler events (no cpu_op, user_annotation or "
                            f"kernel among its {col.n_events} events)")
        self.gpu = self.n_gpu > 0
        self.names = col.name_list
        n_iv = self.n_iv
        self.tid_of_iv = np.frombuffer(col.iv_tid, dtype=np.int32) if n_iv else np.zeros(0, np.int32)
        self.ts_iv = np.frombuffer(col.iv_ts, dtype=np.float64) if n_iv else np.zeros(0)
        self.dur_iv = np.frombuffer(col.iv_dur, dtype=np.float64) if n_iv else np.zeros(0)
        # which runtime calls launched GPU work: correlation -> runtime index (only those)
        gcorr = set(col.g_corr)
        gcorr.discard(-1)
        self.launch_of_corr = {c: j for j, c in enumerate(col.rt_corr) if c in gcorr}
        launches = sorted(self.launch_of_corr.values())
        self.n_ln = len(launches)
        self.ln_tid = np.array([col.rt_tid[j] for j in launches], dtype=np.int32)
        self.ln_ts = np.array([col.rt_ts[j] for j in launches], dtype=np.float64)
        self.ln_index = {j: k for k, j in enumerate(launches)}
        # flow endpoints: the backward node ops ('f') and the forward ops ('s')
        self.f_at: dict[tuple[int, float], Any] = {}
        self.s_at: dict[Any, tuple[int, float]] = {}
        for fid, fe in col.flows.items():
            if "f" in fe and "s" in fe:
                self.f_at[fe["f"]] = fid
                self.s_at[fid] = fe["s"]
        self.s_keys = set(self.s_at.values())
        # what nest_ops_and_launches fills, per interval (ops and annotations) and per launch
        self.parent = array("i", [-1]) * n_iv
        self.path_of = array("i", [0]) * n_iv          # range path id (0 = no range)
        self.ann_of = array("i", [-1]) * n_iv          # innermost annotation instance enclosing (or being) it
        self.op_of = array("i", [-1]) * n_iv           # innermost op enclosing (or being) it
        self.top_of = array("i", [-1]) * n_iv          # outermost op
        self.flow_of = array("i", [-1]) * n_iv         # innermost op that is a backward node with a fwdbwd flow
        self.self_us = array("d", col.iv_dur)          # self time (ops)
        self.path_names: list[str] = [""]
        self.paths: dict[tuple[int, int], int] = {}
        self.flow_ids: list[Any] = []
        self.op_at_s: dict[tuple[int, float], int] = {}
        self.ann_by_tid: dict[int, list[int]] = defaultdict(list)
        self.ln_parent = array("i", [-1]) * self.n_ln
        # what place_launches fills, per launch
        self.ln_path = array("i", [0]) * self.n_ln
        self.ln_ann = array("i", [-1]) * self.n_ln
        self.ln_bwd = array("b", [0]) * self.n_ln
        self.borrowed = 0

    # ---- one sweep per thread over intervals (by start, longest first) and launches (by time)
    def nest_ops_and_launches(self) -> None:
        import numpy as np

        order = np.lexsort((-self.dur_iv, self.ts_iv, self.tid_of_iv)) if self.n_iv else np.zeros(0, np.int64)
        ln_order = np.lexsort((self.ln_ts, self.ln_tid)) if self.n_ln else np.zeros(0, np.int64)
        iv_bounds = _group_bounds(self.tid_of_iv[order]) if self.n_iv else {}
        ln_bounds = _group_bounds(self.ln_tid[ln_order]) if self.n_ln else {}
        order_l, ln_order_l = order.tolist(), ln_order.tolist()
        for tid in set(iv_bounds) | set(ln_bounds):
            self._sweep_thread(tid, order_l[slice(*iv_bounds.get(tid, (0, 0)))],
                               ln_order_l[slice(*ln_bounds.get(tid, (0, 0)))])

    def _sweep_thread(self, tid: int, ivs: list[int], lns: list[int]) -> None:
        ts_l, dur_l, ln_ts = self.col.iv_ts, self.col.iv_dur, self.ln_ts
        stack: list[int] = []
        ends: list[float] = []
        i = j = 0
        while i < len(ivs) or j < len(lns):
            if i < len(ivs) and (j >= len(lns) or ts_l[ivs[i]] <= ln_ts[lns[j]]):
                x = ivs[i]
                i += 1
                t = ts_l[x]
                while ends and ends[-1] <= t:
                    stack.pop()
                    ends.pop()
                self._enter(x, tid, t, stack[-1] if stack else -1)
                stack.append(x)
                ends.append(t + dur_l[x])
            else:
                k = lns[j]
                j += 1
                t = float(ln_ts[k])
                while ends and ends[-1] < t:
                    stack.pop()
                    ends.pop()
                self.ln_parent[k] = stack[-1] if stack else -1

    def _enter(self, x: int, tid: int, t: float, par: int) -> None:
        """Interval `x` opens inside `par`: its parent, range path, annotation, op, top op and flow."""
        self.parent[x] = par
        if par >= 0:
            pp, pa, po, pt, pf = (self.path_of[par], self.ann_of[par], self.op_of[par], self.top_of[par],
                                  self.flow_of[par])
        else:
            pp, pa, po, pt, pf = 0, -1, -1, -1, -1
        if self.col.iv_ann[x]:
            nid = self.col.iv_name[x]
            nm = self.names[nid]
            self.path_of[x] = pp if nm.startswith(STEP_PREFIX) else self._path(pp, nid, nm)
            self.ann_of[x], self.op_of[x], self.top_of[x], self.flow_of[x] = x, po, pt, pf
            self.ann_by_tid[tid].append(x)
            return
        self.path_of[x], self.ann_of[x], self.op_of[x] = pp, pa, x
        self.top_of[x] = pt if pt >= 0 else x
        key = (tid, t)
        fid = self.f_at.get(key)
        if fid is not None:
            self.flow_of[x] = len(self.flow_ids)
            self.flow_ids.append(fid)
        else:
            self.flow_of[x] = pf
        if key in self.s_keys:
            self.op_at_s[key] = x
        if po >= 0:
            self.self_us[po] -= self.col.iv_dur[x]

    def _path(self, parent_path: int, nid: int, name: str) -> int:
        """The id of range path `parent/name` (made on first sight)."""
        pid = self.paths.get((parent_path, nid))
        if pid is None:
            pid = self.paths[(parent_path, nid)] = len(self.path_names)
            self.path_names.append(name if parent_path == 0 else f"{self.path_names[parent_path]}/{name}")
        return pid

    # ---- per launch: range path, annotation instance, pass
    def place_launches(self) -> None:
        """Each launch's ranges; a backward launch outside any range (autograd's thread) borrows the ranges open
        on the forward thread at that moment (the fwdbwd flow names the thread)."""
        col, names, iv_name = self.col, self.names, self.col.iv_name
        autograd = {i: "autograd" in col.thread_names.get(key, "") for i, key in enumerate(col.thread_keys)}
        self.flow_src: dict[int, Counter[int]] = defaultdict(Counter)
        for fid, fe in col.flows.items():
            if "f" in fe and "s" in fe:
                self.flow_src[fe["f"][0]][self.s_at[fid][0]] += 1
        self.ann_count = Counter({t: len(v) for t, v in self.ann_by_tid.items() if not autograd.get(t, False)})
        borrow: dict[int, list[int]] = defaultdict(list)
        for k in range(self.n_ln):
            x = self.ln_parent[k]
            tid = int(self.ln_tid[k])
            bwd = autograd.get(tid, False)
            if x >= 0:
                self.ln_path[k], self.ln_ann[k] = self.path_of[x], self.ann_of[x]
                top = self.top_of[x]
                if top >= 0 and names[iv_name[top]].startswith(BWD_PREFIX):
                    bwd = True
            self.ln_bwd[k] = bwd
            if self.ln_path[k] == 0 and bwd:
                fwd_tid = (self.s_at[self.flow_ids[self.flow_of[x]]][0] if x >= 0 and self.flow_of[x] >= 0
                           else self._fallback_tid(tid))
                if fwd_tid >= 0 and fwd_tid != tid:
                    borrow[fwd_tid].append(k)
        for tid, ks in borrow.items():
            self._borrow(self.ann_by_tid.get(tid, []), ks)

    def _fallback_tid(self, tid: int) -> int:
        """Where a backward thread's launches without a flow (e.g. AccumulateGrad) take their ranges from: the
        thread its fwdbwd flows come from most often, else the non-autograd thread with most ranges."""
        s = self.flow_src.get(tid)
        if s:
            return s.most_common(1)[0][0]
        return next((t for t, _ in self.ann_count.most_common() if t != tid), -1)

    def _borrow(self, anns: list[int], ks: list[int]) -> None:
        """Give launches `ks` the innermost annotation open at their time among `anns` (in start order)."""
        ts_l, dur_l, ln_ts = self.col.iv_ts, self.col.iv_dur, self.ln_ts
        ks.sort(key=lambda k: ln_ts[k])
        stack: list[int] = []
        ends: list[float] = []
        ai = 0
        for k in ks:
            t = float(ln_ts[k])
            while ai < len(anns) and ts_l[anns[ai]] <= t:
                a = anns[ai]
                ai += 1
                while ends and ends[-1] <= ts_l[a]:
                    stack.pop()
                    ends.pop()
                stack.append(a)
                ends.append(ts_l[a] + dur_l[a])
            while ends and ends[-1] < t:
                stack.pop()
                ends.pop()
            if stack:
                self.ln_path[k], self.ln_ann[k] = self.path_of[stack[-1]], stack[-1]
                self.borrowed += 1

    # ---- GPU activities
    def gpu_groups(self) -> tuple[dict[tuple[int, int], _Group], dict[int, list[tuple[float, float]]], int]:
        """Activities grouped per (name, range path); the GPU intervals of each annotation instance; how many
        activities had no launch in the trace."""
        col, names, iv_name = self.col, self.names, self.col.iv_name
        groups: dict[tuple[int, int], _Group] = {}
        inst_iv: dict[int, list[tuple[float, float]]] = defaultdict(list)
        unattributed = 0
        for g in range(self.n_gpu):
            jl = self.launch_of_corr.get(col.g_corr[g])
            k = self.ln_index[jl] if jl is not None else -1
            path = self.ln_path[k] if (k >= 0 and self.by_range) else 0
            key = (col.g_name[g], path if self.by_range else -1)
            grp = groups.get(key)
            if grp is None:
                grp = groups[key] = _Group(col.g_kind[g])
            t0, d = col.g_ts[g], col.g_dur[g]
            grp.durs.append(d * 1000.0)
            grp.streams.add(col.g_stream[g])
            if k < 0:
                unattributed += 1
                continue
            x = self.ln_parent[k]
            is_bwd = bool(self.ln_bwd[k])
            grp.passes["bwd" if is_bwd else "fwd"] += 1
            if x >= 0:
                top, inner = self.top_of[x], self.op_of[x]
                if top >= 0:
                    grp.ops[_op_label(names[iv_name[top]])] += 1
                if inner >= 0:
                    grp.launch_ops[names[iv_name[inner]]] += 1
                if is_bwd and self.flow_of[x] >= 0:
                    fop = self.op_at_s.get(self.s_at[self.flow_ids[self.flow_of[x]]])
                    if fop is not None:
                        grp.fwd_ops[names[iv_name[fop]]] += 1
            a = self.ln_ann[k]
            while a >= 0:
                inst_iv[a].append((t0, t0 + d))
                pa = self.parent[a]
                a = self.ann_of[pa] if pa >= 0 else -1
        return groups, inst_iv, unattributed

    def kernel_rows(self, groups: dict[tuple[int, int], _Group]) -> list[KernelRow]:
        out = []
        for (nid, path), grp in groups.items():
            raw = self.names[nid]
            name, extra = raw, grp.extra()
            if grp.kind == MEMCPY:
                m = _MEMCPY_RX.search(raw)
                name = f"[CUDA memcpy {_MEMCPY_DIR.get(m.group(1), m.group(1)) if m else 'Unknown'}]"
                extra["torch_name"] = raw
            elif grp.kind == MEMSET:
                name = "[CUDA memset]"
                extra["torch_name"] = raw
            st = durations_stats(grp.durs)
            out.append(KernelRow(
                tool="torch", name=name, short_name=short_name(name), kernel_class=classify(name),
                nvtx_range=self.path_names[path] if path > 0 else None, count=int(st["count"]),
                total_ns=st["total_ns"], avg_ns=st["avg_ns"], med_ns=st["med_ns"], min_ns=st["min_ns"],
                max_ns=st["max_ns"], std_ns=st["std_ns"], extra=extra))
        return out

    # ---- CPU ops (self time), per name (and range path)
    def cpu_rows(self) -> tuple[list[CpuOpRow], list[dict[str, Any]]]:
        """Per CPU op name (and range path): self times as rows; and the ops with most self time overall."""
        col, names = self.col, self.names
        groups: dict[tuple[int, int], list[float]] = defaultdict(list)
        total: Counter[int] = Counter()
        total_path: Counter[tuple[int, int]] = Counter()
        for x in range(self.n_iv):
            if col.iv_ann[x]:
                continue
            key = (col.iv_name[x], self.path_of[x] if self.by_range else -1)
            groups[key].append(max(self.self_us[x], 0.0) * 1000.0)
            total[col.iv_name[x]] += int(col.iv_dur[x] * 1000.0)
            total_path[key] += int(col.iv_dur[x] * 1000.0)
        by_name: Counter[int] = Counter()
        calls: Counter[int] = Counter()
        rows = []
        for (nid, path), xs in groups.items():
            by_name[nid] += int(sum(xs))
            calls[nid] += len(xs)
            nm = names[nid]
            st = durations_stats(xs)
            rows.append(CpuOpRow(
                tool="torch", name=nm, op_class=_cpu_class(nm),
                nvtx_range=self.path_names[path] if path > 0 else None, count=int(st["count"]),
                total_ns=st["total_ns"], avg_ns=st["avg_ns"], med_ns=st["med_ns"], min_ns=st["min_ns"],
                max_ns=st["max_ns"], std_ns=st["std_ns"], cpu_total_ns=float(total_path[(nid, path)]),
                extra={"device": "cpu", "time": "self"}))
        top = [{"name": names[n], "calls": calls[n], "self_ns": s, "total_ns": total[n]}
               for n, s in by_name.most_common(15)]
        self.cpu_calls = sum(calls.values())
        return rows, top

    # ---- ranges: per range text, as nsys groups NVTX ranges (the paths they were seen under go in extra)
    def range_rows(self, inst_iv: dict[int, list[tuple[float, float]]]) -> list[RangeRow]:
        col, names = self.col, self.names
        inst_by_name: dict[str, list[int]] = defaultdict(list)
        for x in range(self.n_iv):
            if col.iv_ann[x]:
                nm = names[col.iv_name[x]]
                inst_by_name[STEP_PREFIX + "*" if nm.startswith(STEP_PREFIX) else nm].append(x)
        ranges: list[RangeRow] = []
        for name, insts in inst_by_name.items():
            proj = 0.0  # as nsys' nvtx_gpu_proj_sum: first op's start to last op's end, per instance
            busy = 0.0  # the same ops with overlaps merged and gaps left out
            ops = 0
            for x in insts:
                ivs = inst_iv.get(x)
                if ivs:
                    ops += len(ivs)
                    proj += max(e for _, e in ivs) - min(s for s, _ in ivs)
                    busy += _union_us(ivs)
            seen = sorted({self.path_names[self.path_of[x]] for x in insts if self.path_of[x] > 0})
            ranges.append(RangeRow(
                name=name, domain=None, style="push_pop", count=len(insts),
                range_total_ns=sum(col.iv_dur[x] for x in insts) * 1000.0,
                gpu_proj_total_ns=proj * 1000.0 if self.gpu else None, gpu_ops=ops if self.gpu else None,
                extra={"paths": seen[:20], "threads": len({col.iv_tid[x] for x in insts}),
                       "gpu_busy_ns": busy * 1000.0 if self.gpu else None}))
        ranges.sort(key=lambda r: r.name)
        return ranges

    def meta(self, header: dict[str, Any], top_cpu: list[dict[str, Any]], unattributed: int,
             notes: list[str]) -> dict[str, Any]:
        col = self.col
        meta: dict[str, Any] = {
            "format": "kineto-chrome-trace", "events": col.n_events, "gpu_activity": self.gpu,
            "event_categories": dict(col.cats.most_common()), "cpu_ops": self.cpu_calls,
            "cpu_ops_top_self": top_cpu, "threads": {f"{k[0]}/{k[1]}": v for k, v in col.thread_names.items()},
            "gpu_ops": self.n_gpu, "gpu_ops_unattributed": unattributed, "launches_borrowed_range": self.borrowed,
            "by_range": self.by_range,
        }
        if self.gpu:
            meta["gpu_span_ns"] = (col.ts_max - col.ts_min) * 1000.0
        if col.skipped:
            meta["events_skipped"] = col.skipped
        if col.mem_peak:
            meta["peak_allocated_bytes"] = col.mem_peak
        devs = header.get("deviceProperties")
        if isinstance(devs, list):
            names = [d.get("name") for d in devs if isinstance(d, dict)]
            meta["devices"] = [n for n in names if isinstance(n, str) and n]
        for hk in ("schemaVersion", "cuda_runtime_version", "cuda_driver_version", "cupti_version",
                   "torch_version", "profctl"):
            v = header.get(hk)
            if isinstance(v, (str, int)) or (isinstance(v, dict) and hk == "profctl" and _plain(v)):
                meta[hk] = v
        if notes:
            meta["notes"] = notes
        return meta


class _Group:
    __slots__ = ("durs", "fwd_ops", "kind", "launch_ops", "ops", "passes", "streams")

    def __init__(self, kind: int) -> None:
        self.kind = kind
        self.durs: list[float] = []
        self.streams: set[int] = set()
        self.passes: Counter[str] = Counter()
        self.ops: Counter[str] = Counter()
        self.launch_ops: Counter[str] = Counter()
        self.fwd_ops: Counter[str] = Counter()

    def extra(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": _KIND_NAMES.get(self.kind, "kernel"), "pass": dict(self.passes),
                             "streams": len(self.streams)}
        if self.ops:
            d["ops"] = dict(self.ops.most_common(5))
        if self.launch_ops:
            d["launch_ops"] = dict(self.launch_ops.most_common(5))
        if self.fwd_ops:
            d["fwd_ops"] = dict(self.fwd_ops.most_common(5))
        return d


def _op_label(name: str) -> str:
    return name[len(BWD_PREFIX):] if name.startswith(BWD_PREFIX) else name


def _cpu_class(name: str) -> str:
    """Kernel classes for CPU ops: SDPA's fused CPU kernels say 'flash_attention' but not 'fwd'; aten::mm and
    aten::addmm are GEMMs."""
    if "flash_attention" in name:
        return "flash_bwd" if "backward" in name else "flash_fwd"
    if _CPU_GEMM.fullmatch(name):
        return "gemm"
    return classify(name)


def _group_bounds(sorted_tids: Any) -> dict[int, tuple[int, int]]:
    """tid -> (start, end) of its run in an array sorted by tid."""
    import numpy as np

    if len(sorted_tids) == 0:
        return {}
    cuts = np.flatnonzero(np.diff(sorted_tids)) + 1
    starts = [0, *cuts.tolist()]
    ends = [*cuts.tolist(), len(sorted_tids)]
    return {int(sorted_tids[s]): (s, e) for s, e in zip(starts, ends, strict=True)}


def _union_us(ivs: list[tuple[float, float]]) -> float:
    ivs.sort()
    total = 0.0
    cs, ce = ivs[0]
    for s, e in ivs[1:]:
        if s > ce:
            total += ce - cs
            cs, ce = s, e
        elif e > ce:
            ce = e
    return total + ce - cs


__all__ = ["read"]
