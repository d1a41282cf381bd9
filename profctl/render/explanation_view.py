"""``profctl explain``: the causes first (what to change, where, what it saves, and why profctl thinks so), then the
mechanisms (two kernels side by side, the gap in ranked parts, hot lines, ncu's findings), as a terminal text,
Markdown or JSON. Text lines wrap at the terminal's width (120 columns in a pipe or a file)."""

from __future__ import annotations

import json
import textwrap
from typing import Any

from profctl.analysis import source
from profctl.analysis.explanation import Explanation
from profctl.render import tables
from profctl.render.source_view import finding_rows, line_rows
from profctl.render.source_view import to_dict as view_dict

#: hot lines and findings shown per kernel under the comparison
TOP = 3
#: causes shown in full (the rest: one line each)
SHOWN = 5


def _who(p: Any) -> str:
    rng = f" [{p.nvtx_path}]" if p.nvtx_path else ""
    dev = f" on {p.device}" if p.device else ""
    return f"{p.base_name}{rng}{dev} ({tables.display_path(p.report)})"


def table_rows(e: Explanation) -> list[dict[str, Any]]:
    if e.b is None:
        return [{"": r.quantity, "A": r.a, "unit": r.unit} for r in e.rows]
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
        if p is None or r is None or not p.duration_ns:
            continue
        h = r.against(p.duration_ns * 1e-9)
        roofs = ", ".join(f"{x.name} {x.seconds * 1e6:.1f} us" for x in r.roofs)
        out.append(f"{who}: {h.sentence()} (roofs on {r.device}: {roofs})")
    return out


def _out_of(e: Explanation) -> tuple[float | None, str]:
    """What a saving is a share of: the gap (A against B) or the kernel's time (A alone)."""
    gap = e.gap_us
    if e.b is not None and gap is not None and gap > 0 and not e.same_time:
        return gap, "of the gap"
    return (e.a.duration_ns / 1e3 if e.a.duration_ns else None), "of A's time"


def cause_blocks(e: Explanation) -> list[tuple[str, list[str]]]:
    """Each cause as (its first line, its detail lines): rank, id and title, where, the saving and ncu's estimate,
    the evidence, the fix, a caveat."""
    total, what = _out_of(e)
    out = []
    for i, c in enumerate(e.causes, 1):
        share = f" ({100 * c.saving_us / total:.0f}% {what})" if total else ""
        head = f"{i}. {c.id}: {c.title}" + (f" at {c.where()}" if c.lines else " (the kernel as a whole)")
        unpredicted = c.id == "latency-bound" and not c.saving_us
        saves = "not predicted" if unpredicted else f"saves about {c.saving_us:,.1f} us{share}"
        if not unpredicted and c.fixed_us is not None:
            saves = saves.replace("saves about", "alone saves about") if c.with_others_us is not None else saves
            saves += f": fixed, about {c.fixed_us:,.1f} us" + (f", then {c.then_binds} binds" if c.then_binds else "")
        if not unpredicted and c.with_others_us is not None and c.with_others_us > 1.1 * c.saving_us:
            saves += f"; with the other named fixes it adds {c.with_others_us:,.1f} us"
        if c.ncu_us is not None:
            saves += f"; ncu's {c.ncu_rule} estimates {c.ncu_us:,.1f} us"
        detail = [saves, *(f"evidence: {x}" for x in c.evidence), f"fix: {c.fix}"]
        if c.track:
            detail.append(f"track record: {c.track}")
        if c.note:
            detail.append(f"note: {c.note}")
        if c.definition.attention:
            detail.append(f"in attention: {c.definition.attention}")
        out.append((head, detail if i <= SHOWN else [saves]))
    return out


def floor_lines(e: Explanation) -> list[str]:
    """Each kernel's floor from its own counters: the binding unit, the next ones, the roofline position."""
    out = []
    for who, p in (("A", e.a), ("B", e.b)):
        fl = e.floors.get(who.lower())
        if p is None or fl is None or not fl.units:
            continue
        units = sorted(fl.units, key=lambda u: -u.attainable_us)[:4]
        out.append(f"{who}'s floor by unit (the least time the work it did needs at the clock it ran, 100 % of "
                   "peak): " + "; ".join(f"{u.label} {u.floor_us:,.1f} us ({u.pct:.0f} %"
                                         + (f", {u.work}" if u.work else "") + ")" for u in units))
        if fl.roofline is not None and fl.roofline.sentence():
            out.append(f"{who}'s roofline: {fl.roofline.sentence()}")
        if fl.missing and len(fl.missing) < len(fl.units) + len(fl.missing):
            out.append(f"{who}'s report lacks the counters of: " + ", ".join(m.split(" (")[0] for m in fl.missing))
    return out


