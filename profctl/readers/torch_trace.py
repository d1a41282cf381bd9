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


The reader is four steps, one module each: the file is streamed (profctl.readers._torch_stream: ``traceEvents``
decoded one event at a time by ``json.JSONDecoder.raw_decode`` over a sliding window of the text); only compact
columns (``array``) of what the summary needs are kept, in named groups (profctl.readers._torch_collect), so
memory grows with the number of ops and kernels, not with the size of their JSON; GPU activities are attributed
to ops and ranges (profctl.readers._torch_attribute); and the rows are summarised here
(benchmarks/torch_trace_scale.py measures the whole).
"""

from __future__ import annotations

import gzip
import json
import lzma
import re
import zlib
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from profctl.errors import BadReport
from profctl.kernels import classify, short_name
from profctl.readers import _torch_stream as stream
from profctl.readers._torch_attribute import BWD_PREFIX, STEP_PREFIX, Attribution, KernelGroup
from profctl.readers._torch_collect import Category, Trace
from profctl.schema import CpuOpRow, KernelRow, RangeRow, Source, Summary, busy_fields, durations_stats
from profctl.schema.samples import first_starts, in_order, sample_fields

GZIP_MAGIC = b"\x1f\x8b"
#: the ``profctl`` field of the traces profctl's workload writes (its measured iterations only)
PROFCTL_TAG = "workloads.torch_profile"
#: characters read at a time (tests make it tiny)
CHUNK_CHARS = stream.CHUNK_CHARS
#: one JSON value (an event, or a top-level field) larger than this is refused rather than buffered
MAX_VALUE_CHARS = stream.MAX_VALUE_CHARS

_MEMCPY_DIR = {"HtoD": "Host-to-Device", "DtoH": "Device-to-Host", "DtoD": "Device-to-Device",
               "HtoH": "Host-to-Host", "PtoP": "Peer-to-Peer", "DtoA": "Device-to-Array",
               "AtoD": "Array-to-Device", "HtoA": "Host-to-Array", "AtoH": "Array-to-Host"}
_MEMCPY_RX = re.compile(r"Memcpy\s+(\w+)")
_CPU_GEMM = re.compile(r"aten::_?(?:add|badd)?b?mm(?:_out)?")


def read(path: str | Path, *, by_range: bool = False, notes: list[str] | None = None) -> Summary:
    """Summarise the trace at `path`; per kernel name, or per kernel name and range path with `by_range`.

    Notes for the user (a trace without GPU activity, launches that could not be attributed) are in
    ``summary.meta["notes"]``, and appended to `notes` when given; a reader prints nothing.
    """
    p = Path(path)
    tr, header = collect(p)
    summary = _summarise(p, tr, header, by_range=by_range)
    if notes is not None:
        notes.extend(summary.meta.get("notes", []))
    return summary


def collect(path: str | Path, *, details: bool = False) -> tuple[Trace, dict[str, Any]]:
    """The trace's events kept as compact columns (profctl.readers._torch_collect; with `details`, the GPU
    activities' launch details too), and the file's other top-level fields; BadReport with one line for what is
    not a readable trace. :func:`read` summarises these; a timeline writer walks them."""
    p = Path(path)
    tr = Trace(details=details)
    header: dict[str, Any] = {}
    try:
        with stream.open_text(p) as f:
            tr.collect(stream.events(stream.Stream(f, chunk_chars=CHUNK_CHARS, max_value_chars=MAX_VALUE_CHARS),
                                     header))
    except stream.Truncated as e:
        raise BadReport(f"{p}: truncated trace: the file ends inside {e.where} after {tr.n_events} events "
                        "(was it still being written?)") from None
    except stream.NotJSON as e:
        raise BadReport(f"{p}: not JSON: {e.msg} at character {e.offset}") from None
    except stream.NotTrace as e:
        raise BadReport(f"{p}: JSON, but not a torch.profiler/Chrome trace: {e}") from None
    except RecursionError:
        raise BadReport(f"{p}: JSON nested too deeply to be a trace (after {tr.n_events} events)") from None
    except (EOFError, zlib.error, lzma.LZMAError) as e:
        raise BadReport(f"{p}: truncated or damaged compressed file after {tr.n_events} events ({e})") from None
    except gzip.BadGzipFile as e:
        raise BadReport(f"{p}: damaged gzip file ({e})") from None
    except UnicodeDecodeError:
        raise BadReport(f"{p}: not a text (UTF-8) JSON file") from None
    except OSError as e:
        raise BadReport(f"{p}: cannot read: {e.strerror or e}") from None
    if tr.n_events == 0:
        raise BadReport(f"{p}: trace has no events")
    return tr, header


# ---------------------------------------------------------------------------------------------- summary
def _summarise(p: Path, tr: Trace, header: dict[str, Any], *, by_range: bool) -> Summary:
    """The Summary of what `tr` kept: attribute every GPU activity to its launching op and ranges, then
    aggregate per kernel (and range path), per CPU op, and per range."""
    if len(tr.intervals) == 0 and len(tr.gpu) == 0:
        raise BadReport(f"{p}: JSON without torch.profiler events (no cpu_op, user_annotation or kernel "
                        f"among its {tr.n_events} events): not a torch.profiler trace")
    a = Attribution(tr, by_range).run()
    gpu = len(tr.gpu) > 0
    groups, inst_iv, unattributed = a.gpu_groups()
    # profctl's workload records its measured iterations only; another program's trace holds its first calls
    whole = header.get("profctl") != PROFCTL_TAG
    kernels = _kernel_rows(a, groups, whole)
    cpu_rows, cpu_top, cpu_calls = _cpu_rows(a, whole)
    notes: list[str] = []
    warnings: list[str] = []
    if not gpu:
        notes.append(f"{p.name}: no GPU activity in this trace (no kernel, memcpy or memset events): it holds "
                     f"CPU ops only, {len(cpu_rows)} op row(s) by self time in cpu_ops, no kernels")
        warnings.append(notes[-1])
    elif unattributed:
        notes.append(f"{p.name}: {unattributed} of {len(tr.gpu)} GPU activities have no launching call in the "
                     "trace (CPU activity not recorded?); they count per kernel but not per range")
    kernels.sort(key=lambda k: (-k.total_ns, k.name, k.nvtx_range or ""))
    meta = _meta(a, header, cpu_top, cpu_calls, unattributed, notes)
    meta["holds"] = "gpu_and_cpu" if gpu else "cpu_ops_only"
    meta["samples"] = ("whole program: each kernel's and op's first call marked (first_call)" if whole else
                       "measured iterations only")
    if tr.skipped:
        warnings.append(f"{tr.skipped} event(s) that are not trace events (wrong types or fields) were skipped")
    if warnings:
        meta["warnings"] = warnings
    tv = header.get("torch_version")
    cpu_rows.sort(key=lambda c: (-c.total_ns, c.name, c.nvtx_range or ""))
    return Summary(sources=(Source(path=str(p), tool="torch", tool_version=str(tv) if tv else None),),
                   kernels=tuple(kernels), ranges=tuple(_range_rows(a, inst_iv)), meta=meta,
                   cpu_ops=tuple(cpu_rows))


def _kernel_rows(a: Attribution, groups: dict[tuple[int, int], KernelGroup], whole: bool) -> list[KernelRow]:
    """One row per kernel name (and range path), with its launches' durations as samples (`whole`: the trace
    covers the program, so each kernel's first launch is marked as a first call); memcpy and memset named as
    nsys names them."""
    first = first_starts({k: g.starts for k, g in groups.items()})
    out = []
    for (nid, path), grp in groups.items():
        raw = a.names[nid]
        name, extra = raw, grp.extra()
        extra.update(sample_fields(in_order(grp.starts, grp.durs),
                                   first_call=whole and min(grp.starts) == first.get(nid)))
        if grp.kind == Category.MEMCPY:
            m = _MEMCPY_RX.search(raw)
            name = f"[CUDA memcpy {_MEMCPY_DIR.get(m.group(1), m.group(1)) if m else 'Unknown'}]"
            extra["torch_name"] = raw
        elif grp.kind == Category.MEMSET:
            name = "[CUDA memset]"
            extra["torch_name"] = raw
        st = durations_stats(grp.durs)
        out.append(KernelRow(
            tool="torch", name=name, short_name=short_name(name), kernel_class=classify(name),
            nvtx_range=a.path_names[path] if path > 0 else None, count=int(st["count"]),
            total_ns=st["total_ns"], avg_ns=st["avg_ns"], med_ns=st["med_ns"], min_ns=st["min_ns"],
            max_ns=st["max_ns"], std_ns=st["std_ns"], extra=extra))
    return out


def _cpu_rows(a: Attribution, whole: bool) -> tuple[list[CpuOpRow], list[dict[str, Any]], int]:
    """Per CPU op name (and range path): self times as rows, with each call's as samples (`whole`: each op's
    first call marked); the ops with most self time overall; how many op calls."""
    iv, names, nest = a.tr.intervals, a.names, a.nest
    groups: dict[tuple[int, int], list[float]] = defaultdict(list)
    starts: dict[tuple[int, int], list[float]] = defaultdict(list)
    total: Counter[int] = Counter()
    total_path: Counter[tuple[int, int]] = Counter()
    for x in range(len(iv)):
        if iv.is_range[x]:
            continue
        key = (iv.name[x], nest.path[x] if a.by_range else -1)
        groups[key].append(max(nest.self_us[x], 0.0) * 1000.0)
        starts[key].append(iv.start[x])
        total[iv.name[x]] += int(iv.dur[x] * 1000.0)
        total_path[key] += int(iv.dur[x] * 1000.0)
    by_name: Counter[int] = Counter()
    calls: Counter[int] = Counter()
    first = first_starts(starts)
    rows = []
    for (nid, path), xs in groups.items():
        st_ = starts[(nid, path)]
        samples = sample_fields(in_order(st_, xs), first_call=whole and min(st_) == first.get(nid))
        by_name[nid] += int(sum(xs))
        calls[nid] += len(xs)
        nm = names[nid]
        st = durations_stats(xs)
        rows.append(CpuOpRow(
            tool="torch", name=nm, op_class=_cpu_class(nm),
            nvtx_range=a.path_names[path] if path > 0 else None, count=int(st["count"]),
            total_ns=st["total_ns"], avg_ns=st["avg_ns"], med_ns=st["med_ns"], min_ns=st["min_ns"],
            max_ns=st["max_ns"], std_ns=st["std_ns"], cpu_total_ns=float(total_path[(nid, path)]),
            extra={"device": "cpu", "time": "self", **samples}))
    top = [{"name": names[n], "calls": calls[n], "self_ns": s, "total_ns": total[n]}
           for n, s in by_name.most_common(15)]
    return rows, top, sum(calls.values())


def _range_rows(a: Attribution, inst_iv: dict[int, list[tuple[float, float]]]) -> list[RangeRow]:
    """Per range text, as nsys groups NVTX ranges (the paths they were seen under go in extra)."""
    iv, names, nest, gpu = a.tr.intervals, a.names, a.nest, len(a.tr.gpu) > 0
    inst_by_name: dict[str, list[int]] = defaultdict(list)
    for x in range(len(iv)):
        if iv.is_range[x]:
            nm = names[iv.name[x]]
            inst_by_name[STEP_PREFIX + "*" if nm.startswith(STEP_PREFIX) else nm].append(x)
    ranges: list[RangeRow] = []
    for name, insts in inst_by_name.items():
        proj = 0.0  # as nsys' nvtx_gpu_proj_sum: first op's start to last op's end, per instance
        busy = 0.0  # the same ops with overlaps merged and gaps left out
        span = 0.0  # the range's time: its start to its end or its last op's end, whichever is later
        ops = 0
        for x in insts:
            ivs = inst_iv.get(x)
            end = iv.start[x] + iv.dur[x]
            if ivs:
                ops += len(ivs)
                proj += max(e for _, e in ivs) - min(s for s, _ in ivs)
                busy += _union_us(ivs)
                end = max(end, max(e for _, e in ivs))
            span += end - iv.start[x]
        seen = sorted({a.path_names[nest.path[x]] for x in insts if nest.path[x] > 0})
        ranges.append(RangeRow(
            name=name, domain=None, style="push_pop", count=len(insts),
            range_total_ns=sum(iv.dur[x] for x in insts) * 1000.0,
            gpu_proj_total_ns=proj * 1000.0 if gpu else None, gpu_ops=ops if gpu else None,
            extra={"paths": seen[:20], "threads": len({iv.thread[x] for x in insts}),
                   **busy_fields(busy * 1000.0 if gpu else None, span * 1000.0)}))
    ranges.sort(key=lambda r: r.name)
    return ranges


def _meta(a: Attribution, header: dict[str, Any], top_cpu: list[dict[str, Any]], cpu_calls: int,
          unattributed: int, notes: list[str]) -> dict[str, Any]:
    """What the summary says about the trace: counts, threads, devices, versions, notes."""
    tr = a.tr
    gpu = len(tr.gpu) > 0
    meta: dict[str, Any] = {
        "format": "kineto-chrome-trace", "events": tr.n_events, "gpu_activity": gpu,
        "event_categories": dict(tr.cats.most_common()), "cpu_ops": cpu_calls,
        "cpu_ops_top_self": top_cpu, "threads": {f"{k[0]}/{k[1]}": v for k, v in tr.thread_names.items()},
        "gpu_ops": len(tr.gpu), "gpu_ops_unattributed": unattributed, "launches_borrowed_range": a.borrowed,
        "by_range": a.by_range,
    }
    if gpu:
        meta["gpu_span_ns"] = (tr.ts_max - tr.ts_min) * 1000.0
    if tr.skipped:
        meta["events_skipped"] = tr.skipped
    if tr.mem_peak:
        meta["peak_allocated_bytes"] = tr.mem_peak
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


def _plain(v: Any) -> bool:
    """True when `v` is JSON without NaN or infinity (it goes into the summary as it is)."""
    try:
        json.dumps(v, allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        return False
    return True


def _cpu_class(name: str) -> str:
    """Kernel classes for CPU ops: SDPA's fused CPU kernels say 'flash_attention' but not 'fwd'; aten::mm and
    aten::addmm are GEMMs."""
    if "flash_attention" in name:
        return "flash_bwd" if "backward" in name else "flash_fwd"
    if _CPU_GEMM.fullmatch(name):
        return "gemm"
    return classify(name)


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


__all__ = ["BWD_PREFIX", "CHUNK_CHARS", "MAX_VALUE_CHARS", "STEP_PREFIX", "collect", "read"]
