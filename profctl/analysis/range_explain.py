"""Why a range of a timeline is slow when its kernels are fast (``profctl explain RUN --range NAME``, issue 49).

A range's time (from its start to the end of its last GPU operation, summed over its instances) is split into
the GPU busy with the range's own operations and the GPU idle, and the idle into what the host was doing:

* **sync**: the GPU went idle while a launching thread sat in a synchronizing call (cudaStreamSynchronize,
  cudaDeviceSynchronize, a device-to-host copy: ``.item()``): the GPU drained, then waited for the host to refill it;
* **host**: a gap longer than an eager op's launch cost with no sync: Python or other host code between launches
  (with the Python frame that cost it where the torch trace has stacks);
* **launch**: gaps no longer than a launch's cost between small kernels: launch-bound (a CUDA graph or fusion);
* **lead**: before the range's first GPU operation.

Then the range's own operations: copies and casts (extra kernels), and the kernels themselves. The operations
of a range are those launched on its thread inside it, and those launched meanwhile by a thread that pushes no
range of its own (autograd's backward thread). Every saving is bounded: the range cannot go below the time of
the kernels it keeps. The thresholds are in :data:`THRESHOLDS`, each with its reason.
"""

from __future__ import annotations

import bisect
import itertools
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from profctl.errors import NothingMatched
from profctl.kernels import short_name
from profctl.readers.range_timeline import GpuOp, Span, Timeline


@dataclass(frozen=True)
class Threshold:
    value: float
    reason: str


#: every number the explanation compares with, and why it is that number
THRESHOLDS: dict[str, Threshold] = {
    "gpu_bound_share": Threshold(0.80, "a range whose GPU is busy with its own work 80 % of its time is limited by "
                                       "that work: what is left idle is below what run-to-run noise and the "
                                       "unavoidable first launch cost"),
    "min_cause_share": Threshold(0.05, "a cause worth less than 5 % of the range is within the noise of one "
                                       "profiled run and not named"),
    "launch_gap_ns": Threshold(40_000, "an eager PyTorch op costs 5-30 us of host time to dispatch and launch "
                                       "(H200 host under nsys: 5-15 us per tiny op); a gap between launches longer "
                                       "than 40 us is other host code, not the launch"),
    "sync_slack_ns": Threshold(5_000, "a synchronizing call returns within a few microseconds of the GPU work it "
                                      "waited for; a call that ended more than 5 us before the GPU went idle was "
                                      "not waiting for it"),
    "small_kernel_ns": Threshold(10_000, "a kernel shorter than an eager launch's host cost (5-15 us) cannot hide "
                                         "the next launch: many of them make a range launch-bound"),
    "graph_node_ns": Threshold(250, "in a CUDA graph, consecutive kernel nodes start about 0.2-0.3 us apart on "
                                    "Hopper (40 kernels of 0.93 us replayed in 46 us on the H200 here)"),
    "ncu_time_ratio": Threshold(3.0, "an ncu launch of the same kernel (where launch configurations are not "
                                      "recorded) stands for the range's launches when their times differ by at "
                                      "most 3x: ncu replays with cold caches and small kernels take up to 2.2x "
                                      "longer there (0.9 us under nsys, 2.0 us under ncu here), while another "
                                      "problem size of the same GEMM kernel differs by 3.5x or more (24, 88 and "
                                      "336 us in tests/data/ranges)"),
    "min_samples": Threshold(5, "fewer than 5 CPU samples in a cause's gaps say nothing about where the host "
                                "time went (nsys samples a thread about once a millisecond)"),
    "frame_cover": Threshold(0.5, "the Python frame named for a gap is the innermost one covering at least half "
                                  "of the host time before the next launch"),
}

SYNC_CALL = re.compile(r"Synchronize|cudaMemcpy(?!Async)|cuMemcpyDtoH(?!Async)|cuCtxSynchronize", re.I)
COPY_KERNEL = re.compile(r"copy|cast|convert|transpose|contiguous", re.I)
DTOH = re.compile(r"Device-to-Host|DtoH", re.I)
LAUNCH_CALL = re.compile(r"Launch|Memcpy|Memset", re.I)
#: what a sampled module means for host time (the innermost frame's module, its version suffix dropped)
MODULE_SAYS = {"python": " (the Python interpreter: Python code)", "libtorch_cpu": " (PyTorch's dispatcher and ops)",
               "libtorch_python": " (PyTorch's Python bindings)", "libcuda": " (the CUDA driver)",
               "libcudart": " (the CUDA runtime)", "libToolsInjection": " (nsys's own instrumentation)"}
