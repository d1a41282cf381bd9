"""Choosing kernels: one launch of a report by a pattern over its names (``--kernel``/``--vs``), its pass; and
what a user's program marked: the kernels launched inside a named NVTX / record_function range,
whichever tool recorded them (each reader names a kernel's ranges in its row's ``nvtx_range``: nsys one range
per row, ``domain:text``; ncu a path per domain, ``domain@a/b/c``; torch the path ``a/b/c``)."""

from __future__ import annotations

import re
from dataclasses import replace

from profctl import nvtx
from profctl.errors import NothingMatched, UsageError
from profctl.schema import Summary
from profctl.schema.profile import KernelProfile

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


# ------------------------------------------------------------ one launch of a report, by name
def describe(p: KernelProfile) -> str:
    """How a kernel is named in messages: its base name, and its NVTX path when it has one."""
    return p.base_name + (f" [{p.nvtx_path}]" if p.nvtx_path else "")


def matching(profiles: list[KernelProfile], pattern: str, where: str, flag: str = "--kernel/--vs"
             ) -> list[KernelProfile]:
    """The launches `pattern` (a regex over the kernel's demangled name, base name and NVTX path) matches in
    `profiles` (read from `where`): by name where any name matches, else by NVTX path (``--vs cudnn`` means the
    cuDNN kernel, not a launch whose range happens to say cudnn). NothingMatched names the kernels there; a bad
    regex is a UsageError."""
    rx = pattern_of(pattern, flag)
    hits = [p for p in profiles if rx.search(p.name) or rx.search(p.base_name)] or \
        [p for p in profiles if rx.search(p.nvtx_path or "")]
    if not hits:
        seen = ", ".join(dict.fromkeys(describe(p) for p in profiles)) or "none"
        raise NothingMatched(f"{pattern!r} matches no kernel in {where}; its kernels: {seen}")
    return hits


def pattern_of(pattern: str, flag: str = "--kernel/--vs") -> re.Pattern[str]:
    """The regex `pattern` compiled; a UsageError naming `flag` when it is not one (checked before a report is
    read: the reader is given the patterns, to read in depth only the kernels they pick)."""
    try:
        return re.compile(pattern)
    except re.error as e:
        raise UsageError(f"{flag} {pattern!r} is not a regular expression: {e}") from None


_BWD = re.compile(r"(?<![a-z])(bwd|backward|bprop|dgrad|wgrad)|_bwd_|Backward", re.I)
_FWD = re.compile(r"(?<![a-z])(fwd|forward|fprop)|_fwd_|Forward", re.I)


def pass_of(p: KernelProfile) -> str | None:
    """'fwd' or 'bwd' when the launch's NVTX path or kernel name says which pass it belongs to (profctl's
    ranges, ``*.fwd.*`` ranges, FlashAttention's flash_fwd/flash_bwd, cuDNN's fprop/bprop); None otherwise."""
    for text in (p.nvtx_path or "", p.base_name, p.name):
        b, f = _BWD.search(text), _FWD.search(text)
        if b and not f:
            return "bwd"
        if f and not b:
            return "fwd"
    return None


def select(profiles: list[KernelProfile], pattern: str, where: str, like: KernelProfile | None = None
           ) -> tuple[KernelProfile, str | None]:
    """The launch `pattern` picks (:func:`matching`) and a note saying which, when it had a choice.

    One kernel name matched: its first launch. Several distinct names: the one the pattern names exactly (``--kernel
    _fwd_kernel`` is Triton's ``_fwd_kernel``, not FlashAttention's ``flash_fwd_kernel`` it also matches); with
    `like` (A, when choosing B) the longest launch of A's pass (forward or backward) where the pass tells the matches
    apart (``--vs cudnn`` for a backward kernel means cuDNN's main backward kernel); otherwise a UsageError that lists
    the names (issue 43: a pattern that silently explained FA2's kernel for Triton's)."""
    hits = matching(profiles, pattern, where)
    names = list(dict.fromkeys(p.base_name for p in hits))
    if len(names) > 1:
        exact = [h for h in hits if pattern in (h.base_name, h.name)]
        if exact:
            hits = exact + [h for h in hits if h not in exact]
            return hits[0], (f"{pattern!r} names {describe(hits[0])} exactly (it also matches "
                             + ", ".join(n for n in names if n != hits[0].base_name) + ")")
        want = pass_of(like) if like is not None else None
        same = [h for h in hits if h is not like and want is not None and pass_of(h) == want]
        if same and len(same) < len(hits):  # the pass tells them apart: its longest launch (the work, not a helper)
            same.sort(key=lambda h: -(h.duration_ns or 0))
            return same[0], (f"{pattern!r} matches {len(names)} kernels in {where} ({_listed(names)}); using "
                             f"{describe(same[0])}, the longest of the {want} pass, as A's")
        raise UsageError(f"{pattern!r} matches {len(names)} different kernels in {where}: {_listed(names, 8)}; "
                         "name one exactly (e.g. --kernel '^NAME$', or the NVTX path)")
    note = None
    if len(hits) > 1:
        note = (f"{pattern!r} matches {len(hits)} launches of {names[0]} in {where}; using the first (narrow it "
                "with the NVTX path)")
    return hits[0], note


def _listed(names: list[str], n: int = 4) -> str:
    return ", ".join(names[:n]) + (f", ... ({len(names) - n} more)" if len(names) > n else "")
