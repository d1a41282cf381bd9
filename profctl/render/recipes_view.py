"""An ncu recipe as the terminal, Markdown or JSON shows it: what it collects, what each metric means and how
to read it, the diagnosis thresholds and the hints; and the list of recipes."""

from __future__ import annotations

import json
from typing import Any

from rich.table import Table

from profctl.analysis.thresholds import THRESHOLDS as EXPLAIN_THRESHOLDS
from profctl.recipes import THRESHOLDS, Recipe
from profctl.render.tables import console, markdown
from profctl.render.tables import to_csv as rows_csv


def list_rows(recipes: list[Recipe], cc: tuple[int, int] | None) -> list[dict[str, str]]:
    """One row per recipe: name, summary, how many metrics, sections or set."""
    return [{"recipe": r.name, "summary": r.summary, "metrics": str(len(r.metric_names(cc))),
             "sections/set": ", ".join(list(r.sections_for(cc)) + ([f"set {r.set_name}"] if r.set_name else []))
             or "-"} for r in recipes]


def list_to_json(rows: list[dict[str, str]]) -> str:
    return json.dumps(rows, indent=1) + "\n"


def list_to_markdown(rows: list[dict[str, str]]) -> str:
    return markdown(rows)


def list_to_csv(rows: list[dict[str, str]]) -> str:

    return rows_csv(rows)


def list_to_console(rows: list[dict[str, str]], title: str, con: Any = None) -> None:
    t = Table(title=title, header_style="bold")
    for c in rows[0] if rows else ["recipe"]:
        t.add_column(c, overflow="fold", no_wrap=c in ("recipe", "metrics"))
    for row in rows:
        t.add_row(*row.values())
    (con or console()).print(t)


def _sections(r: Recipe, want_cc: tuple[int, int] | None) -> dict[str, list[dict[str, str]]]:
    metrics = [{"metric": m.name, "cc": m.cc.text or "all", "label": m.label, "means": m.means, "read": m.read,
                "line": str(m.line)} for m in r.metrics_for(want_cc)]
    collect = [{"collect": f"section {s}"} for s in r.sections_for(want_cc)]
    if r.set_name:
        collect.append({"collect": f"set {r.set_name}"})
    if r.import_source:
        collect.append({"collect": "the kernels' source files (--import-source yes)"})
    th = [{"threshold": k, "value": f"{v:g}", "meaning": THRESHOLDS[k][1]} for k, v in r.all_thresholds().items()]
    hints = [{"when": h.when, "cc": h.cc.text or "all", "say": h.say} for h in r.hints
             if want_cc is None or h.cc.matches(want_cc)]
    return {"Metrics": metrics, "Also collects": collect, "Thresholds": th, "Explain thresholds": explain_rows(r),
            "Hints": hints}


def explain_rows(r: Recipe) -> list[dict[str, str]]:
    """explain's own thresholds and ceilings (profctl.analysis.thresholds), shown with the recipe explain reads."""
    if r.name != "explain":
        return []
    return [{"threshold": t.name, "value": f"{t.value:g}", "meaning": t.reason} for t in EXPLAIN_THRESHOLDS.values()]


def to_json(r: Recipe, want_cc: tuple[int, int] | None) -> str:
    return json.dumps(to_dict(r, want_cc), indent=1) + "\n"


def to_csv(r: Recipe, want_cc: tuple[int, int] | None) -> str:
    """The recipe's metrics, one row each."""
    return rows_csv([{k: str(v) for k, v in m.items()} for m in to_dict(r, want_cc)["metrics"]])


def to_markdown(r: Recipe, want_cc: tuple[int, int] | None) -> str:
    text = f"# {r.name}\n\n{r.summary}\n\n{r.description}\n\n"
    for title, rows in _sections(r, want_cc).items():
        if rows:
            text += f"## {title}\n\n{markdown(rows)}\n"
    return text


def to_text(r: Recipe, want_cc: tuple[int, int] | None, cc_text: str | None) -> str:
    """Plain text lines (the terminal's form)."""
    parts = _sections(r, want_cc)
    lines = [f"{r.name} — {r.summary}", f"file: {r.path}", ""]
    if r.description:
        lines += [r.description, ""]
    lines.append(f"Metrics{f' for cc {cc_text}' if cc_text else ' (cc: the compute capabilities each applies to)'}:")
    for m in r.metrics_for(want_cc):
        lines += [f"  {m.name}   [cc {m.cc.text or 'all'}, line {m.line}]", f"      {m.label}: {m.means}",
                  f"      read: {m.read}"]
    for c in parts["Also collects"]:
        lines.append(f"Also collects: {c['collect']}")
    lines += ["", "Diagnosis thresholds:"]
    lines += [f"  {t['threshold']} = {t['value']}: {t['meaning']}" for t in parts["Thresholds"]]
    if parts["Explain thresholds"]:
        lines += ["", "Explain thresholds (profctl.analysis.thresholds: what profctl explain judges by):"]
        lines += [f"  {t['threshold']} = {t['value']}: {t['meaning']}" for t in parts["Explain thresholds"]]
    if parts["Hints"]:
        lines += ["", "Hints (said when the condition holds):"]
        lines += [f"  when {h['when']} [cc {h['cc']}]:\n      {h['say']}" for h in parts["Hints"]]
    return "\n".join(lines) + "\n"


def to_dict(r: Recipe, cc: tuple[int, int] | None) -> dict[str, Any]:
    """The recipe as JSON data (metrics for `cc` only, when given)."""
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
        "import_source": r.import_source,
        "thresholds": r.all_thresholds(),
        "explain_thresholds": {t["threshold"]: float(t["value"]) for t in explain_rows(r)},
        "hints": [{"when": h.when, "cc": h.cc.text, "say": h.say, "line": h.line} for h in r.hints],
    }
