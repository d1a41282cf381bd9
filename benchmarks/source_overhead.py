"""`profctl ncu --recipe stalls|explain` against the same ncu command line alone (issues 26, 31: at most 1.1x), on a
program of one's own (`-- python tests/data/planted/planted_triton.py`) and on a built-in backend; and, to find
why ncu itself ran about 1 s longer inside profctl than alone, the same ncu argv started other ways.

Per case: a discarded warm-up pair, then `--rounds` rounds of every way, the order rotating from round to round
(profctl is first in one round, last in another). The ncu argv is the one profctl recorded in its run's manifest.
profctl's time includes reading the report in depth (every kernel's warp samples, lines and findings) and
printing the source view. Ways:

- ``profctl``: the whole `profctl ncu` command (wall time; its manifest gives ncu's own wall time inside it and
  where profctl's own time went: before ncu, reading the report, the rest);
- ``profctl-old``: the same command run by the code before (`--old PATH`: a checkout, run from its folder);
- ``alone``: subprocess.run with the output captured (a pipe), as one runs ncu by hand in a script;
- ``proc``: profctl.proc.run from this process (output to a log file, stdin /dev/null, a session of its own),
  as profctl starts it, without anything else profctl does;
- ``proc-nvml``: the same right after the NVML start and stop profctl does before it (nvml.here, the run
  manifest's environment);
- ``proc-nvml-held``: the same with NVML kept started while ncu runs.

For the file-based ways a thread reads ncu's log as it grows and notes when ncu connected to the program and
when its first and last launch ended (profctl's own run records the same in its manifest).

    python3 benchmarks/source_overhead.py --out $OUT/source_overhead.json --rounds 3 \
        [--cases program,builtin] [--ways profctl,alone,proc,proc-nvml,proc-nvml-held]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def newest(root: Path) -> dict[str, Any]:
    run = sorted(p for p in root.iterdir() if p.is_dir())[-1]
    return json.loads((run / "manifest.json").read_text())


def ncu_alone(root: Path, work: Path) -> list[str]:
    argv = list(next(t["argv"] for t in newest(root)["tools"] if t["name"] == "ncu"))
    argv[argv.index("--export") + 1] = str(work / "alone.ncu-rep")
    return argv


class Phases:
    """A thread reading ncu's log as it grows: when it connected and its first and last launch ended."""

    def __init__(self, log: Path) -> None:
        from profctl.tools.ncu import ProgressReader

        self.log, self.reader, self.t0 = log, ProgressReader(), time.time()
        self.stop = threading.Event()
        self.offset = log.stat().st_size if log.exists() else 0
        self.t = threading.Thread(target=self._loop, daemon=True)
        self.t.start()

    def _pump(self) -> None:
        try:
            with open(self.log, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return
        self.offset += len(data)
        self.reader.feed(data.decode("utf-8", errors="replace"), time.time())

    def _loop(self) -> None:
        while not self.stop.wait(0.2):
            self._pump()

    def end(self) -> dict[str, float | None]:
        self.stop.set()
        self.t.join()
        self._pump()
        r = self.reader
        return {k: (round(v - self.t0, 3) if v is not None else None) for k, v in
                (("connected_s", r.connected), ("first_launch_s", r.first_end), ("last_launch_s", r.last_end))}


def ways(case: list[str], root: Path, work: Path, old: str | None = None
         ) -> dict[str, Callable[[], dict[str, Any]]]:
    from profctl import nvml, proc, run_store

    pa = profctl_argv(case, root)
    root_old = work / "reports-old"
    po = profctl_argv(case, root_old)
    here = Path.cwd()
    alone = ncu_alone(root, work)
    log = work / "alone.log"

    def profctl() -> dict[str, Any]:
        wall = timed(pa)
        m = newest(root)
        return {"wall_s": wall, "ncu_s": m.get("ncu_wall_s"), "total_s": m.get("total_wall_s"),
                "timing": m.get("timing")}

    def profctl_old() -> dict[str, Any]:  # python -m: the old checkout's folder first on sys.path
        argv = [str(here / a) if a.startswith("tests/") else a for a in po]
        wall = timed(argv, cwd=Path(old) if old else None)
        m = newest(root_old)
        return {"wall_s": wall, "ncu_s": m.get("ncu_wall_s"), "total_s": m.get("total_wall_s")}

    def by_pipe() -> dict[str, Any]:
        return {"wall_s": timed(alone), "ncu_s": None}

    def by_proc(before: Callable[[], Any] | None = None, held: bool = False) -> dict[str, Any]:
        nv: Any = None
        if held:
            import pynvml

            nv = pynvml
            nv.nvmlInit()
        try:
            started = before() if before is not None else None
            ph = Phases(log)
            t0 = time.perf_counter()
            res = proc.run(alone, log=log, timeout_s=900)
            wall = time.perf_counter() - t0
            if isinstance(started, subprocess.Popen):
                started.wait(timeout=120)
            return {"wall_s": wall, "ncu_s": res.wall_s, "phases": ph.end()}
        finally:
            if nv is not None:
                nv.nvmlShutdown()

    def nvml_as_profctl() -> None:
        nvml.here("cuda")
        run_store.environment()

    def warm_as_profctl() -> subprocess.Popen[bytes]:
        """ncu_report's one-time start on the small report while ncu runs, as profctl's thread does it, but in a
        fresh process each time (in this process it would be paid once); waited for after ncu"""
        return subprocess.Popen([sys.executable, "-c", "from profctl.tools import ncu; ncu.warm_reader()"])

    def inproc() -> dict[str, Any]:
        """profctl's command run inside this process (typer's CliRunner): no Python start, no imports, the
        pipeline's threads in a process that has been running for a while"""
        from typer.testing import CliRunner

        from profctl.cli import app

        t0 = time.perf_counter()
        CliRunner().invoke(app, pa[3:])
        wall = time.perf_counter() - t0
        m = newest(root)
        tm = m.get("timing") or {}
        return {"wall_s": wall, "ncu_s": m.get("ncu_wall_s"), "total_s": m.get("total_wall_s"),
                "phases": (tm.get("ncu_phases") or [None])[0]}

    return {"profctl": profctl, "profctl-old": profctl_old, "alone": by_pipe, "proc": by_proc, "inproc": inproc,
            "proc-nvml": lambda: by_proc(nvml_as_profctl), "proc-nvml-held": lambda: by_proc(held=True),
            "proc-warm": lambda: by_proc(warm_as_profctl)}


def measure(name: str, case: list[str], rounds: int, names: list[str], old: str | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as td:
        root, work = Path(td) / "reports", Path(td)
        first = timed(profctl_argv(case, root))  # warm-up (Triton compiles, caches) and the ncu argv
        table = ways(case, root, work, old)
        timed(ncu_alone(root, work))
        if "profctl-old" in names:
            table["profctl-old"]()  # its warm-up
        got: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
        for r in range(rounds):
            order = names[r % len(names):] + names[: r % len(names)]  # two ways: they alternate
            if r % 2 and len(names) > 2:  # more: the rotation is reversed every other round
                order.reverse()
            for n in order:
                got[n].append(table[n]())
            print(f"{name} round {r + 1} ({' -> '.join(order)}): "
                  + ", ".join(f"{n} {got[n][-1]['wall_s']:.2f} s" for n in names), flush=True)
    med = {n: statistics.median(x["wall_s"] for x in v) for n, v in got.items()}
    out: dict[str, Any] = {"case": name, "argv": profctl_argv(case, Path("REPORTS")), "warmup_profctl_s": first,
                           "runs": got, "median_s": med}
    for way, key in (("profctl", ""), ("profctl-old", "_old")):
        if way in med and "alone" in med:
            out[f"ratio{key}"] = med[way] / med["alone"]
            # the same round's two runs against each other: drift between rounds (clocks, caches) cancels
            out[f"paired_ratio{key}"] = statistics.median(p["wall_s"] / a["wall_s"] for p, a in zip(
                got[way], got["alone"], strict=True))
    return out


def report(o: dict[str, Any]) -> None:
    med = o["median_s"]
    line = f"{o['case']}: " + ", ".join(f"{n} {v:.2f} s" for n, v in med.items())
    if "ratio" in o:
        line += f"; profctl / alone {o['ratio']:.3f}x"
    if "paired_ratio" in o:
        line += f" (median of the rounds' own ratios {o['paired_ratio']:.3f}x)"
    if "ratio_old" in o:
        line += f"; the code before / alone {o['ratio_old']:.3f}x (rounds' own {o['paired_ratio_old']:.3f}x)"
    print(line)
    p = o["runs"].get("profctl") or []
    if p:
        ncu_in = statistics.median(x["ncu_s"] for x in p if x.get("ncu_s"))
        tm = [x.get("timing") or {} for x in p]

        def m(key: str) -> float:
            vals = [t[key] for t in tm if t.get(key) is not None]
            return statistics.median(vals) if vals else float("nan")

        own = statistics.median(x["total_s"] - x["ncu_s"] for x in p if x.get("total_s") and x.get("ncu_s"))
        start = statistics.median(x["wall_s"] - x["total_s"] for x in p if x.get("total_s"))
        print(f"  inside profctl: ncu {ncu_in:.2f} s; profctl's pipeline around it {own:.2f} s (before ncu "
              f"{m('before_ncu_s'):.2f}, reading the report {m('read_s'):.2f}, summary written {m('after_s'):.2f}); "
              f"Python start, options and printing {start:.2f} s")
        phases = [ph for t in tm for ph in (t.get("ncu_phases") or [])]
        if phases:
            print("  ncu inside profctl, medians (s after start): " + ", ".join(
                f"{k} {statistics.median(ph[k] for ph in phases if ph.get(k) is not None):.2f}"
                for k in ("connected_s", "read_ahead_s", "first_launch_s", "last_launch_s", "exit_s")
                if any(ph.get(k) is not None for ph in phases)))
    for n, v in o["runs"].items():
        phases = [x["phases"] for x in v if x.get("phases")]
        if phases:
            print(f"  {n}: ncu {statistics.median(x['ncu_s'] for x in v):.2f} s; " + ", ".join(
                f"{k} {statistics.median(ph[k] for ph in phases if ph.get(k) is not None):.2f}"
                for k in ("connected_s", "first_launch_s", "last_launch_s")
                if any(ph.get(k) is not None for ph in phases)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", default="program,builtin")
    ap.add_argument("--ways", default="profctl,alone", help="for every case")
    ap.add_argument("--why-ways", default="profctl,alone,proc,proc-nvml,proc-nvml-held",
                    help="for the first case (where the diagnosis runs)")
    ap.add_argument("--old", default=None, help="a checkout of the code before, for the way profctl-old")
    a = ap.parse_args()
    out = []
    for i, n in enumerate(a.cases.split(",")):
        names = (a.why_ways if i == 0 else a.ways).split(",")
        out.append(measure(n, CASES[n], a.rounds, names, a.old))
        report(out[-1])
        Path(a.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
