"""Bench rows as the sweep makes them (profctl.schema.bench.BenchRow): a point's row from the workload's row
event (FLOPs, TFLOP/s, % of peak, a suspect rate flagged), a failed point's row, and what is added once every row
is in: speedups over the baseline, clock, noise and host warnings."""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

from profctl import devices, flops
from profctl.model_spec import ModelSpec
from profctl.nvml import clock_warning
from profctl.roofs import row_roofs
from profctl.schema.bench import ATTENTION_CASE_FIELDS, MODEL_CASE_FIELDS, BenchRow
from profctl.spec import AttentionSpec

#: what a row records of where it ran (profctl.nvml.here)
WHERE_FIELDS = ("host", "gpu_index", "gpu_name", "gpu_uuid", "driver")
#: a row whose measured steps spread wider than this (interquartile range / median) gets a noise_warning
NOISE_IQR = 0.10
#: a GPU row whose host takes this share of its step time or more (median host time between a step's events /
#: median step) gets a host_warning: the steps are queued back to back, so once the host's time a call nears the
#: GPU's, any jitter of the host stretches steps, and a step times the launch as much as the kernel. Measured on the
#: H200 machine (issue 50, 2026-11-29): the 0.25-ms warp-specialized forward read 339-432 TFLOP/s in the 6 of 20
#: bench processes whose host took 0.31-0.39 ms a step (94-97 % of it) and 550-553 where it took 0.14-0.18 ms
#: (56-71 %); its kernel alone 551-554 in every process
HOST_SHARE = 0.8
#: a row whose processes' medians (bench --processes) are further apart than this ratio gets a process_warning: a
#: GPU row's processes differ by 1.5 % at most when kernel-bound (H100, benchmarks/RESULTS.md "compare noise"), a
#: quiet CPU's by up to 1.6x (two speed states, "The gate: power and false alarms"); past 10 % the reader should know
#: that the row's median is one of several
PROCESSES_APART = 1.10


def where_fields(where: dict[str, Any]) -> dict[str, Any]:
    """What a row records of where it ran: host, GPU index, name, UUID and driver."""
    return {k: where.get(k) for k in WHERE_FIELDS if k in where}


def _base_row(spec: AttentionSpec | ModelSpec) -> BenchRow:
    d = spec.to_dict()
    if isinstance(spec, ModelSpec):
        row = BenchRow({"workload": "model", "backend": spec.label, **{k: d[k] for k in MODEL_CASE_FIELDS}})
    else:
        row = BenchRow({"backend": spec.label, **{k: d[k] for k in ATTENTION_CASE_FIELDS if k in d},
                        "causal_align": spec.causal_align, "flops": flops.flops(spec)})
        if spec.masked:  # the useful work the FLOPs count: the mask's visible pairs, per batch and head
            row["visible_pairs"] = flops.spec_pairs(spec)
    if spec.label != spec.backend:
        row.backend_ref = spec.backend  # the function reference the label stands for
    return row


def failed_row(spec: AttentionSpec | ModelSpec, status: str, reason: str) -> BenchRow:
    """The row of a point that produced no result (crashed, timeout)."""
    return BenchRow({**_base_row(spec), "status": status, "reason": reason, "median_ms": None, "tflops": None,
                     "peak_mem_bytes": None, "rel_error": None})


