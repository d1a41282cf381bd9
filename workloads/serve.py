"""A warm workload process (``--serve``): started once per worker, fed batches of cases on stdin, one JSON line
each (``{"cases": [3, 4], "jsonl": "/part/folder/workload.jsonl"}``), so Python, torch and the CUDA context are paid
for once per worker rather than once per part (issue 24: a short sweep over two GPUs spent most of its time
starting children).

Each batch writes the device event, its cases' start and row events, then ``{"event": "idle"}`` into the batch's
JSON-lines file; the caching allocator's free blocks are released after every batch, and Python's garbage too
after every case that did not end ``ok`` (an OOM's tensors), so a later case is never measured on a process a
failure left dirty. A CUDA error that breaks the context ends the process with status 3 (the parent starts a
fresh one), and the end of its input (stdin, or the FIFO ``--requests`` names) ends it with status 0.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NoReturn

from .results import jsonl_emitter

Emit = Callable[[dict[str, Any]], None]


def get_ready(device: str, t_main: float) -> dict[str, Any]:
    """Before the first request: import torch, start CUDA (a context on the GPU) and cuBLAS (a small matmul), so
    that a child started ahead of its first batch has them ready when the batch comes; the ``ready`` event says
    how long each took (``t``: ``time.time()``, the clock of the parent's events)."""
    t0 = time.time()
    import torch

    t1 = time.time()
    if device == "cuda" and torch.cuda.is_available():
        x = torch.ones(64, 64, device="cuda", dtype=torch.bfloat16)
        (x @ x).sum().item()
    t2 = time.time()
    return {"event": "ready", "t_main": t_main, "import_s": round(t1 - t0, 3), "cuda_s": round(t2 - t1, 3),
            "t": t2}


@contextlib.contextmanager
def requests_of(path: str | None) -> Iterator[Iterable[str]]:
    """The lines batches come on: stdin, or the file at `path` (a FIFO a parent process writes to: opened once
    the process is ready, it ends when its last writer closes it)."""
    if path is None:
        yield sys.stdin
        return
    with open(path, encoding="utf-8") as f:
        yield f


def exit_now(rc: int) -> NoReturn:
    """End a warm child at the end of its input without Python's finalization: its events are on disk already
    (each line written and synced), stdout and stderr are flushed here, and the driver frees the GPU as the
    process ends. Interpreter shutdown with torch loaded took 0.36-0.48 s, and the session waits for its children
    at its end: on the critical path of every ``--workers`` run (issue 31); a bench child's end (``--exit-fast``)
    is on every serial bench's. Only for ``--serve`` and ``--exit-fast``, never under nsys or ncu: there a process
    must exit normally, their libraries write their data as it does."""
    for f in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            f.flush()
    os._exit(rc)


EXIT_FAST_HELP = ("end without Python's shutdown (0.4 s with torch) once the rows are written; only where no "
                  "profiler wraps the process (serve.exit_now)")


def finish(rc: int, hooks: Any, *, fast: bool) -> int:
    """The end of a workload's run of cases: with `fast` (``--exit-fast``), the hooks closed and the process
    ended here (:func:`exit_now`: its rows are on disk, no interpreter shutdown to wait for); else `rc`."""
    if fast:
        hooks.close()
        exit_now(rc)
    return rc


def release_memory(collect: bool = True) -> None:
    """Drop what a finished case left: Python garbage (`collect`: a full collection, 0.1-0.3 s with torch
    loaded; needed after a failure, whose traceback may hold tensors), then the CUDA caching allocator's free
    blocks."""
    if collect:
        gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def serve(run_batch: Callable[[Sequence[int], Emit], int], device_event: Callable[[], dict[str, Any]],
          requests: Iterable[str] | None = None, *, default: Callable[[Any], Any] | None = None,
          ready: dict[str, Any] | None = None) -> int:
    """Run batches as they come; the exit status: 0 at the end of the input, 2 for a request that is not one,
    3 when a batch broke the CUDA context. `ready`: what the process did before its first request (a ``ready``
    event: how long its imports and CUDA start took), written into the first batch's file."""
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
        if ready is not None:
            emit(ready)
            ready = None
        rc = run_batch(cases, emit)
        emit({"event": "idle", "rc": rc, "t": time.time()})
        print(f"serve: batch of {len(cases)} case(s) done (status {rc})", flush=True)
        if rc == 3:
            return 3
        release_memory(collect=False)  # while the parent sends the next batch; a failed case collected already
    return 0
