"""The events of a torch.profiler trace, kept as compact columns: only what the summary needs, in ``array``s.

A trace of millions of events is held as a few numbers per op, range, runtime call and GPU activity (names and
threads interned as small integers), so memory grows with the number of events, not with their JSON. The
columns come in named groups, one per kind of event:

* :class:`Intervals`: CPU ops and ``user_annotation`` ranges (they nest together on their thread);
* :class:`RuntimeCalls`: CUDA runtime and driver calls with a correlation id (the launches among them);
* :class:`GpuOps`: kernels, memcpy and memset (:class:`Category` tells which);
* :class:`Flows`: the ``fwdbwd`` flows from a backward node to its forward op.

:meth:`Trace.collect` is the reader's hot loop, run once per event: measure a change to it on
benchmarks/torch_trace_scale.py.
"""

from __future__ import annotations

import json
import math
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any


class Category(IntEnum):
    """What an event is, from its ``cat`` (Kineto's names; legacy capitalised ones and other runtimes' mapped
    onto them). Stored as small integers in :attr:`GpuOps.kind`."""

    OP = 0
    ANNOTATION = 1
    RUNTIME = 2
    KERNEL = 3
    MEMCPY = 4
    MEMSET = 5
    GPU_ANNOTATION = 6
    PYTHON_FUNCTION = 7
    OTHER = 8


C = Category
CATEGORIES: dict[str, Category] = {
    "cpu_op": C.OP, "operator": C.OP, "user_annotation": C.ANNOTATION, "cuda_runtime": C.RUNTIME,
    "cuda_driver": C.RUNTIME, "runtime": C.RUNTIME, "privateuse1_runtime": C.RUNTIME,
    "privateuse1_driver": C.RUNTIME, "xpu_runtime": C.RUNTIME, "mtia_runtime": C.RUNTIME,
    "kernel": C.KERNEL, "gpu_memcpy": C.MEMCPY, "memcpy": C.MEMCPY, "gpu_memset": C.MEMSET, "memset": C.MEMSET,
    "gpu_user_annotation": C.GPU_ANNOTATION, "python_function": C.PYTHON_FUNCTION,
}
#: categories whose complete events are counted but not kept
NOT_KEPT = (C.OTHER, C.GPU_ANNOTATION, C.PYTHON_FUNCTION)
# the hot loop compares with plain module names: an enum member's attribute lookup costs ~100 ns in Python 3.11
_ANNOTATION, _RUNTIME, _OTHER = C.ANNOTATION, C.RUNTIME, C.OTHER
_INTERVALS = (C.OP, C.ANNOTATION)  # categories kept as Intervals
#: a time (microseconds) beyond this is not one: ~300 years; a damaged number, whose products would overflow
MAX_TIME_US = 1e16


def _ints() -> array[int]:
    return array("i")


def _floats() -> array[float]:
    return array("d")


@dataclass(slots=True)
class Intervals:
    """CPU ops and ``user_annotation`` range instances, one entry per event, in the order seen (times in µs).
    Both open and close on a thread's stack, so they share columns; ``is_range`` tells them apart."""

    thread: array[int] = field(default_factory=_ints)
    start: array[float] = field(default_factory=_floats)
    dur: array[float] = field(default_factory=_floats)
    name: array[int] = field(default_factory=_ints)
    is_range: array[int] = field(default_factory=lambda: array("b"))

    def __len__(self) -> int:
        return len(self.start)


@dataclass(slots=True)
class RuntimeCalls:
    """Runtime and driver calls with a positive correlation id: the call that launched a GPU activity shares it."""

    corr: array[int] = field(default_factory=lambda: array("q"))
    thread: array[int] = field(default_factory=_ints)
    start: array[float] = field(default_factory=_floats)

    def __len__(self) -> int:
        return len(self.start)


@dataclass(slots=True)
class GpuOps:
    """GPU activities (kernels, memcpy, memset), times in µs; ``corr`` is -1 where the event has none, ``stream``
    the interned (device, stream) thread key."""

    name: array[int] = field(default_factory=_ints)
    start: array[float] = field(default_factory=_floats)
    dur: array[float] = field(default_factory=_floats)
    corr: array[int] = field(default_factory=lambda: array("q"))
    kind: array[int] = field(default_factory=lambda: array("b"))
    stream: array[int] = field(default_factory=_ints)
    #: the interned launch details (JSON text of DETAIL_ARGS) per activity, -1 for none; kept only by a
    #: ``Trace(details=True)`` (a timeline needs them, the summary does not)
    detail: array[int] = field(default_factory=_ints)

    def __len__(self) -> int:
        return len(self.start)


#: the GPU activities' args a timeline shows (Kineto's names)
DETAIL_ARGS = ("grid", "block", "registers per thread", "shared memory", "bytes", "device", "stream")


@dataclass(slots=True)
class Flows:
    """``fwdbwd`` flows: flow id -> {"s": (thread, time) at the forward op, "f": (thread, time) at the backward
    node}."""

    ends: dict[Any, dict[str, tuple[int, float]]] = field(default_factory=dict)

    def complete(self) -> Iterator[tuple[Any, tuple[int, float], tuple[int, float]]]:
        """(flow id, start end, finish end) of every flow with both ends in the trace."""
        for fid, fe in self.ends.items():
            if "f" in fe and "s" in fe:
                yield fid, fe["s"], fe["f"]


