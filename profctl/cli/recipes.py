"""`profctl recipes [NAME|PATH]`: list the ncu recipes, or show one (metrics per compute capability, what each
means and how to read it, thresholds, hints). A path validates a recipe file of your own."""

from __future__ import annotations

import typer

from profctl.cli._common import guard


@guard
def recipes(
    name: str | None = typer.Argument(
        None, help="a recipe name or a path to a recipe .yaml; none: list them"
    ),
    cc: str | None = typer.Option(
        None, "--cc", help="show only the metrics for this compute capability, e.g. 9.0"
    ),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown or json"),
) -> None:
    """List the ncu recipes, or show one: what it collects, what each metric means and how to read it."""
    import json

    from profctl import recipes as rmod
    from profctl.errors import UsageError

    if format not in ("table", "markdown", "json"):
        raise UsageError(f"unknown format {format!r}; choose table, markdown or json")
    want_cc = _parse_cc(cc) if cc else None
    if name is None:
        rows = []
        for r in rmod.load_all():
            rows.append(
                {
                    "recipe": r.name,
                    "summary": r.summary,
                    "metrics": str(len(r.metric_names(want_cc))),
                    "sections/set": ", ".join(
                        list(r.sections_for(want_cc)) + ([f"set {r.set_name}"] if r.set_name else [])
                    )
                    or "-",
                }
            )
        _out(rows, format, "ncu recipes (profctl ncu --recipe NAME)")
        return
    r = rmod.get(name)
    if format == "json":
        print(json.dumps(_as_dict(r, want_cc), indent=1))
        return
    metrics = [
        {
            "metric": m.name,
            "cc": m.cc.text or "all",
            "label": m.label,
            "means": m.means,
            "read": m.read,
            "line": str(m.line),
        }
        for m in r.metrics_for(want_cc)
    ]
    collect = [{"collect": f"section {s}"} for s in r.sections_for(want_cc)]
    if r.set_name:
        collect.append({"collect": f"set {r.set_name}"})
    th = [
        {"threshold": k, "value": f"{v:g}", "meaning": rmod.THRESHOLDS[k][1]}
        for k, v in r.all_thresholds().items()
    ]
    hints = [{"when": h.when, "cc": h.cc.text or "all", "say": h.say} for h in r.hints
             if want_cc is None or h.cc.matches(want_cc)]
    if format == "markdown":
        from profctl.render.summary import markdown

        text = f"# {r.name}\n\n{r.summary}\n\n{r.description}\n\n"
        for title, rows in (
            ("Metrics", metrics),
            ("Also collects", collect),
            ("Thresholds", th),
            ("Hints", hints),
        ):
            if rows:
                text += f"## {title}\n\n{markdown(rows)}\n"
        print(text, end="")
        return
    lines = [f"{r.name} — {r.summary}", f"file: {r.path}", ""]
    if r.description:
        lines += [r.description, ""]
    lines.append(f"Metrics{f' for cc {cc}' if cc else ' (cc: the compute capabilities each applies to)'}:")
    for m in r.metrics_for(want_cc):
        lines += [
            f"  {m.name}   [cc {m.cc.text or 'all'}, line {m.line}]",
            f"      {m.label}: {m.means}",
            f"      read: {m.read}",
        ]
    for c in collect:
        lines.append(f"Also collects: {c['collect']}")
    lines += ["", "Diagnosis thresholds:"]
    lines += [f"  {t['threshold']} = {t['value']}: {t['meaning']}" for t in th]
    if hints:
        lines += ["", "Hints (said when the condition holds):"]
        lines += [f"  when {h['when']} [cc {h['cc']}]:\n      {h['say']}" for h in hints]
    print("\n".join(lines))


def _parse_cc(text: str) -> tuple[int, int]:
    import re

    from profctl.errors import UsageError

    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text)
    if not m:
        raise UsageError(f"--cc {text!r}: write MAJOR.MINOR, e.g. 9.0")
    return int(m.group(1)), int(m.group(2))


def _as_dict(r: object, cc: tuple[int, int] | None) -> dict[str, object]:
    from profctl.recipes import Recipe

    assert isinstance(r, Recipe)
    return {
        "name": r.name,
        "path": r.path,
        "summary": r.summary,
        "description": r.description,
        "metrics": [
            {
                "name": m.name,
                "cc": m.cc.text,
                "label": m.label,
                "means": m.means,
                "read": m.read,
                "line": m.line,
            }
            for m in r.metrics_for(cc)
        ],
        "sections": r.sections_for(cc),
        "set": r.set_name,
        "thresholds": r.all_thresholds(),
        "hints": [{"when": h.when, "cc": h.cc.text, "say": h.say, "line": h.line} for h in r.hints],
    }


def _out(rows: list[dict[str, str]], format: str, title: str) -> None:
    import json

    if format == "json":
        print(json.dumps(rows, indent=1))
        return
    from profctl.render.summary import markdown

    if format == "markdown":
        print(markdown(rows), end="")
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title, header_style="bold")
    for c in rows[0] if rows else ["recipe"]:
        t.add_column(c, overflow="fold", no_wrap=c in ("recipe", "metrics"))
    for row in rows:
        t.add_row(*row.values())
    Console().print(t)
