"""`profctl nsys`: run the workload under Nsight Systems, export the report to SQLite, print its summary."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from profctl.cli._common import guard, workload_options

if TYPE_CHECKING:
    from profctl.workload import WorkloadArgs


@guard
@workload_options
def nsys(
    wl: WorkloadArgs,
    trace: str = typer.Option("cuda,nvtx,osrt,cublas,cudnn", "--trace", "-t",
                              help="nsys --trace list (cuda is needed for the kernel table)"),
    capture: str = typer.Option("cudaProfilerApi", "--capture",
                                help="cudaProfilerApi: the measured iterations of every case, one report; nvtx: "
                                     "from the first 'measure' range on; none: the whole process"),
    all_work: bool = typer.Option(False, "--all-work",
                                  help="summarize everything captured, not only the work launched between "
                                       "cudaProfilerStart and Stop"),
    sample: bool = typer.Option(False, "--sample/--no-sample", help="CPU sampling and context switches"),
    timeout: float = typer.Option(1800.0, "--timeout", help="seconds before nsys profile is killed"),
    reports_dir: Path | None = typer.Option(None, "--reports", "--reports-dir",
                                            help="run directory root [default: $PROFCTL_REPORTS or ./reports]"),
    by_range: bool = typer.Option(False, "--by-range", help="add the per-NVTX-range kernel breakdown"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown, csv or json"),
    limit: int = typer.Option(25, "--limit", help="kernels shown in the table (0: all)"),
) -> None:
    """Profile the attention workload with Nsight Systems (nsys profile + export + summary)."""
    from profctl.errors import UsageError
    from profctl.render.summary import FORMATS

    if format not in FORMATS:
        raise UsageError(f"unknown format {format!r}; choose from {', '.join(FORMATS)}")
    traces = [t.strip() for t in trace.split(",") if t.strip()]
    from profctl.adapters.nsys import TRACE_CHOICES

    bad = [t for t in traces if t not in TRACE_CHOICES]
    if bad:
        raise UsageError(f"--trace: unknown {', '.join(bad)}; choose from {', '.join(TRACE_CHOICES)}")
    if "cuda" not in traces:
        raise UsageError("--trace must include cuda: without it the report has no kernels")
    if capture not in ("cudaProfilerApi", "nvtx", "none"):
        raise UsageError(f"--capture {capture!r}: choose cudaProfilerApi, nvtx or none")
    if timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {timeout}")
    r = wl.resolved()
    if r.device != "cuda":
        raise UsageError("profctl nsys needs a CUDA GPU (the workload resolved to --device cpu)")
    run_nsys(r, traces=traces, capture=capture, sample=sample, timeout=timeout, reports_dir=reports_dir,
             by_range=by_range, fmt=format, limit=limit, all_work=all_work)


def run_nsys(r: WorkloadArgs, *, traces: list[str], capture: str, sample: bool, timeout: float,
             reports_dir: Path | None, by_range: bool, fmt: str, limit: int, all_work: bool) -> Path:
    import sys

    from profctl import runs
    from profctl.adapters.nsys import find

    exe_path = find()  # before the run directory: a missing tool leaves no empty run behind
    run = runs.new_run("nsys", root=reports_dir, argv=["profctl", *sys.argv[1:]],
                       extra={"workload": r.manifest_dict(), "trace": traces, "capture": capture, "sample": sample})
    with runs.recording(run):
        return _run_nsys(run, exe_path, r, traces=traces, capture=capture, sample=sample, timeout=timeout,
                         by_range=by_range, fmt=fmt, limit=limit, all_work=all_work)


def _run_nsys(run: Path, exe: Path, r: WorkloadArgs, *, traces: list[str], capture: str, sample: bool,
              timeout: float, by_range: bool, fmt: str, limit: int, all_work: bool) -> Path:
    import json

    from profctl import runs
    from profctl.adapters import nsys as adapter
    from profctl.cli._common import econsole
    from profctl.fsutil import atomic_write_json
    from profctl.readers import nsys_sqlite
    from profctl.render.summary import render
    from profctl.workload import child_env, project_root

    ver = adapter.version(exe)
    log = run / "nsys.log"
    rows = run / "rows.jsonl"
    child = r.child_argv(jsonl=rows)
    ec = econsole()
    ec.print(f"[dim]nsys {ver} ({exe}); run directory {run}[/dim]")
    runs.record_tool(run, "nsys", adapter.profile_argv(exe, run / "profile", child, trace=traces, capture=capture,
                                                       sample=sample), version=ver, log=log.name, exe=str(exe))
    rep = adapter.profile(exe, run / "profile", child, log=log, timeout_s=timeout, env=child_env(),
                          cwd=project_root(), trace=traces, capture=capture, sample=sample)
    sqlite = adapter.export_sqlite(exe, rep, run / "profile.sqlite", log=log, timeout_s=timeout)
    window = None if (all_work or capture == "none") else "profiler-api"
    with nsys_sqlite.NsysExport(sqlite, window=window) as ex:
        summary = ex.summary(by_range=by_range)
    with nsys_sqlite.NsysExport(sqlite) as ex:  # all ranges: the case ranges open before the window too
        lines = flash_vs_baseline(ex, {s.backend: s.shape_key for s in r.specs()} if len(
            {s.shape_key for s in r.specs()}) == 1 else {})
    atomic_write_json(run / "summary.json", json.loads(summary.to_json()))
    failed = _failed_cases(rows)
    text = render(summary, fmt, limit=limit or None)
    if text is not None:
        print(text, end="" if text.endswith("\n") else "\n")
    if fmt in ("table", "markdown"):
        for ln in lines:
            print(ln)
    for f in failed:
        ec.print(f"[yellow]case {f}[/yellow]")
    ec.print(f"report: {rep}  (open in the Nsight Systems GUI)")
    ec.print(f"sqlite: {sqlite}; log: {log}")
    return rep


def _failed_cases(rows: Path) -> list[str]:
    import json

    out = []
    if rows.exists():
        for ln in rows.read_text(encoding="utf-8").splitlines():
            try:
                ev = json.loads(ln)
            except ValueError:
                continue
            if ev.get("event") == "row" and ev.get("status") != "ok":
                spec = ev.get("spec", {})
                out.append(f"{spec.get('backend')} {spec.get('seqlen_q')}: {ev.get('status')}: {ev.get('reason')}")
    return out


def flash_vs_baseline(ex: object, shape_of: dict[str, str] | None = None) -> list[str]:
    """One line per case and pass: GPU time per iteration projected from profctl's `<backend>.fwd|bwd` ranges
    inside `measure`, and the speed-up over the baseline (eager, else sdpa-math) of the same shape.

    The case is the enclosing `<backend>[<shape>]` range; the first case's is pushed before capture starts and
    may be missing, then `shape_of` (backend -> the sweep's only shape) names it."""
    from profctl.readers.nsys_sqlite import NsysExport
    from workloads import nvtx_scheme as ns

    assert isinstance(ex, NsysExport)
    insts = [i for i in ex.range_instances() if i.domain == ns.DOMAIN]
    # the case of each leaf range: the innermost enclosing '<backend>[<shape>]' range on the same thread
    by_tid: dict[int, list] = {}
    for i in insts:
        by_tid.setdefault(i.tid, []).append(i)
    per: dict[tuple[str, str], list[float]] = {}
    for rs in by_tid.values():
        rs.sort(key=lambda i: (i.start, -i.end))
        stack: list = []
        for i in rs:
            while stack and stack[-1].end < i.end:
                stack.pop()
            stack.append(i)
            if i.proj_start is None or not (i.text.endswith(".fwd") or i.text.endswith(".bwd")):
                continue
            case = next((p.text for p in reversed(stack[:-1]) if p.text.endswith("]") and "[" in p.text), None)
            phase_ok = any(p.text == ns.MEASURE for p in stack[:-1])
            backend = i.text.rsplit(".", 1)[0]
            if case is None and shape_of and backend in shape_of:
                case = ns.case_range(backend, shape_of[backend])
            if case is None or not phase_ok:
                continue
            per.setdefault((case, i.text.rsplit(".", 1)[1]), []).append(float(i.proj_end - i.proj_start))
    if not per:
        return []
    import statistics

    med = {k: statistics.median(v) for k, v in per.items()}
    lines = ["", "GPU time per iteration (median of the measured iterations, projected from NVTX):"]
    for (case, p), v in sorted(med.items()):
        backend, shape = case.split("[", 1)
        base = next((med[(f"{b}[{shape}", p)] for b in ("eager", "sdpa-math") if (f"{b}[{shape}", p) in med
                     and b != backend), None)
        vs = f"  {base / v:5.2f}x vs {'eager' if (f'eager[{shape}', p) in med else 'sdpa-math'}" if base else ""
        lines.append(f"  {backend:15s} {p}  [{shape[:-1]}]  {v / 1e6:9.4f} ms{vs}")
    return lines