VERDICTS = {"sync": "sync-bound", "host": "host-bound", "lead": "host-bound", "launch": "launch-bound"}


def th(key: str) -> float:
    return THRESHOLDS[key].value


@dataclass
class Cause:
    """One reason for the range's time: how much of it, what fixing it saves (bounded), and where it is."""

    id: str
    title: str
    time_ns: float
    saving_ns: float
    fix: str
    evidence: list[str] = field(default_factory=list)
    where: list[tuple[str, float]] = field(default_factory=list)


@dataclass
class RangeExplanation:
    name: str
    source: str
    path: str
    instances: int
    time_ns: float
    busy_ns: float
    idle_ns: float
    kernels_ns: float
    launches: int
    verdict: str
    causes: list[Cause] = field(default_factory=list)
    kernels: list[tuple[str, int, float]] = field(default_factory=list)
    idle_by: dict[str, float] = field(default_factory=dict)
    launch_cost_ns: float = 0.0
    floor_ns: float = 0.0
    all_fixed_ns: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: kernel launches per (name, launch configuration), for matching an ncu report's launches (range_kernels)
    configs: list[tuple[str, tuple[int, int] | None, int, float]] = field(default_factory=list)
    #: each kernel's own verdict and floor from an ncu report of the same program (range_kernels.attach)
    kernel_floors: list[dict[str, Any]] = field(default_factory=list)
    ncu_report: str | None = None

    @property
    def busy_share(self) -> float:
        return self.busy_ns / self.time_ns if self.time_ns else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"range": self.name, "source": self.source, "path": self.path, "instances": self.instances,
                "time_ns": self.time_ns, "gpu_busy_ns": self.busy_ns, "gpu_busy_share": self.busy_share,
                "gpu_idle_ns": self.idle_ns, "kernels_ns": self.kernels_ns, "launches": self.launches,
                "verdict": self.verdict, "idle_by": self.idle_by, "launch_cost_ns": self.launch_cost_ns,
                "floor_ns": self.floor_ns, "all_fixed_ns": self.all_fixed_ns, "notes": self.notes,
                "kernels": [{"name": n, "count": c, "total_ns": t} for n, c, t in self.kernels],
                "ncu_report": self.ncu_report, "kernel_floors": self.kernel_floors,
                "causes": [vars(c) | {"where": [{"at": w, "ns": t} for w, t in c.where]} for c in self.causes],
                "thresholds": {k: {"value": v.value, "reason": v.reason} for k, v in THRESHOLDS.items()}}


# ------------------------------------------------------------------------------------------------ matching
def match_name(names: list[str], query: str) -> str:
    """The one range name `query` means: itself, or the only name ending in ``/query`` or containing it;
    NothingMatched naming the ranges there are."""
    if query in names:
        return query
    for test in (lambda n: n.endswith("/" + query) or n.endswith(":" + query), lambda n: query in n):
        hits = [n for n in names if test(n)]
        if len(hits) == 1:
            return hits[0]
        if hits:
            raise NothingMatched(f"range {query!r} is ambiguous: it matches {', '.join(hits[:12])}")
    if not names:
        raise NothingMatched("the report has no NVTX or record_function ranges: push one around the code to "
                             "explain (torch.cuda.nvtx.range_push/pop, or torch.profiler.record_function)")
    shown = ", ".join(names[:20]) + (f" (and {len(names) - 20} more)" if len(names) > 20 else "")
    raise NothingMatched(f"no range matches {query!r}; the ranges are: {shown}")