def together_line(e: Explanation) -> str | None:
    """The named fixes together, from the one model of A's time: what they save and what then binds."""
    j = e.together
    if j is None or len(j.ids) < 2 or not e.a.duration_ns:
        return None
    t = e.a.duration_ns / 1e3
    total, what = _out_of(e)
    share = f" ({100 * j.saving_us / total:.0f} % {what})" if total else ""
    return (f"together, the {len(j.ids)} named fixes ({', '.join(j.ids)}) save about {j.saving_us:,.1f} us{share}: "
            f"A from {t:,.1f} us to about {j.time_us:,.1f} us, then {j.binds} binds. Each saving above is that fix "
            "alone; they do not add")


def shared_line(e: Explanation) -> str | None:
    if not e.shared:
        return None
    return ("both kernels have, to the same degree (not causes of the gap): "
            + "; ".join(f"{c.id}" + (f" at {c.where()}" if c.lines else "") for c in e.shared[:4]))


def a_own_lines(e: Explanation) -> list[str]:
    return [f"A's own cause {i} (of A's time, not of a gap): {c.id}" + (f" at {c.where()}" if c.lines else "")
            + f", saves about {c.saving_us:,.1f} us: " + (c.evidence[0] if c.evidence else "")
            for i, c in enumerate(e.a_own[:3], 1)]


def extra_lines(e: Explanation) -> list[str]:
    """What follows the ranked causes: the fixes together, the shared faults, each kernel's own where there is no
    gap, the roof's slack."""
    return [y for y in (together_line(e), shared_line(e)) if y] + a_own_lines(e) + \
        [y for y in (slack_line(e),) if y] + b_cause_lines(e)


def slack_line(e: Explanation) -> str | None:
    if not e.slack:
        return None
    fl = e.floors.get("a")
    left = (fl.duration_us - fl.attainable_us) if fl is not None else None
    return ("also seen, within the roof's slack (none can save more than the "
            + (f"{max(left, 0.0):,.1f} us " if left is not None else "")
            + "left to the roof): " + ", ".join(f"{c.id} (at most {c.saving_us:,.1f} us)" for c in e.slack[:4]))


def b_cause_lines(e: Explanation) -> list[str]:
    return [f"B's own cause {i}: {c.id}" + (f" at {c.where()}" if c.lines else "") + f", saves about "
            f"{c.saving_us:,.1f} us of B's time: " + (c.evidence[0] if c.evidence else "")
            for i, c in enumerate(e.b_causes, 1)]


def _headline_cause(e: Explanation) -> str | None:
    if not e.causes:
        return None
    c = e.causes[0]
    if c.id == "latency-bound" and not c.saving_us:
        return f"cause: {c.title} ({c.evidence[0] if c.evidence else ''})"
    total, what = _out_of(e)
    share = f", {100 * c.saving_us / total:.0f}% {what}" if total else ""
    where = f" at {c.where()}" if c.lines else ""
    return f"first cause: {c.id}{where}: fixing it saves about {c.saving_us:,.1f} us{share}"


def to_console(e: Explanation, con: Any) -> None:
    width = min(getattr(con, "width", 120) or 120, 120)

    def say(text: str, indent: str = "", style: str | None = None) -> None:
        for line in textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent + "  ") or [""]:
            con.print(line, markup=False, style=style, highlight=False)

    say(f"A: {_who(e.a)}")
    if e.b is not None:
        say(f"B: {_who(e.b)}")
    if e.verdict:
        say(f"verdict: {e.verdict}", style="bold")
    for x in e.chosen:
        say(f"chosen: {x}")
    say(e.headline, style="bold")
    for x in e.premises:
        say(f"premise: {x}", style="yellow")
    for x in e.loop:
        say(f"before and after: {x}", style="bold")
    head = _headline_cause(e)
    if head:
        say(head, style="bold")
    if e.causes:
        total, what = _out_of(e)
        say("")
        say("Causes, ranked by the time fixing each is predicted to save"
            + (f" ({what}: {total:,.1f} us)" if total else "") + ":", style="bold")
        for first, detail in cause_blocks(e):
            say(first, " ", style="bold")
            for d in detail:
                say(d, "    ")
    elif e.b is not None and not e.same_time:
        say("No cause of the catalog fits this gap (docs/diagnosis.md, Causes): the mechanisms below say where "
            "the time goes.")
    for x in extra_lines(e):
        say(x, " ")
    say("")
    say("Mechanisms (what ncu measured):", style="bold")
    tables.print_table(con, "side by side" if e.b is not None else "figures", table_rows(e))
    if e.factors:
        tables.print_table(con, "where the gap comes from (parts add up; + makes A slower)", factor_rows(e))
    for n in [*e.notes, *roof_lines(e), *floor_lines(e)]:
        say(n, "  ")
    for who, p in (("A", e.a), ("B", e.b)):
        if p is None:
            continue
        v = source.view(p, TOP)
        if (v.lines or v.sass) and p.total_samples:
            what_ = "hot lines" if v.lines else "hot instructions"
            tables.print_table(con, f"{who}: {what_}", line_rows(v, TOP, terse=True))
        rows = finding_rows(v, TOP, terse=True)
        if rows:
            tables.print_table(con, f"{who}: ncu's top findings", rows)


