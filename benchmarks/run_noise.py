"""How much one op's median moves between processes: the run-to-run noise `profctl compare` must allow for.

Runs `profctl torch -- python examples/ops_program.py` N times (each a fresh process), then for every op judged
by compare's floors computes the standard deviation of the log of its per-run median (first call left out),
which is the `sigma` of compare's run-level noise model (profctl.analysis.compare.stats.RunNoise). Optionally keeps both
CPU cores busy with spinning processes while it runs (`--load 2`), as a shared CI machine would.

    python benchmarks/run_noise.py --runs 8 [--load 2] [--store DIR] [--out results.json]

`--bench` measures the gate itself on CPU bench runs (issue 39): at each load level (`--loads 0,1,2`: that many
spinning processes it starts and stops itself), `--pairs` P times three runs a side of one unchanged workload
(`profctl bench --device cpu -b benchmarks/gate_ab_functions.py:attn`, a `file.py:fn` of PyTorch SDPA; both sides
the same), interleaved, and three runs of the same workload doing 1.3x the work (`attn_1_3x`). It counts how often
`profctl compare BASE1,BASE2,BASE3 NEW1,NEW2,NEW3 --fail-if-slower 10%` fails on identical runs (false alarms;
the target is none), how often one run a side does (each pair's three 1-vs-1 pairs), and how often the planted
1.3x is caught (3 vs 3: `slower` and the gate fails); and the per-run scatter of the medians (the sigma of
compare's run-level noise model for CPU bench rows, profctl.analysis.compare.stats.CPU_BENCH_RUN_NOISE).

    python benchmarks/run_noise.py --bench --pairs 20 --loads 0,1,2 [--iters 20] [--threads 1] [--out r.json]
    python benchmarks/run_noise.py --bench --reanalyse r.json     # the same runs judged again (no new runs)
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


FNS = ROOT / "benchmarks" / "gate_ab_functions.py"


def bench_run(store: Path, fn: str, iters: int, threads: int | None = None) -> str:
    """One `profctl bench` process of `gate_ab_functions.py:fn` on the CPU, labelled `attn` so the base and the
    planted variant pair (`threads`: OMP_NUM_THREADS for it; None: torch's default); its run directory."""
    import os

    env = {**os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
    before = set(store.iterdir()) if store.exists() else set()
    subprocess.run([sys.executable, "-m", "profctl", "bench", "--device", "cpu", "-b", f"{FNS}:{fn}", "--label",
                    "attn", "--baseline", "none", "-s", "256,512", "--heads", "4", "--iters", str(iters), "-q",
                    "--reports", str(store)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=600, env=env)
    (new,) = set(store.iterdir()) - before
    return str(new)


def record_bench(store: Path, loads: list[int], pairs: int, iters: int, threads: int | None = None
                 ) -> dict[str, Any]:
    """Per load level, `pairs` x (3 base, 3 new, 3 planted) runs, interleaved base, new, slow, base, ..."""
    plan: dict[str, Any] = {"iters": iters, "pairs": pairs, "threads": threads, "levels": {}}
    for load in loads:
        procs = [mp.Process(target=_spin, args=(time.time() + 7200,)) for _ in range(load)]
        for pr in procs:
            pr.start()
        try:
            level = []
            for i in range(pairs):
                runs: dict[str, list[str]] = {"base": [], "new": [], "slow": []}
                for _ in range(3):
                    for role, fn in (("base", "attn"), ("new", "attn"), ("slow", "attn_1_3x")):
                        runs[role].append(bench_run(store, fn, iters, threads))
                level.append(runs)
                print(f"load {load}: pair {i + 1}/{pairs} recorded", file=sys.stderr, flush=True)
        finally:
            for pr in procs:
                pr.terminate()
                pr.join()
        plan["levels"][str(load)] = level
    return plan


def _gate(base: list[str], new: list[str]) -> tuple[int, list[str]]:
    """(1 when `--fail-if-slower 10%` fails, else 0; each row's verdict) for runs as `profctl compare` reads them."""
    from profctl import inputs
    from profctl.analysis.compare import compare_runs, gate

    cmp = compare_runs(inputs.load_sides(",".join(base)), inputs.load_sides(",".join(new)), limit=0.10)
    return gate(cmp, 0.10).exit_code, [r.verdict for r in cmp.rows]


def analyse_bench(plan: dict[str, Any]) -> dict[str, Any]:
    """False alarms (identical runs, 3 vs 3 and 1 vs 1), catches of the planted 1.3x (3 vs 3, 1 vs 1), the
    per-run medians' scatter and the machine's busy cores, per load level."""
    from profctl import machine_state, run_store

    out: dict[str, Any] = {}
    for load, level in plan["levels"].items():
        fa3 = fa1 = catch3 = catch1 = n1 = 0
        verdicts: dict[str, int] = {}
        logs: dict[str, list[float]] = {}
        busy: list[float] = []
        ratios: list[float] = []
        for runs in level:
            code, vs = _gate(runs["base"], runs["new"])
            fa3 += code
            for v in vs:
                verdicts[v] = verdicts.get(v, 0) + 1
            code, vs = _gate(runs["base"], runs["slow"])
            catch3 += code == 1 and "slower" in vs
            for b, n, s in zip(runs["base"], runs["new"], runs["slow"], strict=True):
                n1 += 1
                fa1 += _gate([b], [n])[0]
                catch1 += _gate([b], [s])[0]
            for r in runs["base"] + runs["new"]:
                for row in json.loads((Path(r) / "bench.json").read_text()):
                    logs.setdefault(str(row["seqlen_q"]), []).append(math.log(row["median_ms"]))
                b_ = machine_state.busy_of(run_store.read_manifest(r).get("machine"))
                if b_ is not None:
                    busy.append(b_)
            for rb, rs in zip(runs["base"], runs["slow"], strict=True):
                mb = {x["seqlen_q"]: x["median_ms"] for x in json.loads((Path(rb) / "bench.json").read_text())}
                for x in json.loads((Path(rs) / "bench.json").read_text()):
                    ratios.append(x["median_ms"] / mb[x["seqlen_q"]])
        out[load] = {"pairs": len(level), "false_alarms_3v3": fa3, "false_alarms_1v1": fa1, "pairs_1v1": n1,
                     "caught_3v3": catch3, "caught_1v1": catch1, "verdicts_identical_3v3": verdicts,
                     "sigma_per_run": {s: statistics.stdev(x) for s, x in logs.items() if len(x) > 1},
                     "busy_cores": [min(busy), statistics.median(busy), max(busy)] if busy else None,
                     "planted_ratio": [min(ratios), statistics.median(ratios), max(ratios)] if ratios else None}
    return out


def main_bench(a: argparse.Namespace) -> int:
    if a.reanalyse:
        plan = json.loads(a.reanalyse.read_text())["plan"]
    else:
        store = a.store or Path(tempfile.mkdtemp(prefix="gate-noise-"))
        plan = record_bench(store, [int(x) for x in a.loads.split(",")], a.pairs, a.iters, a.threads)
    res = analyse_bench(plan)
    for load, r in res.items():
        sig = ", ".join(f"s{k} {100 * v:.1f} %" for k, v in r["sigma_per_run"].items())
        print(f"load {load}: {r['pairs']} pairs of 3 runs a side: false alarms {r['false_alarms_3v3']}/{r['pairs']} "
              f"(3 vs 3), {r['false_alarms_1v1']}/{r['pairs_1v1']} (1 vs 1); planted 1.3x caught "
              f"{r['caught_3v3']}/{r['pairs']} (3 vs 3), {r['caught_1v1']}/{r['pairs_1v1']} (1 vs 1); "
              f"identical 3 vs 3 rows {r['verdicts_identical_3v3']}; per-run sigma {sig}; busy cores of other work "
              f"{r['busy_cores']}; planted/base medians {r['planted_ratio']}")
    if a.out:
        a.out.write_text(json.dumps({"plan": plan, "results": res}, indent=1))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--load", type=int, default=0, help="spinning processes kept busy meanwhile")
    p.add_argument("--store", type=Path, default=None)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--bench", action="store_true", help="the gate's false alarms and catches on CPU bench runs")
    p.add_argument("--pairs", type=int, default=20, help="--bench: pairs of 3 runs a side per load level")
    p.add_argument("--loads", default="0,1,2", help="--bench: busy cores (spinning processes) per level")
    p.add_argument("--iters", type=int, default=20, help="--bench: --iters of each bench run")
    p.add_argument("--threads", type=int, default=None,
                   help="--bench: OMP_NUM_THREADS for the bench processes (default: torch's own, 2 on 2 cores)")
    p.add_argument("--reanalyse", type=Path, default=None, help="--bench: judge the runs of an earlier --out again")
    a = p.parse_args()
    if a.bench:
        return main_bench(a)
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