# ------------------------------------------------------------------------------------------------ helpers
class _Host:
    """Per-thread lookups: calls, CPU ops and Python frames by start."""

    def __init__(self, tl: Timeline) -> None:
        self.calls: dict[int, list[Span]] = defaultdict(list)
        self.frames: dict[int, list[Span]] = defaultdict(list)
        self.ops: dict[int, list[Span]] = defaultdict(list)
        for src, dst in ((tl.calls, self.calls), (tl.frames, self.frames), (tl.cpu_ops, self.ops)):
            for s in src:
                dst[s.tid].append(s)
        self.frame_starts = {t: [f.start for f in fs] for t, fs in self.frames.items()}
        d2h = {id(o.call) for o in tl.ops if o.kind == "memcpy" and o.call is not None and DTOH.search(o.name)}
        self.syncs = [c for c in tl.calls if SYNC_CALL.search(c.name) or id(c) in d2h]
        self.samples: dict[int, list[tuple[int, str]]] = defaultdict(list)
        for tid, t, mod in tl.samples:
            self.samples[tid].append((t, mod))
        self.syncs.sort(key=lambda c: c.end)
        self.sync_ends = [c.end for c in self.syncs]

    def sync_before(self, t: int, tids: set[int], since: int) -> Span | None:
        """The last synchronizing call on one of `tids` that began after `since` and was in progress or over by
        `t`."""
        i = bisect.bisect_right(self.sync_ends, t + th("sync_slack_ns"))
        for c in reversed(self.syncs[max(0, i - 64):i]):
            if c.tid in tids and c.start >= since:
                return c
        for c in self.syncs[i:i + 64]:
            if c.tid in tids and c.start <= t <= c.end:
                return c
        return None

    def frame(self, tid: int, a: int, b: int, *, user: bool = False) -> str | None:
        """The innermost Python frame covering at least `frame_cover` of [a, b] on `tid` (user code only: not a
        built-in, nor torch's own files)."""
        fs, starts = self.frames.get(tid), self.frame_starts.get(tid)
        if not fs or not starts or b <= a:
            return None
        need = th("frame_cover") * (b - a)
        lo = bisect.bisect_left(starts, a - 4 * (b - a))
        hi = bisect.bisect_right(starts, b)
        best: Span | None = None
        for f in fs[lo:hi]:
            if min(f.end, b) - max(f.start, a) >= need and (best is None or f.end - f.start < best.end - best.start):
                if user and (f.name.startswith("<built-in") or "torch/" in f.name):
                    continue
                best = f
        return best.name if best else None

    def sampled(self, tid: int, a: int, b: int) -> list[str]:
        """The modules of the CPU samples (nsys) taken on `tid` within [a, b]."""
        xs = self.samples.get(tid)
        if not xs or b <= a:
            return []
        lo = bisect.bisect_left(xs, (a, ""))
        hi = bisect.bisect_right(xs, (b, "\uffff"))
        return [m for _, m in xs[lo:hi]]

    def cpu_op(self, tid: int, t: int) -> str | None:
        """The outermost CPU op (torch) open at `t` on `tid`."""
        for o in self.ops.get(tid, ()):
            if o.start > t:
                break
            if o.end >= t:
                return o.name
        return None


def _union(ivs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(ivs):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _own_ops(tl: Timeline, inst: Span, open_on: dict[int, list[Span]]) -> list[GpuOp]:
    """The operations launched on the range's thread inside it, or meanwhile by another thread with no range of
    its own open at the launch (autograd's backward thread, which may push a range of its own elsewhere, such as
    cuBLAS's ``cublasCreate`` on its first call)."""
    out = []
    for o in tl.ops:
        c = o.call
        if c is None or c.start < inst.start or c.start > inst.end:
            continue
        if c.tid == inst.tid or not any(r.start <= c.start <= r.end for r in open_on.get(c.tid, ())):
            out.append(o)
    return out


@dataclass
class _Acc:
    """What the instances add up to."""

    time: float = 0.0
    busy: float = 0.0
    idle: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    gaps: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    where: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    ops: list[GpuOp] = field(default_factory=list)
    launch_steps: list[int] = field(default_factory=list)
    sync_calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    samples: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))


