"""Summarise a Proton trace with profctl's reader and analysis (JSON on stdout), and optionally write the events
of its first CTAs as a small gzipped trace (test data, a picture of a few CTAs).

    python benchmarks/proton_summary.py TRACE [--clock-mhz F] [--keep-ctas N --reduced OUT.chrome_trace.gz]
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import sys
import time
from typing import Any


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--clock-mhz", type=float, default=None)
    ap.add_argument("--keep-ctas", type=int, default=0)
    ap.add_argument("--reduced", default=None)
    a = ap.parse_args()
    from profctl.analysis import timeline
    from profctl.readers import proton_trace

    t0 = time.time()
    tr = proton_trace.read(a.trace)
    t1 = time.time()
    rep = timeline.analyze(tr, clock_mhz=a.clock_mhz)
    t2 = time.time()
    out: dict[str, Any] = {"read_s": round(t1 - t0, 2), "analyze_s": round(t2 - t1, 2), "events": tr.n_events,
           "kernels": [k.name for k in tr.kernels], "call_stacks": [list(k.call_stack) for k in tr.kernels],
           "report": dataclasses.asdict(rep)}
    for k in out["report"]["kernels"]:
        k["timeline"] = k["timeline"][:400]
    for kt in rep.kernels:  # a few lines to read in the session's output
        print(f"{kt.kernel}: {kt.ctas} CTAs x {kt.warps} warps, {kt.events} events, CTA span mean "
              f"{kt.mean_cta_span:.0f} max {kt.max_cta_span} cycles", file=sys.stderr)
        for s in kt.scopes:
            print(f"  {s.name:10s} n={s.count:8d} total={s.total_cycles:14d} mean={s.mean_cycles:9.1f} "
                  f"share={s.share:.3f}", file=sys.stderr)
        for o in kt.overlaps:
            if o.fraction >= 0.05:
                print(f"  {o.a} under {o.b}: {o.fraction:.3f}", file=sys.stderr)
        if kt.path:
            print(f"  path CTA{kt.path.cta}: span {kt.path.span_cycles} {kt.path.by_scope} unscoped "
                  f"{kt.path.unscoped_cycles}", file=sys.stderr)
    print(f"read {out['read_s']} s, analyze {out['analyze_s']} s; notes {rep.notes} warnings {rep.warnings}",
          file=sys.stderr)
    json.dump(out, sys.stdout, default=str)
    if a.keep_ctas and a.reduced:
        with open(a.trace, encoding="utf-8") as f:
            d = json.load(f)
        keep = [e for e in d["traceEvents"] if int(str(e.get("pid", "")).rsplit("CTA", 1)[-1] or -1) < a.keep_ctas]
        d["traceEvents"] = keep
        with gzip.open(a.reduced, "wt", encoding="utf-8") as f:
            json.dump(d, f, separators=(",", ":"))
        print(f"\nreduced: {len(keep)} events", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
