"""Selecting what a user's program marked: the kernels launched inside a named NVTX / record_function range,
whichever tool recorded them (each reader names a kernel's ranges in its row's ``nvtx_range``: nsys one range
per row, ``domain:text``; ncu a path per domain, ``domain@a/b/c``; torch the path ``a/b/c``)."""

from __future__ import annotations

import re
from dataclasses import replace

from profctl import nvtx
from profctl.schema import Summary

_NSYS_DOMAIN = re.compile(r"^([^:/@]+):(?!:)")


def _components(label: str) -> list[tuple[str | None, str]]:
    """(domain, range) of every range a row's label names."""
    out: list[tuple[str | None, str]] = []
    for part in label.split(nvtx.PATH_SEP):
        part = part.strip()
        dom, ranges = nvtx.split_path(part)
        if dom is None and len(ranges) == 1:
            m = _NSYS_DOMAIN.match(ranges[0])
            if m:
                dom, ranges = m.group(1), [ranges[0][m.end():]]
        out += [(dom, r) for r in ranges if r]
    return out


def names_range(label: str | None, name: str) -> bool:
    """True when a row's range label has the range `name` (``domain@range`` or ``range``) among its parts."""
    if not label:
        return False
    dom, sep, rng = name.partition("@")
    want_dom, want = (dom, rng) if sep else (None, name)
    return any(r == want and (want_dom is None or d == want_dom) for d, r in _components(label))


def range_names(s: Summary, limit: int = 12) -> list[str]:
    """The distinct ranges a summary's rows and range table name (for 'nothing matched' messages)."""
    seen: dict[str, None] = {}
    for r in s.ranges:
        seen.setdefault(f"{r.domain}@{r.name}" if r.domain else r.name)
    for path in [k.nvtx_range for k in s.kernels] + [c.nvtx_range for c in s.cpu_ops]:
        for d, rng in _components(path or ""):
            seen.setdefault(f"{d}@{rng}" if d else rng)
    return list(seen)[:limit]


def within_range(s: Summary, name: str) -> Summary:
    """The kernel rows launched inside range `name` (the summary must have been read by range) and the CPU ops
    run inside it, the range table kept whole. Empty when nothing matched (`is_empty`): the caller says which
    ranges were seen."""
    kernels = tuple(k for k in s.kernels if names_range(k.nvtx_range, name))
    cpu = tuple(c for c in s.cpu_ops if names_range(c.nvtx_range, name))
    return replace(s, kernels=kernels, cpu_ops=cpu, meta={**s.meta, "range": name})


def is_empty(s: Summary) -> bool:
    """Nothing timed: no kernel and no CPU op."""
    return not s.kernels and not s.cpu_ops
