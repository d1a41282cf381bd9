"""Run a user's Python program with its ``torch.profiler.record_function`` ranges also pushed as NVTX ranges, so
that Nsight Systems and Nsight Compute see them: ``profctl nsys|ncu --record-function-nvtx -- python SCRIPT.py``.

    python -m profctl.workloads.rfnvtx -- SCRIPT.py ARGS...
    python -m profctl.workloads.rfnvtx -- -m package.module ARGS...

record_function feeds torch.profiler only: a program that marks its steps with it shows them to ``profctl torch
--range`` but not to nsys or ncu. Here every record_function (context manager or decorator, on any thread) also
pushes an NVTX range of its name on entry and pops it on exit, through the ``nvtx`` package (the default domain,
as ``torch.cuda.nvtx.range_push`` would). Nothing else changes: no profiler is started (that is nsys' or ncu's job),
the program runs as __main__ with its own argv (profctl.workloads.pyprofile.run_program), and its exit status is
this process's.

(torch.autograd.profiler.emit_nvtx would also name record_function ranges, but it pushes a range for every
operator as well, needs the profiler's NVTX mode and a CUDA build, and renames nothing a user wrote.)
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .pyprofile import run_program


def install(push: Callable[[str], Any] | None = None, pop: Callable[[], Any] | None = None) -> None:
    """Make every ``record_function`` push an NVTX range named like it on entry and pop it on exit. `push`/`pop`
    default to the nvtx package's ``push_range``/``pop_range``."""
    import torch.autograd.profiler as ap

    if push is None or pop is None:
        import nvtx

        push, pop = nvtx.push_range, nvtx.pop_range
    rf = ap.record_function
    if getattr(rf, "_profctl_nvtx", False):
        return
    enter, leave = rf.__enter__, rf.__exit__

    def __enter__(self: Any) -> Any:
        push(str(self.name))
        try:
            return enter(self)
        except BaseException:
            pop()
            raise

    def __exit__(self: Any, *exc: Any) -> Any:
        try:
            return leave(self, *exc)
        finally:
            pop()

    rf.__enter__ = __enter__  # type: ignore[method-assign]
    rf.__exit__ = __exit__  # type: ignore[method-assign]
    rf._profctl_nvtx = True  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    entry = args[1:] if args[:1] == ["--"] else args
    if not entry or (entry[0] == "-m" and len(entry) < 2):
        print("error: give the program: -- SCRIPT.py ARGS... or -- -m MODULE ARGS...", file=sys.stderr)
        return 2
    if entry[0] != "-m" and not Path(entry[0]).is_file():
        print(f"error: {entry[0]}: no such file", file=sys.stderr)
        return 2
    install()
    return run_program(entry)


if __name__ == "__main__":
    sys.exit(main())
