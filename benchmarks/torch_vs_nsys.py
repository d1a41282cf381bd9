"""Per-kernel times from `profctl torch` against Nsight Systems on the same workload (run on the GPU machine).

    python3 benchmarks/torch_vs_nsys.py --out DIR [--backends sdpa-flash,sdpa-cudnn,eager] [--budget-s 240]

Runs the torch.profiler pipeline twice (A, B: run-to-run noise) on all backends in one process each, and
``nsys profile --capture-range=cudaProfilerApi --capture-range-end=stop`` once per backend (one case per process,
so nsys also sees exactly the measured iterations), then ``nsys stats --report cuda_gpu_kern_sum``. Kernels are
matched by profctl.kernels.match_key (nsys writes ``(int)128`` where torch writes ``128``). Writes
``compare.json`` and ``compare.md`` into DIR.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from profctl import proc  # noqa: E402
from profctl.kernels import match_key, short_name  # noqa: E402
from profctl.pipelines import torchprof_pipeline  # noqa: E402
from profctl.pipelines.targets import Workload  # noqa: E402
from profctl.spec import AttentionSweep  # noqa: E402


def workload(backends: str, a: argparse.Namespace) -> Workload:
    return Workload(AttentionSweep.from_strings(
        backend=backends, batch=a.batch, seqlen=a.seqlen, heads=a.heads, head_dim=128, dtype="bf16",
        pass_="fwd+bwd", device="cuda", warmup=a.warmup, iters=a.iters, check=False))


def torch_rows(wl: Workload, tag: str, work: Path) -> dict[tuple[str, str], dict[str, float]]:
    req = torchprof_pipeline.TorchRequest(target=wl, reports=work / f"torch-{tag}", timeout_s=300)
    s = torchprof_pipeline.run(req).summary
    out: dict[tuple[str, str], dict[str, float]] = {}
    for k in s.kernels:
        if k.extra.get("kind") != "kernel" or not k.nvtx_range:
            continue
        backend = k.nvtx_range.split("[", 1)[0]
        key = (backend, match_key(k.name))
        cur = out.setdefault(key, {"count": 0, "total_ns": 0.0, "med_ns": k.med_ns, "name": k.name})  # type: ignore[dict-item]
        cur["count"] += k.count
        cur["total_ns"] += k.total_ns
    return out


def nsys_rows(wl: Workload, backend: str, work: Path, nsys: str, tag: str) -> dict[tuple[str, str], dict[str, Any]]:
    out = work / f"nsys-{backend}-{tag}"
    child = wl.resolve().argv()
    argv = [nsys, "profile", "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none",
            "--capture-range=cudaProfilerApi", "--capture-range-end=stop", f"--output={out}",
            "--force-overwrite=true", *child]
    log = work / "nsys.log"
    proc.run(argv, log=log, timeout_s=200, env=wl.env())
    proc.run([nsys, "stats", "--force-export=true", "--format=csv", f"--output={out}",
              "--report=cuda_gpu_kern_sum", f"{out}.nsys-rep"], log=log, timeout_s=200)
    path = sorted(glob.glob(f"{out}*cuda_gpu_kern_sum*.csv"))[0]
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            key = (backend, match_key(r["Name"]))
            rows[key] = {"count": int(r["Instances"]), "total_ns": float(r["Total Time (ns)"]),
                         "med_ns": float(r["Med (ns)"]), "name": r["Name"]}
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--backends", default="sdpa-flash,sdpa-cudnn,eager")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seqlen", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--budget-s", type=float, default=240.0, help="skip the second nsys round past this")
    a = ap.parse_args()
    out = Path(a.out)
    work = Path("/tmp/torch_vs_nsys")
    work.mkdir(parents=True, exist_ok=True)
    nsys = os.environ.get("NSYS", "nsys")
    t0 = time.time()
    wl = workload(a.backends, a)
    ta = torch_rows(wl, "A", work)
    tb = torch_rows(wl, "B", work)
    ns: dict[tuple[str, str], dict[str, Any]] = {}
    ns2: dict[tuple[str, str], dict[str, Any]] = {}
    for b in a.backends.split(","):
        ns.update(nsys_rows(workload(b, a), b, work, nsys, "1"))
    if time.time() - t0 < a.budget_s:
        for b in a.backends.split(","):
            ns2.update(nsys_rows(workload(b, a), b, work, nsys, "2"))
    rows = []
    for key in sorted(set(ta) | set(ns)):
        x, y, z, w = ta.get(key), tb.get(key), ns.get(key), ns2.get(key)

        def avg(d: dict[str, Any] | None) -> float | None:
            return d["total_ns"] / d["count"] if d and d["count"] else None

        r: dict[str, Any] = {"backend": key[0], "kernel": short_name((x or z or {}).get("name", key[1]), 50),
                             "torch_A_count": x and x["count"], "nsys_count": z and z["count"],
                             "torch_A_avg_ns": avg(x), "torch_B_avg_ns": avg(y), "nsys_avg_ns": avg(z),
                             "nsys2_avg_ns": avg(w)}
        if r["torch_A_avg_ns"] and r["nsys_avg_ns"]:
            r["torch_vs_nsys_pct"] = 100 * (r["torch_A_avg_ns"] / r["nsys_avg_ns"] - 1)
        if r["torch_A_avg_ns"] and r["torch_B_avg_ns"]:
            r["torch_A_vs_B_pct"] = 100 * (r["torch_A_avg_ns"] / r["torch_B_avg_ns"] - 1)
        if r["nsys_avg_ns"] and r["nsys2_avg_ns"]:
            r["nsys_1_vs_2_pct"] = 100 * (r["nsys_avg_ns"] / r["nsys2_avg_ns"] - 1)
        rows.append(r)
    big = [r for r in rows if (r.get("nsys_avg_ns") or 0) >= 20_000 and "torch_vs_nsys_pct" in r]

    def med_abs(k: str) -> float | None:
        xs = [abs(r[k]) for r in big if k in r]
        return statistics.median(xs) if xs else None

    res = {"args": vars(a), "wall_s": time.time() - t0, "rows": rows,
           "kernels_over_20us": len(big),
           "median_abs_torch_vs_nsys_pct": med_abs("torch_vs_nsys_pct"),
           "median_abs_torch_A_vs_B_pct": med_abs("torch_A_vs_B_pct"),
           "median_abs_nsys_1_vs_2_pct": med_abs("nsys_1_vs_2_pct"),
           "max_abs_torch_vs_nsys_pct": max((abs(r["torch_vs_nsys_pct"]) for r in big), default=None)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(json.dumps(res, indent=1))
    cols = ["backend", "kernel", "torch_A_count", "nsys_count", "torch_A_avg_ns", "torch_B_avg_ns", "nsys_avg_ns",
            "nsys2_avg_ns", "torch_vs_nsys_pct", "torch_A_vs_B_pct", "nsys_1_vs_2_pct"]
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        md.append("| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |")
    (out / "compare.md").write_text("\n".join(md) + "\n")
    print(json.dumps({k: v for k, v in res.items() if k != "rows"}, indent=1))
    return 0


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.1f}"
    return "" if v is None else str(v)


if __name__ == "__main__":
    sys.exit(main())
