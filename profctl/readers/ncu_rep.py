"""Read an Nsight Compute report (.ncu-rep, or gzip/xz-compressed) into a Summary: one load of the report
(profctl.readers._ncu_load, in a child process) gives every launch, grouped per kernel and NVTX range
(:func:`summarize`, as the CSV reader groups its launches). The container check and the grouping are here too for
profctl.inputs, which reads a report through ``ncu --import`` where the ncu_report module is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profctl.readers._ncu import Launch, RepInfo, check_rep, newer_than, summarize
from profctl.readers._ncu_load import load, plain_report
from profctl.schema import Summary

__all__ = ["Launch", "RepInfo", "check_rep", "newer_than", "plain_report", "read", "read_launches", "summarize"]


def read(path: str | Path, *, by_range: bool = True, isolate: bool = True, **_: Any) -> Summary:
    """The Summary of one report: per (kernel, NVTX range) when `by_range`, else per kernel. `isolate` False
    reads in this process: for a report ncu has just written here (a damaged one is what needs the child)."""
    p = Path(path)
    launches, version, reader = read_launches(p, isolate=isolate)
    return summarize(launches, path=p, tool_version=version, by_range=by_range, reader=reader)


def read_launches(path: str | Path, *, isolate: bool = True) -> tuple[list[Launch], str | None, str]:
    """(every launch, the version of the ncu that wrote the report, which reader read it): the list the CSV
    reader's read_launches gives for the report's raw page."""
    p = Path(path)
    with plain_report(p) as rep:
        got = load(rep, p, isolate=isolate)
    return got.launches, got.tool_version, got.reader
