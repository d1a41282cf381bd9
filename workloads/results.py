"""What the workloads' result rows share, in one place: the timing statistics of a list of iteration times, a
failure's reason on one line, and the JSON-lines event file a parent follows."""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable
from typing import Any


def timing_stats(times: list[float]) -> dict[str, float]:
    """median, min, max, mean and standard deviation (0 for one time) of iteration times in ms."""
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times),
            "mean_ms": statistics.fmean(times), "std_ms": statistics.stdev(times) if len(times) > 1 else 0.0}


def one_line(s: str, width: int = 400) -> str:
    """`s` with its white space folded, cut to `width` characters: a row's reason stays one readable line."""
    s = " ".join(s.split())
    return s if len(s) <= width else s[: width - 1] + "…"


#: how allocators say they ran out: CUDA ("out of memory"), the CPU allocator ("can't allocate memory",
#: "not enough memory"), the C library (ENOMEM: "Cannot allocate memory")
_OOM_WORDS = ("out of memory", "can't allocate memory", "cannot allocate memory", "not enough memory")


def out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` is an allocation that failed for want of memory, on the GPU or on the host."""
    msg = f"{type(exc).__name__}: {exc}".lower()
    return isinstance(exc, MemoryError) or any(w in msg for w in _OOM_WORDS)


def jsonl_emitter(path: str | None, *, default: Callable[[Any], Any] | None = None) -> Callable[[dict[str, Any]], None]:
    """A function that appends one event as a JSON line to `path` (nothing when None), flushed to disk at once so
    that the parent keeps every finished row if the process dies."""

    def emit(obj: dict[str, Any]) -> None:
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(obj, default=default) + "\n")
                f.flush()
                os.fsync(f.fileno())

    return emit
