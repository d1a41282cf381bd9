"""Per-launch NVTX paths in an nsys export: the canonical path (profctl.nvtx.canonical_path) of every kernel
launch, as ncu would have recorded it, and the rule for launches made on autograd's worker thread.

A launch's path: on the launching thread, each domain's push/pop ranges open at the launch's CUDA API call
(``start <= call start <= end``), outermost first; and the start/end ranges of the process open at that moment
(start/end ranges belong to no thread).

Autograd's worker thread (nsys names it ``pt_autograd_<n>``) launches the backward kernels while the thread that
called ``backward()`` waits inside the ranges it pushed; ncu and nsys' own projection see no range around those
launches. The rule here, as the torch reader borrows the forward thread's ranges: **a kernel launched on
autograd's worker thread with no push/pop range open on that thread takes the push/pop ranges open, at the
launch's API call, on the thread of the same process whose innermost open range began last** (the caller of
``backward()``). Threads are recognised by name; in an export without thread names every thread that launches
kernels outside any range is treated so. Such rows say how many launches borrowed (``extra.borrowed_launches``)
and the summary's meta says from which thread (``meta.nvtx_borrowed``).
"""

from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from profctl.nvtx import canonical_path

if TYPE_CHECKING:
    from profctl.readers.nsys_sqlite import NsysExport

AUTOGRAD_THREAD_PREFIX = "pt_autograd"
PUSH_POP_EVENTS = (59, 70)
START_END_EVENTS = (60, 71)
PID_MASK = 0xFFFFFFFFFF000000
DOMAIN_PID_MASK = 0x0000FFFFFF000000


@dataclass
class _Stack:
    """One thread's push/pop ranges of one domain, by start (longest first), with each one's parent."""

    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)

    def finish(self, items: list[tuple[int, int, str]]) -> None:
        items.sort(key=lambda x: (x[0], -x[1]))
        open_: list[int] = []
        for i, (s, e, t) in enumerate(items):
            while open_ and self.ends[open_[-1]] < e:
                open_.pop()
            self.starts.append(s)
            self.ends.append(e)
            self.texts.append(t)
            self.parents.append(open_[-1] if open_ else -1)
            open_.append(i)

    def innermost(self, t: int) -> int:
        """The innermost range open at `t` (-1 for none): an ancestor of the last range begun by `t`."""
        i = bisect.bisect_right(self.starts, t) - 1
        while i >= 0 and self.ends[i] < t:
            i = self.parents[i]
        return i

    def chain(self, i: int) -> list[str]:
        out = []
        while i >= 0:
            out.append(self.texts[i])
            i = self.parents[i]
        return out[::-1]


@dataclass
class PathIndex:
    """Every NVTX range of an export, arranged to answer 'which ranges were open at this launch'."""

    stacks: dict[int, dict[str, _Stack]]                       # tid -> domain -> stack
    start_end: dict[int, list[tuple[int, int, str, str]]]      # pid -> (start, end, domain, text), by start
    names: dict[int, str]                                      # tid -> thread name
    inverted: int = 0                                          # ranges skipped: end before start

    def eligible(self, tid: int) -> bool:
        name = self.names.get(tid)
        return name is None or name.startswith(AUTOGRAD_THREAD_PREFIX)

    def open_on(self, tid: int, t: int) -> tuple[dict[str, list[str]], tuple[tuple[int, str, int], ...], int]:
        """(domain -> push/pop stack, identity of the innermost instances, start of the innermost one)."""
        pp: dict[str, list[str]] = {}
        ident: list[tuple[int, str, int]] = []
        last = -1
        for dom, st in self.stacks.get(tid, {}).items():
            i = st.innermost(t)
            if i >= 0:
                pp[dom] = st.chain(i)
                ident.append((tid, dom, i))
                last = max(last, st.starts[i])
        return pp, tuple(sorted(ident)), last

    def borrow(self, tid: int, t: int) -> tuple[int, dict[str, list[str]], tuple[tuple[int, str, int], ...]] | None:
        """The push/pop ranges of the process's thread whose innermost open range began last, if any."""
        best: tuple[int, int, dict[str, list[str]], tuple[tuple[int, str, int], ...]] | None = None
        for u in self.stacks:
            if u == tid or (u & PID_MASK) != (tid & PID_MASK):
                continue
            pp, ident, last = self.open_on(u, t)
            if pp and (best is None or last > best[0]):
                best = (last, u, pp, ident)
        return (best[1], best[2], best[3]) if best else None


