"""Typed errors. Every failure a user can cause or meet ends as one of these, and the CLI prints it as one line.

Each error carries a short message and, where a tool failed, the path of the log that holds the details, so
the one-line error still leads to the evidence.
"""

from __future__ import annotations

from pathlib import Path


class ProfctlError(Exception):
    """Base class: a failure with a one-line explanation for the user."""

    exit_code = 1

    def __init__(self, message: str, *, log: Path | str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.log = Path(log) if log is not None else None
        self.hint = hint

    def one_line(self) -> str:
        text = self.message.strip().replace("\n", " ")
        if self.hint:
            text = text.rstrip(".;:") + "; " + self.hint.strip().replace("\n", " ")
        if self.log is not None:
            text += f" (log: {self.log})"
        return text


class UsageError(ProfctlError):
    """A bad option value: unknown backend, non-positive size, heads not divisible by kv-heads, ..."""

    exit_code = 2


class RecipeError(UsageError):
    """A recipe file that does not validate; the message points at the file and line."""


class SpecError(ValueError):
    """A workload option with a bad value (profctl.spec); the message names the option and the value. A
    ValueError, since the workload child (profctl.workloads) meets it too; the targets turn it into a
    UsageError."""


class UnsupportedShape(ProfctlError):
    """A backend cannot take this shape, dtype or device."""


class ToolNotFound(ProfctlError):
    """An external tool (nsys, ncu) is not installed or not where we looked."""

    exit_code = 3


class ToolFailed(ProfctlError):
    """An external tool ran and failed; `log` names its output."""

    exit_code = 4


class ToolTimeout(ToolFailed):
    """An external tool ran past its timeout and was killed."""


class CounterPermission(ToolFailed):
    """ncu could not read GPU performance counters (ERR_NVGPUCTRPERM)."""

    HINT = (
        "GPU performance counters are restricted to admin users: run as root, or load the driver with "
        "NVreg_RestrictProfilingToAdminUsers=0 (e.g. options nvidia NVreg_RestrictProfilingToAdminUsers=0 in "
        "/etc/modprobe.d, then reload), or in a container add the SYS_ADMIN capability; "
        "see https://developer.nvidia.com/ERR_NVGPUCTRPERM."
    )


class NothingMatched(ProfctlError):
    """A selection matched nothing: an NVTX range, a kernel regex (explain, --view --kernel, perfetto --range), a
    --table with no rows to lay out. Its own exit code, so a script tells it from a failed gate (1)."""

    exit_code = 7


class NotComparable(ProfctlError):
    """Two runs that measure different things (GPU, shapes, dtype, versions that change the numbers)."""

    exit_code = 6


class Regression(ProfctlError):
    """`--fail-if-slower`: a case got slower than the limit (or stopped working)."""

    exit_code = 1


class BadReport(ProfctlError):
    """A report file that is unreadable: truncated, foreign, or from an unsupported tool version."""

    exit_code = 5


class NeedsTool(BadReport):
    """A report that must be converted by its tool before a reader can read it (an .nsys-rep)."""


class ReaderMissing(BadReport):
    """The ncu_report module is not installed (another way to read the report may exist: ncu --import)."""


class ReaderFault(BadReport):
    """A report that made a reader fail in a way it does not name: still one line for the user, never a
    traceback (the fuzz tests require that no damaged report of theirs ends here)."""


class CannotWrite(ProfctlError):
    """A file or directory profctl must write cannot be written: a read-only folder, a directory where a file
    should go, a full disk. The message names the path; nothing half-written is left there."""


class CannotStartRun(CannotWrite):
    """The run store cannot take a new run directory (`--reports` read-only, or a folder that cannot be made
    there, as under /proc). A run directory is made before anything runs, so this is an output that cannot be
    written, found before the work: exit 2, like `-o` naming a folder, not 1 (a write failing after the work)."""

    exit_code = 2


class WorkloadFailed(ProfctlError):
    """The workload child process exited abnormally."""


class ProgramFailed(ProfctlError):
    """The user's program exited with a non-zero status; what the tool recorded was kept. `lines`: its last error
    lines (the end of its traceback), which the CLI prints above the one-line error."""

    exit_code = 8

    def __init__(self, message: str, *, log: Path | str | None = None, hint: str | None = None,
                 lines: list[str] | None = None) -> None:
        super().__init__(message, log=log, hint=hint)
        self.lines = list(lines or [])