def make_row(spec: AttentionSpec | ModelSpec, ev: dict[str, Any], clocks: dict[str, Any],
             device: dict[str, Any]) -> BenchRow:
    """A bench row from the workload's row event: FLOPs from the backend's causal alignment (a function backend
    reports its own; a model step counts its matmuls and attention, workloads/models.model_flops), TFLOP/s, % of
    the device's peak (for a model step: its MFU), a rate above the datasheet peak flagged as suspect."""
    if isinstance(spec, AttentionSpec) and ev.get("causal_align") and spec.causal and \
            ev["causal_align"] != spec.causal_align:
        spec = replace(spec, align=ev["causal_align"])
    row = _base_row(spec)
    for k, v in ev.items():
        if k not in ("event", "index", "spec", "t"):
            row[k] = v  # every field the child measured, as it named it
    if isinstance(spec, ModelSpec):
        row.torch_dtype, row.dtype = row.dtype, spec.dtype  # profctl's name (bf16), torch's beside it
        row.flops = row.model_flops
        if row.peak_mem_allocated_bytes is not None:
            row.peak_mem_bytes = row.peak_mem_allocated_bytes
    for key in ("median_ms", "tflops", "rel_error", "peak_mem_bytes"):
        row.setdefault(key, None)
    if row.peak_mem_bytes is None and row.peak_host_mem_bytes is not None:  # a CPU: the host's figure stands in
        row.peak_mem_bytes, row.peak_mem_where = row.peak_host_mem_bytes, "host"
    med = row.median_ms
    if row.ok and med and row.flops:
        rate = flops.tflops(row.flops, med * 1e-3)
        row.tflops = rate
        name = device.get("name") if spec.device == "cuda" else None
        peak = devices.peak_tflops(name, spec.dtype)
        row.peak_tflops = peak
        row.pct_of_peak = 100.0 * rate / peak if peak else None
        if isinstance(spec, ModelSpec):
            row.mfu = rate / peak if peak else None
        row.suspect = bool(peak and rate > peak)
        if row.suspect:
            row.suspect_reason = f"{rate:.0f} TFLOP/s is above the {peak:.0f} TFLOP/s datasheet peak"
        if isinstance(spec, AttentionSpec):
            _add_roof(row, name, med * 1e-3)
            computed, visible = row.get("computed_pairs"), row.get("visible_pairs")
            if computed and visible:  # a block-sparse kernel: the rate of what it computed, partial tiles whole
                row["tflops_computed"] = rate * computed / visible
    row.clocks = clocks
    return row


def _add_roof(row: BenchRow, device_name: str | None, seconds: float) -> None:
    """The attention point against the binding speed-of-light roof of its shape on this GPU (profctl.roofs)."""
    r = row_roofs(row, device_name)
    if r is None:
        return
    h = r.against(seconds)
    row.roof, row.roof_ms, row.pct_of_roof = h.roof.name, h.roof.seconds * 1e3, h.pct
    if h.above_roof and not row.suspect:
        row.suspect = True
        row.suspect_reason = h.sentence()


def add_speedups(rows: list[BenchRow], baseline: str | None) -> None:
    """Each row's speedup over the baseline's row of the same case (baseline time / time)."""
    if not baseline:
        return
    base = {r.case(): r for r in rows if r.backend == baseline and r.ok}
    for r in rows:
        b = base.get(r.case())
        r.baseline = baseline
        r.speedup = (b.median_ms / r.median_ms) if (b and b.median_ms is not None and r.ok and r.median_ms) \
            else None


