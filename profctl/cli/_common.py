"""What every command shares, by its old import path: the names below live in modules of one idea each, and this
module only gathers them (new code imports from those modules).

- `_workload_options`: the workload and model options, --reports' help, the workload they build and its check
- `_command`: ProfctlCommand (reading a line with profctl.cli.argv, click's errors in profctl's words), the options
  as typed (typed_flags, given, translate), conflict, percent, command_line
- `_messages`: err, note, warn
- `_guard`: @guard (one line per error, the watched standard output)
- `_program`: the user's program after '--' (target_of), its failure, the --range hint
- `_output`: checks of outputs before any work, and emit (-o's file, through links, to FIFOs and devices in place)
- `_formats`: the format -o's file name asks for
"""

from __future__ import annotations

from profctl.cli._command import (
    ProfctlCommand,
    click_error_line,
    command_line,
    conflict,
    given,
    percent,
    suggest,
    translate,
    typed_flags,
)
from profctl.cli._guard import StdoutFailed, guard
from profctl.cli._messages import err, note, warn
from profctl.cli._output import check_format, check_limit, check_outputs, check_reports, emit, emit_summary
from profctl.cli._program import PROGRAM_HELP, RF_NVTX_HELP, program_failed, target_of, with_range_hint
from profctl.cli._workload_options import (
    MODEL_OPTIONS,
    REPORTS_HELP,
    WORKLOAD_OPTIONS,
    build_workload,
    validate_workload,
    workload_options,
)

__all__ = [
    "MODEL_OPTIONS", "PROGRAM_HELP", "REPORTS_HELP", "RF_NVTX_HELP", "WORKLOAD_OPTIONS", "ProfctlCommand",
    "StdoutFailed", "build_workload", "check_format", "check_limit", "check_outputs", "check_reports",
    "click_error_line", "command_line", "conflict", "emit", "emit_summary", "err", "given", "guard", "note",
    "percent", "program_failed", "suggest", "target_of", "translate", "typed_flags", "validate_workload", "warn",
    "with_range_hint", "workload_options",
]
