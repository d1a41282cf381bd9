"""`profctl proton` at the shapes people profile (issue 40): wall time, peak memory and each phase's seconds.

    python benchmarks/proton_scale.py gpu [--out benchmarks/out/proton_scale.json] [--sweep/--no-sweep]
    BEFORE=/path/to/older/tree python benchmarks/proton_scale.py gpu     # the same commands on an older profctl
    python benchmarks/proton_scale.py cpu [--ctas 1024] [--gz]            # read a generated trace (no GPU)
    python benchmarks/proton_scale.py gen OUT.chrome_trace [--ctas 1024]  # just write one

`gpu` runs, each in a fresh process (``python -m profctl`` as installed, or the tree named by ``BEFORE``, an
older copy of the repository such as ``git archive 213f9c4 | tar -x -C DIR``), one case
``profctl proton -b triton -s 4096 --heads 32 -d 128`` (b1 bf16 non-causal) and the four-case sweep
``--causal false,true -s 4096,8192``, each with ``--overhead 5``. Per command: wall seconds; peak RSS of profctl
itself and of its largest descendant (``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` of a small wrapper that
runs one command: the children's peak is then the largest process of that command's tree, each waited for);
each case's phases as the run's manifest holds them (an older tree: none); the trace's size; and the first
lines profctl printed while it worked (progress). Done means one case under 20 s and 2 GB, the sweep under 2 min.

`cpu` writes a synthetic Proton trace shaped like profctl's forward at b1 h32 s4096 d128 (8 warps, 32 key
blocks, the seven scopes; 1,024 CTAs: about 1.3 M scope instances, 330 MB) with the writer's exact layout, then
reads it with profctl's reader and analysis in a child process, which reports its wall time and peak RSS and
whether the per-scope counts and totals equal what was written. tests/unit/test_proton_scale.py reads a smaller
one under an address-space limit.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
SCOPES_ONCE = ("load_q", "store")
SCOPES_LOOP = ("load_k", "qk", "softmax", "load_v", "pv")
#: mean cycles per instance, as the H200 recorded them (benchmarks/RESULTS.md, issue 30)
MEAN = {"load_q": 2135, "load_k": 79, "qk": 961, "softmax": 1321, "load_v": 153, "pv": 229, "store": 1444}


def write_trace(f: IO[str], *, ctas: int = 1024, warps: int = 8, blocks: int = 32, sms: int = 132,
                seed: int = 0) -> dict[str, Any]:
    """A Proton Chrome trace (Triton 3.6's writer: sorted keys, one "X" event per scope instance per warp, cycles /
    1000 as ts and dur) of a forward like profctl's; returns what it holds: per scope count and total cycles."""
    rnd = random.Random(seed)
    counts = dict.fromkeys((*SCOPES_ONCE, *SCOPES_LOOP), 0)
    totals = dict.fromkeys(counts, 0)
    f.write('{"displayTimeUnit":"ns","traceEvents":[')
    first = True
    stack = '["ROOT","_fwd_kernel"]'
    for c in range(ctas):
        sm = c % sms
        base = (c // sms) * 130_000
        pid = f"_fwd_kernel Core{sm} CTA{c}"
        fin = 150 + c % 40
        out = []
        for w in range(warps):
            t = base + rnd.randrange(0, 40)
            seq = [("load_q", 0)] + [(s, b) for b in range(blocks) for s in SCOPES_LOOP] + [("store", 0)]
            for name, _ in seq:
                dur = max(1, int(MEAN[name] * (0.75 + 0.5 * rnd.random())))
                counts[name] += 1
                totals[name] += dur
                out.append(f'{{"args":{{"Finalization Time (ns)":{fin},"Frequency (MHz)":1000.0,"call_stack":'
                           f'{stack}}},"cat":"_fwd_kernel","cname":"cq_build_passed","dur":{dur / 1000!r},'
                           f'"name":"{name}","ph":"X","pid":"{pid}","tid":"warp {w} (line 0)","ts":{t / 1000!r}}}')
                t += dur + rnd.randrange(5, 30)
        f.write(("" if first else ",") + ",".join(out))
        first = False
    f.write("]}\n")
    return {"ctas": ctas, "warps": warps, "blocks": blocks, "counts": counts, "totals": totals}


def generate(path: Path, *, ctas: int, gz: bool = False) -> dict[str, Any]:
    if gz:
        with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as g:
            return write_trace(g, ctas=ctas)
    with open(path, "w", encoding="utf-8") as f:
        return write_trace(f, ctas=ctas)


#: run in a child: read and analyse a trace with the profctl on sys.path, report time, RSS and the figures
READER = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from profctl.analysis import timeline
from profctl.readers import proton_trace
tr = proton_trace.read(sys.argv[1])
t1 = time.perf_counter()
rep = timeline.analyze(tr)
t2 = time.perf_counter()
k = rep.kernels[0]
print(json.dumps({"read_s": round(t1 - t0, 2), "analyze_s": round(t2 - t1, 2), "events": int(tr.n_events),
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "counts": {s.name: s.count for s in k.scopes}, "totals": {s.name: s.total_cycles for s in k.scopes},
                  "ctas": k.ctas}))
"""


def read_in_child(path: Path, tree: Path, *, limit_as: int | None = None) -> dict[str, Any]:
    """Read `path` with the profctl of `tree` in a fresh child (an address-space limit in bytes if given)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}

    def limit() -> None:
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", READER, str(path)], capture_output=True, text=True, env=env,
                       preexec_fn=limit, cwd=tree, timeout=1800)
    wall = time.perf_counter() - t0
    if r.returncode:
        return {"error": r.stderr.strip().splitlines()[-1:] or [f"exit {r.returncode}"], "wall_s": round(wall, 2)}
    got: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    got["wall_s"] = round(wall, 2)
    return got


