"""How much one op's median moves between processes: the run-to-run noise `profctl compare` must allow for.

Runs `profctl torch -- python examples/ops_program.py` N times (each a fresh process), then for every op judged
by compare's floors computes the standard deviation of the log of its per-run median (first call left out),
which is the `sigma` of compare's run-level noise model (profctl.analysis.compare.stats.RunNoise). Optionally keeps both
CPU cores busy with spinning processes while it runs (`--load 2`), as a shared CI machine would.

    python benchmarks/run_noise.py --runs 8 [--load 2] [--store DIR] [--out results.json]

`--bench` measures the gate itself on CPU runs, its false alarms and its power (issues 39 and 48): at each load level
(`--loads 0,1,2`: that many spinning processes it starts and stops itself), `--pairs` P times three `profctl bench
--device cpu -b benchmarks/gate_ab_functions.py:attn --label attn` processes (PyTorch SDPA), three more of the same
code (identical), and three of each planted slowdown (`--planted 1.1,1.3,2`: `attn_1_1x`, `attn_1_3x`, `attn_2x`,
the attention and 10 %, 30 % or 100 % of it again), interleaved; then one `profctl bench --ab attn,X` for X the same
code and each planted variant. Each comparison is judged by today's code with `--fail-if-slower 5%` (`--limit`):
three runs a side, one run a side (each pair's three 1-vs-1 pairs; also counted apart where both runs recorded a
quiet machine), and the `--ab` run judged again from its rounds. Every run records the machine's busy cores of other
work (profctl.machine_state), and the table gives them per level. The recording is written to `--out` after every
pair; `--reanalyse` judges it again (no new runs).

    python benchmarks/run_noise.py --bench --pairs 20 --loads 0,1,2 [--planted 1.1,1.3,2] [--out r.json]
    python benchmarks/run_noise.py --bench --reanalyse r.json     # the same runs judged again (no new runs)

On a many-core machine, benchmarks/gate_slices.sh runs the pairs side by side on 2-CPU slices (`--slices 0-1,2-3,...`:
each process and the level's spinners pinned to its slice, a machine of its own; `--deadline S` stops starting
pairs after S seconds; `--interleave` spreads every level's pairs over the run, `--planted-ab` sets the --ab runs'
planted variants apart, `--record-only` judges nothing). `--quantile Q` judges with each run's Q quantile instead
of its median (the low-quantile candidate of issue 48).
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
import threading
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
#: a spinning process for a busy core, as `python -c` (it runs until terminated)
SPIN = "while True:\n    pass"
#: the planted variants of `attn` (benchmarks/gate_ab_functions.py) by their slowdown
PLANTED = {"1.1": "attn_1_1x", "1.3": "attn_1_3x", "2": "attn_2x"}


def _new_dir(store: Path, argv: list[str], env: dict[str, str], cpus: list[int] | None = None) -> str:
    """Run `argv` (pinned to `cpus` with taskset, when given) and return the run directory it added to `store`."""
    before = set(store.iterdir()) if store.exists() else set()
    if cpus:
        argv = ["taskset", "-c", ",".join(map(str, cpus)), *argv]
    done = subprocess.run(argv, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=900, env=env)
    new = set(store.iterdir()) - before if store.exists() else set()
    if len(new) != 1:
        raise RuntimeError(f"{' '.join(argv)} (exit {done.returncode}) made {len(new)} run directories: "
                           + (done.stderr or "")[-600:])
    return str(new.pop())


def _env(threads: int | None) -> dict[str, str]:
    import os

    return {**os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {})}


#: --processes of every bench run (`--processes`; None: bench's own default, 3 on a CPU)
PROCESSES: list[int | None] = [None]


def bench_run(store: Path, fn: str, iters: int, threads: int | None = None, seqlens: str = "512",
              cpus: list[int] | None = None) -> str:
    """One `profctl bench` run of `gate_ab_functions.py:fn` on the CPU, labelled `attn` so the base and the
    planted variant pair (`threads`: OMP_NUM_THREADS for it; None: torch's default; :data:`PROCESSES` its
    --processes); its run directory."""
    n = PROCESSES[0]
    return _new_dir(store, [sys.executable, "-m", "profctl", "bench", "--device", "cpu", "-b", f"{FNS}:{fn}",
                            "--label", "attn", "--baseline", "none", "-s", seqlens, "--heads", "4", "--iters",
                            str(iters), *(["--processes", str(n)] if n else []), "-q", "--reports", str(store)],
                   _env(threads), cpus)


def ab_run(store: Path, fn_b: str, iters: int, rounds: int, threads: int | None = None, seqlens: str = "512",
           cpus: list[int] | None = None) -> str:
    """One `profctl bench --ab attn,fn_b` process (interleaved rounds); its run directory."""
    return _new_dir(store, [sys.executable, "-m", "profctl", "bench", "--device", "cpu", "--ab",
                            f"{FNS}:attn,{FNS}:{fn_b}", "-s", seqlens, "--heads", "4", "--iters", str(iters),
                            "--rounds", str(rounds), "-q", "--reports", str(store)], _env(threads), cpus)


def record_bench(store: Path, loads: list[int], pairs: int | list[int], iters: int, threads: int | None = None, *,
                 planted: list[str], ab_rounds: int = 20, ab_iters: int = 5, out: Path | None = None,
                 seqlens: str = "512", slices: list[list[int]] | None = None,
                 deadline: float | None = None, planted_ab: list[str] | None = None,
                 interleave: bool = False) -> dict[str, Any]:
    """Per load level (that many spinning processes), `pairs` times: three bench runs each of `attn` (base),
    `attn` again (same) and every planted variant, interleaved base, same, planted..., base, ...; then one
    `--ab` run of `attn` against `attn_same` and against every planted variant (`ab_rounds` rounds of `ab_iters`).
    Written to `out` after every pair, so a cut-short recording keeps what it has.

    With `slices` (lists of CPU numbers) each slice is a machine of its own: the pairs are shared out among them
    and run side by side, every process and the level's spinners pinned to the slice (taskset,
    sched_setaffinity), each slice's runs in a store of its own; a pair records its slice. With `deadline` (a
    time.time()) a pair still running then is dropped and no new one starts; with `interleave` the levels' pairs
    are taken in turn, each level's spread over the whole run (a deadline then cuts every level by the same share),
    else level by level.
    `planted_ab`: the planted variants of the `--ab` runs, when not `planted`'s."""
    planted_ab = planted if planted_ab is None else planted_ab
    plan: dict[str, Any] = {"iters": iters, "pairs": pairs, "threads": threads, "seqlens": seqlens,
                            "processes": PROCESSES[0], "planted": planted, "planted_ab": planted_ab,
                            "ab_rounds": ab_rounds, "ab_iters": ab_iters, "slices": slices,
                            "levels": {str(load): [] for load in loads}}
    roles = [("base", "attn"), ("same", "attn"), *((p, PLANTED[p]) for p in planted)]
    jobs = job_order(loads, pairs, interleave)
    total = len(jobs)
    lock = threading.Lock()

    def one_pair(load: int, i: int, cpus: list[int] | None, where: Path) -> None:
        # spinners as processes of their own (subprocess closes inherited descriptors: a fork from this thread
        # while another thread's subprocess.run waits on its exec pipe would hold that pipe open)
        pin = ["taskset", "-c", ",".join(map(str, cpus))] if cpus else []
        procs = [subprocess.Popen([*pin, sys.executable, "-c", SPIN]) for _ in range(load)]
        t0 = time.time()
        try:
            def go(run: Any, *args: Any) -> str:
                if deadline is not None and time.time() > deadline:
                    raise Late
                return str(run(where, *args, threads, seqlens, cpus))

            runs: dict[str, list[str]] = {role: [] for role, _ in roles}
            for _ in range(3):
                for role, fn in roles:
                    runs[role].append(go(bench_run, fn, iters))
            ab = {"same": go(ab_run, "attn_same", ab_iters, ab_rounds)}
            for p in planted_ab:
                ab[p] = go(ab_run, PLANTED[p], ab_iters, ab_rounds)
        finally:
            for pr in procs:
                pr.terminate()
                pr.wait()
        with lock:
            plan["levels"][str(load)].append({"bench": runs, "ab": ab, "slice": cpus,
                                              "seconds": round(time.time() - t0, 1)})
            done = sum(map(len, plan["levels"].values()))
            print(f"load {load}: pair {i + 1} recorded (slice {cpus}, {done} of {total})",
                  file=sys.stderr, flush=True)
            if out is not None:
                out.write_text(json.dumps({"plan": plan}, indent=1))

    _run_jobs(jobs, one_pair, lock, store, slices)
    return plan


