"""What profctl costs on top of the tool it wraps (issue 10): `profctl ncu` against the same ncu command line
alone, and `profctl nsys` against its `nsys profile` + `nsys export` alone, side by side in one process, on
the GPU machine. Each pair alternates (profctl, tool alone) `--rounds` times; the ratio of medians is printed
and written as JSON.

    python3 benchmarks/tool_overhead.py --out $OUT/overhead.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKLOAD = ["--seqlen", "2048", "--backend", "sdpa-flash,sdpa-cudnn,eager"]


def timed(argv: list[str], cwd: Path | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, timeout=900, cwd=cwd)
    return time.perf_counter() - t0


def newest_run(root: Path) -> dict:
    run = sorted(p for p in root.iterdir() if p.is_dir())[-1]
    return json.loads((run / "manifest.json").read_text())


#: where a profctl run's time went, as its manifest says (seconds)
TIMINGS: dict[str, float] = {}


def ncu_pair(work: Path) -> tuple[float, float]:
    root = work / "ncu"
    profctl = [sys.executable, "-m", "profctl", "ncu", "--recipe", "tensor-core", "--clock-control", "none",
               *WORKLOAD, "--reports", str(root), "-f", "json"]
    wall = timed(profctl)
    m = newest_run(root)
    TIMINGS.update({k: float(v) for k, v in m.items() if k.endswith("_s") and isinstance(v, (int, float))})
    argv = list(next(t["argv"] for t in m["tools"] if t["name"] == "ncu"))
    out = work / "alone.ncu-rep"
    argv[argv.index("--export") + 1] = str(out)
    return wall, timed(argv)


def nsys_pair(work: Path) -> tuple[float, float]:
    root = work / "nsys"
    wall = timed([sys.executable, "-m", "profctl", "nsys", *WORKLOAD, "--reports", str(root), "-f", "json"])
    m = newest_run(root)
    TIMINGS.update({k: float(v) for k, v in m.items() if k.endswith("_s") and isinstance(v, (int, float))})
    tools = m["tools"]
    prof = next(t["argv"] for t in tools if t["name"] == "nsys")
    prof = [a if not a.startswith("--output=") else f"--output={work / 'alone'}" for a in prof]

    def alone() -> None:
        subprocess.run(prof, check=True, capture_output=True, timeout=900)
        subprocess.run([prof[0], "export", "--type=sqlite", f"--output={work / 'alone.sqlite'}",
                        "--force-overwrite=true", "--lazy=false", str(work / "alone.nsys-rep")], check=True,
                       capture_output=True, timeout=900)

    t0 = time.perf_counter()
    alone()
    return wall, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    res: dict[str, dict[str, list[float]]] = {"ncu": {"profctl": [], "alone": []},
                                              "nsys": {"profctl": [], "alone": []}}
    for tool, pair in (("ncu", ncu_pair), ("nsys", nsys_pair)):
        for _ in range(a.rounds):
            TIMINGS.clear()
            work = Path(tempfile.mkdtemp(prefix=f"ovh-{tool}-"))
            try:
                p, t = pair(work)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            res[tool]["profctl"].append(p)
            res[tool]["alone"].append(t)
            res.setdefault(f"{tool}_manifest", {}).setdefault("rounds", []).append(dict(TIMINGS))  # type: ignore
            print(f"{tool}: profctl {p:.2f} s, alone {t:.2f} s; manifest {TIMINGS}", flush=True)
    manifests = {k: res.pop(k) for k in list(res) if k.endswith("_manifest")}
    summary: dict = {tool: {"profctl_median_s": statistics.median(v["profctl"]),
                      "alone_median_s": statistics.median(v["alone"]),
                      "ratio": statistics.median(v["profctl"]) / statistics.median(v["alone"]), **v}
               for tool, v in res.items()}
    summary.update(manifests)
    Path(a.out).write_text(json.dumps(summary, indent=1))
    for tool, s in summary.items():
        if tool.endswith("_manifest"):
            continue
        print(f"{tool}: profctl {s['profctl_median_s']:.2f} s / alone {s['alone_median_s']:.2f} s = "
              f"{s['ratio']:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
