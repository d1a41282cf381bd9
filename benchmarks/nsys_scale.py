"""How the nsys SQLite reader scales: build a large export from a small real one, then time `profctl report` on it.

    python benchmarks/nsys_scale.py build  [--copies 5000] [--src ../shared/fixtures/h100-sm90/attn.sqlite]
                                           [--out benchmarks/out/attn_x5000.sqlite]
    python benchmarks/nsys_scale.py measure [--db benchmarks/out/attn_x5000.sqlite] [--by-range] [--repeat 3]

`build` copies the source export's schema and its small tables once (StringIds, enums, target info, ...) and
replicates every row of the timeline tables (kernels, memcpy, memset, CUDA runtime/driver API, synchronization,
CUDA events, NVTX ranges) `--copies` times, each copy shifted by the source's time span (plus 1 ms) and its
correlation ids shifted past the source's largest, so each copy is a new, later, identical stretch of work.
NVTX domain-create events are kept once. The result is an export nsys could have written for a long run.

`measure` runs `profctl report --format json FILE` in a fresh process per repeat (so the import and the page
cache state are the same as a user's) and records wall time and the child's peak RSS (ru_maxrss of the child);
it also times a plain SQL join of kernels to their runtime calls, for scale. Results: benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import sys
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SRC = ROOT.parent / "shared" / "fixtures" / "h100-sm90" / "attn.sqlite"
OUT = ROOT / "benchmarks" / "out"

#: timeline tables whose rows are replicated; the others are copied once
REPLICATED = (
    "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
    "NVTX_EVENTS",
)
SHIFT_TIME = ("start", "end")
SHIFT_CORR = ("correlationId",)


def build(src: Path, out: Path, copies: int) -> dict[str, int]:
    """Write `out` (replacing it) with `copies` shifted copies of `src`'s timeline; return row counts."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    if tmp.exists():
        tmp.unlink()
    con = sqlite3.connect(tmp)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    con.execute(f"ATTACH DATABASE '{'file:' + quote(str(src.resolve())) + '?mode=ro&immutable=1'}' AS src")
    tables = [r[0] for r in con.execute("SELECT name FROM src.sqlite_master WHERE type='table' AND sql IS NOT NULL")]
    span_lo, span_hi = con.execute(
        "SELECT min(s), max(e) FROM (SELECT min(start) s, max(end) e FROM src.CUPTI_ACTIVITY_KIND_RUNTIME "
        "UNION ALL SELECT min(start), max(end) FROM src.CUPTI_ACTIVITY_KIND_KERNEL "
        "UNION ALL SELECT min(start), max(coalesce(end, start)) FROM src.NVTX_EVENTS)").fetchone()
    tshift = int(span_hi - span_lo) + 1_000_000
    cshift = int(con.execute("SELECT max(correlationId) FROM src.CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]) + 1
    for t in tables:
        sql = con.execute("SELECT sql FROM src.sqlite_master WHERE name=?", (t,)).fetchone()[0]
        con.execute(sql)
    con.commit()
    con.execute("BEGIN")
    for t in tables:
        cols = [r[1] for r in con.execute(f'PRAGMA src.table_info("{t}")')]
        collist = ", ".join(f'"{c}"' for c in cols)
        if t not in REPLICATED:
            con.execute(f'INSERT INTO main."{t}" ({collist}) SELECT {collist} FROM src."{t}"')
            continue
        exprs = []
        for c in cols:
            if c in SHIFT_TIME:
                exprs.append(f'"{c}" + k * {tshift}')
            elif c in SHIFT_CORR or (t == "NVTX_EVENTS" and c == "rangeId"):
                exprs.append(f'"{c}" + k * {cshift}')
            else:
                exprs.append(f'"{c}"')
        where = " WHERE eventType != 75" if t == "NVTX_EVENTS" else ""
        if t == "NVTX_EVENTS":  # domain-create events once, unshifted
            con.execute(f'INSERT INTO main."{t}" ({collist}) SELECT {collist} FROM src."{t}" WHERE eventType = 75')
        con.execute(
            f'WITH RECURSIVE copies(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM copies WHERE k + 1 < {copies}) '
            f'INSERT INTO main."{t}" ({collist}) SELECT {", ".join(exprs)} FROM copies CROSS JOIN src."{t}"{where}')
    con.commit()
    counts = {t: con.execute(f'SELECT count(*) FROM main."{t}"').fetchone()[0] for t in REPLICATED}
    con.execute("DETACH DATABASE src")
    con.close()
    os.replace(tmp, out)
    return counts


def _child_rusage_run(argv: list[str]) -> tuple[float, int, int]:
    """Run argv; return (wall seconds, child peak RSS in bytes, return code)."""
    t0 = time.perf_counter()
    pid = os.fork() if hasattr(os, "fork") else None
    if pid == 0:  # child: exec the command with output discarded
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.execvp(argv[0], argv)
    assert pid is not None
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    return wall, int(ru.ru_maxrss) * 1024, os.waitstatus_to_exitcode(status)


def measure(db: Path, repeat: int, by_range: bool) -> dict[str, object]:
    argv = [sys.executable, "-m", "profctl", "report", "--format", "json", str(db)]
    if by_range:
        argv.append("--by-range")
    runs = []
    for _ in range(repeat):
        wall, rss, rc = _child_rusage_run(argv)
        if rc != 0:
            raise SystemExit(f"profctl report failed with status {rc}: {' '.join(argv)}")
        runs.append({"wall_s": round(wall, 3), "peak_rss_mb": round(rss / 2**20, 1)})
    baseline_argv = [sys.executable, "-c", "pass"]
    base_wall, base_rss, _ = _child_rusage_run(baseline_argv)
    join = _plain_join(db)
    return {"db": str(db), "db_mb": round(db.stat().st_size / 2**20, 1), "by_range": by_range, "runs": runs,
            "python_startup": {"wall_s": round(base_wall, 3), "peak_rss_mb": round(base_rss / 2**20, 1)},
            "plain_join": join, "rows": _counts(db)}


def _connect(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{quote(str(db.resolve()))}?mode=ro&immutable=1", uri=True)


def _counts(db: Path) -> dict[str, int]:
    con = _connect(db)
    have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    out = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in REPLICATED if t in have}
    con.close()
    return out


def _plain_join(db: Path) -> dict[str, float]:
    """The obvious query, for scale: kernels joined to their runtime calls (SQLite picks an automatic index)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    con = _connect(db)
    t0 = time.perf_counter()
    n = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r "
                    "ON r.correlationId = k.correlationId").fetchone()[0]
    wall = time.perf_counter() - t0
    con.close()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"rows": n, "wall_s": round(wall, 3), "rss_growth_mb": round((after - before) / 1024, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--src", type=Path, default=DEFAULT_SRC)
    b.add_argument("--copies", type=int, default=5000)
    b.add_argument("--out", type=Path, default=None)
    m = sub.add_parser("measure")
    m.add_argument("--db", type=Path, default=OUT / "attn_x5000.sqlite")
    m.add_argument("--repeat", type=int, default=3)
    m.add_argument("--by-range", action="store_true")
    a = p.parse_args(argv)
    if a.cmd == "build":
        out = a.out or OUT / f"attn_x{a.copies}.sqlite"
        t0 = time.perf_counter()
        counts = build(a.src, out, a.copies)
        print(json.dumps({"out": str(out), "mb": round(out.stat().st_size / 2**20, 1),
                          "build_s": round(time.perf_counter() - t0, 1), "rows": counts}, indent=1))
    else:
        print(json.dumps(measure(a.db, a.repeat, a.by_range), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