class Late(Exception):
    """A pair that reached the deadline: dropped."""


def _run_jobs(jobs: list[tuple[int, int]], one_pair: Any, lock: threading.Lock, store: Path,
              slices: list[list[int]] | None) -> None:
    """Take (load, pair) jobs in turn until none is left: here, or one thread a slice, side by side."""
    def worker(cpus: list[int] | None, where: Path) -> None:
        while True:
            with lock:
                if not jobs:
                    return
                load, i = jobs.pop(0)
            try:
                one_pair(load, i, cpus, where)
            except Late:
                print(f"load {load}: pair {i + 1} dropped at the deadline (slice {cpus})", file=sys.stderr)
                return

    if not slices:
        worker(None, store)
        return
    threads_ = [threading.Thread(target=worker, args=(cpus, store / f"slice{k}")) for k, cpus in enumerate(slices)]
    for t in threads_:
        t.start()
    for t in threads_:
        t.join()


def job_order(loads: list[int], pairs: int | list[int], interleave: bool = False) -> list[tuple[int, int]]:
    """(load level, pair index) in the order they run: level by level, or with `interleave` each level's pairs
    spread over the whole run (level 0 of 20 pairs and level 2 of 5: 0, 2, 0, 0, 0, 2, ...), so a deadline cuts
    every level by the same share."""
    per_load = pairs if isinstance(pairs, list) else [pairs] * len(loads)
    jobs = [(load, i) for load, k in zip(loads, per_load, strict=True) for i in range(k)]
    if interleave:
        jobs.sort(key=lambda j: (j[1] / per_load[loads.index(j[0])], loads.index(j[0])))
    return jobs


