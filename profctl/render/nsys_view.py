"""What `profctl nsys` prints beside the unified summary (profctl.render.summary_view): the GPU time per iteration
of each case and pass, with its speedup over the baseline."""

from __future__ import annotations

from typing import Any


def pass_time_lines(times: list[Any]) -> list[str]:
    """One line per case and pass (profctl.pipelines.nsys_pipeline.PassTime): median ms and the speedup."""
    if not times:
        return []
    lines = ["", "GPU time per iteration (median of the measured iterations, projected from NVTX):"]
    for t in times:
        vs = f"  {t.speedup:5.2f}x vs {t.baseline}" if t.speedup else ""
        lines.append(f"  {t.backend:15s} {t.pass_}  [{t.shape_key}]  {t.median_ns / 1e6:9.4f} ms{vs}")
    return lines
