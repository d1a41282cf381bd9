"""torch.profiler as a tool: what it records (its options), the arguments that switch it on in a workload
process, and the files it writes. Nothing to find or version-check outside: the profiler is PyTorch's, inside
the workload child (workloads/torch_profile.py); its version is the child's torch version.

Files in a run directory: ``trace.json.gz`` (Chrome/Perfetto trace of the measured iterations) and
``trace.key_averages.txt`` (torch's own table).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TRACE_NAME = "trace.json.gz"
TABLE_NAME = "trace.key_averages.txt"  # what profctl.workloads.torch_profile writes beside TRACE_NAME


@dataclass(frozen=True)
class TorchOptions:
    """What torch.profiler records besides CPU ops and GPU activity (each costs time and trace size)."""

    shapes: bool = False
    memory: bool = False
    stacks: bool = False

    def argv(self) -> list[str]:
        """The workload options that turn these on."""
        return ([*(["--torch-shapes"] if self.shapes else []), *(["--torch-memory"] if self.memory else []),
                 *(["--torch-stacks"] if self.stacks else [])])


def trace_argv(trace: Path, opts: TorchOptions) -> list[str]:
    """The workload options that make it record its measured iterations into `trace`."""
    return ["--torch-trace", str(trace), *opts.argv()]
