"""`profctl runs` lists the run store; `profctl show RUN` prints one run: its manifest, files and results."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from profctl.cli._command import conflict
from profctl.cli._guard import guard
from profctl.cli._messages import note
from profctl.cli._output import check_format, check_limit, check_outputs, emit
from profctl.cli._workload_options import REPORTS_HELP
from profctl.errors import BadReport, UsageError
from profctl.fsutil import current_umask
from profctl.render.tables import FORMATS, console, markdown, print_table, to_csv

if TYPE_CHECKING:
    from profctl.schema.bench import BenchRow

#: the kinds of run the profiling commands write (ab: profctl bench --ab)
KINDS = ("bench", "nsys", "ncu", "torch", "ab")


def _short_time(iso: Any) -> str:
    s = str(iso or "")
    return s[:19].replace("T", " ") if s else "-"


def _dur(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _cmd(m: dict[str, Any], width: int | None = 70) -> str:
    """The run's command line, cut to `width` for a table a person reads; whole (None) for csv and json."""
    c = m.get("command")
    text = " ".join(shlex.quote(str(x)) for x in c) if isinstance(c, list) else str(c or "")
    return text if width is None else _cut(text, width)


def _cut(text: str, width: int) -> str:
    """`text` in at most `width` characters, an ellipsis saying where it was cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def _gpu(m: dict[str, Any]) -> str:
    dev = m.get("device") or {}
    env = m.get("environment") or {}
    return str(dev.get("name") or dev.get("nvml_name") or env.get("gpu") or "-")


def _points(m: dict[str, Any]) -> str:
    if m.get("points") is not None:
        return f"{m.get('rows') if m.get('rows') is not None else '?'}/{m.get('points')}"
    if m.get("launches") is not None:
        return f"{m['launches']} launches"
    return "-"


@guard
def runs(
    reports: Path | None = typer.Option(None, "--reports", help=REPORTS_HELP),
    kind: str | None = typer.Option(None, "--kind", help="only runs of this kind (bench, nsys, ncu, torch, ab)"),
    status: str | None = typer.Option(None, "--status", help="only runs with this status"),
    limit: int = typer.Option(0, "--limit", help="the N most recent runs in the table (table, markdown) "
                                                 "[default: all]"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown, csv or json"),
) -> None:
    """List the runs in the run store, oldest first (the last is the newest)."""
    from profctl import run_store

    check_format(format, FORMATS)
    check_limit(limit, format)
    if kind is not None and kind not in KINDS:
        raise UsageError(f"--kind {kind!r}: choose from {', '.join(KINDS)}")
    if status is not None and status not in (*run_store.STATUSES, "unreadable"):
        raise UsageError(f"--status {status!r}: choose from {', '.join((*run_store.STATUSES, 'unreadable'))}")
    items = run_store.list_runs(reports)
    if kind:
        items = [r for r in items if r.kind == kind]
    if status:
        items = [r for r in items if r.status == status]
    more = max(0, len(items) - limit) if limit > 0 else 0
    if limit > 0:
        items = items[-limit:]
    if format == "json":
        sys.stdout.write(json.dumps([{"path": str(r.path), "status": r.status, "note": r.note,
                                      "manifest": r.manifest} for r in items], indent=1, default=str) + "\n")
        return
    rows = []
    for r in items:
        m = r.manifest
        pts = _points(m)
        rows.append({"run": r.path.name, "kind": r.kind, "status": r.status, "started": _short_time(m.get("started")),
                     "duration": _dur(r.duration_s()), "label": m.get("label") or "", "gpu": _gpu(m),
                     "points": pts, "command": _cmd(m, None if format == "csv" else 70)})
    if format == "csv":  # data: a value nothing recorded is empty, not the tables' "-"
        sys.stdout.write(to_csv([{k: "" if v == "-" else v for k, v in r.items()} for r in rows]))
    elif format == "markdown":
        sys.stdout.write(markdown(rows))
        if more:
            sys.stdout.write(f"\n_{more} older run(s) not shown; --limit 0 shows all_\n")
    else:
        con = console()
        if not rows:
            what = " ".join(x for x in (status, kind) if x)
            con.print(f"no {what + ' ' if what else ''}runs under {run_store.reports_root(reports)}")
            return
        print_table(con, f"runs in {run_store.reports_root(reports)}", rows)
        if more:
            con.print(f"  ({more} older run(s) not shown; --limit 0 shows all)", style="dim")


def _facts(info: Any) -> list[tuple[str, str]]:
    m = info.manifest
    env = m.get("environment") or {}
    dev = m.get("device") or {}
    git = m.get("git") or {}
    clocks = m.get("clocks") or {}
    out = [("run", info.run_id), ("kind", info.kind),
           ("status", info.status + (f" ({info.note})" if info.note else "")
            + (f": {m['reason']}" if m.get("reason") and not info.note else "")),
           ("label", str(m.get("label") or "-")), ("command", _cmd(m, 400)), ("cwd", str(m.get("cwd") or "-")),
           ("started", str(m.get("started") or "-")), ("ended", str(m.get("ended") or "-")),
           ("duration", _dur(info.duration_s())), ("host", str(m.get("host") or "-")),
           ("gpu", _gpu(m)), ("SM count", str(dev.get("sm_count") or env.get("sm_count") or "-")),
           ("driver", str(env.get("driver") or dev.get("driver") or "-")),
           ("PyTorch", str(dev.get("torch") or env.get("torch") or "-")),
           ("CUDA", str(dev.get("cuda") or env.get("cuda") or "-")),
           ("flash-attn", str(env.get("flash_attn") or "-")), ("FA4", str(env.get("fa4") or "-")),
           ("git", (f"{git.get('commit', '')[:12]}{' (dirty)' if git.get('dirty') else ''} in {git.get('repo')}"
                    if git.get("commit") else "-"))]
    if clocks:
        rng = (f"{clocks.get('sm_clock_mhz_min')}..{clocks.get('sm_clock_mhz_max')} MHz"
               if clocks.get("sm_clock_mhz_min") else "not sampled")
        out.append(("SM clock", rng))
        out.append(("throttle", ", ".join(clocks.get("throttle_reasons") or []) or "none seen"))
        if clocks.get("clock_warnings"):
            out.append(("clock warnings", str(len(clocks["clock_warnings"]))))
    if m.get("points") is not None:
        out.append(("points", f"{m.get('rows')} of {m.get('points')} finished"))
    for t in m.get("tools") or []:
        out.append((f"tool {t.get('name')}", (f"{t.get('version')}: " if t.get("version") else "")
                    + _cut(" ".join(str(a) for a in t.get("argv") or []), 300)))
    return out


@guard
def show(
    run: str = typer.Argument("latest", help="a run directory, its id, a unique part of the id, or 'latest'"),
    reports: Path | None = typer.Option(None, "--reports", help=REPORTS_HELP),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown, csv (the rows) or json"),
    repro: bool = typer.Option(False, "--repro", help="write a bash script that reruns the run's case exactly "
                                                      "(command, environment, version and GPU checks)"),
    output: Path | None = typer.Option(None, "--output", "-o", help="--repro: the script's path [default: "
                                                                    "./repro-<run id>.sh]; '-' prints it"),
) -> None:
    """Print one run: what ran, on what, its status, its files and its results; or (--repro) a script that runs
    it again."""
    from profctl import run_store
    from profctl.pipelines.bench_pipeline import BenchResult
    from profctl.render import bench_view

    check_format(format, FORMATS)
    if output is not None and not repro:
        raise conflict("-o", "no --repro", "show prints to the terminal; -o names the --repro script")
    if repro and format != "table":
        raise conflict("--repro", f"--format {format}", "--repro writes a bash script")
    if output is not None:
        check_outputs(("-o", output))
    info = run_store.load_run(run, reports)
    if info.status == "unreadable":
        raise BadReport(info.note or f"{info.path}: unreadable manifest")
    if repro:
        _repro(info, output)
        return
    bench_rows = _bench_rows(info.path / "bench.json")
    files = info.files()
    if format == "json":
        sys.stdout.write(json.dumps({"path": str(info.path), "status": info.status, "note": info.note,
                                     "manifest": info.manifest, "files": [{"path": p, "bytes": s} for p, s in files],
                                     "rows": bench_rows}, indent=1, default=str) + "\n")
        return
    res = None
    if bench_rows is not None:
        dev = info.manifest.get("device")
        res = BenchResult(rows=bench_rows, device=dev if isinstance(dev, dict) else {}, run_dir=info.path,
                          interrupted=info.status == "incomplete", baseline=None)
    if format == "csv":
        if res is None:
            raise UsageError(f"run {info.run_id} has no bench rows to write as CSV")
        sys.stdout.write(bench_view.to_csv(res))
        return
    facts = [{"field": k, "value": v} for k, v in _facts(info)]
    frows = [{"file": p, "size": f"{s:,} B"} for p, s in files]
    if format == "markdown":
        out = f"## run {info.run_id}\n\n" + markdown(facts) + "\n### files\n\n" + markdown(frows)
        if res is not None:
            out += "\n### rows\n\n" + bench_view.to_markdown(res)
        sys.stdout.write(out)
        return
    con = console()
    print_table(con, f"run {info.path}", facts)
    print_table(con, "files", frows)
    if res is not None and res.rows:
        bench_view.to_console(res, con)
    elif any(p in ("summary.json", "profile.sqlite", "profile.ncu-rep", "trace.json.gz") for p, _ in files):
        con.print(f"its kernels: profctl report {info.path}", style="dim")
    for line in _ab_lines(info.path / "ab.json"):
        con.print(line, markup=False, highlight=False)


def _bench_rows(p: Path) -> list[BenchRow] | None:
    """A run's bench rows, None when it has none (or they cannot be read: show still shows the run)."""
    from profctl.readers import bench_json

    if not p.is_file():
        return None
    try:
        return bench_json.read(p, strict=False)
    except BadReport:
        return None