class Trace:
    """What the summary needs of one trace: the column groups, interned names and threads, and counts; with
    `details`, also the launch details of each GPU activity (grid, block, registers, shared memory, bytes)."""

    def __init__(self, *, details: bool = False) -> None:
        self.details = details
        self.n_events = 0
        self.skipped = 0
        self.names: dict[str, int] = {}
        self.name_list: list[str] = []
        self.threads: dict[tuple[Any, Any], int] = {}
        self.thread_keys: list[tuple[Any, Any]] = []
        self.thread_names: dict[tuple[Any, Any], str] = {}
        self.cats: Counter[str] = Counter()
        self.intervals = Intervals()
        self.runtime = RuntimeCalls()
        self.gpu = GpuOps()
        self.flows = Flows()
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

    def collect(self, events: Iterable[Any]) -> None:
        """Keep what the summary needs of each event (`n_events` counts those seen, also when `events` raises)."""
        for e in events:
            self.n_events += 1
            if type(e) is not dict:
                self.skipped += 1
            elif e.get("ph") == "X":
                self._complete(e)
            else:
                self._other(e)

    def _complete(self, e: dict[str, Any]) -> None:
        """A complete event (``ph`` X): an op, a range, a runtime call or a GPU activity."""
        cat = e.get("cat")
        k = CATEGORIES.get(cat) if isinstance(cat, str) else None
        if k is None:
            k = CATEGORIES.get(cat.lower(), _OTHER) if isinstance(cat, str) else _OTHER
        self.cats[cat if isinstance(cat, str) else str(cat)] += 1
        if k in NOT_KEPT:
            return
        ts, dur = _time(e.get("ts")), _time(e.get("dur", 0.0))
        if ts is None or dur is None or dur < 0 or dur > MAX_TIME_US:
            self.skipped += 1
            return
        if k in _INTERVALS:
            iv = self.intervals
            iv.thread.append(self.thread_id(e.get("pid"), e.get("tid")))
            iv.start.append(ts)
            iv.dur.append(dur)
            iv.name.append(self.name_id(e.get("name", "")))
            iv.is_range.append(k == _ANNOTATION)
        elif k == _RUNTIME:
            args = e.get("args")
            corr = args.get("correlation") if isinstance(args, dict) else None
            if isinstance(corr, int) and _is_corr(corr) and corr > 0:
                rt = self.runtime
                rt.corr.append(corr)
                rt.thread.append(self.thread_id(e.get("pid"), e.get("tid")))
                rt.start.append(ts)
        else:
            args = e.get("args")
            corr = args.get("correlation", -1) if isinstance(args, dict) else -1
            g = self.gpu
            g.name.append(self.name_id(e.get("name", "")))
            g.start.append(ts)
            g.dur.append(dur)
            g.corr.append(corr if _is_corr(corr) else -1)
            g.kind.append(k)
            g.stream.append(self.thread_id(e.get("pid"), e.get("tid")))
            if self.details:
                g.detail.append(self._detail(args))
            if ts < self.ts_min:
                self.ts_min = ts
            if ts + dur > self.ts_max:
                self.ts_max = ts + dur

    def _detail(self, args: Any) -> int:
        """The interned JSON text of the activity's DETAIL_ARGS (-1 when it has none)."""
        if not isinstance(args, dict):
            return -1
        d = {k: args[k] for k in DETAIL_ARGS if k in args}
        return self.name_id(json.dumps(d, sort_keys=True, default=str)) if d else -1

    def _other(self, e: dict[str, Any]) -> None:
        """Flow ends, thread names and memory events; anything else is not needed."""
        ph = e.get("ph")
        if ph == "s" or ph == "f":
            if e.get("cat") == "fwdbwd":
                fid, ts = e.get("id"), _time(e.get("ts"))
                if ts is None or not isinstance(fid, (int, str)):
                    self.skipped += 1
                    return
                self.flows.ends.setdefault(fid, {})[ph] = (self.thread_id(e.get("pid"), e.get("tid")), ts)
        elif ph == "M":
            if e.get("name") == "thread_name" and isinstance(e.get("args"), dict):
                self.thread_names[(_key(e.get("pid")), _key(e.get("tid")))] = str(e["args"].get("name", ""))
        elif (ph == "i" or ph == "I") and e.get("name") == "[memory]":
            args = e.get("args")
            if isinstance(args, dict) and _time(args.get("Total Allocated")) is not None:
                dev = f"{args.get('Device Type', '?')}:{args.get('Device Id', '?')}"
                self.mem_peak[dev] = max(self.mem_peak.get(dev, 0.0), float(args["Total Allocated"]))


def _time(v: Any) -> float | None:
    """A finite number of microseconds, or None (a string, NaN, infinity, a list, an absurd value: the event is
    skipped and counted)."""
    if type(v) is float:  # most times: NaN and infinities fail the comparison
        return v if -MAX_TIME_US <= v <= MAX_TIME_US else None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) and abs(f) <= MAX_TIME_US else None


def _is_corr(v: Any) -> bool:
    """A correlation id that fits the 64-bit columns."""
    return isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < (1 << 63)


def _key(v: Any) -> Any:
    """A process or thread id usable as a key (Kineto writes ints or strings; anything else, as text)."""
    return v if isinstance(v, (int, str)) or v is None else repr(v)[:80]
