"""Two Proton timelines side by side (profctl.analysis.timeline_diff): which scope grew, which overlap across the
warps of a CTA was lost; as a terminal table, Markdown or JSON."""

from __future__ import annotations

import json
from typing import Any

from profctl.render.tables import markdown as md
from profctl.render.tables import print_table
from profctl.render.timeline_view import fmt_num, fmt_pct


def scope_rows(d: Any) -> list[dict[str, Any]]:
    rows = []
    for s in d.scopes:
        r = s.ratio
        rows.append({"scope": s.name, f"{d.a_label} cycles/CTA": fmt_num(s.a_cycles_per_cta),
                     f"{d.b_label} cycles/CTA": fmt_num(s.b_cycles_per_cta), "change": fmt_num(s.delta),
                     "%": "" if r is None else f"{(r - 1) * 100:+.1f}", f"{d.a_label} mean": fmt_num(s.a_mean, 1),
                     f"{d.b_label} mean": fmt_num(s.b_mean, 1), f"{d.a_label} share %": fmt_pct(s.a_share),
                     f"{d.b_label} share %": fmt_pct(s.b_share)})
    return rows


def overlap_rows(d: Any, limit: int | None = 12) -> list[dict[str, Any]]:
    moved = [o for o in d.overlaps if abs(o.delta) >= 0.01]
    moved.sort(key=lambda o: -abs(o.delta))
    return [{"scope": o.a, "while another warp runs": o.b, f"{d.a_label} %": f"{o.before * 100:.1f}",
             f"{d.b_label} %": f"{o.after * 100:.1f}", "change (points)": f"{o.delta * 100:+.1f}"}
            for o in moved[:limit]]


def _diff_title(d: Any) -> str:
    return f"{d.b_label} ({d.kernel_b}) against {d.a_label} ({d.kernel_a})"


def to_console(d: Any, con: Any) -> None:
    con.print(_diff_title(d), style="bold", soft_wrap=True)
    for line in d.summary():
        con.print(f"  {line}", soft_wrap=True)
    print_table(con, "scopes (cycles per CTA and warp)" if d.per_warp else "scopes (cycles per CTA, over every warp)",
                scope_rows(d))
    ov = overlap_rows(d)
    if ov:
        print_table(con, "overlaps that moved (A runs while B runs on another warp of the CTA)", ov)
    for n in d.notes:
        con.print(f"  note: {n}", style="dim", soft_wrap=True)


def to_markdown(d: Any) -> str:
    out = [f"# {_diff_title(d)}", ""] + [f"- {line}" for line in d.summary()] + ["", "## Scopes", "",
                                                                                   md(scope_rows(d)), ""]
    ov = overlap_rows(d)
    if ov:
        out += ["## Overlaps that moved", "", md(ov), ""]
    out += [f"> note: {n}" for n in d.notes]
    return "\n".join(out).rstrip() + "\n"


def to_json(d: Any) -> str:
    return json.dumps(d.to_dict(), indent=1) + "\n"
