"""profctl spread over the GPUs of one machine (issue 16), measured in one go on a 2-GPU machine.

    python benchmarks/dask_scaling.py --out DIR [--iters 200] [--budget-s 420]

1. The same 16-point bench sweep (2 backends x 8 shapes, bf16), one `profctl bench` process each: serially,
   with ``--workers 2`` (one worker per GPU) and with ``--workers 1 --gpus 0``; wall time of each whole command
   (Python start, Dask start and stop included) and every point's median against the serial run's.
2. nsys and ncu captures of a small sweep, serially and with ``--workers 2`` (two captures at once, one per
   GPU): the kernels each saw, compared.

Writes DIR/results.json and the bench rows (DIR/<name>.json) and prints a compact table last. Steps that would
run past --budget-s are skipped (and said so), so the table always comes out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

SWEEP = ["--backend", "sdpa-flash,eager", "--batch", "4", "--heads", "32", "--head-dim", "128", "--dtype", "bf16",
         "--seqlen", "1024,2048,4096,8192", "--causal", "false,true", "--pass", "fwd", "--baseline", "none",
         "--device", "cuda"]
CAPTURE = ["--backend", "sdpa-flash,eager", "--batch", "2", "--heads", "16", "--head-dim", "128", "--dtype", "bf16",
           "--seqlen", "1024,2048", "--device", "cuda"]


def sh(argv: list[str], log: Path, timeout: float, env: dict[str, str] | None = None,
       cwd: str | None = None) -> tuple[int, float]:
    t0 = time.perf_counter()
    with open(log, "ab") as f:
        pre = " ".join(f"{k}={v}" for k, v in (env or {}).items())
        f.write(("\n$ " + pre + " " + " ".join(argv) + "\n").encode())
        f.flush()
        try:
            rc = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, cwd=cwd,
                                env={**os.environ, **(env or {})}).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return rc, time.perf_counter() - t0


def latest(reports: Path, kind: str) -> Path:
    return sorted(p for p in reports.iterdir() if f"-{kind}-" in p.name)[-1]


def bench(name: str, extra: list[str], a: argparse.Namespace, reports: Path, log: Path,
          env: dict[str, str] | None = None) -> dict[str, Any]:
    out = a.out.resolve() / f"{name}.json"
    # python -m puts the working directory first on sys.path: the code before runs from its own folder
    cwd = a.before_path if name in ("before", "serial_before") else None
    rc, wall = sh([sys.executable, "-m", "profctl", "bench", *SWEEP, "--iters", str(a.iters), "--warmup", "10",
                   "-q", "-f", "json", "-o", str(out), "--reports", str(reports), *extra], log, 580, env, cwd)
    res: dict[str, Any] = {"name": name, "args": extra, "env": env, "rc": rc, "wall_s": round(wall, 2)}
    if rc == 0:
        run = latest(reports, "bench")
        m = json.loads((run / "manifest.json").read_text())
        res["rows"] = json.loads(out.read_text())
        res["executor"] = m.get("executor")
        res["parts"] = m.get("parts")
        res["timing"] = m.get("timing")  # the serial run's one part
    return res


def capture(tool: str, extra: list[str], reports: Path, log: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "profctl", tool, *CAPTURE, *extra, "--format", "json"]
    if tool == "ncu":
        argv += ["--clock-control", "none", "--recipe", "tensor-core", "--reports", str(reports)]
    else:
        argv += ["--iters", "5", "--reports", str(reports)]
    rc, wall = sh(argv, log, 400)
    res: dict[str, Any] = {"tool": tool, "args": extra, "rc": rc, "wall_s": round(wall, 2)}
    if rc == 0:
        run = latest(reports, tool)
        s = json.loads((run / "summary.json").read_text())
        if tool == "ncu":
            names = Counter(f"{ln.get('nvtx_range')}|{ln.get('name') or ln.get('kernel')}"
                            for ln in s["meta"].get("launches", []))
        else:
            names = Counter()
            for k in s["kernels"]:
                names[k["name"]] += k["count"]
        res.update(run=run.name, kernels=dict(names), sources=[x["path"].split("/")[-2:] for x in s["sources"]],
                   parts=json.loads((run / "manifest.json").read_text()).get("parts"))
    return res


def medians(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], float]:
    return {(r["backend"], r["seqlen_q"], r["causal"]): r["median_ms"] for r in rows if r.get("status") == "ok"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--iters", type=int, default=150)
    ap.add_argument("--budget-s", type=float, default=420)
    ap.add_argument("--steps", default="serial,workers2,workers1_gpu0",
                    help="bench runs, in this order: serial (again: serial_b), workers2 (again: workers2_b, "
                         "workers2_c), cold (PROFCTL_WARM=0 --workers 2), before (--workers 2 with --before-path "
                         "first on PYTHONPATH; serial_before: serial), workers1_gpu0")
    ap.add_argument("--before-path", default=None, help="a checkout of the code before, for the 'before' step")
    ap.add_argument("--no-captures", action="store_true", help="skip the nsys/ncu captures")
    ap.add_argument("--dry", action="store_true", help="a tiny CPU sweep, to check the script without a GPU")
    a = ap.parse_args()
    if a.dry:
        global SWEEP
        SWEEP = ["--backend", "sdpa-flash,eager", "--heads", "2", "--head-dim", "8", "--seqlen", "16,32",
                 "--causal", "false,true", "--baseline", "none", "--device", "cpu"]
    a.out.mkdir(parents=True, exist_ok=True)
    reports, log = Path("/tmp/profctl-reports"), a.out / "log.txt"
    reports.mkdir(exist_ok=True)
    t_start = time.perf_counter()
    results: dict[str, Any] = {"bench": [], "captures": [], "skipped": []}
    probe = subprocess.run([sys.executable, "-c", "import torch, dask, distributed, platform; print(platform.node(), "
                            "torch.__version__, torch.cuda.device_count(), dask.__version__, distributed.__version__)"],
                           capture_output=True, text=True)
    smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True) if not a.dry else None
    results["env"] = {"python": probe.stdout.strip() or probe.stderr[-500:],
                      "gpus": smi.stdout.strip() if smi else None}
    print("env:", results["env"], flush=True)

    def left() -> float:
        return a.budget_s - (time.perf_counter() - t_start)

    w2 = ["--workers", "2"]
    before_env = {"PYTHONPATH": os.pathsep.join(x for x in (a.before_path, os.environ.get("PYTHONPATH")) if x)}
    known: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "serial": ([], None), "workers2": (w2, None), "workers2_b": (w2, None), "workers2_c": (w2, None),
        "serial_b": ([], None), "serial_before": ([], before_env),
        "cold": (w2, {"PROFCTL_WARM": "0"}), "before": (w2, before_env),
        "workers1_gpu0": (["--workers", "1", "--gpus", "0"], None)}
    steps = [(n, *known[n]) for n in a.steps.split(",")]
    for name, extra, env in steps:
        prev = results["bench"][0]["wall_s"] if results["bench"] else 0
        if left() < prev * (0.7 if name.startswith(("workers2", "cold", "before")) else 1.1):
            results["skipped"].append(name)
            continue
        results["bench"].append(bench(name, extra, a, reports, log, env))
        print(f"{name}: rc {results['bench'][-1]['rc']} wall {results['bench'][-1]['wall_s']} s", flush=True)
    for tool in () if a.no_captures else ("nsys", "ncu"):
        for extra in ([], ["--workers", "2"]):
            if left() < 45:
                results["skipped"].append(f"{tool} {' '.join(extra)}")
                continue
            results["captures"].append(capture(tool, extra, reports, log))
            c = results["captures"][-1]
            print(f"{tool} {extra}: rc {c['rc']} wall {c['wall_s']} s", flush=True)
    (a.out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    summarize(results)
    return 0


def summarize(results: dict[str, Any]) -> None:
    b = {r["name"]: r for r in results["bench"]}
    print("\n== bench sweep (16 points): wall time of the whole command ==")
    ser = b.get("serial")
    for r in results["bench"]:
        ratio = f"{r['wall_s'] / ser['wall_s']:.3f}x serial" if ser else ""
        ex = r.get("executor") or {}
        print(f"{r['name']:>14}: rc {r['rc']}  {r['wall_s']:7.2f} s  {ratio}  dask start {ex.get('start_s')} s")
        if r.get("timing"):
            print(f"{'':>16}one part: {json.dumps(r['timing'])}")
        per: dict[str, list[dict[str, Any]]] = {}
        for p in r.get("parts") or []:
            per.setdefault(str(p.get("gpu_index", p.get("worker"))), []).append(p)
        for gpu, ps in sorted(per.items()):
            tm = [p.get("timing") or {} for p in ps]
            busy = sum(t.get("points_s", 0) for t in tm)
            first = json.dumps({k: tm[0].get(k) for k in ("child_age_s", "wait_s", "child_ready")})
            print(f"{'':>16}gpu{gpu}: {len(ps)} parts, cases {sum(p.get('cases', 0) for p in ps)}, part walls "
                  f"{sum(p.get('wall_s', 0) for p in ps):.2f} s, points {busy:.2f} s, waits "
                  f"{sum(t.get('wait_s', 0) for t in tm):.2f} s, overheads "
                  f"{sum(t.get('overhead_s', 0) for t in tm):.2f} s; first: {first}")
    if ser and ser.get("rows"):
        base = medians(ser["rows"])
        print("\n== per-point median vs serial (ratio); noise: workers1 (GPU 0 again) vs serial ==")
        print(f"{'backend':>10} {'seq':>5} {'causal':>6} {'serial ms':>10} "
              + " ".join(f"{n:>14}" for n in b if n != "serial"))
        for k, v in sorted(base.items()):
            cells = []
            for n, r in b.items():
                if n == "serial" or not r.get("rows"):
                    continue
                m = medians(r["rows"]).get(k)
                gix = next((x.get("gpu_index") for x in r["rows"] if (x["backend"], x["seqlen_q"], x["causal"]) == k),
                           None)
                cells.append(f"{m / v:8.3f} g{gix}" if m else "      -")
            print(f"{k[0]:>10} {k[1]:>5} {k[2]!s:>6} {v:10.4f} " + " ".join(f"{c:>14}" for c in cells))
        spread = {(x["backend"], x["seqlen_q"], x["causal"]): x.get("iqr_ratio") or 0
                  for x in ser["rows"] if x.get("status") == "ok" and x.get("median_ms")}
        for n, r in b.items():
            if n != "serial" and r.get("rows"):
                meds = medians(r["rows"])
                d = {k: abs(meds[k] / v - 1) for k, v in base.items() if k in meds}
                over = [k for k, x in d.items() if x > max(0.02, spread.get(k, 0))]
                print(f"{n}: max |ratio-1| {max(d.values()) * 100:.2f} %, median "
                      f"{statistics.median(d.values()) * 100:.2f} %; beyond max(2 %, the serial row's IQR/median): "
                      f"{over or 'none'}")
    caps: dict[str, dict[str, Any]] = {}
    for c in results["captures"]:
        caps.setdefault(c["tool"], {})["workers2" if c["args"] else "serial"] = c
    print("\n== captures: serial vs --workers 2 (two at once, one per GPU) ==")
    for tool, pair in caps.items():
        s, w = pair.get("serial"), pair.get("workers2")
        line = (f"{tool}: serial rc {s and s['rc']} {s and s['wall_s']} s; "
                f"workers2 rc {w and w['rc']} {w and w['wall_s']} s")
        if s and w and s.get("kernels") is not None and w.get("kernels") is not None:
            same = s["kernels"] == w["kernels"]
            line += f"; kernels identical: {same} ({sum(s['kernels'].values())} vs {sum(w['kernels'].values())} " \
                    f"launches, {len(s['kernels'])} vs {len(w['kernels'])} names); parts {w.get('sources')}"
            if not same:
                diff = {k: (s["kernels"].get(k), w["kernels"].get(k)) for k in set(s["kernels"]) | set(w["kernels"])
                        if s["kernels"].get(k) != w["kernels"].get(k)}
                line += f"; differ: {json.dumps(diff)[:600]}"
        print(line)
    if results["skipped"]:
        print("skipped (budget):", ", ".join(results["skipped"]))
    sys.stdout.flush()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