def parse_slices(text: str) -> list[list[int]]:
    """'0-1,2-3' or '0+8,1+9' -> [[0, 1], [2, 3]]: each comma-separated item a slice, a range or '+'-joined CPUs."""
    out = []
    for item in text.split(","):
        if "-" in item:
            a, b = item.split("-")
            out.append(list(range(int(a), int(b) + 1)))
        else:
            out.append([int(x) for x in item.split("+")])
    return out


def _gate(base: list[str], new: list[str], limit: float) -> tuple[int, list[str]]:
    """(1 when `--fail-if-slower limit` fails, else 0; each row's verdict) for runs as `profctl compare` reads
    them; a pair `compare` refuses (exit 6) counts as passing, with the verdict 'refused'."""
    from profctl import inputs
    from profctl.analysis.compare import compare_runs, gate
    from profctl.errors import NotComparable

    try:
        cmp = compare_runs(inputs.load_sides(",".join(base)), inputs.load_sides(",".join(new)), limit=limit)
    except NotComparable:
        return 0, ["refused"]
    return gate(cmp, limit).exit_code, [r.verdict for r in cmp.rows]


def _ab_gate(run: str, limit: float) -> tuple[int, list[str], list[float]]:
    """An `--ab` run judged again by today's code (its rounds from ab.json): (gate exit, verdicts, ratios)."""
    from profctl.analysis.compare import gate
    from profctl.pipelines import ab_pipeline

    cmp = ab_pipeline.report_of(Path(run), limit=limit)
    return gate(cmp, limit).exit_code, [r.verdict for r in cmp.rows], [r.ratio for r in cmp.rows if r.ratio]


def _busy(runs: list[str]) -> list[float]:
    from profctl import machine_state, run_store

    out = []
    for r in runs:
        b = machine_state.busy_of(run_store.read_manifest(r).get("machine"))
        if b is not None:
            out.append(b)
    return out


def _quiet(runs: list[str]) -> bool:
    """Whether every run recorded a quiet machine (profctl.analysis.compare.stats.quiet_machine)."""
    from profctl import run_store
    from profctl.analysis.compare.stats import quiet_machine

    return quiet_machine([run_store.read_manifest(r).get("machine") for r in runs])


