"""`profctl torch`: profile the workload's measured iterations with torch.profiler and print the summary."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from profctl.cli._common import guard, workload_options


@guard
@workload_options
def torch_cmd(
    wl: Any,
    shapes: bool = typer.Option(False, "--shapes/--no-shapes", help="record operator input shapes"),
    memory: bool = typer.Option(False, "--memory/--no-memory", help="record memory allocations"),
    stacks: bool = typer.Option(False, "--stacks/--no-stacks", help="record Python stacks of the ops"),
    by_range: bool = typer.Option(True, "--by-range/--no-by-range",
                                  help="break kernels down per range (case / measure / pass)"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown, csv or json"),
    limit: int = typer.Option(0, "--limit", help="show only the N kernels with most total time (table/markdown)"),
    reports: Path | None = typer.Option(None, "--reports", help="run directory root [default: ./reports]"),
    timeout: float = typer.Option(1800.0, "--timeout", help="seconds before the workload is killed"),
) -> None:
    """Profile with torch.profiler (CPU and CUDA activity, measured iterations only); write the trace
    (.json.gz, for Perfetto) and the key_averages table into a run directory; print the kernel summary."""
    from profctl.adapters import torchprof
    from profctl.errors import UsageError
    from profctl.render.summary import FORMATS, render

    if format not in FORMATS:
        raise UsageError(f"unknown format {format!r}; choose from {', '.join(FORMATS)}")
    if timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {timeout}")
    opts = torchprof.TorchOptions(shapes=shapes, memory=memory, stacks=stacks)
    tr = torchprof.run(wl, opts=opts, reports=reports, timeout_s=timeout, argv=["profctl", *sys.argv[1:]])
    summary = torchprof.summarise(tr, by_range=by_range)
    text = render(summary, format, limit=limit or None)
    if text is not None:
        print(text, end="" if text.endswith("\n") else "\n")
    for r in tr.failed_rows():
        spec = r.get("spec") or {}
        print(f"profctl: {spec.get('backend')} {spec.get('pass')}: {r.get('status')}: {r.get('reason')}",
              file=sys.stderr)
    print(f"run: {tr.run_dir}\ntrace: {tr.trace}\nkey_averages: {tr.table}", file=sys.stderr)
