"""`profctl ncu --recipe stalls|explain` against the same ncu command line alone (issue 26: at most 1.1x), on a
program of one's own (`-- python tests/data/planted/planted_triton.py`) and on a built-in backend.

Per case: a discarded warm-up pair, then `--rounds` pairs whose order alternates. The ncu argv is the one profctl
recorded in its run's manifest. profctl's time includes reading the report in depth (every kernel's warp samples,
lines and findings) and printing the source view. Prints and writes JSON.

    python3 benchmarks/source_overhead.py --out $OUT/source_overhead.json --rounds 3
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

CASES = {
    "program": ["--recipe", "stalls", "--", sys.executable, "tests/data/planted/planted_triton.py"],
    "builtin": ["--recipe", "stalls", "-b", "triton", "-s", "4096", "--heads", "32"],
    "builtin-explain": ["--recipe", "explain", "-b", "triton,sdpa-cudnn", "-s", "4096", "--heads", "32"],
}


def timed(argv: list[str], cwd: Path | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, timeout=900, cwd=cwd)
    return time.perf_counter() - t0


def profctl_argv(case: list[str], root: Path) -> list[str]:
    i = case.index("--") if "--" in case else len(case)
    return [sys.executable, "-m", "profctl", "ncu", "--clock-control", "none", "--reports", str(root), *case[:i],
            *case[i:]]


def manifest_times(root: Path) -> dict:
    """The newest run's own account: ncu's wall time and profctl's whole pipeline (from its manifest)."""
    run = sorted(p for p in root.iterdir() if p.is_dir())[-1]
    m = json.loads((run / "manifest.json").read_text())
    return {k: m.get(k) for k in ("ncu_wall_s", "total_wall_s")}


def ncu_alone(root: Path, work: Path) -> list[str]:
    run = sorted(p for p in root.iterdir() if p.is_dir())[-1]
    manifest = json.loads((run / "manifest.json").read_text())
    argv = list(next(t["argv"] for t in manifest["tools"] if t["name"] == "ncu"))
    argv[argv.index("--export") + 1] = str(work / "alone.ncu-rep")
    return argv


def measure(name: str, case: list[str], rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as td:
        root, work = Path(td) / "reports", Path(td)
        pa = profctl_argv(case, root)
        first = timed(pa)  # warm-up (Triton compiles, caches) and the manifest the ncu argv comes from
        alone = ncu_alone(root, work)
        timed(alone)
        p, a, inside = [], [], []
        for r in range(rounds):
            order = [(pa, p), (alone, a)] if r % 2 == 0 else [(alone, a), (pa, p)]
            for argv, into in order:
                into.append(timed(argv))
                if into is p:
                    inside.append(manifest_times(root))
    ratio = statistics.median(p) / statistics.median(a)
    return {"case": name, "argv": pa, "warmup_profctl_s": first, "profctl_s": p, "ncu_alone_s": a, "ratio": ratio,
            "manifest": inside}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", default=",".join(CASES))
    a = ap.parse_args()
    out = [measure(n, CASES[n], a.rounds) for n in a.cases.split(",")]
    for o in out:
        own = [m["total_wall_s"] - m["ncu_wall_s"] for m in o["manifest"]
               if m.get("total_wall_s") and m.get("ncu_wall_s")]
        ncu_in = [m["ncu_wall_s"] for m in o["manifest"] if m.get("ncu_wall_s")]
        print(f"{o['case']}: profctl {statistics.median(o['profctl_s']):.2f} s, ncu alone "
              f"{statistics.median(o['ncu_alone_s']):.2f} s: {o['ratio']:.3f}x; inside profctl: ncu "
              f"{statistics.median(ncu_in) if ncu_in else float('nan'):.2f} s, profctl's pipeline around it "
              f"{statistics.median(own) if own else float('nan'):.2f} s")
    Path(a.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