def _medians(run: str) -> dict[Any, float]:
    return {x["seqlen_q"]: x["median_ms"] for x in json.loads((Path(run) / "bench.json").read_text())
            if x.get("median_ms")}


def _span(xs: list[float]) -> list[float] | None:
    return [min(xs), statistics.median(xs), max(xs)] if xs else None


def analyse_bench(plan: dict[str, Any], limit: float = 0.05) -> dict[str, Any]:
    """Per load level and comparison (identical 'same', or a planted slowdown), how often the gate fails
    (`--fail-if-slower limit`): three runs a side, one run a side (each pair's three 1-vs-1 pairs) and `--ab`;
    with the machine's busy cores of other work and the planted / base ratio of single runs' medians."""
    out: dict[str, Any] = {}
    for load, level in plan["levels"].items():
        cells: dict[str, dict[str, Any]] = {}
        busy: list[float] = []
        for pair in level:
            # a recording of issue 39's --bench: base, new (the same code), slow (1.3x), no --ab
            runs = pair["bench"] if "bench" in pair else {"base": pair["base"], "same": pair["new"],
                                                          "1.3": pair["slow"]}
            busy += _busy([r for rs in runs.values() for r in rs] + list(pair.get("ab", {}).values()))
            roles = [r for r in runs if r != "base"] + [r for r in pair.get("ab", {}) if r not in runs]
            for role in roles:
                c = cells.setdefault(role, {"pairs": 0, "fail_3v3": 0, "fail_1v1": 0, "pairs_1v1": 0,
                                            "fail_ab": 0, "pairs_ab": 0, "verdicts_3v3": {}, "verdicts_ab": {},
                                            "ratio_1v1": [], "ratio_ab": [], "quiet_3v3": 0, "fail_quiet_3v3": 0,
                                            "quiet_1v1": 0, "fail_quiet_1v1": 0})
                for key in ("quiet_3v3", "fail_quiet_3v3", "quiet_1v1", "fail_quiet_1v1"):
                    c.setdefault(key, 0)  # a recording judged before these were counted
                if role in runs:
                    c["pairs"] += 1
                    code, vs = _gate(runs["base"], runs[role], limit)
                    c["fail_3v3"] += code
                    if _quiet(runs["base"] + runs[role]):
                        c["quiet_3v3"] += 1
                        c["fail_quiet_3v3"] += code
                    for v in vs:
                        c["verdicts_3v3"][v] = c["verdicts_3v3"].get(v, 0) + 1
                for b, n in zip(runs["base"], runs.get(role, []), strict=False):
                    c["pairs_1v1"] += 1
                    code = _gate([b], [n], limit)[0]
                    c["fail_1v1"] += code
                    if _quiet([b, n]):
                        c["quiet_1v1"] += 1
                        c["fail_quiet_1v1"] += code
                    mb = _medians(b)
                    c["ratio_1v1"] += [m / mb[k] for k, m in _medians(n).items() if k in mb]
                ab = pair.get("ab", {}).get(role)
                if ab is not None and (Path(ab) / "ab.json").exists():
                    code, vs, ratios = _ab_gate(ab, limit)
                    c["pairs_ab"] += 1
                    c["fail_ab"] += code
                    c["ratio_ab"] += ratios
                    for v in vs:
                        c["verdicts_ab"][v] = c["verdicts_ab"].get(v, 0) + 1
        for c in cells.values():
            c["ratio_1v1"], c["ratio_ab"] = _span(c["ratio_1v1"]), _span(c["ratio_ab"])
        out[load] = {"pairs": len(level), "busy_cores": _span(busy), "cells": cells}
    return out


def _fmt(span: list[float] | None) -> str:
    return "-" if span is None else f"{span[0]:.2f}, {span[1]:.2f}, {span[2]:.2f}"


