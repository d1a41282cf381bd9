"""A warm workload process (``--serve``): started once per worker, fed batches of cases on stdin, one JSON line
each (``{"cases": [3, 4], "jsonl": "/part/folder/workload.jsonl"}``), so Python, torch and the CUDA context are paid
for once per worker rather than once per part (issue 24: a short sweep over two GPUs spent most of its time
starting children).

Each batch writes the device event, its cases' start and row events, then ``{"event": "idle"}`` into the batch's
JSON-lines file; memory is released after every batch and after every case that did not end ``ok`` (an OOM's
tensors and the caching allocator's blocks), so a later case is never measured on a process a failure left
dirty. A CUDA error that breaks the context ends the process with status 3 (the parent starts a fresh one), and
the end of stdin ends it with status 0.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .results import jsonl_emitter

Emit = Callable[[dict[str, Any]], None]


def release_memory() -> None:
    """Drop what a finished case left: Python garbage, then the CUDA caching allocator's free blocks."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def serve(run_batch: Callable[[Sequence[int], Emit], int], device_event: Callable[[], dict[str, Any]],
          requests: Iterable[str] | None = None, *, default: Callable[[Any], Any] | None = None) -> int:
    """Run batches as they come; the exit status: 0 at the end of the input, 2 for a request that is not one,
    3 when a batch broke the CUDA context."""
    for line in requests if requests is not None else sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
            cases = [int(i) for i in req["cases"]]
            path = str(req["jsonl"])
        except (ValueError, KeyError, TypeError):
            print(f"serve: not a request: {line[:200]!r}", file=sys.stderr, flush=True)
            return 2
        emit = jsonl_emitter(path, default=default)
        emit(device_event())
        rc = run_batch(cases, emit)
        release_memory()
        emit({"event": "idle", "rc": rc, "t": time.time()})
        print(f"serve: batch of {len(cases)} case(s) done (status {rc})", flush=True)
        if rc == 3:
            return 3
    return 0