# ------------------------------------------------------------------------------------------------ one instance
def _gaps(w0: int, w1: int, busy: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, t = [], w0
    for s, e in busy:
        if s > t:
            out.append((t, min(s, w1)))
        t = max(t, e)
    if t < w1:
        out.append((t, w1))
    return [(a, b) for a, b in out if b > a]


def _where_host(host: _Host, tl: Timeline, nxt: GpuOp, a: int) -> str:
    """Where the host time before `nxt`'s launch went: a Python frame (torch stacks), else the op launching."""
    c = nxt.call
    assert c is not None
    f = host.frame(c.tid, a, c.start)
    if f:
        return f
    op = host.cpu_op(c.tid, c.start)
    what = short_name(nxt.name, 50)
    return f"before {op} ({what})" if op else f"before the launch of {what}"


def _classify(host: _Host, tl: Timeline, own: list[GpuOp], gap: tuple[int, int], acc: _Acc) -> None:
    g0, g1 = gap
    starts = [o.start for o in own]
    j = bisect.bisect_left(starts, g1)
    if not own or own[0].start >= g1:
        kind, where = "lead", "before the first launch"
        c = own[0].call if own else None
        if c is not None:
            where = host.frame(c.tid, g0, c.start) or where
            acc.samples[kind].update(host.sampled(c.tid, g0, c.start))
    elif j >= len(own):
        kind, where = "host", "after the last launch (host work at the end of the range)"
    else:
        nxt = own[j]
        tids = {o.call.tid for o in own if o.call is not None}
        s = host.sync_before(g0, tids, own[0].call.start if own[0].call else g0)
        c = nxt.call
        assert c is not None
        refilled, k = 0, j - 1
        while s is not None and k >= 0 and own[k].end > s.end:
            refilled += min(own[k].end, g0) - max(own[k].start, s.end)
            k -= 1
        if s is not None and refilled <= th("launch_gap_ns"):
            kind = "sync"
            op = host.cpu_op(s.tid, s.start)
            fr = host.frame(s.tid, s.start, s.end, user=True)
            where = " in ".join(x for x in (s.name, op, fr) if x)
            acc.sync_calls[s.name] += 1
            after = host.frame(c.tid, s.end, c.start)
            if after:
                acc.where["sync-after"][after] += g1 - g0
        elif g1 - g0 <= th("launch_gap_ns"):
            kind, where = "launch", short_name(nxt.name, 50)
        else:
            kind, where = "host", _where_host(host, tl, nxt, g0)
            acc.samples[kind].update(host.sampled(c.tid, g0, c.start))
    acc.idle[kind] += g1 - g0
    acc.gaps[kind] += 1
    acc.where[kind][where] += g1 - g0


def _instance(host: _Host, tl: Timeline, inst: Span, open_on: dict[int, list[Span]], acc: _Acc) -> None:
    own = sorted(_own_ops(tl, inst, open_on), key=lambda o: o.start)
    w0 = inst.start
    w1 = max([inst.end] + [o.end for o in own])
    busy_all = _union([(max(o.start, w0), min(o.end, w1)) for o in tl.ops if o.end > w0 and o.start < w1])
    acc.time += w1 - w0
    acc.busy += sum(e - s for s, e in _union([(max(o.start, w0), min(o.end, w1)) for o in own]))
    acc.ops += own
    for gap in _gaps(w0, w1, busy_all):
        _classify(host, tl, own, gap, acc)
    launches = sorted(o.call.start for o in own if o.call is not None and LAUNCH_CALL.search(o.call.name))
    acc.launch_steps += [b - a for a, b in itertools.pairwise(launches) if 0 < b - a <= th("launch_gap_ns")]


# ------------------------------------------------------------------------------------------------ the causes
_FIX = {
    "sync": "keep the value on the device (accumulate tensors, read them once after the loop) or read it "
            "asynchronously (non_blocking copy to pinned memory plus an event): the host then runs ahead",
    "host": "move the host code out of the per-call path (precompute, cache, vectorize) or capture the range in "
            "a CUDA graph / torch.compile(mode='reduce-overhead')",
    "lead": "start the GPU work earlier: do the host preparation before the range or overlap it with the "
            "previous step",
    "launch": "capture the range in a CUDA graph (torch.cuda.graph, torch.compile(mode='reduce-overhead')) or "
              "fuse the small ops into one kernel (torch.compile, a Triton kernel)",
    "extra": "let the consumer read the view as it is (matmul takes transposed operands; pass strides) or cast "
             "once outside the loop, so the copy kernels go",
}
_TITLE = {"sync": "waits on synchronization", "host": "host time between launches", "lead": "gap before the first "
          "launch", "launch": "launch-bound: many small kernels", "extra": "extra kernels: copies and casts"}


def _ranked(d: dict[str, float], n: int = 5) -> list[tuple[str, float]]:
    return sorted(d.items(), key=lambda x: -x[1])[:n]


def _us(ns: float) -> str:
    return f"{ns / 1e3:,.1f} us" if ns < 1e6 else f"{ns / 1e6:,.2f} ms"


def _sampled(c: Counter[str]) -> list[str]:
    """Where nsys's CPU samples on the launching thread in these gaps were: by module of the sampled frame."""
    n = sum(c.values())
    if n < th("min_samples"):
        return []
    parts = ", ".join(f"{k / n:.0%} {m}{MODULE_SAYS.get(m.split('.so')[0].rstrip('0123456789.'), '')}"
                      for m, k in c.most_common(4))
    return [f"{n} CPU samples (nsys) on the launching thread in these gaps: {parts}"]


def _idle_causes(acc: _Acc, n_inst: int, launch_cost: float, room: float) -> list[Cause]:
    out = []
    kernels = [o for o in acc.ops if o.kind == "kernel"]
    med = statistics.median([o.dur for o in kernels]) if kernels else 0.0
    for kind in ("sync", "host", "lead", "launch"):
        t = acc.idle.get(kind, 0.0)
        if t <= 0:
            continue
        n = acc.gaps[kind]
        if kind == "sync":
            saving = min(t, acc.busy)  # the host work after a wait overlaps at most the GPU work there is
            ev = [f"{n} times the GPU drained while the host waited in " +
                  ", ".join(f"{k} x{v}" for k, v in acc.sync_calls.items()) +
                  f", then sat idle {_us(t / max(n, 1))} on average until the next launch"]
            ev += [f"host code after the wait: {w} ({_us(x)})" for w, x in _ranked(acc.where["sync-after"], 3)]
        elif kind == "launch":
            saving = t - n * th("graph_node_ns")
            said = (f"the host takes {_us(launch_cost)} per launch here (measured)" if launch_cost else
                    "no two launches here came close enough to measure the host's cost per launch")
            ev = [f"{len(kernels)} kernels, median {_us(med)} each; {n} gaps of {_us(t / max(n, 1))} on average "
                  f"between them; {said}",
                  f"a CUDA graph replays them about {_us(th('graph_node_ns'))} apart: saves {_us(max(saving, 0))}; "
                  "fusing them into one kernel saves at least as much"]
        else:
            # unmeasured (no two launches within launch_gap_ns): each gap keeps the most an eager launch costs
            cost = launch_cost or th("launch_gap_ns")
            saving = t - n * cost
            ev = [f"{n} gaps, {_us(t / max(n, 1))} each on average, longer than a launch's host cost " +
                  (f"({_us(launch_cost)} measured here)" if launch_cost else
                   f"(not measured here: no two launches came within {_us(th('launch_gap_ns'))}; each gap keeps "
                   f"{_us(cost)}, the most an eager launch costs)")]
            ev += _sampled(acc.samples[kind])
        out.append(Cause(kind, _TITLE[kind], t, max(0.0, min(saving, room)), _FIX[kind], ev,
                         _ranked(acc.where[kind])))
    return out


def _extra_cause(acc: _Acc, busy_share: float, gpu_bound: bool) -> Cause | None:
    extra = [o for o in acc.ops if (o.kind == "kernel" and COPY_KERNEL.search(o.name))
             or (o.kind == "memcpy" and re.search(r"Device-to-Device|DtoD", o.name))]
    if not extra:
        return None
    t = float(sum(o.dur for o in extra))
    by: dict[str, float] = defaultdict(float)
    for o in extra:
        by[short_name(o.name, 60)] += o.dur
    factor = 1.0 if gpu_bound else busy_share
    ev = [f"{len(extra)} copy/cast operations, {_us(t)} of GPU time ({t / max(acc.time, 1):.0%} of the range)"]
    if not gpu_bound:
        ev.append(f"the GPU is busy {busy_share:.0%} of the range: removing them saves that share of their time")
    return Cause("extra", _TITLE["extra"], t, t * factor, _FIX["extra"], ev, _ranked(by))


def _configs(ops: list[GpuOp]) -> list[tuple[str, tuple[int, int] | None, int, float]]:
    by: dict[tuple[str, tuple[int, int] | None], list[int]] = defaultdict(list)
    for o in ops:
        if o.kind == "kernel":
            by[(o.name, o.config)].append(o.dur)
    return sorted(((n, c, len(d), float(sum(d))) for (n, c), d in by.items()), key=lambda x: -x[3])


def _kernels(ops: list[GpuOp]) -> list[tuple[str, int, float]]:
    by: dict[str, list[int]] = defaultdict(list)
    for o in ops:
        by[o.name].append(o.dur)
    return sorted(((n, len(d), float(sum(d))) for n, d in by.items()), key=lambda x: -x[2])


def explain(tl: Timeline, query: str) -> RangeExplanation:
    """The explanation of the range `query` means (:func:`match_name`) in `tl`, over all its instances."""
    name = match_name(tl.range_names(), query)
    insts = [r for r in tl.ranges if r.name == name]
    open_on: dict[int, list[Span]] = defaultdict(list)
    for r in tl.ranges:
        open_on[r.tid].append(r)
    host = _Host(tl)
    acc = _Acc()
    for inst in insts:
        _instance(host, tl, inst, open_on, acc)
    ex = RangeExplanation(name, tl.source, tl.path, len(insts), acc.time, acc.busy, acc.time - acc.busy,
                          float(sum(o.dur for o in acc.ops)), len(acc.ops), "GPU-bound")
    ex.idle_by = {k: v for k, v in acc.idle.items() if v > 0}
    ex.kernels = _kernels(acc.ops)
    ex.configs = _configs(acc.ops)
    ex.notes += tl.notes
    ex.launch_cost_ns = statistics.median(acc.launch_steps) if acc.launch_steps else 0.0
    if not acc.ops:
        ex.verdict = "no GPU work"
        ex.notes.append("no GPU operation was launched inside this range (nor by autograd's thread meanwhile)")
        return ex
    gpu_bound = ex.busy_share >= th("gpu_bound_share")
    causes = _idle_causes(acc, len(insts), ex.launch_cost_ns, ex.idle_ns)
    if not gpu_bound and causes:
        ex.verdict = VERDICTS[max(causes, key=lambda c: c.saving_ns).id]
    extra = _extra_cause(acc, ex.busy_share, gpu_bound)
    if extra is not None:
        causes.append(extra)
    keep = th("min_cause_share") * ex.time_ns
    ex.causes = sorted((c for c in causes if c.saving_ns >= keep), key=lambda c: -c.saving_ns)
    ex.floor_ns = ex.busy_ns - (extra.time_ns if extra else 0.0)
    ex.all_fixed_ns = max(ex.floor_ns, ex.time_ns - sum(c.saving_ns for c in ex.causes))
    return ex


# ------------------------------------------------------------------------------------------------ a pair
@dataclass
class RangePair:
    """What made range B faster (or slower) than range A, per instance, in the terms of one explanation."""

    a: RangeExplanation
    b: RangeExplanation
    parts: list[tuple[str, float, float]] = field(default_factory=list)  # (part, A per instance, B per instance)

    @property
    def gap_ns(self) -> float:
        return self.a.time_ns / max(self.a.instances, 1) - self.b.time_ns / max(self.b.instances, 1)

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a.to_dict(), "b": self.b.to_dict(), "gap_ns_per_instance": self.gap_ns,
                "parts": [{"part": p, "a_ns": x, "b_ns": y, "saved_ns": x - y} for p, x, y in self.parts]}


def _parts(e: RangeExplanation) -> dict[str, float]:
    n = max(e.instances, 1)
    extra = next((c.time_ns for c in e.causes if c.id == "extra"), 0.0)
    out = {"GPU busy: kernels kept": (e.busy_ns - extra) / n, "GPU busy: extra copies/casts": extra / n}
    for k in ("sync", "host", "lead", "launch"):
        out[f"GPU idle: {_TITLE[k]}"] = e.idle_by.get(k, 0.0) / n
    return out


def compare(a: RangeExplanation, b: RangeExplanation) -> RangePair:
    """A's and B's time per instance in the same parts, the parts B saved most first."""
    pa, pb = _parts(a), _parts(b)
    parts = [(k, pa[k], pb[k]) for k in pa if pa[k] or pb[k]]
    return RangePair(a, b, sorted(parts, key=lambda x: -(x[1] - x[2])))
