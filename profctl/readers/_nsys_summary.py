"""The Summary of an nsys export: rows made from what :class:`profctl.readers.nsys_sqlite.NsysExport` queries.

Per kernel name (with launch configurations), per memcpy kind and memset, per NVTX range (nsys' projection),
per canonical NVTX path and kernel (``--by-range``, attributed by profctl.readers._nsys_paths), and per measured
leaf path of a profctl run (``read_paths``); then the checks and warnings that go into ``meta``.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from profctl import kernels as kn
from profctl import nvtx
from profctl.errors import BadReport
from profctl.kernels import classify, short_name
from profctl.readers import _nsys_paths
from profctl.readers._nsys_schema import KERNEL, MEMCPY, MEMSET, NVTX, RUNTIME, TRACE_OPTION
from profctl.schema import KernelRow, RangeRow, Source, Summary, busy_fields, durations_stats, warn
from profctl.schema.samples import first_starts, in_order, sample_fields

if TYPE_CHECKING:
    from pathlib import Path

    from profctl.readers._nsys_export import NsysExport, RangeInstance
    from profctl.readers._nsys_paths import LeafRows

T = TypeVar("T")
U = TypeVar("U")


def summarize(ex: NsysExport, *, by_range: bool = False, api: bool = False) -> Summary:
    """The export's Summary: kernels and memory operations, NVTX ranges, and (`by_range`) kernels per path."""
    if ex.window:
        kernels = kernels_and_memops(ex)
        ranges = range_rows(ex.range_instances())
    else:
        # The kernel summary and the NVTX projection read disjoint work; SQLite releases the GIL while it
        # steps, so the two run on two cores, each on its own read-only connection.
        kernels, ranges = _in_parallel(lambda: _with_export(ex, kernels_and_memops),
                                       lambda: range_rows(ex.range_instances()))
    return _finish(ex, kernels, ranges, by_range=by_range, api=api)


def _finish(ex: NsysExport, kernels: list[KernelRow], ranges: list[RangeRow], *, by_range: bool,
            api: bool) -> Summary:
    if not any(k.extra.get("kind") == "kernel" for k in kernels):
        n = ex.invalid_time_rows(KERNEL)
        if n:
            raise BadReport(f"{ex.path}: no kernel record has valid times ({n} end before they start or are "
                            "not numbers): damaged timestamps")
        if ex.window and ex.windows():
            raise BadReport(f"{ex.path}: no GPU kernel was launched between cudaProfilerStart and "
                            "cudaProfilerStop (an empty measured range)")
        raise BadReport(f"{ex.path}: the kernel table is empty: no GPU kernel ran inside the captured range")
    meta: dict[str, Any] = {"reader": "nsys_sqlite", "export_schema": ex.schema.schema_version,
                            "traces": [TRACE_OPTION.get(t, t) for t in ex.schema.capture_traces()]}
    if by_range:
        kernels += kernels_by_range(ex, meta)
    meta.update(ex.gpu_info())
    _warnings(ex, meta)
    if ex.window:
        meta["window"] = ex.window
        meta["windows"] = len(ex.windows())
    if api:
        meta["cuda_api"] = ex.api_rows()
    return Summary(sources=(Source(path=str(ex.path), tool="nsys", tool_version=ex.schema.version),),
                   kernels=tuple(kernels), ranges=tuple(ranges), meta=meta)


def _warnings(ex: NsysExport, meta: dict[str, Any]) -> None:
    """Warnings for what the export holds that is odd: records ending before they start (left out), string
    ids missing from StringIds (names shown as ``<string N>``), no version."""
    for t in (KERNEL, MEMCPY, MEMSET):
        if not ex.schema.has(t):
            continue
        n = ex.invalid_time_rows(t)
        if n:
            warn(meta, f"{n} record(s) of {t} have no valid times (not numbers, or the end before the start): "
                       "left out")
    if ex.missing_strings():
        warn(meta, f"{ex.missing_strings()} string id(s) missing from StringIds (names shown as <string N>)")
    if not ex.schema.version:
        warn(meta, "the export names no nsys version (no META_DATA_EXPORT/EXPORT_META_DATA)")


def kernels_and_memops(ex: NsysExport) -> list[KernelRow]:
    return kernel_rows(ex) + memop_rows(ex)


def kernel_rows(ex: NsysExport) -> list[KernelRow]:
    """Per kernel name, as ``cuda_gpu_kern_sum``, with the most used launch configurations."""
    by_id = ex.name_is_string_id()
    source = ex.kernel_source()
    whole = source == KERNEL  # no profiler window: the export holds the program's first calls too
    shorts = ex.short_names(source)
    configs = ex.launch_configs(source)
    out = []
    for nid, durs in ex.kernel_durations(source):
        name = ex.kernel_name(nid, by_id)
        sid = shorts.get(nid)
        short = (ex.string(sid) if by_id else str(sid)) if sid is not None else ""
        if not short or kn.is_generic(short) or short.startswith("<string "):
            short = kn.short_name(name)
        st = durations_stats(durs)
        cfgs = [(c, len(durs) if n < 0 else n) for c, n in configs.get(nid, [])]
        extra: dict[str, Any] = {"kind": "kernel", "launch_configs": [
            {"grid": list(c[0:3]), "block": list(c[3:6]), "registers_per_thread": c[6],
             "static_smem_bytes": c[7], "dynamic_smem_bytes": c[8], "count": n} for c, n in cfgs[:8]],
            **sample_fields(durs, first_call=whole)}
        if len(cfgs) > 8:
            extra["launch_configs_more"] = len(cfgs) - 8
        out.append(KernelRow(tool="nsys", name=name, short_name=short, kernel_class=kn.classify(name),
                             nvtx_range=None, count=int(st["count"]), total_ns=st["total_ns"],
                             avg_ns=st["avg_ns"], med_ns=st["med_ns"], min_ns=st["min_ns"],
                             max_ns=st["max_ns"], std_ns=st["std_ns"], extra=extra))
    return out


