"""Read an Nsight Compute report in depth: per kernel launch, a :class:`profctl.schema.profile.KernelProfile`
(every instruction's warp-state samples by stall reason, its source line and text, ncu's findings;
profctl.readers._ncu_profile), from one load of the report (profctl.readers._ncu_load) in a child process like
every user report. The Summary comes from the same load when asked for (:func:`read_with_summary`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from profctl.readers._ncu import summarize
from profctl.readers._ncu_load import load, plain_report
from profctl.schema import Summary
from profctl.schema.profile import KernelProfile


def read_profiles(path: str | Path, *, kernels: Sequence[str] | None = None, isolate: bool = True
                  ) -> list[KernelProfile]:
    """Every launch of the report at `path` (plain, .gz or .xz) as a KernelProfile, in report order. With
    `kernels` (regexes over a launch's name, base name and NVTX path), only the launches one of them picks are
    read in depth; the others come with their names only (``names_only``), for a message that lists them."""
    p = Path(path)
    with plain_report(p) as rep:
        return load(rep, p, launches=False, profiles=True, kernels=kernels, isolate=isolate).profiles


def read_with_summary(path: str | Path, *, by_range: bool = True, isolate: bool = True
                      ) -> tuple[Summary, list[KernelProfile]]:
    """The report's Summary (as profctl.readers.ncu_rep.read gives it) and every launch's profile, from one
    load (`isolate` False: in this process, for the report `profctl ncu` has just written)."""
    p = Path(path)
    with plain_report(p) as rep:
        got = load(rep, p, launches=True, profiles=True, isolate=isolate)
    summary = summarize(got.launches, path=p, tool_version=got.tool_version, by_range=by_range, reader=got.reader)
    return summary, got.profiles