def cpu(a: argparse.Namespace) -> dict[str, Any]:
    before = os.environ.get("BEFORE")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / ("big.chrome_trace" + (".gz" if a.gz else ""))
        t0 = time.perf_counter()
        want = generate(path, ctas=a.ctas, gz=a.gz)
        out: dict[str, Any] = {"ctas": a.ctas, "bytes": path.stat().st_size,
                               "generate_s": round(time.perf_counter() - t0, 1)}
        trees = ([("before", Path(before))] if before else []) + [("after", ROOT)]
        for label, tree in trees:
            got = read_in_child(path, tree)
            got["same_counts"] = got.get("counts") == want["counts"]
            got["same_totals"] = got.get("totals") == want["totals"]
            got.pop("counts", None)
            got.pop("totals", None)
            out[label] = got
    return out


# ------------------------------------------------------------------------------------------------------ the GPU
ONE = ["proton", "-b", "triton", "-s", "4096", "--heads", "32", "-d", "128", "--overhead", "5", "-f", "json"]
SWEEP = ["proton", "-b", "triton", "-s", "4096,8192", "--heads", "32", "-d", "128", "--causal", "false,true",
         "--overhead", "5", "-f", "json"]

#: one command in a wrapper that reports its own and its descendants' peak RSS (getrusage of the waited-for tree)
WRAP = r"""
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
wall = time.perf_counter() - t0
ch = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": p.returncode, "wall_s": round(wall, 2), "peak_rss_children_mb": round(ch.ru_maxrss / 1024, 1),
                  "child_cpu_s": round(ch.ru_utime + ch.ru_stime, 1), "stderr": p.stderr[-6000:]}))
"""


