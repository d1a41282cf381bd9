"""Why does ncu itself run longer under `profctl ncu` than alone (benchmarks/tool_overhead.py saw 11.8 s against
10.9 s for the same argv)? The same ncu command line, run four ways, in rotating order, `--rounds` times:

- ``pipe``: subprocess.run with its output captured (as tool_overhead.py runs "alone");
- ``proc``: through profctl.proc.run, as profctl runs it (stdin /dev/null, output to a log file, a new session,
  PYTHONUNBUFFERED=1 for the workload);
- ``proc-nounbuf``: proc without PYTHONUNBUFFERED;
- ``profctl``: the whole `profctl ncu`, whose manifest gives ncu's own wall time inside it.

    python3 benchmarks/ncu_overhead_why.py --out $OUT/ncu_why.json --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tool_overhead import newest_manifest, profctl_argv

from profctl import proc


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ncu-why-"))
    root = work / "runs"
    subprocess.run(profctl_argv("ncu", root), check=True, capture_output=True, timeout=900)  # warm-up
    argv = list(next(t["argv"] for t in newest_manifest(root)["tools"] if t["name"] == "ncu"))
    argv[argv.index("--export") + 1] = str(work / "alone.ncu-rep")

    def pipe() -> float:
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, timeout=900)
        return time.perf_counter() - t0

    def via_proc(env: dict[str, str]) -> float:
        return proc.run(argv, log=work / "alone.log", env=env, timeout_s=900).wall_s

    def whole() -> float:
        subprocess.run(profctl_argv("ncu", root), check=True, capture_output=True, timeout=900)
        return float(newest_manifest(root)["ncu_wall_s"])

    ways = {"pipe": pipe, "proc": lambda: via_proc({"PYTHONUNBUFFERED": "1"}), "proc-nounbuf": lambda: via_proc({}),
            "profctl": whole}
    names = list(ways)
    res: dict[str, list[float]] = {n: [] for n in names}
    for r in range(a.rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for n in order:
            res[n].append(ways[n]())
        print(f"round {r + 1} ({' -> '.join(order)}): " + ", ".join(f"{n} {res[n][-1]:.2f} s" for n in names),
              flush=True)
    out = {n: {"median_s": statistics.median(v), "runs_s": v} for n, v in res.items()}
    Path(a.out).write_text(json.dumps(out, indent=1))
    print("ncu's wall time, median: " + ", ".join(f"{n} {v['median_s']:.2f} s" for n, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
