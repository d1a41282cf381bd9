"""``profctl explain``: two kernels side by side and the time gap between them in ranked parts, as a terminal
table, Markdown or JSON."""

from __future__ import annotations

import json
from typing import Any

from profctl.analysis import source as src
from profctl.analysis.explain import Explanation
from profctl.render import tables
from profctl.render.source import finding_rows, line_rows

#: hot lines and findings shown per kernel under the comparison
TOP = 3


def _who(p: Any) -> str:
    rng = f" [{p.nvtx_path}]" if p.nvtx_path else ""
    return f"{p.base_name}{rng} ({tables.display_path(p.report)})"


def table_rows(e: Explanation) -> list[dict[str, Any]]:
    return [{"": r.quantity, "A": r.a, "B": r.b, "unit": r.unit} for r in e.rows]


def factor_rows(e: Explanation) -> list[dict[str, Any]]:
    rows = [{"part of the gap": f.name, "us": f"{f.us:+.1f}", "of the gap": f"{100 * f.share:+.0f}%",
             "why": f.says} for f in e.factors]
    if e.factors:
        rows.append({"part of the gap": "(remainder)", "us": f"{e.remainder_us:+.1f}", "of the gap": "",
                     "why": "what the parts above leave unexplained"})
    return rows


def roof_lines(e: Explanation) -> list[str]:
    out = []
    for who, p in (("A", e.a), ("B", e.b)):
        r = e.roofs.get(who.lower())
        if r is None or not p.duration_ns:
            continue
        h = r.against(p.duration_ns * 1e-9)
        roofs = ", ".join(f"{x.name} {x.seconds * 1e6:.1f} us" for x in r.roofs)
        out.append(f"{who}: {h.sentence()} (roofs on {r.device}: {roofs})")
    return out


def print_explanation(e: Explanation, con: Any) -> None:
    con.print(f"A: {_who(e.a)}", markup=False)
    con.print(f"B: {_who(e.b)}", markup=False)
    con.print(e.headline, style="bold", markup=False)
    tables.print_table(con, "side by side", table_rows(e))
    if e.factors:
        tables.print_table(con, "where the gap comes from (parts add up; + makes A slower)", factor_rows(e))
    for n in [*e.notes, *roof_lines(e)]:
        con.print(f"  {n}", markup=False, soft_wrap=True)
    for who, p in (("A", e.a), ("B", e.b)):
        v = src.view(p, TOP)
        if v.lines or v.sass:
            what = "hot lines" if v.lines else "hot instructions"
            tables.print_table(con, f"{who}: {what}", line_rows(v, TOP, terse=True))
        rows = finding_rows(v, TOP, terse=True)
        if rows:
            tables.print_table(con, f"{who}: ncu's top findings", rows)


def markdown(e: Explanation) -> str:
    out = [f"**A**: {_who(e.a)}  \n**B**: {_who(e.b)}\n", f"**{e.headline}**\n", tables.markdown(table_rows(e))]
    if e.factors:
        out += ["\nWhere the gap comes from (the parts add up; + makes A slower):\n", tables.markdown(factor_rows(e))]
    out += [f"- {n}" for n in [*e.notes, *roof_lines(e)]]
    for who, p in (("A", e.a), ("B", e.b)):
        v = src.view(p, TOP)
        out += [f"\n{who}: {'hot lines' if v.lines else 'hot instructions'}\n", tables.markdown(line_rows(v, TOP))]
        rows = finding_rows(v, TOP)
        if rows:
            out += [f"\n{who}: ncu's top findings\n", tables.markdown(rows)]
    return "\n".join(out) + "\n"


def to_dict(e: Explanation) -> dict[str, Any]:
    from profctl.render.source import to_dict as view_dict

    def side(who: str, p: Any) -> dict[str, Any]:
        r = e.roofs.get(who)
        d = view_dict(src.view(p, TOP), TOP)
        d["roofs"] = r.to_dict(p.duration_ns * 1e-9 if p.duration_ns else None) if r else None
        return d

    return {"schema": "profctl.explain/1", "headline": e.headline,
            "a": side("a", e.a), "b": side("b", e.b),
            "rows": [{"quantity": r.quantity, "a": r.a, "b": r.b, "a_value": r.va, "b_value": r.vb, "unit": r.unit}
                     for r in e.rows],
            "factors": [{"name": f.name, "us": f.us, "share": f.share, "says": f.says} for f in e.factors],
            "remainder_us": e.remainder_us, "notes": e.notes}


def to_json(e: Explanation) -> str:
    return json.dumps(to_dict(e), indent=1, default=str) + "\n"
