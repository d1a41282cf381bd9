"""`profctl recipes [NAME|PATH]`: list the ncu recipes, or show one (metrics per compute capability, what each
means and how to read it, thresholds, hints). A path validates a recipe file of your own."""

from __future__ import annotations

import re
import sys

import typer

from profctl.cli._guard import guard
from profctl.cli._output import check_format
from profctl.errors import UsageError


@guard
def recipes(
    name: str | None = typer.Argument(
        None, help="a recipe name or a path to a recipe .yaml; none: list them"
    ),
    cc: str | None = typer.Option(
        None, "--cc", help="show only the metrics for this compute capability, e.g. 9.0"
    ),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown, csv or json"),
) -> None:
    """List the ncu recipes, or show one: what it collects, what each metric means and how to read it."""
    from profctl import recipes as rmod
    from profctl.render import recipes_view

    check_format(format, ("table", "markdown", "csv", "json"))
    want_cc = _parse_cc(cc) if cc else None
    if name is None:
        rows = recipes_view.list_rows(rmod.load_all(), want_cc)
        if format == "table":
            recipes_view.list_to_console(rows, "ncu recipes (profctl ncu --recipe NAME)")
            return
        fns = {"csv": recipes_view.list_to_csv, "json": recipes_view.list_to_json,
               "markdown": recipes_view.list_to_markdown}
        sys.stdout.write(fns[format](rows))
        return
    r = rmod.get(name)
    if format == "table":
        sys.stdout.write(recipes_view.to_text(r, want_cc, cc))
    else:
        sys.stdout.write({"csv": recipes_view.to_csv, "json": recipes_view.to_json,
                          "markdown": recipes_view.to_markdown}[format](r, want_cc))


def _parse_cc(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text)
    if not m:
        raise UsageError(f"--cc {text!r}: write MAJOR.MINOR, e.g. 9.0")
    return int(m.group(1)), int(m.group(2))
