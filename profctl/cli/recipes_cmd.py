"""`profctl recipes [NAME|PATH]`: list the ncu recipes, or show one (metrics per compute capability, what each
means and how to read it, thresholds, hints). A path validates a recipe file of your own."""

from __future__ import annotations

import re
import sys

import typer

from profctl.cli._common import check_format, guard
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
    if format == "csv":
        from profctl.render.tables import to_csv

        rows = recipes_view.list_rows(rmod.load_all(), want_cc) if name is None else \
            [{k: str(v) for k, v in m.items()} for m in recipes_view.as_dict(rmod.get(name), want_cc)["metrics"]]
        sys.stdout.write(to_csv(rows))
        return
    if name is None:
        text = recipes_view.render_list(recipes_view.list_rows(rmod.load_all(), want_cc), format,
                                  "ncu recipes (profctl ncu --recipe NAME)")
    else:
        text = recipes_view.render_recipe(rmod.get(name), format, want_cc, cc)
    if text is not None:
        sys.stdout.write(text)


def _parse_cc(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text)
    if not m:
        raise UsageError(f"--cc {text!r}: write MAJOR.MINOR, e.g. 9.0")
    return int(m.group(1)), int(m.group(2))