def load(ex: NsysExport) -> PathIndex:
    """The ranges of `ex` (ranges whose end precedes their start are skipped and counted)."""
    from profctl.readers.nsys_sqlite import NVTX

    names = _thread_names(ex)
    if not ex.schema.has(NVTX):
        return PathIndex({}, {}, names)
    n = ex.schema.cols(NVTX)
    domains = ex._domains()
    per: dict[tuple[int, str], list[tuple[int, int, str]]] = defaultdict(list)
    se: dict[int, list[tuple[int, int, str, str]]] = defaultdict(list)
    inverted = 0
    events = ",".join(map(str, PUSH_POP_EVENTS + START_END_EVENTS))
    for tid, s, e, et, did, text in ex.q(
            f'SELECT e."{n["globalTid"]}", e."{n["start"]}", e."{n["end"]}", e."{n["eventType"]}", '
            f'{ex.schema.col(NVTX, "domainId", "e", "0")}, {ex._text_expr("e")} FROM {NVTX} AS e '
            f'{ex._text_join("e")} WHERE e."{n["eventType"]}" IN ({events}) AND e."{n["start"]}" IS NOT NULL '
            f'AND e."{n["end"]}" IS NOT NULL'):
        if not isinstance(s, int) or not isinstance(e, int):
            continue
        if e < s:
            inverted += 1
            continue
        t = int(tid or 0)
        dom = domains.get((int(did or 0), t & DOMAIN_PID_MASK), "") if did else ""
        if int(et) in PUSH_POP_EVENTS:
            per[(t, dom)].append((s, e, str(text)))
        else:
            se[t & PID_MASK].append((s, e, dom, str(text)))
    stacks: dict[int, dict[str, _Stack]] = defaultdict(dict)
    for (t, dom), items in per.items():
        st = _Stack()
        st.finish(items)
        stacks[t][dom] = st
    for v in se.values():
        v.sort()
    return PathIndex(dict(stacks), dict(se), names, inverted)


def _thread_names(ex: NsysExport) -> dict[int, str]:
    """globalTid -> thread name, from ThreadNames (absent or unreadable: none)."""
    from profctl.errors import BadReport
    from profctl.readers.nsys_sqlite import STRINGS

    if "ThreadNames" not in ex.schema.tables:
        return {}
    try:
        cols = {r[1] for r in ex.q('PRAGMA table_info("ThreadNames")')}
        if not {"nameId", "globalTid"} <= cols:
            return {}
        return {int(t): str(v) for t, v in ex.q(
            f"SELECT t.globalTid, s.value FROM ThreadNames AS t JOIN {STRINGS} AS s ON s.id = t.nameId")
            if isinstance(t, int)}
    except BadReport:
        return {}


class _OpenStartEnd:
    """The start/end ranges of one process open at increasing times (one sweep per launching thread)."""

    def __init__(self, ranges: list[tuple[int, int, str, str]]) -> None:
        self.ranges, self.i = ranges, 0
        self.heap: list[tuple[int, int]] = []

    def at(self, t: int) -> tuple[dict[str, list[str]], tuple[int, ...]]:
        rs = self.ranges
        while self.i < len(rs) and rs[self.i][0] <= t:
            heapq.heappush(self.heap, (rs[self.i][1], self.i))
            self.i += 1
        while self.heap and self.heap[0][0] < t:
            heapq.heappop(self.heap)
        out: dict[str, list[str]] = defaultdict(list)
        for _, j in self.heap:
            out[rs[j][2]].append(rs[j][3])
        return dict(out), tuple(sorted(j for _, j in self.heap))


@dataclass
class PathRows:
    """Kernel durations per (canonical path, kernel name id), and how the launches were attributed."""

    durs: dict[tuple[str, Any], list[float]] = field(default_factory=lambda: defaultdict(list))
    instances: dict[tuple[str, Any], set[tuple[Any, ...]]] = field(default_factory=lambda: defaultdict(set))
    borrowed: dict[tuple[str, Any], int] = field(default_factory=lambda: defaultdict(int))
    borrowed_from: dict[tuple[int, int], int] = field(default_factory=lambda: defaultdict(int))


def kernel_paths(ex: NsysExport, window_sql: str = "") -> tuple[PathRows, PathIndex]:
    """Every kernel launch of `ex` (optionally only those `window_sql` keeps) with its canonical path."""
    idx = load(ex)
    out = PathRows()
    cache: dict[tuple[Any, ...], str | None] = {}
    cur_tid: int | None = None
    sweep = _OpenStartEnd([])
    cur = ex.q(f"SELECT l.tid, l.rs, l.name, l.ge - l.gs FROM launches AS l WHERE l.kind = 0 {window_sql} "
               "ORDER BY l.tid, l.rs")
    while rows := cur.fetchmany(8192):
        for tid, rs, nid, d in rows:
            if not isinstance(rs, int) or not isinstance(d, (int, float)) or d < 0:
                continue
            tid = int(tid or 0)
            if tid != cur_tid:
                cur_tid, sweep = tid, _OpenStartEnd(idx.start_end.get(tid & PID_MASK, []))
            se, se_ident = sweep.at(rs)
            pp, ident, _ = idx.open_on(tid, rs)
            src = None
            if not pp and idx.eligible(tid):
                got = idx.borrow(tid, rs)
                if got is not None:
                    src, pp, ident = got
            key = (ident, se_ident)
            if key not in cache:
                cache[key] = canonical_path(pp, se)
            path = cache[key]
            if path is None:
                continue
            k = (path, nid)
            out.durs[k].append(float(d))
            out.instances[k].add(key)
            if src is not None:
                out.borrowed[k] += 1
                out.borrowed_from[(tid, src)] += 1
    return out, idx
