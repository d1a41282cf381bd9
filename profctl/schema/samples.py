"""Per-instance samples on a summary row: what lets `profctl compare` put an interval on a kernel's or an op's
change instead of a plain threshold on two medians.

Readers keep, in a row's ``extra``:

* ``samples_ns``: the duration of every instance (launch, op call) in the order they ran, in whole nanoseconds;
  beyond :data:`SAMPLE_CAP` instances an evenly spaced, deterministic subsample (the first and the last kept),
  so a summary of a long run stays small;
* ``samples_of``: how many instances the samples stand for (only when they were subsampled);
* ``first_call``: ``samples_ns[0]`` is the kernel's (op's) first instance in the report -- a first call, which
  pays for lazy module loading, autotuning, allocator growth -- so a comparison leaves it out. Readers set it
  only where the report covers a whole program: a profctl run's report holds measured iterations only (its
  warm-up ran before the capture, or in a ``warmup`` range), and its rows never say ``first_call``.

Summaries written before samples existed have none: they compare by the plain threshold (docs/summary-schema.md).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

#: at most this many samples are stored per row (an evenly spaced subsample beyond)
SAMPLE_CAP = 2000

K = TypeVar("K", bound=Hashable)


def subsample(xs: Sequence[float], cap: int = SAMPLE_CAP) -> list[float]:
    """`xs` itself up to `cap` items; beyond, `cap` evenly spaced items (the first and the last among them):
    deterministic, and spread over the whole run so a drift stays visible."""
    n = len(xs)
    if n <= cap:
        return list(xs)
    if cap < 2:
        return list(xs[:cap])
    return [xs[(i * (n - 1)) // (cap - 1)] for i in range(cap)]


def sample_fields(durations_in_order: Sequence[float], *, first_call: bool = False,
                  cap: int = SAMPLE_CAP) -> dict[str, Any]:
    """The ``extra`` fields of a row from its instances' durations (ns) in the order they ran."""
    kept = subsample(durations_in_order, cap)
    out: dict[str, Any] = {"samples_ns": [round(float(x)) for x in kept]}
    if len(kept) < len(durations_in_order):
        out["samples_of"] = len(durations_in_order)
    if first_call and kept:
        out["first_call"] = True
    return out


def in_order(starts: Sequence[float], durs: Sequence[float]) -> list[float]:
    """Durations sorted by their instances' start times (stable for equal starts)."""
    if all(starts[i] <= starts[i + 1] for i in range(len(starts) - 1)):
        return list(durs)
    return [d for _, d in sorted(zip(starts, durs, strict=True), key=lambda t: t[0])]


def first_starts(groups: Mapping[tuple[K, Any], Sequence[float]]) -> dict[K, float]:
    """The earliest start per name over groups keyed (name, anything): where each name's first call is."""
    out: dict[K, float] = {}
    for (name, _), starts in groups.items():
        if starts:
            m = min(starts)
            if name not in out or m < out[name]:
                out[name] = m
    return out


@dataclass(frozen=True)
class Samples:
    """A row's samples as a comparison reads them back."""

    values: tuple[float, ...]
    first_call: bool = False
    of: int | None = None  # instances they stand for, when subsampled

    @property
    def subsampled(self) -> bool:
        return self.of is not None and self.of > len(self.values)


def samples_of(extra: Mapping[str, Any] | None) -> Samples | None:
    """The samples a row's ``extra`` holds; None when it has none or they are not a list of finite times
    (a hand-edited summary never breaks a comparison: it falls back to the threshold)."""
    if not extra:
        return None
    raw = extra.get("samples_ns")
    if not isinstance(raw, list) or not raw:
        return None
    vals: list[float] = []
    for x in raw:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
            return None
        vals.append(float(x))
    of = extra.get("samples_of")
    return Samples(values=tuple(vals), first_call=extra.get("first_call") is True,
                   of=int(of) if isinstance(of, int) and not isinstance(of, bool) else None)


def merged(parts: Iterable[Samples]) -> Samples | None:
    """Several rows of one kernel (a merged summary) as one sample: values concatenated; a first call kept
    only at the front (the first part's)."""
    ps = list(parts)
    if not ps:
        return None
    vals: list[float] = []
    for i, p in enumerate(ps):
        vals.extend(p.values[1:] if (i and p.first_call and len(p.values) > 1) else p.values)
    ofs = [p.of or len(p.values) for p in ps]
    return Samples(values=tuple(vals), first_call=ps[0].first_call,
                   of=sum(ofs) if any(p.subsampled for p in ps) else None)


__all__ = ["SAMPLE_CAP", "Samples", "first_starts", "in_order", "merged", "sample_fields", "samples_of", "subsample"]
