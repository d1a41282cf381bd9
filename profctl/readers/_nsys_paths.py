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

For a profctl run, :func:`measured_leaves` places each launch in its measured leaf path instead
(``profctl@<backend>[<shape>]/measure/<backend>.<pass>``; profctl.readers.nsys_sqlite.read_paths).

Everything here reads the export through :class:`~profctl.readers.nsys_sqlite.NsysExport`'s public queries
(``kernel_launches``, ``nvtx_ranges``, ``domains``, ``thread_names``, ``range_instances``).
"""

from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from profctl import nvtx
from profctl.nvtx import canonical_path
from profctl.readers._nsys_schema import NVTX

if TYPE_CHECKING:
    from profctl.readers._nsys_export import NsysExport, RangeInstance

AUTOGRAD_THREAD_PREFIX = "pt_autograd"
PUSH_POP_EVENTS = (59, 70)
START_END_EVENTS = (60, 71)
PID_MASK = 0xFFFFFFFFFF000000
DOMAIN_PID_MASK = 0x0000FFFFFF000000
INF = float("inf")


@dataclass
class _Stack:
    """One thread's push/pop ranges of one domain, by start (longest first), with each one's parent."""

    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    _chains: dict[int, tuple[str, ...]] = field(default_factory=dict)

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

    def innermost(self, t: int) -> tuple[int, float]:
        """(the innermost range open at `t` or -1, the last time the answer holds for): an ancestor of the last
        range begun by `t`; it holds until the next range begins or it ends."""
        j = bisect.bisect_right(self.starts, t)
        i = j - 1
        while i >= 0 and self.ends[i] < t:
            i = self.parents[i]
        until: float = self.starts[j] - 1 if j < len(self.starts) else INF
        if i >= 0 and self.ends[i] < until:
            until = self.ends[i]
        return i, until

    def chain(self, i: int) -> tuple[str, ...]:
        """The texts from the outermost range to `i` (memoised per range: a parent's chain plus one)."""
        memo = self._chains
        if i in memo:
            return memo[i]
        p = self.parents[i]
        c = (self.chain(p) if p >= 0 else ()) + (self.texts[i],)
        memo[i] = c
        return c


@dataclass
class PathIndex:
    """Every NVTX range of an export, arranged to answer 'which ranges were open at this launch'."""

    stacks: dict[int, dict[str, _Stack]]                       # tid -> domain -> stack
    start_end: dict[int, list[tuple[int, int, str, str]]]      # pid -> (start, end, domain, text), by start
    names: dict[int, str]                                      # tid -> thread name
    inverted: int = 0                                          # ranges skipped: end before start
    threads_of: dict[int, list[int]] = field(default_factory=dict)  # pid -> threads with push/pop ranges

    def __post_init__(self) -> None:
        for t in self.stacks:
            self.threads_of.setdefault(t & PID_MASK, []).append(t)

    def eligible(self, tid: int) -> bool:
        name = self.names.get(tid)
        return name is None or name.startswith(AUTOGRAD_THREAD_PREFIX)

    def open_on(self, tid: int, t: int) -> tuple[tuple[tuple[int, str, int], ...], int, float]:
        """(identity of the innermost open instance per domain, start of the innermost one, until when it holds)."""
        ident: list[tuple[int, str, int]] = []
        last, until = -1, INF
        for dom, st in self.stacks.get(tid, {}).items():
            i, u = st.innermost(t)
            until = min(until, u)
            if i >= 0:
                ident.append((tid, dom, i))
                last = max(last, st.starts[i])
        return tuple(ident), last, until

    def borrow(self, tid: int, t: int) -> tuple[int | None, tuple[tuple[int, str, int], ...], float]:
        """(the thread of the process whose innermost open range began last, its open instances, until when the
        choice holds); (None, (), ...) when no other thread has a range open."""
        best: tuple[int, int | None, tuple[tuple[int, str, int], ...]] = (-1, None, ())
        until = INF
        for u in self.threads_of.get(tid & PID_MASK, ()):
            if u == tid:
                continue
            ident, last, hold = self.open_on(u, t)
            until = min(until, hold)
            if ident and last > best[0]:
                best = (last, u, ident)
        return best[1], best[2], until

    def stacks_of(self, ident: tuple[tuple[int, str, int], ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return tuple((dom, self.stacks[tid][dom].chain(i)) for tid, dom, i in ident)


def load(ex: NsysExport) -> PathIndex:
    """The ranges of `ex` (ranges whose end precedes their start are skipped and counted)."""
    names = ex.thread_names()
    if not ex.schema.has(NVTX):
        return PathIndex({}, {}, names)
    domains = ex.domains()
    per: dict[tuple[int, str], list[tuple[int, int, str]]] = defaultdict(list)
    se: dict[int, list[tuple[int, int, str, str]]] = defaultdict(list)
    inverted = 0
    for tid, s, e, et, did, text in ex.nvtx_ranges(PUSH_POP_EVENTS + START_END_EVENTS):
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


class _OpenStartEnd:
    """The start/end ranges of one process open at increasing times (one sweep per launching thread)."""

    def __init__(self, ranges: list[tuple[int, int, str, str]]) -> None:
        self.ranges, self.i = ranges, 0
        self.heap: list[tuple[int, int]] = []

    def at(self, t: int) -> tuple[tuple[int, ...], float]:
        """(the open ranges' indices, until when the set holds)."""
        rs = self.ranges
        while self.i < len(rs) and rs[self.i][0] <= t:
            heapq.heappush(self.heap, (rs[self.i][1], self.i))
            self.i += 1
        while self.heap and self.heap[0][0] < t:
            heapq.heappop(self.heap)
        until: float = rs[self.i][0] - 1 if self.i < len(rs) else INF
        if self.heap and self.heap[0][0] < until:
            until = self.heap[0][0]
        return tuple(sorted(j for _, j in self.heap)), until

    def named(self, ident: tuple[int, ...]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((self.ranges[j][2], self.ranges[j][3]) for j in ident))


@dataclass
class PathRows:
    """Kernel durations per (canonical path, kernel name id), and how the launches were attributed."""

    durs: dict[tuple[str, Any], list[float]] = field(default_factory=lambda: defaultdict(list))
    starts: dict[tuple[str, Any], list[float]] = field(default_factory=lambda: defaultdict(list))  # API call starts
    instances: dict[tuple[str, Any], set[tuple[Any, ...]]] = field(default_factory=lambda: defaultdict(set))
    borrowed: dict[tuple[str, Any], int] = field(default_factory=lambda: defaultdict(int))
    borrowed_from: dict[tuple[int, int], int] = field(default_factory=lambda: defaultdict(int))


@lru_cache(maxsize=65536)
def _path(push_pop: tuple[tuple[str, tuple[str, ...]], ...], start_end: tuple[tuple[str, str], ...]) -> str | None:
    """profctl.nvtx.canonical_path of a hashable NVTX state (many range instances share their texts)."""
    se: dict[str, list[str]] = defaultdict(list)
    for dom, text in start_end:
        se[dom].append(text)
    return canonical_path(dict(push_pop), se)


class _Cursor:
    """One launching thread's launches, in time order: the path at each, recomputed only when a range begins or
    ends (most launches reuse the last answer)."""

    def __init__(self, idx: PathIndex, tid: int, cache: dict[tuple[Any, ...], str | None]) -> None:
        self.idx, self.tid, self.cache = idx, tid, cache
        self.sweep = _OpenStartEnd(idx.start_end.get(tid & PID_MASK, []))
        self.eligible = idx.eligible(tid)
        self.until: float = -INF
        self.state: tuple[str | None, tuple[Any, ...], int | None] = (None, (), None)

    def at(self, t: int) -> tuple[str | None, tuple[Any, ...], int | None]:
        """(canonical path, identity of the open range instances, thread the ranges were borrowed from)."""
        if t <= self.until:
            return self.state
        se, until = self.sweep.at(t)
        ident, _, hold = self.idx.open_on(self.tid, t)
        until = min(until, hold)
        src = None
        if not ident and self.eligible:
            src, ident, hold = self.idx.borrow(self.tid, t)
            until = min(until, hold)
        key = (ident, se)
        if key not in self.cache:
            self.cache[key] = _path(self.idx.stacks_of(ident), self.sweep.named(se))
        self.until, self.state = until, (self.cache[key], key, src if ident else None)
        return self.state


def kernel_paths(ex: NsysExport) -> tuple[PathRows, PathIndex]:
    """Every kernel launch of `ex` (inside its profiler window when it has one) with its canonical path."""
    idx = load(ex)
    out = PathRows()
    cache: dict[tuple[Any, ...], str | None] = {}
    cursor: _Cursor | None = None
    for tid, rs, _, nid, d in ex.kernel_launches(by_thread=True):
        if not isinstance(rs, int) or not isinstance(d, (int, float)) or d < 0:
            continue
        tid = int(tid or 0)
        if cursor is None or cursor.tid != tid:
            cursor = _Cursor(idx, tid, cache)
        path, key, src = cursor.at(rs)
        if path is None:
            continue
        k = (path, nid)
        out.durs[k].append(float(d))
        out.starts[k].append(float(rs))
        out.instances[k].add(key)
        if src is not None:
            out.borrowed[k] += 1
            out.borrowed_from[(tid, src)] += 1
    return out, idx


# ------------------------------------------------------------------------------------ measured leaves (read_paths)
@dataclass
class LeafRows:
    """Kernel durations per (measured leaf path, kernel name key), the leaf instances they ran in, and the GPU
    projection of every leaf instance per path (profctl.readers.nsys_sqlite.read_paths)."""

    durs: dict[tuple[str, Any], list[float]] = field(default_factory=lambda: defaultdict(list))
    rids: dict[tuple[str, Any], set[int]] = field(default_factory=lambda: defaultdict(set))
    spans: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))


def measured_leaves(ex: NsysExport, first_case: str | None = None) -> LeafRows:
    """Each kernel launch of `ex` in the innermost measured ``<backend>.fwd|bwd`` range of the profctl domain
    around it on its thread (profctl.nvtx.measured_leaf_path; `first_case` names the case range pushed before
    capture began). Launches outside such a range are left out."""
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
    out = LeafRows()
    for tid, rs_, re_, nid, d in ex.kernel_launches():
        ls = leaves.get(int(tid or 0)) or []
        if not ls:
            continue
        j = bisect.bisect_right(starts[int(tid or 0)], rs_) - 1
        if j < 0 or not (ls[j].start <= rs_ <= ls[j].end and re_ <= ls[j].end):
            continue
        k = (leaf_path[ls[j].rid], nid)
        out.durs[k].append(float(d))
        out.rids[k].add(ls[j].rid)
    for i in insts:
        if i.rid in leaf_path and i.proj_start is not None:
            out.spans[leaf_path[i.rid]].append(float((i.proj_end or 0) - i.proj_start))
    return out