def merge_processes(rows: list[BenchRow]) -> BenchRow:
    """One point timed in several processes (bench --processes), their rows in order, as one row: the row of the
    middle process by median (the lower middle of an even count) with every process's steps in ``times_ms``,
    ``times_per_process`` to split them, each process's median and what the processes that timed nothing said.
    The middle, not the mean: a process that landed in a slow state (the machine's, for its whole life) moves the
    row no more than a fast one; ``profctl compare`` takes each process as a run."""
    ok = [r for r in rows if r.ok and r.median_ms and r.process_times()]
    failures = [f"{r.status}: {r.reason}" for r in rows if not r.ok]
    if not ok:
        out = BenchRow(rows[0])
    else:
        order = sorted(range(len(ok)), key=lambda j: float(ok[j].median_ms or 0.0))
        out = BenchRow(ok[order[(len(ok) - 1) // 2]])
        times = [[x for t in r.process_times() for x in t] for r in ok]  # each row: one process's steps
        out.times_ms = [x for t in times for x in t]
        out.times_per_process = [len(t) for t in times]
        out.process_medians_ms = [float(r.median_ms or 0.0) for r in ok]
        if any(r.check == "fail" for r in ok):  # a wrong result in any process is a wrong result
            wrong = next(r for r in ok if r.check == "fail")
            out.check, out.rel_error = "fail", wrong.rel_error
    out.processes = len(ok)
    if failures:
        out.process_failures = failures
    return out


def add_noise_warnings(rows: list[BenchRow], limit: float = NOISE_IQR) -> None:
    """A ``noise_warning`` on each ok row whose middle half of measured steps spans more than `limit` of the
    median (in the process whose median is the row's, when several timed it): such a median moves from run to run
    (host-bound steps, a shared GPU), so a speedup between rows can be noise. Kernel-bound attention points spread
    under 3 % on the H100; a host-bound decode step 2-23 %."""
    for r in rows:
        procs, med = r.process_times(), r.median_ms
        if not r.ok or not procs or not med:
            continue
        meds = r.process_medians_ms if isinstance(r.process_medians_ms, list) and \
            len(r.process_medians_ms) == len(procs) else [med] * len(procs)
        t = procs[min(range(len(procs)), key=lambda j: abs(float(meds[j]) - med))]
        if len(t) < 4:
            continue
        q1, _, q3 = statistics.quantiles(t, n=4)
        spread = (q3 - q1) / med
        r.iqr_ratio = spread
        if spread > limit:
            of = f" (its middle process of {len(procs)})" if len(procs) > 1 else ""
            r.noise_warning = (f"timings spread: the middle half of {len(t)} steps{of} spans {q1:.4g}-{q3:.4g} ms "
                               f"({spread:.0%} of the median); the median may move between runs (a host-bound "
                               f"step, a busy machine): more --iters, or profile it")


def add_process_warnings(rows: list[BenchRow], apart: float = PROCESSES_APART) -> None:
    """A ``process_warning`` on each ok row whose processes' medians (bench --processes) are more than `apart`
    apart (``process_spread``: the largest over the smallest): the row's median is then one of several states; and
    on an ok row some of whose processes timed nothing (``process_failures``: a crash or OOM in one process only)."""
    for r in rows:
        meds = [float(m) for m in (r.process_medians_ms or []) if isinstance(m, (int, float)) and m > 0]
        if not r.ok:
            continue
        words = []
        if len(meds) >= 2:
            r.process_spread = max(meds) / min(meds)
            if r.process_spread > apart:
                words.append(f"its {len(meds)} processes' medians differ: {', '.join(f'{m:.4g}' for m in meds)} ms "
                             f"({r.process_spread:.2f}x apart: a process keeps its speed for its life, the machine's "
                             "state); the row is their middle, and compare takes each process as a run")
        if r.process_failures:
            words.append(f"{len(r.process_failures)} of its {len(r.process_failures) + len(meds)} processes timed "
                         f"nothing ({r.process_failures[0]})")
        if words:
            r.process_warning = "; ".join(words)


def add_host_warnings(rows: list[BenchRow], share: float = HOST_SHARE) -> None:
    """A ``host_warning`` on each ok GPU row whose host time a step (``host_ms``: between the step's events, as the
    host enqueued them) is `share` of its median step or more: its median may be the host's, not the kernel's."""
    for r in rows:
        host, med = r.host_ms, r.median_ms
        if not r.ok or not isinstance(host, (int, float)) or not med or host < share * med:
            continue
        r.host_warning = (f"host-bound steps: the host takes {host:.4g} ms a step to launch the call against a "
                          f"{med:.4g}-ms median step ({host / med:.0%}), so the steps time the host as much as the "
                          "kernel; the kernel alone: profctl nsys or ncu, or a larger problem")


def add_clock_warnings(rows: list[BenchRow]) -> None:
    """A ``clock_warning`` on each row whose SM clock fell during its point (against the sweep's top clock)."""
    top = max(((r.clocks or {}).get("sm_clock_mhz_max") or 0 for r in rows if r.clocks), default=0) or None
    for r in rows:
        w = clock_warning(r.clocks or {}, top)
        if w:
            r.clock_warning = w
