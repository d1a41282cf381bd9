"""Issue 41's table: bench rows of FlexAttention against FA4, cuDNN, SDPA flash, profctl's Triton and eager over
full, causal, window and document masks, laid out seed-style (one panel per head dim and pass, a row per sequence
length and mask, a column per backend) as Markdown for benchmarks/RESULTS.md.

    python benchmarks/flex_table.py rows.json [more.json ...] > table.md

A cell is ``ms / TFLOP/s of useful work / % of the binding roof``; a backend that cannot take the mask natively is
``n/r`` (not run here: its reason is under the table once), one that failed ``err``. Flex's compile time and block
mask build time, measured apart from its median, get columns of their own, with its tile density (the share of
128 x 128 tiles its block mask computes) and the useful share of the pairs those tiles hold.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from profctl.schema.bench import BenchRow

ORDER = ("flex", "flex-fa4", "fa4", "sdpa-cudnn", "sdpa-flash", "flash-attn", "triton", "eager")


def mask_name(r: dict[str, Any]) -> str:
    parts = ["causal" if r.get("causal") else "full"]
    if r.get("window"):
        parts.append(f"window {r['window']}")
    if r.get("docs"):
        d = r["docs"]
        parts.append(f"{d[0]} docs" if len(d) == 1 else "docs " + "+".join(map(str, d)))
    return ", ".join(parts)


def cell(r: dict[str, Any] | None) -> str:
    if r is None:
        return "-"
    b = BenchRow.of(r)
    if b.status == "unsupported":
        return "n/r"
    if b.status != "ok":
        return str(b.status or "err")
    ms, tf, roof = b.median_ms, b.tflops, b.pct_of_roof
    out = f"{ms:.3f} / {tf:.0f}" if ms is not None and tf is not None else "?"
    if roof is not None:
        out += f" / {roof:.0f}%"
    if r.get("check") == "fail":
        out += " (wrong)"
    return out


def table(rows: list[dict[str, Any]]) -> str:
    backends = [b for b in ORDER if any(r.get("backend") == b for r in rows)]
    backends += sorted({str(r.get("backend")) for r in rows} - set(backends))
    panels: dict[tuple[Any, ...], dict[tuple[Any, ...], dict[str, dict[str, Any]]]] = defaultdict(dict)
    for r in rows:
        panel = (r.get("head_dim"), r.get("pass"), r.get("dtype"), r.get("batch"), r.get("heads"), r.get("kv_heads"))
        line = (r.get("seqlen_q"), bool(r.get("causal")), r.get("window") or 0, tuple(r.get("docs") or ()))
        panels[panel].setdefault(line, {})[str(r.get("backend"))] = r
    out: list[str] = []
    for (d, p, dt, b, h, kv), lines in sorted(panels.items(), key=lambda kv_: str(kv_[0])):
        out += [f"### d{d} {p} {dt} (batch {b}, heads {h}/{kv})", "",
                "ms / TFLOP/s of useful work / % of the binding roof; flex: compile s and block-mask ms apart", "",
                "| seqlen | mask | " + " | ".join(backends)
                + " | flex compile s | flex mask ms | flex tiles | useful |",
                "|---|---|" + "---|" * len(backends) + "---|---|---|---|"]
        for key in sorted(lines):
            got = lines[key]
            any_row = next(iter(got.values()))
            fx = got.get("flex") or {}
            comp = f"{fx['compile_ms'] / 1e3:.1f}" if fx.get("compile_ms") is not None else "-"
            mask = f"{fx['block_mask_ms']:.1f}" if fx.get("block_mask_ms") is not None else "-"
            dens = f"{100 * fx['mask_density']:.0f} %" if fx.get("mask_density") is not None else "-"
            useful = (f"{100 * fx['visible_pairs'] / fx['computed_pairs']:.0f} %"
                      if fx.get("computed_pairs") and fx.get("visible_pairs") else "-")
            out.append(f"| {key[0]} | {mask_name(any_row)} | " + " | ".join(cell(got.get(be)) for be in backends)
                       + f" | {comp} | {mask} | {dens} | {useful} |")
        out.append("")
    refused = {(str(r.get("backend")), str(r.get("reason"))) for r in rows if r.get("status") == "unsupported"}
    if refused:
        out.append("n/r, not run here:")
        out += [f"- {b}: {why}" for b, why in sorted(refused)]
    return "\n".join(out)


def main(paths: list[str]) -> int:
    rows: list[dict[str, Any]] = []
    for p in paths:
        with open(p) as f:
            rows += json.load(f)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
