"""The profctl command line. Each command lives in its own module and only parses options and prints; the work
is done by the pipeline modules it calls (imported lazily, so `profctl --help` stays fast)."""

from __future__ import annotations

import importlib

import typer

from profctl import __version__
from profctl.cli._command import ProfctlCommand

app = typer.Typer(
    name="profctl",
    help="Profile GPU attention kernels (FlashAttention, SDPA, cuDNN, FA4, eager) with nsys, ncu and "
    "torch.profiler, and compare them in one summary.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", help="print profctl's version and exit", is_eager=True),
) -> None:
    """Profile GPU attention kernels with nsys, ncu and torch.profiler, and compare them in one summary."""
    if version:
        print(f"profctl {__version__}")
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        print(ctx.get_help())
        raise typer.Exit(0)


#: (command name, module, function) — a module that is not there yet is simply not registered
COMMANDS = [
    ("bench", "profctl.cli.bench_cmd", "bench"),
    ("nsys", "profctl.cli.nsys_cmd", "nsys"),
    ("ncu", "profctl.cli.ncu_cmd", "ncu"),
    ("torch", "profctl.cli.torch_cmd", "torch_cmd"),
    ("report", "profctl.cli.report_cmd", "report"),
    ("recipes", "profctl.cli.recipes_cmd", "recipes"),
    ("doctor", "profctl.cli.doctor_cmd", "doctor"),
    ("runs", "profctl.cli.runs_cmd", "runs"),
    ("show", "profctl.cli.runs_cmd", "show"),
    ("compare", "profctl.cli.compare_cmd", "compare"),
    ("explain", "profctl.cli.explain_cmd", "explain"),
    ("proton", "profctl.cli.proton_cmd", "proton"),
    ("mcp", "profctl.cli.mcp_cmd", "mcp"),
]

for _name, _mod, _fn in COMMANDS:
    try:
        _m = importlib.import_module(_mod)
    except ModuleNotFoundError as _e:
        if _e.name != _mod:
            raise
        continue
    app.command(_name, cls=ProfctlCommand)(getattr(_m, _fn))


def main() -> None:
    app()
