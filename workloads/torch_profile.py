"""torch.profiler around the attention workload: records the measured iterations only, one trace per process.

``python -m profctl.workloads.attention ... --torch-trace run/trace.json.gz`` makes :func:`make_hooks` build
:class:`TorchProfileHooks`. The profiler is created once, with a schedule that keeps it in WARMUP (Kineto
and CUPTI initialised, nothing recorded) until the first measured iteration, then RECORD. Between cases -- their
set-up, reference check and warm-up iterations -- collection is switched off with
``toggle_collection_dynamic``, so the single trace holds exactly the measured iterations of every case.

Ranges: profctl's NVTX ranges are mirrored as ``record_function`` ranges (``user_annotation`` in the trace) with
the same names, ``<backend>[<shape_key>]`` / ``measure`` / ``<backend>.fwd|bwd``, so the trace reader attributes
kernels to them as nsys does with the NVTX ranges. They are opened only while recording.

On close it writes the Chrome/Perfetto trace (``.json.gz``, atomically) and the ``key_averages`` table beside it
(``<trace name>.key_averages.txt``).
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

from .hooks import Hooks


class TorchProfileHooks(Hooks):
    """The workload's hooks for ``--torch-trace PATH`` (options ``--torch-shapes/--torch-memory/--torch-stacks``)."""

    def __init__(self, path: str | Path, *, device: str = "cuda", shapes: bool = False, memory: bool = False,
                 stacks: bool = False) -> None:
        import torch
        from torch.profiler import ProfilerAction, ProfilerActivity, profile

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.cuda = device == "cuda" and torch.cuda.is_available()
        self.activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        self._torch = torch
        self._RECORD = ProfilerAction.RECORD
        self._action = ProfilerAction.WARMUP
        self.recording = False
        self.started = False
        self.cases = 0
        self._local = threading.local()
        self.prof = profile(
            activities=self.activities,
            schedule=lambda step: self._action,
            record_shapes=shapes,
            profile_memory=memory,
            with_stack=stacks,
        )
        self.prof.start()  # WARMUP: the profiler's start-up costs come before any case

    # ---- the workload's hooks
    def measure_begin(self, case: Any) -> None:
        if not self.started:
            self._action = self._RECORD
            self.prof.step()  # WARMUP -> RECORD: start the trace
            self.started = True
            self.prof.add_metadata("torch_version", self._torch.__version__)  # top-level fields of the trace
            self.prof.add_metadata("profctl", "workloads.torch_profile")  # the tag its traces have always carried
        else:
            self.prof.toggle_collection_dynamic(True, self.activities)
        self.recording = True
        self.cases += 1
        self.push(str(getattr(case, "case_id", case)))  # the case range opened before recording began

    def iteration_end(self, case: Any) -> None:
        """Nothing per iteration: the measured region is recorded as a whole (the iterations are its ranges)."""

    def measure_end(self, case: Any) -> None:
        if self.cuda:
            self._torch.cuda.synchronize()
        self.pop()
        self.recording = False
        self.prof.toggle_collection_dynamic(False, self.activities)

    def ranges(self) -> TorchProfileHooks:
        """The mirror for the workload's NVTX pushes and pops (see profctl.workloads.attention.Nvtx)."""
        return self

    # ---- mirror of the NVTX ranges, per thread (autograd's worker thread pushes the backward ranges)
    def push(self, name: str) -> None:
        """Open `name` while recording. A name already open on this thread is not opened again: on the CPU,
        autograd runs the backward markers on the calling thread, inside the same ranges."""
        stack = self._stack()
        if self.recording and not any(n == name for n, rf in stack if rf is not None):
            rf = self._torch.profiler.record_function(name)
            rf.__enter__()
            stack.append((name, rf))
        else:
            stack.append((name, None))

    def pop(self) -> None:
        stack = self._stack()
        if stack:
            _, rf = stack.pop()
            if rf is not None:
                rf.__exit__(None, None, None)

    def _stack(self) -> list[tuple[str, Any]]:
        st: list[tuple[str, Any]] | None = getattr(self._local, "stack", None)
        if st is None:
            st = self._local.stack = []
        return st

    # ---- output
    def close(self) -> None:
        """Stop the profiler, write the trace and the key_averages table (both atomically)."""
        if not self.started:
            self.prof.stop()
            print("warning: torch.profiler recorded nothing (no case reached its measured iterations)",
                  file=sys.stderr)
            return
        if not self.recording:
            self.prof.toggle_collection_dynamic(True, self.activities)  # stop cleanly from an enabled state
        self.prof.stop()
        tmp = self.path.with_name(f".{self.path.name}.partial{''.join(self.path.suffixes[-2:]) or '.json'}")
        self.prof.export_chrome_trace(str(tmp))
        os.replace(tmp, self.path)
        table = self.key_averages_table()
        ka = key_averages_path(self.path)
        tmpk = ka.with_name(f".{ka.name}.partial")
        tmpk.write_text(table, encoding="utf-8")
        os.replace(tmpk, ka)
        print(f"torch.profiler: {self.cases} case(s) recorded -> {self.path}", flush=True)

    def key_averages_table(self) -> str:
        ka = self.prof.key_averages()
        keys = ("self_device_time_total", "self_cuda_time_total") if self.cuda else ("self_cpu_time_total",)
        for key in keys:
            try:
                return str(ka.table(sort_by=key, row_limit=-1, max_name_column_width=90))
            except (AttributeError, KeyError, ValueError):
                continue
        return str(ka.table(row_limit=-1))


def key_averages_path(trace: Path) -> Path:
    """``run/trace.json.gz`` -> ``run/trace.key_averages.txt`` (profctl.tools.torchprof.TABLE_NAME)."""
    name = trace.name
    for suf in (".json.gz", ".json", ".gz"):
        if name.endswith(suf):
            name = name[: -len(suf)]
            break
    return trace.with_name(name + ".key_averages.txt")


def make_hooks(torch_trace: str | None, **options: Any) -> Hooks:
    """The hooks a runner's command line asks for: torch.profiler with ``--torch-trace PATH``, else none."""
    return TorchProfileHooks(torch_trace, **options) if torch_trace else Hooks()