def memop_rows(ex: NsysExport) -> list[KernelRow]:
    """Memcpy per copy kind and memset, as nsys names them ('[CUDA memcpy Host-to-Device]', '[CUDA memset]')."""
    labels = ex.memcpy_labels()
    out = []
    for t, cls in ((MEMCPY, "memcpy"), (MEMSET, "memset")):
        if not ex.schema.has(t):
            continue
        groups: dict[Any, tuple[list[float], int]] = {}
        for k, d, b in ex.memop_durations(t):
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


def range_rows(insts: list[RangeInstance]) -> list[RangeRow]:
    """Per range name and style, as ``nvtx_gpu_proj_sum``: the projected instances' durations and shape."""
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
            **busy_fields(float(sum(r.busy for r in rs)),
                          float(sum(max(r.end, r.proj_end or r.end) - r.start for r in rs))),
        }
        out.append(RangeRow(name=text, domain=dom or None, style=style, count=len(rs),
                            range_total_ns=float(sum(r.end - r.start for r in rs)),
                            gpu_proj_total_ns=st["total_ns"] if n else 0.0,
                            gpu_ops=sum(r.ops for r in proj), extra=extra))
    return out


def kernels_by_range(ex: NsysExport, meta: dict[str, Any] | None = None) -> list[KernelRow]:
    """Per (canonical NVTX path, kernel name): each launch in the path of the ranges open at its API call, as
    ncu records it (profctl.readers._nsys_paths; launches of autograd's worker thread outside any range take
    the ranges of the thread that called backward()). How launches were attributed goes into `meta`."""
    if not ex.schema.has(NVTX) or not ex.schema.has(RUNTIME):
        return []
    by_id = ex.name_is_string_id()
    rows, idx = _nsys_paths.kernel_paths(ex)
    whole = not (ex.window and ex.windows())  # no profiler window: first calls are in the export
    first = first_starts(rows.starts)
    out = []
    for (path, nid), durs in rows.durs.items():
        name = ex.kernel_name(nid, by_id)
        st = durations_stats(durs)
        starts = rows.starts[(path, nid)]
        extra: dict[str, Any] = {
            "kind": "kernel", "nvtx_instances": len(rows.instances[(path, nid)]),
            **sample_fields(in_order(starts, durs), first_call=whole and min(starts) == first.get(nid))}
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


def leaf_summary(ex: NsysExport, leaves: LeafRows, path: str | Path) -> Summary:
    """The Summary of kernels per measured leaf path of a profctl run (profctl.readers.nsys_sqlite.read_paths):
    kernel rows, and one range row per path with the GPU projections of its instances."""
    names = ex.kernel_names(nid for _, nid in leaves.durs)
    kernels = []
    for (p, nid), ds in leaves.durs.items():
        st = durations_stats(ds)
        name = names[nid]
        kernels.append(KernelRow(tool="nsys", name=name, short_name=short_name(name), kernel_class=classify(name),
                                 nvtx_range=p, count=int(st["count"]), total_ns=st["total_ns"], avg_ns=st["avg_ns"],
                                 med_ns=st["med_ns"], min_ns=st["min_ns"], max_ns=st["max_ns"], std_ns=st["std_ns"],
                                 extra={"kind": "kernel", "nvtx_instances": len(leaves.rids[(p, nid)]),
                                        **sample_fields(ds)}))
    ranges = [RangeRow(name=p, domain=nvtx.DOMAIN, style="push_pop", count=len(v), range_total_ns=0.0,
                       gpu_proj_total_ns=sum(v), gpu_ops=None, extra={"proj_instances": len(v), "path": True})
              for p, v in leaves.spans.items()]
    return Summary(sources=(Source(path=str(path), tool="nsys", tool_version=ex.schema.version),),
                   kernels=tuple(kernels), ranges=tuple(ranges),
                   meta={"reader": "profctl.readers.nsys_sqlite.read_paths", **ex.gpu_info()})


def _with_export(ex: NsysExport, fn: Callable[[NsysExport], T]) -> T:
    """`fn` on a second connection to the same export (what runs on another thread needs its own)."""
    with type(ex)(ex.path) as other:
        return fn(other)


def _in_parallel(a: Callable[[], T], b: Callable[[], U]) -> tuple[T, U]:
    """Run `a` on a worker thread and `b` here; re-raise the first error of either."""
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
