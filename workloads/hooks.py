"""Where a profiler wrapped around a workload (torch.profiler) starts and stops recording, so it records the
measured iterations only. Its own module so that the runners and the profilers that implement the hooks import
it, not each other (a runner picks the profiler: profctl.workloads.attention.make_hooks)."""

from __future__ import annotations

from typing import Any


class Hooks:
    """The default does nothing. `case` is whatever the runner measures (an AttentionSpec, a model case)."""

    def measure_begin(self, case: Any) -> None:
        """Called right before the first measured iteration of a case."""

    def iteration_end(self, case: Any) -> None:
        """Called after each measured iteration (torch.profiler's step())."""

    def measure_end(self, case: Any) -> None:
        """Called after the last measured iteration, once the GPU is idle."""

    def close(self) -> None:
        """Called once when the process is done with all cases."""

    def ranges(self) -> Any:
        """An object whose push(name)/pop() mirror the NVTX ranges (torch.profiler's record_function)."""
        return None

    def case_range(self, case: Any) -> str | None:
        """Not used by the default hooks."""
        return None
