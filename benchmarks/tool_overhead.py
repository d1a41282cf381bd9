"""What profctl costs on top of the tool it wraps (issue 10): `profctl ncu` against the same ncu command line
alone, and `profctl nsys` against its `nsys profile` + `nsys export` alone, on the GPU machine.

Per tool: one discarded warm-up pair (first-run caches, JIT), then `--rounds` pairs whose order alternates
(profctl first, then the tool first), so neither side always runs on a machine the other just warmed. The tool's
argv is the one profctl recorded in its manifest. Printed and written as JSON: the ratio of medians, and where
profctl's extra went (its manifest's in-process timings against the wall time seen from outside).

    python3 benchmarks/tool_overhead.py --out $OUT/overhead.json --rounds 5
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
from collections.abc import Callable
from pathlib import Path

WORKLOAD = ["--seqlen", "2048", "--backend", "sdpa-flash,sdpa-cudnn,eager"]


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, timeout=900)
    return time.perf_counter() - t0


def newest_manifest(root: Path) -> dict:
    run = sorted(p for p in root.iterdir() if p.is_dir())[-1]
    return json.loads((run / "manifest.json").read_text())


def profctl_argv(tool: str, root: Path) -> list[str]:
    extra = ["--recipe", "tensor-core", "--clock-control", "none"] if tool == "ncu" else []
    return [sys.executable, "-m", "profctl", tool, *extra, *WORKLOAD, "--reports", str(root), "-f", "json"]


def alone_runner(tool: str, manifest: dict, work: Path) -> Callable[[], None]:
    """The tool's own command lines, from what profctl recorded, writing into ``work``."""
    argv = list(next(t["argv"] for t in manifest["tools"] if t["name"] == tool))
    if tool == "ncu":
        argv[argv.index("--export") + 1] = str(work / "alone.ncu-rep")

        def run_ncu() -> None:
            subprocess.run(argv, check=True, capture_output=True, timeout=900)

        return run_ncu
    prof = [a if not a.startswith("--output=") else f"--output={work / 'alone'}" for a in argv]
    export = [prof[0], "export", "--type=sqlite", f"--output={work / 'alone.sqlite'}", "--force-overwrite=true",
              "--lazy=false", str(work / "alone.nsys-rep")]

    def run() -> None:
        subprocess.run(prof, check=True, capture_output=True, timeout=900)
        subprocess.run(export, check=True, capture_output=True, timeout=900)

    return run


def in_process(m: dict) -> dict[str, float]:
    return {k: float(v) for k, v in m.items() if k.endswith("_s") and isinstance(v, (int, float))}


def measure(tool: str, rounds: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"ovh-{tool}-"))
    try:
        root = work / "runs"
        timed(profctl_argv(tool, root))  # warm-up, discarded; also gives the tool's argv
        alone = alone_runner(tool, newest_manifest(root), work)
        t0 = time.perf_counter()
        alone()
        print(f"{tool}: warm-up done (alone {time.perf_counter() - t0:.2f} s)", flush=True)
        out: dict = {"profctl": [], "alone": [], "order": [], "manifest": []}
        for i in range(rounds):
            first_profctl = i % 2 == 0
            for side in (("profctl", "alone") if first_profctl else ("alone", "profctl")):
                if side == "profctl":
                    out["profctl"].append(timed(profctl_argv(tool, root)))
                    out["manifest"].append(in_process(newest_manifest(root)))
                else:
                    t0 = time.perf_counter()
                    alone()
                    out["alone"].append(time.perf_counter() - t0)
            out["order"].append("profctl first" if first_profctl else "alone first")
            print(f"{tool} round {i + 1} ({out['order'][-1]}): profctl {out['profctl'][-1]:.2f} s, "
                  f"alone {out['alone'][-1]:.2f} s; manifest {out['manifest'][-1]}", flush=True)
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def summarize(tool: str, v: dict) -> dict:
    pm, am = statistics.median(v["profctl"]), statistics.median(v["alone"])
    keys = ("ncu_wall_s",) if tool == "ncu" else ("profile_wall_s", "export_wall_s")  # what "alone" runs
    tool_in = [sum(m.get(k, float("nan")) for k in keys) for m in v["manifest"]]
    total_in = [m.get("total_wall_s", sum(x for k, x in m.items() if k != "total_wall_s")) for m in v["manifest"]]
    return {"profctl_median_s": pm, "alone_median_s": am, "ratio": pm / am,
            "tool_under_profctl_median_s": statistics.median(tool_in),
            "profctl_in_process_median_s": statistics.median(t - x for t, x in zip(total_in, tool_in, strict=True)),
            "startup_and_output_median_s": statistics.median(
                p - t for p, t in zip(v["profctl"], total_in, strict=True)),
            **v}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--tools", default="ncu,nsys")
    a = ap.parse_args()
    summary = {}
    for tool in a.tools.split(","):
        summary[tool] = summarize(tool, measure(tool, a.rounds))
        Path(a.out).write_text(json.dumps(summary, indent=1))  # what finished is kept
    for tool, s in summary.items():
        print(f"{tool}: profctl {s['profctl_median_s']:.2f} s / alone {s['alone_median_s']:.2f} s = "
              f"{s['ratio']:.3f}x; under profctl the tool ran {s['tool_under_profctl_median_s']:.2f} s, profctl's "
              f"own work {s['profctl_in_process_median_s']:.2f} s, start-up and output "
              f"{s['startup_and_output_median_s']:.2f} s (medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
