"""Left for the command module that still imports through it (compare_cmd): the names below live in
modules of one idea each, and new code imports them from there (`_workload_options`, `_command`, `_messages`,
`_guard`, `_output`). Goes once it imports from the real modules."""

from __future__ import annotations

from profctl.cli._command import conflict, percent
from profctl.cli._guard import guard
from profctl.cli._messages import warn
from profctl.cli._output import check_format, check_outputs, emit
from profctl.cli._workload_options import REPORTS_HELP

__all__ = ["REPORTS_HELP", "check_format", "check_outputs", "conflict", "emit", "guard", "percent", "warn"]
