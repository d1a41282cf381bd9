"""How often `profctl explain` names the right cause: planted pairs (tests/data/pairs, recorded with plain ncu on the
GPU machine; each pair one known fault, the same work in both kernels) scored against their ground truth.

For each pair of the manifest:

* **first cause**: is ``profctl explain R --kernel A --vs B``'s first cause the planted one, and at the planted line
  (the line marked ``PLANT: <cause>`` in the source; faults of the launch configuration have none);
* **saving**: the first planted cause's predicted saving against the measured gap (the pair's timings outside
  ncu), and ncu's own rule estimate for the same thing beside it: within 35 %?;
* **alone**: does ``profctl explain R --kernel A`` (one kernel, no comparison) name the planted cause among its
  first two.

It runs the CLI itself (`python -m profctl explain ... -f json`), so it also times explain on one pair.

    python benchmarks/explain_accuracy/score.py [--data tests/data/pairs] [--markdown out.md] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 0.35


def explain(report: Path, a: str, b: str | None) -> tuple[dict[str, Any], float]:
    argv = [sys.executable, "-m", "profctl", "explain", str(report), "--kernel", _exact(a), "-f", "json"]
    if b is not None:
        argv += ["--vs", _exact(b)]
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"explain {a} vs {b}: exit {r.returncode}: {r.stderr.strip()[:300]}")
    return json.loads(r.stdout), dt


def _exact(name: str) -> str:
    import re

    return f"^{re.escape(name)}$"


def at_line(cause: dict[str, Any], pair: dict[str, Any]) -> bool | None:
    """Whether the cause names the planted line among its lines (None: the fault has no line)."""
    if pair.get("line") is None:
        return None
    want = (Path(pair["file"]).name, int(pair["line"]))
    return any((Path(x["file"]).name, int(x["line"])) == want for x in cause.get("lines") or [])


def score(pair: dict[str, Any], data: Path) -> dict[str, Any]:
    report = data / pair["report"]
    doc, secs = explain(report, pair["a"], pair["b"])
    alone, _ = explain(report, pair["a"], None)
    causes = doc["causes"]
    gap = pair["time_a_us"] - pair["time_b_us"]
    first = causes[0] if causes else None
    planted = next((c for c in causes if c["id"] == pair["cause"]), None)
    ids_alone = [c["id"] for c in alone["causes"]]
    out = {"id": pair["id"], "cause": pair["cause"], "attention": pair.get("attention", False),
           "first": first["id"] if first else None, "first_ok": bool(first and first["id"] == pair["cause"]),
           "line_ok": at_line(first, pair) if first and first["id"] == pair["cause"] else
           (False if pair.get("line") is not None else None),
           "gap_us": gap, "predicted_us": planted["saving_us"] if planted else None,
           "ncu_us": planted.get("ncu_saving_us") if planted else None,
           "ncu_rule": planted.get("ncu_rule") if planted else None,
           "alone": ids_alone[:3], "alone_ok": pair["cause"] in ids_alone[:2], "seconds": secs,
           "ncu_gap_us": (doc["a"] or {}).get("duration_us")}
    out["saving_ok"] = _within(out["predicted_us"], gap)
    out["ncu_ok"] = _within(out["ncu_us"], gap)
    return out


def _within(pred: float | None, gap: float) -> bool:
    return pred is not None and gap > 0 and abs(pred - gap) <= TOLERANCE * gap


def table(rows: list[dict[str, Any]]) -> str:
    def f(x: Any) -> str:
        return "-" if x is None else (f"{x:,.1f}" if isinstance(x, float) else str(x))

    def yn(x: bool | None) -> str:
        return "n/a" if x is None else ("yes" if x else "**no**")

    out = ["| pair | planted cause | first cause | right? | at the line? | gap (us) | predicted (us) | within 35 %? "
           "| ncu's estimate (us) | ncu within 35 %? | alone: first two | right? |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['id']} | {r['cause']} | {r['first']} | {yn(r['first_ok'])} | {yn(r['line_ok'])} | "
                   f"{f(r['gap_us'])} | {f(r['predicted_us'])} | {yn(r['saving_ok'])} | {f(r['ncu_us'])} | "
                   f"{yn(r['ncu_ok'])} | {', '.join(r['alone'][:2])} | {yn(r['alone_ok'])} |")
    n = len(rows)
    firsts = sum(r["first_ok"] for r in rows)
    lines = [r for r in rows if r["line_ok"] is not None]
    out += ["", f"first cause right: {firsts} of {n}; at the planted line: {sum(bool(r['line_ok']) for r in lines)} "
                f"of {len(lines)} with a line; saving within 35 % of the gap: {sum(r['saving_ok'] for r in rows)} of "
                f"{n} (ncu's estimates: {sum(r['ncu_ok'] for r in rows)} of {n}, "
                f"{sum(r['ncu_us'] is not None for r in rows)} with one); alone, planted cause among the first two: "
                f"{sum(r['alone_ok'] for r in rows)} of {n}; explain per pair: median "
                f"{sorted(r['seconds'] for r in rows)[n // 2]:.2f} s, max {max(r['seconds'] for r in rows):.2f} s"]
    return "\n".join(out) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=ROOT / "tests" / "data" / "pairs")
    p.add_argument("--markdown", type=Path)
    p.add_argument("--json", type=Path)
    p.add_argument("--only", help="comma list of pair ids")
    a = p.parse_args()
    pairs = json.loads((a.data / "manifest.json").read_text())["pairs"]
    if a.only:
        keep = set(a.only.split(","))
        pairs = [x for x in pairs if x["id"] in keep]
    pairs = [x for x in pairs if not x.get("costs_nothing") and x.get("in_accuracy_set", True)]
    rows = [score(x, a.data) for x in pairs]
    md = table(rows)
    print(md)
    if a.markdown:
        a.markdown.write_text(md)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
