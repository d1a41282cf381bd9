"""Time and peak memory of the torch trace reader on traces built large from the shared fixture.

    python benchmarks/torch_trace_scale.py [--sizes-mb 100,1000] [--work benchmarks/out/torch_scale] [--gz]

Builds ``N`` copies of the fixture's events (../shared/fixtures/h100-sm90/torch_trace.json.gz), each shifted in
time past the previous one, with correlation ids, External ids and flow ids offset so every copy links up as
the original does, and writes them as one Kineto-style trace of about the requested size. Each trace is then
read in a fresh process (``profctl.readers.torch_trace.read``, by range), which reports its wall time and peak
RSS; for comparison, the same for a plain ``json.load`` of the smallest trace. Results go to stdout as a
Markdown table (copied into benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from profctl import proc  # noqa: E402

FIXTURE = Path(os.environ.get("PROFCTL_SHARED_FIXTURES", ROOT.parent / "shared" / "fixtures" / "h100-sm90"))
FIXTURE = FIXTURE / "torch_trace.json.gz"

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
if sys.argv[1] == "reader":
    from profctl.readers import torch_trace
    s = torch_trace.read(sys.argv[2], by_range=True, notes=[])
    n = sum(k.count for k in s.kernels)
else:
    import gzip
    op = gzip.open if sys.argv[2].endswith(".gz") else open
    with op(sys.argv[2], "rt") as f:
        n = len(json.load(f)["traceEvents"])
print("RESULT", json.dumps({"wall_s": time.perf_counter() - t0, "n": n,
      "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def build(out: Path, target_mb: float, gz: bool) -> dict[str, Any]:
    with gzip.open(FIXTURE, "rt") as f:
        doc = json.load(f)
    events: list[dict[str, Any]] = doc.pop("traceEvents")
    meta = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    ts = [float(e["ts"]) for e in body if "ts" in e and isinstance(e["ts"], (int, float))]
    span = max(float(e["ts"]) + float(e.get("dur", 0)) for e in body if isinstance(e.get("ts"), (int, float)))
    span = span - min(ts) + 1000.0
    corr = 1 + max(int(e.get("args", {}).get("correlation", 0) or 0) for e in body)
    ext = 1 + max(int(e.get("args", {}).get("External id", 0) or 0) for e in body)
    fid = 1 + max(int(e["id"]) for e in body if e.get("ph") in ("s", "f") and isinstance(e.get("id"), int))
    one = sum(len(json.dumps(e)) + 2 for e in body)
    copies = max(1, int(target_mb * 1e6 / one))
    opener: Any = gzip.open if gz else open
    t0 = time.perf_counter()
    tmp = out.with_name(out.name + ".partial")
    with opener(tmp, "wt", encoding="utf-8") as f:
        f.write("{\n" + ",\n".join(f'  "{k}": {json.dumps(v)}' for k, v in doc.items()) + ',\n  "traceEvents": [\n')
        first = True
        for e in meta:
            f.write(("" if first else ",\n") + json.dumps(e))
            first = False
        for k in range(copies):
            for e in body:
                c = dict(e)
                if isinstance(c.get("ts"), (int, float)):
                    c["ts"] = round(float(c["ts"]) + k * span, 3)
                if c.get("ph") in ("s", "f") and isinstance(c.get("id"), int):
                    c["id"] = c["id"] + k * fid
                a = c.get("args")
                if isinstance(a, dict) and ("correlation" in a or "External id" in a):
                    a = dict(a)
                    if isinstance(a.get("correlation"), int) and a["correlation"] > 0:
                        a["correlation"] += k * corr
                    if isinstance(a.get("External id"), int):
                        a["External id"] += k * ext
                    c["args"] = a
                f.write(",\n" + json.dumps(c))
        f.write("\n  ]\n}\n")
    tmp.replace(out)
    kernels = sum(1 for e in body if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")) * copies
    return {"copies": copies, "events": len(meta) + copies * len(body), "gpu_ops": kernels,
            "bytes": out.stat().st_size, "build_s": time.perf_counter() - t0}


def measure(mode: str, path: Path, log: Path) -> dict[str, Any]:
    res = proc.run([sys.executable, "-c", CHILD, mode, str(path)], log=log, timeout_s=3600,
                   env={"PYTHONPATH": str(ROOT)})
    line = [ln for ln in res.log_text().splitlines() if ln.startswith("RESULT ")][-1]
    out: dict[str, Any] = json.loads(line[len("RESULT "):])
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes-mb", default="100,1000")
    ap.add_argument("--work", default=str(ROOT / "benchmarks" / "out" / "torch_scale"))
    ap.add_argument("--gz", action="store_true", help="also build and read .json.gz versions")
    ap.add_argument("--baseline", action="store_true", help="also json.load the smallest trace")
    ap.add_argument("--keep", action="store_true", help="keep the built traces")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    sizes = [float(x) for x in a.sizes_mb.split(",")]
    for mb in sizes:
        for gz in ([False, True] if a.gz else [False]):
            p = work / f"trace_{int(mb)}mb.json{'.gz' if gz else ''}"
            b = build(p, mb, gz)
            r = measure("reader", p, work / "scale.log")
            row = {"file": p.name, "MB on disk": round(b["bytes"] / 1e6, 1), "events": b["events"],
                   "GPU ops": b["gpu_ops"], "read s": round(r["wall_s"], 2),
                   "MB/s": round(b["bytes"] / 1e6 / r["wall_s"], 1), "peak RSS MB": round(r["maxrss_mb"])}
            if a.baseline and mb == min(sizes):
                j = measure("json.load", p, work / "scale.log")
                row["json.load s"] = round(j["wall_s"], 2)
                row["json.load peak RSS MB"] = round(j["maxrss_mb"])
            rows.append(row)
            print(json.dumps(row), flush=True)
            if not a.keep:
                p.unlink()
    cols: list[str] = []
    for r in rows:
        cols += [c for c in r if c not in cols]
    print("\n| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
