"""Bench rows side by side per GPU: one row per (backend, shape, pass), one column pair (median ms, TFLOP/s)
per GPU -- the GPUs of one run spread over workers, or of runs gathered on different machines and generations
(A100 beside H100 beside H200).

A GPU is told apart by what each row records of where it ran (host, GPU index, name; profctl.nvml.here); rows
of older runs, which do not say, fall back to the run's device name. ``per="model"`` puts all GPUs of one model
in one column (the median of their rows)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from profctl.schema.bench import BenchRow, bench_rows

PER = ("gpu", "model")


def gpu_of(row: Mapping[str, Any], per: str = "gpu", device: str | None = None) -> str:
    """The column a row goes in: ``NAME host:index`` per GPU, ``NAME`` per model; the run's `device` (or the
    row's device, 'cpu') when the row does not say which GPU ran it."""
    row = BenchRow.of(row)
    name = row.gpu_name or device or ("cpu" if row.device == "cpu" else "unknown GPU")
    if per == "model" or row.gpu_index is None:
        return str(name)
    return f"{name} {row.host or '?'}:{row.gpu_index}"


def table(rows: Sequence[Mapping[str, Any]], *, per: str = "gpu", devices: Sequence[str | None] | None = None
          ) -> tuple[list[str], list[dict[str, Any]]]:
    """(the GPU columns in first-seen order, one dict per backend/shape/pass with ``<gpu> ms`` and
    ``<gpu> TFLOP/s`` for each GPU that ran it). `devices[i]` is the device name of row i's run, for rows that
    do not carry their GPU. Only rows with status ok count."""
    if per not in PER:
        raise ValueError(f"per must be one of {', '.join(PER)}")
    gpus: list[str] = []
    cells: dict[tuple[str, str, str], dict[str, list[tuple[float, float | None]]]] = {}
    order: list[tuple[str, str, str]] = []
    for i, r in enumerate(bench_rows(rows)):
        if not r.ok or not r.median_ms:
            continue
        g = gpu_of(r, per, devices[i] if devices is not None and i < len(devices) else None)
        if g not in gpus:
            gpus.append(g)
        key = (r.name, r.shape_label(), str(r.pass_))
        if key not in cells:
            cells[key] = {}
            order.append(key)
        cells[key].setdefault(g, []).append((float(r.median_ms), r.tflops))
    out = []
    for key in order:
        d: dict[str, Any] = {"backend": key[0], "shape": key[1], "pass": key[2]}
        for g in gpus:
            vals = cells[key].get(g)
            d[f"{g} ms"] = statistics.median(v[0] for v in vals) if vals else None
            rates = [v[1] for v in vals or [] if v[1] is not None]
            d[f"{g} TFLOP/s"] = statistics.median(rates) if rates else None
        out.append(d)
    return gpus, out
