"""`profctl mcp`: profctl as a Model Context Protocol server over stdio, for a kernel agent (profctl.mcp_server);
and the worker each of its calls runs in, which runs one profctl command line in-process, as a person's would."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import typer

from profctl import cli
from profctl.cli._command import percent
from profctl.cli._guard import guard
from profctl.cli._workload_options import REPORTS_HELP, typed_options
from profctl.errors import ToolNotFound, UsageError


@guard
def mcp(
    reports: Path | None = typer.Option(None, "--reports", help=REPORTS_HELP + "; every call is kept there as a run"),
    timeout: float = typer.Option(600.0, "--timeout", help="seconds a call may take before it is stopped (a call "
                                                           "may ask for less, never more)"),
    memory_limit: float | None = typer.Option(None, "--memory-limit",
                                              help="GiB: the most GPU memory a workload point may need (points over "
                                                   "it are refused before they allocate) [default: none]"),
    lock_wait: float = typer.Option(60.0, "--lock-wait", help="seconds a GPU call waits for another on the same GPU "
                                                              "before it is refused"),
    page_rows: int = typer.Option(25, "--page-rows", help="rows per page of a long list in an answer (0: whole)"),
    stop_at: str = typer.Option("90%", "--stop-at", help="the % of its floor at which an answer says stop"),
    budget: int = typer.Option(8000, "--budget", help="characters an answer may take, its text and its structured "
                                                      "content each (the data paged and cut to fit; the whole of it "
                                                      "is a file in the call's run directory)"),
) -> None:
    """Serve profctl's commands to an MCP client over stdio (the `agent` extra installs the SDK): bench, ab, ncu,
    explain, report, compare, runs, show; each call time-limited, one GPU job at a time, kept in the run store."""
    for flag, v in (("--timeout", timeout), ("--lock-wait", lock_wait)):
        if v <= 0:
            raise UsageError(f"{flag} must be positive, got {v:g}")
    if memory_limit is not None and memory_limit <= 0:
        raise UsageError(f"--memory-limit must be positive, got {memory_limit:g}")
    if budget < 2000:
        raise UsageError(f"--budget must be at least 2000 characters, got {budget}")
    if page_rows < 0:
        raise UsageError(f"--page-rows must be >= 0, got {page_rows}")
    stop_pct = percent(stop_at, "--stop-at") * 100
    if importlib.util.find_spec("mcp") is None:  # said before anything starts, without importing the SDK
        raise ToolNotFound("the MCP SDK is not installed: pip install 'profctl[agent]'")
    from profctl import mcp_server, run_store

    root = run_store.reports_root(reports).resolve()
    cfg = mcp_server.Config(reports=root, time_limit_s=timeout, memory_limit_gib=memory_limit,
                            lock_wait_s=lock_wait, page_rows=page_rows, stop_pct=stop_pct, budget=budget,
                            workload=tuple(typed_options(exclude=("memory_limit",))))
    mcp_server.serve(cfg, run_cli)


def run_cli(argv: list[str], out_path: str, log_path: str) -> None:
    """The body of one call's worker process: `profctl ARGV` in this process (the CLI's own code path, so the JSON
    is the CLI's), standard output to `out_path`, standard error to `log_path`, no standard input; in a process
    group of its own, so a time limit stops it and what it started. Exits with the command's status."""
    os.setsid()
    out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, std in ((null, 0), (out, 1), (log, 2)):
        os.dup2(fd, std)
        os.close(fd)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 - the process's own stdout
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False, buffering=1)  # noqa: SIM115
    sys.argv = ["profctl", *argv]  # the run's manifest records the command line as typed
    try:
        cli.app(args=argv, prog_name="profctl")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