def to_markdown(e: Explanation) -> str:
    out = [f"**A**: {_who(e.a)}  "]
    if e.b is not None:
        out.append(f"**B**: {_who(e.b)}  ")
    if e.verdict:
        out += ["", f"**verdict**: {e.verdict}", ""]
    out += [f"chosen: {x}  " for x in e.chosen]
    out += ["", f"**{e.headline}**", ""]
    out += [f"> premise: {x}" for x in e.premises]
    out += [f"\n**before and after**: {x}" for x in e.loop]
    if e.causes:
        total, what = _out_of(e)
        out += ["", "### Causes, ranked by the time fixing each is predicted to save"
                + (f" ({what}: {total:,.1f} us)" if total else ""), ""]
        for first, detail in cause_blocks(e):
            out.append(f"{first}  ")
            out += [f"   - {d}" for d in detail]
    out += [f"\n{x}" for x in extra_lines(e)]
    out += ["", "### Mechanisms", "", tables.markdown(table_rows(e))]
    if e.factors:
        out += ["\nWhere the gap comes from (the parts add up; + makes A slower):\n", tables.markdown(factor_rows(e))]
    out += [f"- {n}" for n in [*e.notes, *roof_lines(e), *floor_lines(e)]]
    for who, p in (("A", e.a), ("B", e.b)):
        if p is None:
            continue
        v = source.view(p, TOP)
        if p.total_samples:
            out += [f"\n{who}: {'hot lines' if v.lines else 'hot instructions'}\n",
                    tables.markdown(line_rows(v, TOP))]
        rows = finding_rows(v, TOP)
        if rows:
            out += [f"\n{who}: ncu's top findings\n", tables.markdown(rows)]
    return "\n".join(out) + "\n"


def to_dict(e: Explanation) -> dict[str, Any]:
    """``profctl.explain/4``: ``verdict`` (at the roof, how far from it, or the same time as B), ``causes`` (ranked;
    id, title, lines, saving_us bounded by the floor, fixed_us, evidence, fix, ncu's estimate), ``slack``,
    ``b_causes``, ``floor`` (each kernel's, by unit, with its roofline) and ``premises`` first, then the mechanisms as
    in /1 (``a``, ``b``, ``rows``, ``factors``, ``notes``)."""
    def side(who: str, p: Any) -> dict[str, Any] | None:
        if p is None:
            return None
        r = e.roofs.get(who)
        d = view_dict(source.view(p, TOP), TOP)
        d["device"] = p.device
        d["roofs"] = r.to_dict(p.duration_ns * 1e-9 if p.duration_ns else None) if r else None
        return d

    total, what = _out_of(e)
    fa = e.floors.get("a")
    return {"schema": "profctl.explain/4", "headline": e.headline, "gap_us": e.gap_us,
            "verdict": e.verdict, "healthy": bool(fa is not None and fa.at_roof and not e.causes and e.b is None),
            "chosen": e.chosen, "before_and_after": e.loop,
            "causes": [c.to_dict() for c in e.causes],
            "slack": [c.to_dict() for c in e.slack], "b_causes": [c.to_dict() for c in e.b_causes],
            "together": e.together.to_dict() if e.together is not None else None,
            "shared": [c.to_dict() for c in e.shared], "a_own": [c.to_dict() for c in e.a_own],
            "same_time": e.same_time,
            "floor": {k: (v.to_dict() if v is not None else None) for k, v in e.floors.items()},
            "saving_out_of": {"us": total, "what": what.replace("of ", "")},
            "premises": e.premises,
            "a": side("a", e.a), "b": side("b", e.b),
            "rows": [{"quantity": r.quantity, "a": r.a, "b": r.b if e.b is not None else None, "a_value": r.va,
                      "b_value": r.vb if e.b is not None else None, "unit": r.unit} for r in e.rows],
            "factors": [{"name": f.name, "us": f.us, "share": f.share, "says": f.says} for f in e.factors],
            "remainder_us": e.remainder_us, "notes": e.notes}


def to_json(e: Explanation) -> str:
    return json.dumps(to_dict(e), indent=1, default=str) + "\n"