def run_profctl(tree: Path, args: list[str], reports: Path, timeout_s: float) -> dict[str, Any]:
    """`python -m profctl ARGS` from `tree` with a run store of its own; wall, peak RSS, phases, trace sizes."""
    env = dict(os.environ)
    if tree != ROOT:  # an older tree as it lies (as benchmarks/gpu.sh's plain_tree: profctl.workloads by a link)
        for link, target in (("workloads", "../workloads"), ("builtin_recipes", "../recipes")):
            p = tree / "profctl" / link
            if not p.exists() and (tree / target[3:]).is_dir():
                p.symlink_to(target)
        env["PYTHONPATH"] = str(tree)
    cmd = [sys.executable, "-c", WRAP, sys.executable, "-m", "profctl", *args, "--reports", str(reports)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tree, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"timed_out": timeout_s}
    try:
        got: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": (r.stderr or r.stdout)[-2000:]}
    lines = got.pop("stderr", "").splitlines()
    got["progress_lines"] = [ln for ln in lines if "profctl: case-" in ln][:40]
    got["last_lines"] = lines[-6:]
    runs = sorted(p for p in reports.iterdir() if p.is_dir()) if reports.is_dir() else []
    if runs:
        man = json.loads((runs[-1] / "manifest.json").read_text())
        got["phases"] = man.get("phases")
        got["sampled"] = {k: {f: v.get(f) for f in ("how", "ctas", "launches", "layout")} | {
            "kernels": {kn: {f: kv.get(f) for f in ("ctas_total", "ctas_kept", "overflowed")} | {
                "counts": kv.get("counts"), "cycles_records": kv.get("cycles")} for kn, kv in
                (v.get("kernels") or {}).items()}} for k, v in (man.get("sampled") or {}).items()}
        got["traces_mb"] = {p.name: round(p.stat().st_size / 1e6, 2) for p in runs[-1].glob("*.chrome_trace")}
        got["trees"] = {p.name: _tree_cycles(p) for p in runs[-1].glob("*.hatchet")}
    return got


def _tree_cycles(p: Path) -> dict[str, int] | str:
    try:
        doc = json.loads(p.read_text())
        out: dict[str, int] = {}
        for kern in doc[0].get("children", []):
            for s in kern.get("children", []):
                out[s["frame"]["name"]] = int(s["metrics"].get("cycles", 0))
        return out
    except Exception as e:  # the benchmark reports it, whatever it is
        return f"unread: {type(e).__name__}: {e}"


def gpu(a: argparse.Namespace) -> dict[str, Any]:
    trees = [("after", ROOT)]
    if os.environ.get("BEFORE"):
        trees.insert(0, ("before", Path(os.environ["BEFORE"])))
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        for label, tree in trees:
            for what, args, limit in (("one", ONE, a.timeout_one), ("sweep", SWEEP, a.timeout_sweep)):
                if what == "sweep" and not a.sweep:
                    continue
                if what == "sweep" and label == "before" and not a.sweep_before:
                    continue
                got = run_profctl(tree, args, Path(d) / f"{label}-{what}", limit)
                out[f"{label}/{what}"] = got
                print(f"{label}/{what}: " + json.dumps({k: v for k, v in got.items()
                                                        if k in ("rc", "wall_s", "peak_rss_children_mb",
                                                                 "timed_out", "traces_mb")}), file=sys.stderr)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gpu")
    g.add_argument("--out", type=Path, default=OUT / "proton_scale.json")
    g.add_argument("--sweep", action=argparse.BooleanOptionalAction, default=True)
    g.add_argument("--sweep-before", action=argparse.BooleanOptionalAction, default=False,
                   help="also the sweep on BEFORE (it ran past 200 s in the issue)")
    g.add_argument("--timeout-one", type=float, default=240.0)
    g.add_argument("--timeout-sweep", type=float, default=240.0)
    c = sub.add_parser("cpu")
    c.add_argument("--ctas", type=int, default=1024)
    c.add_argument("--gz", action="store_true")
    c.add_argument("--out", type=Path, default=None)
    n = sub.add_parser("gen")
    n.add_argument("path", type=Path)
    n.add_argument("--ctas", type=int, default=1024)
    a = ap.parse_args()
    if a.cmd == "gen":
        print(json.dumps(generate(a.path, ctas=a.ctas, gz=a.path.suffix == ".gz")))
        return 0
    res = gpu(a) if a.cmd == "gpu" else cpu(a)
    text = json.dumps(res, indent=1)
    print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
