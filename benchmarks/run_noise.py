"""How much one op's median moves between processes: the run-to-run noise `profctl compare` must allow for.

Runs `profctl torch -- python examples/ops_program.py` N times (each a fresh process), then for every op judged
by compare's floors computes the standard deviation of the log of its per-run median (first call left out),
which is the `sigma` of compare's run-level noise model (profctl.analysis.compare.stats.RunNoise). Optionally keeps both
CPU cores busy with spinning processes while it runs (`--load 2`), as a shared CI machine would.

    python benchmarks/run_noise.py --runs 8 [--load 2] [--store DIR] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _spin(stop: float) -> None:
    x = 0
    while time.time() < stop:
        x += 1


def one_run(store: Path) -> Path:
    before = set(store.iterdir()) if store.exists() else set()
    subprocess.run([sys.executable, "-m", "profctl", "torch", "--reports", str(store), "-f", "json", "--",
                    sys.executable, str(ROOT / "examples" / "ops_program.py")], check=True,
                   stdout=subprocess.DEVNULL, timeout=600)
    (new,) = set(store.iterdir()) - before
    return new


def op_medians(run: Path) -> dict[str, float]:
    """op -> median per-call time (ns) over its instances, first call left out (as compare does)."""
    d = json.loads((run / "summary.json").read_text())
    out: dict[str, float] = {}
    for r in d.get("cpu_ops") or d.get("kernels") or []:
        smp = (r.get("extra") or {}).get("samples_ns") or []
        if (r.get("extra") or {}).get("first_call") and len(smp) >= 3:
            smp = smp[1:]
        if len(smp) >= 5 and statistics.median(smp) >= 10_000:
            out[r["name"]] = float(statistics.median(smp))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--load", type=int, default=0, help="spinning processes kept busy meanwhile")
    p.add_argument("--store", type=Path, default=None)
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()
    store = a.store or Path(tempfile.mkdtemp(prefix="run-noise-"))
    procs = [mp.Process(target=_spin, args=(time.time() + 3600,)) for _ in range(a.load)]
    for pr in procs:
        pr.start()
    try:
        runs = [one_run(store) for _ in range(a.runs)]
    finally:
        for pr in procs:
            pr.terminate()
    meds = [op_medians(r) for r in runs]
    ops = sorted(set.intersection(*(set(m) for m in meds)))
    rows: list[dict[str, Any]] = []
    for op in ops:
        logs = [math.log(m[op]) for m in meds]
        mu = statistics.mean(logs)
        rows.append({"op": op, "median_us": math.exp(mu) / 1e3, "sigma": statistics.stdev(logs),
                     "spread": [math.exp(x - mu) - 1 for x in (min(logs), max(logs))]})
    for r in rows:
        print(f"{r['op']:32s} {r['median_us']:9.1f} us  sigma {100 * r['sigma']:5.1f} %  "
              f"spread {100 * r['spread'][0]:+6.1f} .. {100 * r['spread'][1]:+6.1f} %")
    pooled = math.sqrt(statistics.mean(r["sigma"] ** 2 for r in rows)) if rows else float("nan")
    print(f"pooled sigma over {len(rows)} ops, {a.runs} runs, load {a.load}: {100 * pooled:.1f} %")
    if a.out:
        a.out.write_text(json.dumps({"runs": [str(r) for r in runs], "load": a.load, "ops": rows,
                                     "pooled_sigma": pooled}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
