"""Attribution in a torch.profiler trace: each GPU activity to the op that launched it and the ranges around it.

Per GPU activity: correlation -> the launching runtime call -> by time containment on the launching thread, the
CPU ops and ranges (``user_annotation``) open around it. One sweep per thread over its intervals (by start,
longest first) and its launches (by time) nests them (:class:`Nesting`, :class:`Launches`). Backward kernels are
launched by autograd's worker thread, where the caller's ranges are not open; the ``fwdbwd`` flow from the
backward node to its forward op names the forward thread, and the ranges open on that thread at the launch time
are used (the thread that called ``backward()`` waits inside its own range meanwhile). Then the activities are
grouped per kernel name (and range path): :meth:`Attribution.gpu_groups`.

The loops here run once per op or launch of a trace of millions: they work on local names and compact arrays
(benchmarks/torch_trace_scale.py).
"""

from __future__ import annotations

from array import array
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from profctl.readers._torch_collect import Category, Trace

#: ranges torch.profiler adds itself, one per schedule step; kept out of range paths, summed as one range row
STEP_PREFIX = "ProfilerStep#"
BWD_PREFIX = "autograd::engine::evaluate_function: "
KIND_NAMES: dict[int, str] = {Category.KERNEL: "kernel", Category.MEMCPY: "memcpy", Category.MEMSET: "memset"}


@dataclass(slots=True)
class Nesting:
    """Per interval (indexed as :class:`~profctl.readers._torch_collect.Intervals`): where it sits on its
    thread's stack. -1: none."""

    parent: array[int]   # the interval it opens inside
    path: array[int]     # range path id (0 = no range)
    ann: array[int]      # innermost range instance enclosing (or being) it
    op: array[int]       # innermost op enclosing (or being) it
    top: array[int]      # outermost op
    flow: array[int]     # innermost op that is a backward node with a fwdbwd flow (index into flow_ids)
    self_us: array[float]  # self time (ops): its duration less its child ops'

    @classmethod
    def of(cls, durs: array[float]) -> Nesting:
        n = len(durs)
        return cls(array("i", [-1]) * n, array("i", [0]) * n, array("i", [-1]) * n, array("i", [-1]) * n,
                   array("i", [-1]) * n, array("i", [-1]) * n, array("d", durs))


@dataclass(slots=True)
class Launches:
    """The runtime calls that launched GPU work (in the trace's order), and where each sits."""

    thread: Any          # numpy int32 array: the launching thread
    start: Any           # numpy float64 array: the call's start, µs
    parent: array[int]   # innermost interval open around the call on its thread (-1: none)
    path: array[int]     # range path id (0 = none; borrowed from the forward thread for backward launches)
    ann: array[int]      # innermost range instance around it (-1: none)
    bwd: array[int]      # launched for the backward pass

    def __len__(self) -> int:
        return len(self.parent)


class KernelGroup:
    """The GPU activities of one kernel name (and range path): durations, streams, passes, launching ops."""

    __slots__ = ("durs", "fwd_ops", "kind", "launch_ops", "ops", "passes", "starts", "streams")

    def __init__(self, kind: int) -> None:
        self.kind = kind
        self.durs: list[float] = []
        self.starts: list[float] = []
        self.streams: set[int] = set()
        self.passes: Counter[str] = Counter()
        self.ops: Counter[str] = Counter()
        self.launch_ops: Counter[str] = Counter()
        self.fwd_ops: Counter[str] = Counter()

    def extra(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": KIND_NAMES.get(self.kind, "kernel"), "pass": dict(self.passes),
                             "streams": len(self.streams)}
        if self.ops:
            d["ops"] = dict(self.ops.most_common(5))
        if self.launch_ops:
            d["launch_ops"] = dict(self.launch_ops.most_common(5))
        if self.fwd_ops:
            d["fwd_ops"] = dict(self.fwd_ops.most_common(5))
        return d