def main_bench(a: argparse.Namespace) -> int:
    if a.reanalyse:
        plans = [json.loads(f.read_text())["plan"] for f in a.reanalyse]
        plan = {**plans[0], "levels": {}}
        for pl in plans:  # several recordings: their pairs pooled per level
            for load, level in pl["levels"].items():
                plan["levels"].setdefault(load, []).extend(level)
    else:
        store = a.store or Path(tempfile.mkdtemp(prefix="gate-noise-"))
        PROCESSES[0] = a.processes
        pairs = [int(x) for x in str(a.pairs).split(",")]
        plan = record_bench(store, [int(x) for x in a.loads.split(",")], pairs[0] if len(pairs) == 1 else pairs,
                            a.iters, a.threads,
                            planted=[p for p in a.planted.split(",") if p], ab_rounds=a.rounds, ab_iters=a.ab_iters,
                            out=a.out, seqlens=a.seqlens,
                            slices=parse_slices(a.slices) if a.slices else None,
                            deadline=time.time() + a.deadline if a.deadline else None,
                            planted_ab=[p for p in a.planted_ab.split(",") if p] if a.planted_ab is not None
                            else None, interleave=a.interleave)
    if a.record_only:
        return 0
    if a.quantile is not None:  # judge with another per-run value (the candidate measured against the median)
        from profctl.analysis.compare import stats

        stats.BENCH_RUN_QUANTILE = a.quantile
    res = analyse_bench(plan, a.limit / 100)
    print(f"--fail-if-slower {a.limit:g}%")
    print("| spinners | busy cores of other work (min, median, max) | comparison | gate fails, 3 vs 3 | 3 vs 3, all "
          "quiet | 1 vs 1 | 1 vs 1, both runs quiet | --ab | new / base, single runs' medians (min, median, max) | "
          "--ab ratios |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for load, r in res.items():
        for role, c in r["cells"].items():
            what = "identical" if role == "same" else f"planted {role}x"
            print(f"| {load} | {_fmt(r['busy_cores'])} | {what} | {c['fail_3v3']} of {c['pairs']} | "
                  f"{c['fail_quiet_3v3']} of {c['quiet_3v3']} | {c['fail_1v1']} of {c['pairs_1v1']} | "
                  f"{c['fail_quiet_1v1']} of {c['quiet_1v1']} | "
                  f"{c['fail_ab']} of {c['pairs_ab']} | {_fmt(c['ratio_1v1'])} | {_fmt(c['ratio_ab'])} |")
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
    p.add_argument("--pairs", default="20",
                   help="--bench: pairs of 3 runs a side per load level (one number, or one per level: 20,8)")
    p.add_argument("--loads", default="0,1,2", help="--bench: busy cores (spinning processes) per level")
    p.add_argument("--iters", type=int, default=20, help="--bench: --iters of each bench run")
    p.add_argument("--threads", type=int, default=None,
                   help="--bench: OMP_NUM_THREADS for the bench processes (default: torch's own, 2 on 2 cores)")
    p.add_argument("--reanalyse", type=Path, nargs="+", default=None,
                   help="--bench: judge the runs of earlier --out recordings again (several: pooled per level)")
    p.add_argument("--planted", default="1.1,1.3,2", help="--bench: planted slowdowns (of 1.1, 1.3, 2)")
    p.add_argument("--planted-ab", default=None,
                   help="--bench: planted slowdowns of the --ab runs (default: --planted)")
    p.add_argument("--interleave", action="store_true",
                   help="--bench: take the levels' pairs in turn (a --deadline then cuts every level alike)")
    p.add_argument("--rounds", type=int, default=20, help="--bench: --rounds of each --ab run")
    p.add_argument("--ab-iters", type=int, default=5, help="--bench: --iters of each --ab run")
    p.add_argument("--seqlens", default="512", help="--bench: -s of every run")
    p.add_argument("--slices", default=None,
                   help="--bench: CPU slices run side by side as machines of their own, e.g. 0-1,2-3,4-5")
    p.add_argument("--record-only", action="store_true", help="--bench: record the runs, judge nothing")
    p.add_argument("--deadline", type=float, default=None,
                   help="--bench: seconds from now after which no pair starts and a running one is dropped")
    p.add_argument("--quantile", type=float, default=None,
                   help="--bench: judge bench runs by this quantile of each run's iterations, not the median "
                        "(profctl.analysis.compare.stats.BENCH_RUN_QUANTILE)")
    p.add_argument("--limit", type=float, default=5.0, help="--bench: the gate, --fail-if-slower in percent")
    p.add_argument("--processes", type=int, default=None,
                   help="--bench: --processes of every bench run (default: bench's, 3 on a CPU)")
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
