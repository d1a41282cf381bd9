"""A run-against-run comparison (profctl.analysis.compare) as a table, Markdown, CSV or JSON."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from rich.markup import escape

from profctl.analysis.compare.rows import VERDICTS, Comparison
from profctl.analysis.compare.stats import pct, pct_change
from profctl.render.tables import console, markdown, print_table


def display_rows(cmp: Comparison) -> list[dict[str, Any]]:
    out = []
    for r in cmp.rows:
        c = r.case
        ci = f"{pct_change(r.ci_lo)}..{pct_change(r.ci_hi)}" if r.ci_lo is not None else "n/a"
        if "kernel" in c:
            d: dict[str, Any] = {"kernel": c["kernel"], "range": c.get("range") or ""}
        else:
            nm = c["name"] + (f" ({c['backend_base']}->{c['backend_new']})"
                              if c["backend_base"] != c["backend_new"] else "")
            d = {"case": nm, "shape": c["shape"], "pass": c["pass"]}
        d.update({
            "base ms": _ms(r.base_ms), "new ms": _ms(r.new_ms), "time change": pct_change(r.ratio), "CI": ci,
            "noise floor": pct(r.noise_floor) if r.noise_floor is not None else "n/a",
        })
        if "kernel" not in c:
            d["base TFLOP/s"] = _tf(r.base_tflops)
            d["new TFLOP/s"] = _tf(r.new_tflops)
            d["TFLOP/s change"] = pct_change(1.0 / r.ratio) if r.ratio else "-"
        d["verdict"] = r.verdict
        d["note"] = "; ".join(r.notes)
        out.append(d)
    return out


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


def _tf(v: float | None) -> str:
    return "-" if v is None else (f"{v:,.1f}" if v >= 1 else f"{v:.3f}")


def header_lines(cmp: Comparison) -> list[str]:
    b, n = cmp.base.describe(), cmp.new.describe()
    out = [f"base: {cmp.base.name}" + (f" ({b['gpu']})" if b["gpu"] else ""),
           f"new:  {cmp.new.name}" + (f" ({n['gpu']})" if n["gpu"] else ""),
           f"method: {cmp.method}; unchanged band ±{cmp.threshold * 100:g}%"
           + (f" ({cmp.threshold_why}; --threshold to change)" if cmp.threshold_why else "")]
    return out


def footer_lines(cmp: Comparison) -> list[str]:
    c = cmp.counts()
    out = ["result: " + ", ".join(f"{c[v]} {v}" for v in VERDICTS if c.get(v)) if c else "result: nothing paired"]
    nr = cmp.noise_range()
    if nr is not None:
        out.append(f"noise floor: the smallest change each row could have seen was {pct(nr[0])}"
                   + (f" to {pct(nr[1])}" if nr[1] > nr[0] else "") + " (half its interval's width)")
    held = [r for r in cmp.rows if r.verdict == "inconclusive" and r.run_limited]
    if held and cmp.runs == (1, 1) and cmp.noise is not None and not cmp.noise.off:
        out.append(f"one run per side: {len(held)} row(s) inconclusive because a run's median moves by about "
                   f"±{cmp.noise.sigma * 100:g}% between processes ({cmp.noise.source}); give several runs per side "
                   "(profctl compare A1,A2,A3 B1,B2,B3) to measure that noise and judge smaller changes")
    out += [f"forced past: {f}" for f in cmp.forced]
    out += [f"warning: {w}" for w in cmp.warnings]
    return out


def to_json(cmp: Comparison) -> str:
    return json.dumps(cmp.to_dict(), indent=1, default=str) + "\n"


def to_csv(cmp: Comparison) -> str:
    buf = io.StringIO()
    rows = [r.to_dict() for r in cmp.rows]
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return buf.getvalue()


def to_markdown(cmp: Comparison) -> str:
    head = "\n".join(f"- {x}" for x in header_lines(cmp))
    foot = "\n".join(f"- {x}" for x in footer_lines(cmp))
    return f"## profctl compare\n\n{head}\n\n{markdown(display_rows(cmp))}\n{foot}\n"


def to_console(cmp: Comparison, con: Any = None) -> None:
    """The table and its header and footer lines on `con` (default: the terminal)."""

    con = con or console()
    for line in header_lines(cmp):
        con.print(escape(line))
    print_table(con, "profctl compare", display_rows(cmp))
    colours = {"slower": "red", "failed": "red", "faster": "green", "inconclusive": "yellow"}
    for line in footer_lines(cmp):
        style = "yellow" if line.startswith(("warning", "forced")) else None
        if line.startswith("result") and any(cmp.counts().get(v) for v in ("slower", "failed")):
            style = colours["slower"]
        con.print(escape(line), style=style)
