"""`profctl ncu --recipe NAME [workload options]`: profile the measured iteration of each backend and pass
with Nsight Compute, read the report, print the launch list, the recipe's metrics and the diagnosis.

Only launches inside profctl's NVTX range ``<backend>[<shape>]/measure/<backend>.<pass>`` are profiled, and
the workload runs one measured iteration unless --iters is given, so each kernel of that iteration is
profiled once. See docs/ncu.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from profctl.cli._common import guard, workload_options

if TYPE_CHECKING:
    from profctl.workload import WorkloadArgs

_PANEL = "Nsight Compute"


@guard
@workload_options
def ncu(
    ctx: typer.Context,
    recipe: str = typer.Option(
        "tensor-core",
        "--recipe",
        "-r",
        rich_help_panel=_PANEL,
        help="recipe name (`profctl recipes` lists them) or path to a recipe .yaml",
    ),
    kernel: str | None = typer.Option(
        None,
        "--kernel",
        "-k",
        rich_help_panel=_PANEL,
        help="also require the kernel's function name to match this regex",
    ),
    launch_count: int | None = typer.Option(
        None,
        "--launch-count",
        "-c",
        rich_help_panel=_PANEL,
        help="profile at most this many launches in all (ncu -c)",
    ),
    replay_mode: str | None = typer.Option(
        None,
        "--replay-mode",
        rich_help_panel=_PANEL,
        help="kernel, application, range or app-range [default: ncu's]",
    ),
    clock_control: str | None = typer.Option(
        None,
        "--clock-control",
        rich_help_panel=_PANEL,
        help="base, none or reset [default: ncu's (base)]; pass none where clocks must not be touched",
    ),
    cache_control: str | None = typer.Option(
        None,
        "--cache-control",
        rich_help_panel=_PANEL,
        help="all (flush caches between passes) or none [default: ncu's]",
    ),
    timeout: float = typer.Option(
        1800.0, "--timeout", rich_help_panel=_PANEL, help="kill ncu after this many seconds"
    ),
    reports_dir: Path | None = typer.Option(
        None,
        "--reports-dir",
        rich_help_panel=_PANEL,
        help="where the run directory goes [default: $PROFCTL_REPORTS or ./reports]",
    ),
    format: str = typer.Option(
        "table", "--format", "-f", rich_help_panel=_PANEL, help="table, markdown or json"
    ),
    *,
    wl: WorkloadArgs,
) -> None:
    """Profile the measured iteration of each backend with Nsight Compute and diagnose every kernel."""
    import time
    from dataclasses import replace

    from profctl.errors import UsageError

    t0 = time.perf_counter()
    if format not in ("table", "markdown", "json"):
        raise UsageError(f"unknown format {format!r}; choose table, markdown or json")
    from profctl import recipes
    from profctl.adapters import ncu as adapter

    for opt, val, allowed in (
        ("--replay-mode", replay_mode, adapter.REPLAY_MODES),
        ("--clock-control", clock_control, adapter.CLOCK_CONTROLS),
        ("--cache-control", cache_control, adapter.CACHE_CONTROLS),
    ):
        if val is not None and val not in allowed:
            raise UsageError(f"{opt} {val!r}: choose {', '.join(allowed)}")
    if launch_count is not None and launch_count <= 0:
        raise UsageError(f"--launch-count must be positive, got {launch_count}")
    if kernel is not None:
        _check_regex(kernel)
    if not wl.nvtx:
        raise UsageError(
            "profctl ncu selects the measured launches by NVTX range; --no-nvtx would profile nothing"
        )
    rec = recipes.get(recipe)
    exe = adapter.find()

    # one measured iteration unless the user asked for more (a click ParameterSource, compared by name so it works
    # with typer's vendored click and the standalone one)
    if getattr(ctx.get_parameter_source("iters"), "name", "DEFAULT") == "DEFAULT":
        wl = replace(wl, iters=1)
    wl = wl.resolved()
    if wl.device != "cuda":
        raise UsageError(
            "profctl ncu profiles CUDA kernels, and PyTorch sees no CUDA GPU here "
            "(read existing reports with `profctl report`)"
        )
    from profctl.ncu_run import NcuRequest, run_ncu

    req = NcuRequest(
        recipe=rec,
        wl=wl,
        kernel=kernel,
        launch_count=launch_count,
        replay_mode=replay_mode,
        clock_control=clock_control,
        cache_control=cache_control,
        timeout_s=timeout,
        reports_dir=reports_dir,
        exe=exe,
    )
    result = run_ncu(req, t_start=t0)
    _print(result, format)


def _check_regex(rx: str) -> None:
    import re

    from profctl.errors import UsageError

    try:
        re.compile(rx[6:] if rx.startswith("regex:") else rx)
    except re.error as e:
        raise UsageError(f"--kernel {rx!r} is not a valid regular expression: {e}") from None


def _print(result: Any, format: str) -> None:
    import sys

    from profctl.render import ncu as render_ncu

    for w in result.warnings:
        print(f"profctl: warning: {w}", file=sys.stderr)
    text = render_ncu.render(result.summary, result.diagnosis, recipe=result.recipe, cc=result.cc, fmt=format)
    if text is not None:
        print(text, end="" if text.endswith("\n") else "\n")
    print(
        f"profctl: {result.launches} launch(es) profiled; ncu ran {result.ncu_wall_s:.1f} s; "
        f"run directory {result.run_dir}",
        file=sys.stderr,
    )
