"""What a profiling command runs: the user's program after '--', else the built-in workload (target_of), and how
a program's failure and an unmatched --range are said."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from profctl.cli._command import double_dash_given
from profctl.errors import ProgramFailed, UsageError

PROGRAM_HELP = ("-- CMD [ARGS...]: profile your own program instead of the built-in workload (everything after "
                "'--' is its command line)")


def program_failed(status: int, lines: Sequence[str], kept: str, run_dir: Any, log: Any) -> ProgramFailed:
    """The error for a user's program that exited with `status`: one line naming its exception and the log, its
    last error lines (its exception) printed above it by @guard."""
    why = f": {lines[-1].strip()}" if lines else ""
    return ProgramFailed(f"the program exited with status {status}{why}; {kept} {run_dir}", log=log,
                         lines=list(lines))


#: --record-function-nvtx, for nsys and ncu
RF_NVTX_HELP = ("your Python program's torch.profiler.record_function ranges also as NVTX ranges (which --range "
                "then selects): the program runs inside profctl's small wrapper (profctl.workloads.rfnvtx)")


def target_of(wl: Any, program: list[str] | None, *, record_function_nvtx: bool = False) -> Any:
    """The request's target: the user's program when one follows '--', else the built-in workload. Workload
    options given together with a program are an error that names them (they would be silently ignored)."""
    if record_function_nvtx and not program:
        raise UsageError("--record-function-nvtx applies to your own Python program: give -- python SCRIPT.py "
                         "ARGS... (the built-in workloads push NVTX ranges of their own)")
    if not program and double_dash_given():
        raise UsageError("nothing after '--': give the program to profile (-- python SCRIPT.py ARGS...), or leave "
                         "out '--' to profile the built-in workload")
    if not program:
        return wl
    from profctl.pipelines.targets import Program
    from profctl.spec import AttentionSweep

    default = AttentionSweep()
    given = [f.name for f in fields(AttentionSweep) if getattr(wl.sweep, f.name, None) != getattr(default, f.name)]
    if given:
        flag = {"passes": "pass", "backends": "backend", "seqlen_q": "seqlen"}
        names = ", ".join("--" + flag.get(n, n).replace("_", "-") for n in given)
        raise UsageError(f"{names}: workload options do not apply to your program ({' '.join(program)}); give "
                         "either workload options or -- CMD")
    return Program(tuple(program), cwd=Path.cwd(), record_function_nvtx=record_function_nvtx)


def with_range_hint(e: Any, target: Any) -> Any:
    """A --range that matched nothing in a Python program profiled without --record-function-nvtx: the error
    says that record_function ranges are not NVTX ranges, and which option makes them so."""
    entry = getattr(target, "python_entry", lambda: None)()
    if entry is not None and not getattr(target, "record_function_nvtx", False):
        e.hint = ("a torch.profiler.record_function range is no NVTX range, so nsys and ncu do not see it: add "
                  "--record-function-nvtx to push the program's record_function ranges as NVTX ranges")
    return e

