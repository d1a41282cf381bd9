"""What `profctl nsys` prints: the unified summary, the GPU time per iteration of each case and pass with its
speedup over the baseline, failed cases, and where the files are."""

from __future__ import annotations

import sys
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


def print_result(res: Any, fmt: str, *, limit: int | None) -> None:
    from profctl.render.summary_view import render
    from profctl.render.tables import console

    ec = console(stderr=True)
    ec.print(f"[dim]nsys {res.tool_version} ({res.exe}); run directory {res.run_dir}[/dim]")
    text = render(res.summary, fmt, limit=limit)
    if text is not None:
        print(text, end="" if text.endswith("\n") else "\n")
    if fmt in ("table", "markdown"):
        for ln in pass_time_lines(res.pass_times):
            print(ln)
    for r in res.failed_cases:
        spec = r.get("spec", {})
        ec.print(f"[yellow]case {spec.get('backend')} {spec.get('seqlen_q')}: {r.get('status')}: "
                 f"{r.get('reason')}[/yellow]")
    ec.print(f"report: {res.report}  (open in the Nsight Systems GUI)")
    ec.print(f"sqlite: {res.sqlite}; log: {res.log}")
    sys.stdout.flush()