class Attribution:
    """The attribution of one trace, step by step: :meth:`run` nests and places, then :meth:`gpu_groups`."""

    def __init__(self, tr: Trace, by_range: bool) -> None:
        import numpy as np

        self.tr, self.by_range = tr, by_range
        self.names = tr.name_list
        iv, rt = tr.intervals, tr.runtime
        n_iv = len(iv)
        self.tid_of_iv = np.frombuffer(iv.thread, dtype=np.int32) if n_iv else np.zeros(0, np.int32)
        self.ts_iv = np.frombuffer(iv.start, dtype=np.float64) if n_iv else np.zeros(0)
        self.dur_iv = np.frombuffer(iv.dur, dtype=np.float64) if n_iv else np.zeros(0)
        # which runtime calls launched GPU work: correlation -> runtime index (only those)
        gcorr = set(tr.gpu.corr)
        gcorr.discard(-1)
        self.launch_of_corr = {c: j for j, c in enumerate(rt.corr) if c in gcorr}
        launched = sorted(self.launch_of_corr.values())
        self.ln_index = {j: k for k, j in enumerate(launched)}
        n_ln = len(launched)
        self.ln = Launches(np.array([rt.thread[j] for j in launched], dtype=np.int32),
                           np.array([rt.start[j] for j in launched], dtype=np.float64),
                           array("i", [-1]) * n_ln, array("i", [0]) * n_ln, array("i", [-1]) * n_ln,
                           array("b", [0]) * n_ln)
        # flow endpoints: the backward node ops ('f') and the forward ops ('s')
        self.f_at: dict[tuple[int, float], Any] = {}
        self.s_at: dict[Any, tuple[int, float]] = {}
        for fid, s_end, f_end in tr.flows.complete():
            self.f_at[f_end] = fid
            self.s_at[fid] = s_end
        self.s_keys = set(self.s_at.values())
        self.nest = Nesting.of(iv.dur)
        self.path_names: list[str] = [""]
        self.paths: dict[tuple[int, int], int] = {}
        self.flow_ids: list[Any] = []
        self.op_at_s: dict[tuple[int, float], int] = {}
        self.ann_by_tid: dict[int, list[int]] = defaultdict(list)
        self.borrowed = 0

    def run(self) -> Attribution:
        """Nest ops, ranges and launches per thread, then place each launch in its ranges."""
        self.nest_ops_and_launches()
        self.place_launches()
        return self

    # ---- one sweep per thread over intervals (by start, longest first) and launches (by time)
    def nest_ops_and_launches(self) -> None:
        import numpy as np

        n_iv, n_ln = len(self.nest.parent), len(self.ln)
        order = np.lexsort((-self.dur_iv, self.ts_iv, self.tid_of_iv)) if n_iv else np.zeros(0, np.int64)
        ln_order = np.lexsort((self.ln.start, self.ln.thread)) if n_ln else np.zeros(0, np.int64)
        iv_bounds = _group_bounds(self.tid_of_iv[order]) if n_iv else {}
        ln_bounds = _group_bounds(self.ln.thread[ln_order]) if n_ln else {}
        order_l, ln_order_l = order.tolist(), ln_order.tolist()
        for tid in set(iv_bounds) | set(ln_bounds):
            self._sweep_thread(tid, order_l[slice(*iv_bounds.get(tid, (0, 0)))],
                               ln_order_l[slice(*ln_bounds.get(tid, (0, 0)))])

    def _sweep_thread(self, tid: int, ivs: list[int], lns: list[int]) -> None:
        ts_l, dur_l = self.tr.intervals.start, self.tr.intervals.dur
        ln_ts, ln_parent = self.ln.start, self.ln.parent
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
                ln_parent[k] = stack[-1] if stack else -1

    def _enter(self, x: int, tid: int, t: float, par: int) -> None:
        """Interval `x` opens inside `par`: its parent, range path, annotation, op, top op and flow."""
        n = self.nest
        n.parent[x] = par
        if par >= 0:
            pp, pa, po, pt, pf = n.path[par], n.ann[par], n.op[par], n.top[par], n.flow[par]
        else:
            pp, pa, po, pt, pf = 0, -1, -1, -1, -1
        iv = self.tr.intervals
        if iv.is_range[x]:
            nid = iv.name[x]
            nm = self.names[nid]
            n.path[x] = pp if nm.startswith(STEP_PREFIX) else self._path(pp, nid, nm)
            n.ann[x], n.op[x], n.top[x], n.flow[x] = x, po, pt, pf
            self.ann_by_tid[tid].append(x)
            return
        n.path[x], n.ann[x], n.op[x] = pp, pa, x
        n.top[x] = pt if pt >= 0 else x
        key = (tid, t)
        fid = self.f_at.get(key)
        if fid is not None:
            n.flow[x] = len(self.flow_ids)
            self.flow_ids.append(fid)
        else:
            n.flow[x] = pf
        if key in self.s_keys:
            self.op_at_s[key] = x
        if po >= 0:
            n.self_us[po] -= iv.dur[x]

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
        tr, names, iv_name, n, ln = self.tr, self.names, self.tr.intervals.name, self.nest, self.ln
        autograd = {i: "autograd" in tr.thread_names.get(key, "") for i, key in enumerate(tr.thread_keys)}
        self.flow_src: dict[int, Counter[int]] = defaultdict(Counter)
        for fid, _, f_end in tr.flows.complete():
            self.flow_src[f_end[0]][self.s_at[fid][0]] += 1
        self.ann_count = Counter({t: len(v) for t, v in self.ann_by_tid.items() if not autograd.get(t, False)})
        borrow: dict[int, list[int]] = defaultdict(list)
        for k in range(len(ln)):
            x = ln.parent[k]
            tid = int(ln.thread[k])
            bwd = autograd.get(tid, False)
            if x >= 0:
                ln.path[k], ln.ann[k] = n.path[x], n.ann[x]
                top = n.top[x]
                if top >= 0 and names[iv_name[top]].startswith(BWD_PREFIX):
                    bwd = True
            ln.bwd[k] = bwd
            if ln.path[k] == 0 and bwd:
                fwd_tid = (self.s_at[self.flow_ids[n.flow[x]]][0] if x >= 0 and n.flow[x] >= 0
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
        ts_l, dur_l, ln = self.tr.intervals.start, self.tr.intervals.dur, self.ln
        ln_ts = ln.start
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
                ln.path[k], ln.ann[k] = self.nest.path[stack[-1]], stack[-1]
                self.borrowed += 1

    # ---- GPU activities
    def gpu_groups(self) -> tuple[dict[tuple[int, int], KernelGroup], dict[int, list[tuple[float, float]]], int]:
        """Activities grouped per (name, range path); the GPU intervals of each annotation instance; how many
        activities had no launch in the trace."""
        g_ops, names, iv_name, n, ln = self.tr.gpu, self.names, self.tr.intervals.name, self.nest, self.ln
        groups: dict[tuple[int, int], KernelGroup] = {}
        inst_iv: dict[int, list[tuple[float, float]]] = defaultdict(list)
        unattributed = 0
        for g in range(len(g_ops)):
            jl = self.launch_of_corr.get(g_ops.corr[g])
            k = self.ln_index[jl] if jl is not None else -1
            path = ln.path[k] if (k >= 0 and self.by_range) else 0
            key = (g_ops.name[g], path if self.by_range else -1)
            grp = groups.get(key)
            if grp is None:
                grp = groups[key] = KernelGroup(g_ops.kind[g])
            t0, d = g_ops.start[g], g_ops.dur[g]
            grp.durs.append(d * 1000.0)
            grp.starts.append(t0)
            grp.streams.add(g_ops.stream[g])
            if k < 0:
                unattributed += 1
                continue
            x = ln.parent[k]
            is_bwd = bool(ln.bwd[k])
            grp.passes["bwd" if is_bwd else "fwd"] += 1
            if x >= 0:
                top, inner = n.top[x], n.op[x]
                if top >= 0:
                    grp.ops[op_label(names[iv_name[top]])] += 1
                if inner >= 0:
                    grp.launch_ops[names[iv_name[inner]]] += 1
                if is_bwd and n.flow[x] >= 0:
                    fop = self.op_at_s.get(self.s_at[self.flow_ids[n.flow[x]]])
                    if fop is not None:
                        grp.fwd_ops[names[iv_name[fop]]] += 1
            a = ln.ann[k]
            while a >= 0:
                inst_iv[a].append((t0, t0 + d))
                pa = n.parent[a]
                a = n.ann[pa] if pa >= 0 else -1
        return groups, inst_iv, unattributed


def op_label(name: str) -> str:
    """An op's name without the autograd prefix of backward nodes."""
    return name[len(BWD_PREFIX):] if name.startswith(BWD_PREFIX) else name


def _group_bounds(sorted_tids: Any) -> dict[int, tuple[int, int]]:
    """tid -> (start, end) of its run in an array sorted by tid."""
    import numpy as np

    if len(sorted_tids) == 0:
        return {}
    cuts = np.flatnonzero(np.diff(sorted_tids)) + 1
    starts = [0, *cuts.tolist()]
    ends = [*cuts.tolist(), len(sorted_tids)]
    return {int(sorted_tids[s]): (s, e) for s, e in zip(starts, ends, strict=True)}
