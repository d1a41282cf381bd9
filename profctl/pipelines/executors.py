"""Where a target's processes run. `Local` starts them as subprocesses of this one (through profctl.proc: an
argument list, a timeout, the output in a log beside the report, typed errors naming the log)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from profctl import proc


@dataclass(frozen=True)
class Local:
    """One local subprocess per launch: the serial path, and what every other executor runs on its workers."""

    name: str = "local"

    def spawn(self, argv: Sequence[str], *, log: Path, timeout_s: float, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> proc.Running:
        """Start `argv` without waiting (the bench sweep follows its events while it runs)."""
        return proc.spawn(argv, log=log, timeout_s=timeout_s, env=env, cwd=cwd)

    def run(self, argv: Sequence[str], *, log: Path, timeout_s: float, env: dict[str, str] | None = None,
            cwd: Path | None = None, check: bool = False,
            classify: Callable[[proc.ProcResult], Exception | None] | None = None) -> proc.ProcResult:
        """Run `argv` to its end (a tool wrapping the workload)."""
        return proc.run(argv, log=log, timeout_s=timeout_s, env=env, cwd=cwd, check=check, classify=classify)
