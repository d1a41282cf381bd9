"""Draws profctl.analysis.range_explain: why a range of a timeline takes its time (the verdict first, then the
causes ranked by what fixing each saves, each with its evidence and where), and a pair of ranges (what made B
faster). Forms: ``to_console``, ``to_markdown``, ``to_text``, ``to_json``; ``range_rows`` the causes' rows."""

from __future__ import annotations

import json
from typing import Any

from profctl.analysis.range_explain import RangeExplanation, RangePair
from profctl.kernels import short_name


def _us(ns: float) -> str:
    return f"{ns / 1e3:,.1f} us" if abs(ns) < 1e6 else f"{ns / 1e6:,.2f} ms"


def headline(e: RangeExplanation) -> str:
    n = max(e.instances, 1)
    per = f" ({_us(e.time_ns / n)} per instance, {e.instances} instances)" if e.instances > 1 else ""
    return (f"{e.name}: {e.verdict}: {_us(e.time_ns)}{per}; the GPU is busy with the range's own work "
            f"{e.busy_share:.0%} of it ({_us(e.busy_ns)}, {e.launches} GPU operations), idle {_us(e.idle_ns)}")


def range_rows(e: RangeExplanation) -> list[dict[str, Any]]:
    return [{"rank": i, "cause": c.title, "time": _us(c.time_ns), "share": f"{c.time_ns / max(e.time_ns, 1):.0%}",
             "saves": _us(c.saving_ns), "saves_share": f"{c.saving_ns / max(e.time_ns, 1):.0%}",
             "where": c.where[0][0] if c.where else ""} for i, c in enumerate(e.causes, 1)]


def to_text(e: RangeExplanation) -> str:
    lines = [headline(e), ""]
    if not e.causes:
        lines.append("no cause: the range's time is its kernels' time" if e.verdict == "GPU-bound"
                     else "no cause worth naming")
    for i, c in enumerate(e.causes, 1):
        lines.append(f"{i}. {c.title}: {_us(c.time_ns)} ({c.time_ns / max(e.time_ns, 1):.0%} of the range); "
                     f"fixing it saves {_us(c.saving_ns)} ({c.saving_ns / max(e.time_ns, 1):.0%})")
        lines += [f"   evidence: {x}" for x in c.evidence]
        lines += [f"   where: {w} ({_us(t)})" for w, t in c.where[:4]]
        lines.append(f"   fix: {c.fix}")
    if e.causes:
        below = "the kernels' floors plus what stays serial" if e.kernel_floors else "the kernels kept"
        lines.append(f"all fixed: about {_us(e.all_fixed_ns)} (bounded below by {below}, {_us(e.floor_ns)})")
    lines += ["", "kernels (the range's own GPU operations):"]
    for name, count, total in e.kernels[:8]:
        shown = name if name.startswith("[") else short_name(name, 70)
        lines.append(f"  {total / max(e.time_ns, 1):5.1%}  {_us(total):>11}  x{count:<6} {shown}")
    if e.kernel_floors:
        lines += ["", f"each kernel against its floor ({e.ncu_report}):"]
        for r in e.kernel_floors[:10]:
            what = (f"floor {r['floor_share']:.0%} of its time; {r['verdict']}" if r.get("matched")
                    and r.get("floor_share") is not None else (r.get("verdict") or r.get("why") or ""))
            lines.append(f"  {r['share']:5.1%}  {short_name(r['name'], 60)}: {what}")
    if e.launch_cost_ns:
        lines.append(f"host time per launch (median, measured): {_us(e.launch_cost_ns)}")
    lines += [f"note: {n}" for n in e.notes]
    return "\n".join(lines) + "\n"


def to_markdown(e: RangeExplanation) -> str:
    out = [f"**{headline(e)}**", ""]
    if e.causes:
        out += ["| # | cause | time | saves | where |", "|---|---|---|---|---|"]
        out += [f"| {r['rank']} | {r['cause']} | {r['time']} ({r['share']}) | {r['saves']} ({r['saves_share']}) "
                f"| {r['where']} |" for r in range_rows(e)]
    else:
        out.append("no cause: the range's time is its kernels' time")
    return "\n".join(out) + "\n\n```\n" + to_text(e) + "```\n"


def to_json(e: RangeExplanation) -> str:
    return json.dumps(e.to_dict(), indent=1, default=str) + "\n"


def to_console(e: RangeExplanation, con: Any) -> None:
    con.print(to_text(e), markup=False, highlight=False, soft_wrap=True)


# ------------------------------------------------------------------------------------------------ a pair
def pair_text(p: RangePair) -> str:
    a, b = p.a, p.b
    faster = "faster" if p.gap_ns > 0 else "slower"
    lines = [f"{b.name} is {_us(abs(p.gap_ns))} per instance {faster} than {a.name} "
             f"({a.verdict} -> {b.verdict})", "", "per instance:        A           B      saved"]
    for part, x, y in p.parts:
        lines.append(f"  {part:<45} {_us(x):>11} {_us(y):>11} {_us(x - y):>11}")
    return "\n".join(lines) + "\n\nA: " + to_text(a) + "\nB: " + to_text(b)


def pair_json(p: RangePair) -> str:
    return json.dumps(p.to_dict(), indent=1, default=str) + "\n"
