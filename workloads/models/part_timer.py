"""Per-part time without a profiler (:class:`PartTimer`): a range recorder the model's parts report to."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import torch

from .marks import in_backward


class PartTimer:
    """Per-part time without a profiler: CUDA events (perf_counter on CPU) at entry and exit of every range,
    forward and (through the autograd markers) backward, read after one synchronize.

    Cost: two events per range entry (``events`` counts them) plus the autograd markers of backward parts; a few
    microseconds of host time each and no GPU work, but a host-bound step gets slower (+34 % to +73 % for a
    batch-1 decode step on the H100), so run_model_case times parts in steps of their own, never the measured ones.
    A part's time is the GPU time between its two events: kernels of other streams or idle gaps inside
    the bracket count too. Nested ranges (``backward`` holds the parts' backward) are each timed whole.
    """

    def __init__(self, device: str | torch.device) -> None:
        self.cuda = torch.device(device).type == "cuda"
        self._lock = threading.Lock()
        self._records: list[tuple[str, str, Any, Any]] = []
        self.events = 0

    def _stamp(self) -> Any:
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        phase = "bwd" if in_backward() else "fwd"
        start = self._stamp()
        try:
            yield
        finally:
            end = self._stamp()
            with self._lock:
                self._records.append((name, phase, start, end))
                self.events += 2

    def reset(self) -> None:
        with self._lock:
            self._records.clear()
            self.events = 0

    def results(self, iters: int) -> dict[str, float]:
        """ms per iteration for each range name (forward + backward), and ``name.fwd`` / ``name.bwd`` for the
        parts that also ran in backward."""
        if self.cuda:
            torch.cuda.synchronize()
        out: dict[str, float] = {}
        with self._lock:
            recs = list(self._records)
        in_bwd = {name for name, phase, _, _ in recs if phase == "bwd"}
        for name, phase, a, b in recs:
            ms = a.elapsed_time(b) if self.cuda else (b - a) * 1e3
            out[name] = out.get(name, 0.0) + ms
            if name in in_bwd:  # split only parts that also ran in backward (not 'backward', 'optimizer')
                out[f"{name}.{phase}"] = out.get(f"{name}.{phase}", 0.0) + ms
        return {k: v / max(iters, 1) for k, v in sorted(out.items())}
