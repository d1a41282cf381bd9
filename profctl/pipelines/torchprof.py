"""The torch.profiler pipeline (`profctl torch`): the target records its measured iterations with
torch.profiler (inside the workload process: profctl.tools.torchprof says how), then the trace is read into the
unified summary.

Run directory: ``trace.json.gz`` (Chrome/Perfetto), ``trace.key_averages.txt``, ``workload.jsonl`` (the
workload's events), ``torch.log`` (the child's output), ``summary.json`` and the manifest.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from profctl import proc, runs
from profctl.errors import BadReport, NothingMatched, ProgramFailed, UsageError, WorkloadFailed
from profctl.pipelines.base import Request, Result
from profctl.pipelines.targets import Model, Program
from profctl.schema import Summary
from profctl.tools import torchprof as tool

LOG_NAME = "torch.log"
JSONL_NAME = "workload.jsonl"
SUMMARY_NAME = "summary.json"


@dataclass(frozen=True, kw_only=True)
class TorchRequest(Request):
    """What torch.profiler records beyond ops and kernels, whether kernels are broken down per range, and (for a
    program) the record_function / NVTX range to keep."""

    options: tool.TorchOptions = field(default_factory=tool.TorchOptions)
    by_range: bool = True
    range: str | None = None


@dataclass(kw_only=True)
class TorchResult(Result):
    summary: Summary
    trace: Path
    table: Path
    log: Path
    returncode: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    device: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    program_status: int | None = None  # a program's own exit status


def run(req: TorchRequest) -> TorchResult:
    """Profile the target; WorkloadFailed (naming the log) when no trace comes out."""
    if req.timeout_s <= 0:
        raise UsageError(f"--timeout must be positive, got {req.timeout_s}")
    target = req.target.resolve()
    if req.range is not None and not isinstance(target, (Program, Model)):
        raise UsageError("--range selects a range of your own program (profctl torch --range NAME -- python ...) "
                         "or a part of a model step (--model ... --range attn.core)")
    run_dir = runs.new_run("torch", root=req.reports, argv=list(req.command) if req.command else None,
                           extra={**target.manifest(), "torch_options": req.options.argv(), "range": req.range})
    trace, log, jsonl = run_dir / tool.TRACE_NAME, run_dir / LOG_NAME, run_dir / JSONL_NAME
    argv = program_argv(target, trace, jsonl, req.options) if isinstance(target, Program) else \
        target.argv(jsonl=jsonl, extra=tool.trace_argv(trace, req.options))
    runs.record_tool(run_dir, "torch.profiler", argv, log=LOG_NAME)
    # recording(): 'incomplete' on Ctrl-C/SIGTERM, 'failed' with the reason on an error; else our own status
    with runs.recording(run_dir):
        res = req.executor.run(argv, log=log, timeout_s=req.timeout_s, env=target.env(),
                               cwd=getattr(target, "cwd", None))
        events = runs.read_events(jsonl)
        rows, device = runs.rows_of(events), runs.device_of(events)
        exit_status = next((e.get("status") for e in events if e.get("event") == "exit"), None)
        if not trace.exists():
            why = _why(rows) or proc.last_line(res.log_text(20_000))
            raise WorkloadFailed(f"no torch.profiler trace was written (exit status {res.returncode}): {why}", log=log)
        notes: list[str] = []
        try:
            summary = summarize(trace, run_dir, rows, device, by_range=req.by_range or req.range is not None,
                                notes=notes)
        except BadReport:
            if not exit_status:
                raise
            raise ProgramFailed(f"the program exited with status {exit_status} before anything was profiled: "
                                f"{proc.last_line(res.log_text(20_000))}", log=log) from None
        if req.range is not None:
            summary = _within(summary, req.range)
        status = "complete" if res.returncode == 0 else "incomplete"
        runs.finish(run_dir, status, returncode=res.returncode, trace=tool.TRACE_NAME, table=tool.TABLE_NAME,
                    device=device or None)
    warnings = [f"the program exited with status {exit_status}; its trace up to then was kept"] if exit_status \
        else []
    return TorchResult(run_dir=run_dir, status=status, summary=summary, trace=trace,
                       table=run_dir / tool.TABLE_NAME, log=log, returncode=res.returncode, rows=rows, device=device,
                       notes=notes, failed_cases=[r for r in rows if r.get("status") != "ok"], warnings=warnings,
                       program_status=exit_status)


def program_argv(target: Program, trace: Path, jsonl: Path, opts: tool.TorchOptions) -> list[str]:
    """The user's Python program inside profctl's torch.profiler wrapper (workloads.pyprofile). A bare
    ``python``/``python3`` means the interpreter profctl runs in (it has profctl and torch); an interpreter given
    by its path is used as given."""
    import sys

    entry = target.python_entry()
    if entry is None:
        raise UsageError("profctl torch profiles Python programs: give -- python SCRIPT.py ARGS... or "
                         "-- python -m MODULE ARGS... (use profctl nsys or ncu for other programs)")
    first = target.command[0]
    python = first if Path(first).name.startswith("python") and "/" in first else sys.executable
    return [python, "-m", "workloads.pyprofile", "--trace", str(trace), "--jsonl", str(jsonl), *opts.argv(),
            "--", *entry]


def _within(s: Summary, name: str) -> Summary:
    from profctl.analysis.select import range_names, within_range

    sel = within_range(s, name)
    if not sel.kernels:
        raise NothingMatched(f"nothing ran inside a range named {name!r}; ranges seen: "
                             f"{', '.join(range_names(s)) or 'none'}")
    return sel


def _why(rows: list[dict[str, Any]]) -> str:
    bad = [r for r in rows if r.get("status") != "ok"]
    if rows and len(bad) == len(rows):
        r = bad[0]
        return f"no case ran ({len(bad)} failed; first: {r.get('status')}: {r.get('reason')})"
    return ""


def summarize(trace: Path, run_dir: Path, rows: list[dict[str, Any]], device: dict[str, Any], *, by_range: bool,
              notes: list[str]) -> Summary:
    """The trace as a Summary (its tool version = the child's torch) kept as summary.json."""
    from profctl.fsutil import atomic_write_text
    from profctl.readers import torch_trace

    s = torch_trace.read(trace, by_range=by_range, notes=notes)
    version = device.get("torch")
    if version and not s.sources[0].tool_version:
        s = replace(s, sources=(replace(s.sources[0], tool_version=str(version)),))
    meta = dict(s.meta)
    meta["run_dir"] = str(run_dir)
    meta["workload_rows"] = [{k: r.get(k) for k in ("spec", "status", "reason", "median_ms")} for r in rows]
    s = replace(s, meta=meta)
    atomic_write_text(run_dir / SUMMARY_NAME, s.to_json())
    return s
