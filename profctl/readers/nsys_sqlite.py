"""Read any Nsight Systems SQLite export (``nsys export --type sqlite``) into a Summary.

Two groupings, with nsys' own definitions (docs/nsys.md says how each was checked):

* per kernel name, as ``nsys stats --report cuda_gpu_kern_sum``: instances, total, avg, median (mean of the
  middle two for even counts), min, max and sample standard deviation of ``end - start`` of every row of
  CUPTI_ACTIVITY_KIND_KERNEL with that demangled name; memcpy and memset rows are added per copy kind;
* per NVTX range, as ``nvtx_gpu_proj_sum``: push/pop and start/end ranges that start and end on the same thread
  are projected onto the GPU. A GPU operation (kernel, memcpy, memset) belongs to a range when the CUDA API call
  that launched it (joined on ``correlationId`` within the process) lies inside the range on the range's own
  thread; the projection of one range instance spans from the start of its first GPU operation to the end of
  its last. Instances with no GPU operation are not projected. Per range name and style: projected instances,
  total/avg/med/min/max/std of the projected durations, total range time of the projected instances, GPU ops,
  average stack level and children of the projected ranges.

Bounded memory and time on large exports: everything heavy runs inside SQLite (temporary tables in a temporary
file, never in the user's file, which is opened read-only and immutable); Python only streams sorted durations
one kernel name at a time and holds one small tuple per NVTX range instance.

This module holds the entry points (:func:`read`, :func:`read_paths`, :func:`summarize`); beside it,
profctl.readers._nsys_schema opens the file and knows its tables and columns, profctl.readers._nsys_export's
:class:`NsysExport` holds the queries, profctl.readers._nsys_paths places launches in NVTX paths and
profctl.readers._nsys_summary makes the rows. Each uses the ones before it, by their public names only.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from profctl.readers import _nsys_paths, _nsys_summary
from profctl.readers._nsys_export import NsysExport, RangeInstance
from profctl.readers._nsys_schema import (
    COLUMNS,
    KERNEL,
    MEMCPY,
    MEMSET,
    NVTX,
    RUNTIME,
    SQLITE_MAGIC,
    STRINGS,
    TRACE_OPTION,
    Schema,
    check_nsys_export,
    connect,
    db_error,
)
from profctl.schema import Summary


def summarize(ex: NsysExport, *, by_range: bool = False, api: bool = False) -> Summary:
    """The open export's Summary (profctl.readers._nsys_summary makes the rows from its queries)."""
    return _nsys_summary.summarize(ex, by_range=by_range, api=api)


# ---------------------------------------------------------------------------------------------------- entry points
def read(path: str | Path, *, by_range: bool = False, window: str | None = None, api: bool = False,
         **_ignored: Any) -> Summary:
    """Read an nsys SQLite export (any program's) into a Summary; BadReport with one line if it cannot."""
    with NsysExport(path, window=window) as ex:
        try:
            return summarize(ex, by_range=by_range, api=api)
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            raise db_error(ex.path, e) from None



def read_paths(path: str | Path, *, first_case: str | None = None) -> Summary:
    """An export of a profctl run summarised per measured range path ``profctl@<backend>[<shape>]/measure/
    <backend>.<pass>`` (the profctl domain's part of the canonical path), measured iterations only, so several
    shapes and passes of one run stay apart.

    Unlike the per-path rows of :func:`read`, other domains are left out and a launch is placed in the innermost
    ``<backend>.fwd|bwd`` range around it on the launching thread, within its ``measure`` and case ranges (the
    workload pushes the same stack on autograd's thread). With capture by cudaProfilerStart the first case's
    range was pushed before the capture began: `first_case` (``<backend>[<shape>]``) names it
    (profctl.nvtx.measured_leaf_path).
    """
    with NsysExport(path) as ex:
        leaves = _nsys_paths.measured_leaves(ex, first_case)
        return _nsys_summary.leaf_summary(ex, leaves, path)


__all__ = ["COLUMNS", "KERNEL", "MEMCPY", "MEMSET", "NVTX", "RUNTIME", "SQLITE_MAGIC", "STRINGS", "TRACE_OPTION",
           "NsysExport", "RangeInstance", "Schema", "check_nsys_export", "connect", "read", "read_paths", "summarize"]