def _repro(info: Any, output: Path | None) -> None:
    """Write the run's repro script (atomically, executable) to `output` (default ./repro-<run id>.sh; '-':
    standard output)."""
    from profctl.render.repro import script

    ab = None
    if (info.path / "ab.json").is_file():
        try:
            ab = json.loads((info.path / "ab.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            ab = None
    try:
        text = script(info.manifest, ab=ab if isinstance(ab, dict) else None)
    except ValueError as e:
        raise BadReport(f"run {info.run_id}: {e}: nothing to rerun") from None
    if output is not None and str(output) == "-":
        emit(text)
        return
    path = output or Path(f"repro-{info.run_id}.sh")
    if output is None:
        check_outputs(("-o", path))
    emit(text, path)
    os.chmod(path, os.stat(path).st_mode | (0o111 & ~current_umask()))
    note(f"repro: {path} (bash {shlex.quote(str(path))}; PROFCTL='python3 -m profctl' to use another profctl)")


def _ab_lines(p: Path) -> list[str]:
    """An A/B run's answer, one line per case (from its ab.json; none when there is none or it is unreadable)."""
    if not p.is_file():
        return []
    try:
        rows = json.loads(p.read_text(encoding="utf-8"))["result"]["rows"]
        out = []
        for r in rows:
            ci = (f" (CI {(r['ci_lo'] - 1) * 100:+.1f}%..{(r['ci_hi'] - 1) * 100:+.1f}%)"
                  if r.get("ci_lo") is not None and r.get("ci_hi") is not None else "")
            change = f"{(r['ratio'] - 1) * 100:+.1f}% time{ci}: " if r.get("ratio") is not None else ""
            out.append(f"A/B: {r['backend_new']} vs {r['backend_base']}, {r['shape']} {r['pass']}: {change}"
                       f"{r['verdict']}")
        return out
    except (OSError, ValueError, KeyError, TypeError):
        return []
