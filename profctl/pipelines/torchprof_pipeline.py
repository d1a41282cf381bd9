"""The torch.profiler pipeline (`profctl torch`): the target records its measured iterations with
torch.profiler (inside the workload process: profctl.tools.torchprof says how), then the trace is read into the
unified summary.

Run directory: ``trace.json.gz`` (Chrome/Perfetto), ``trace.key_averages.txt``, ``workload.jsonl`` (the
workload's events), ``torch.log`` (the child's output), ``summary.json`` and the manifest.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from profctl import proc, run_store
from profctl.analysis.select import is_empty, range_names, within_range
from profctl.errors import BadReport, NothingMatched, ProfctlError, ProgramFailed, UsageError, WorkloadFailed
from profctl.fsutil import atomic_write_text
from profctl.pipelines.base import Request, Result, TorchTarget
from profctl.pipelines.executors import PartContext, PartOutcome, gather, part_records
from profctl.readers import torch_trace
from profctl.schema import Summary, concat
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
    program_error: list[str] = field(default_factory=list)  # its last error lines (its exception), when it failed


@dataclass
class TorchPart:
    """What one part of a torch.profiler run returns: its summary (the part's trace read), the workload's rows and
    device, the child's exit status and the program's own (its ``exit`` event), and the reader's notes."""

    summary: Summary
    rows: list[dict[str, Any]]
    device: dict[str, Any]
    returncode: int
    exit_status: int | None
    notes: list[str]
    error: list[str] = field(default_factory=list)


def run(req: TorchRequest) -> TorchResult:
    """Profile the target; WorkloadFailed (naming the log) when no trace comes out. On workers
    (``--workers``), each part writes its own trace in its folder and the summaries are concatenated."""
    if req.timeout_s <= 0:
        raise UsageError(f"--timeout must be positive, got {req.timeout_s}")
    with req.executor.session() as ex:
        target = ex.ask(req.target.resolve)
        if not isinstance(target, TorchTarget):
            raise UsageError(f"profctl torch does not run the {target.kind} target")
        if req.range is not None and target.case_ranges:
            raise UsageError("--range selects a range of your own program (profctl torch --range NAME -- python "
                             "...) or a part of a model step (--model ... --range attn.core)")
        ex.prepare(target.device, points=max(1, len(target.cases())))
        run_dir = run_store.new_run("torch", root=req.reports, argv=list(req.command) if req.command else None,
                                    extra={**target.manifest(), "torch_options": req.options.argv(),
                                           "range": req.range})
        # recording(): 'incomplete' on Ctrl-C/SIGTERM, 'failed' with the reason on an error; else our own status
        with run_store.recording(run_dir):
            part = functools.partial(_part, req=req, target=target)
            outs, interrupted = gather(ex.map_parts(part, range(len(target.cases())), run_dir=run_dir,
                                                    device=target.device, on_event=lambda p, e: None,
                                                    weights=target.costs()))
            res = _combine(outs, run_dir, parallel=ex.parallel, interrupted=interrupted)
            run_store.update_manifest(run_dir, executor=ex.describe(),
                                      parts=part_records(outs) if ex.parallel else None)
            if interrupted:
                raise KeyboardInterrupt
    return res


def _part(ctx: PartContext, *, req: TorchRequest, target: TorchTarget) -> TorchPart:
    """One part: the target's cases of this part under torch.profiler, the trace read into a summary."""
    target = ctx.localize(target)
    trace, log, jsonl = ctx.workdir / tool.TRACE_NAME, ctx.workdir / LOG_NAME, ctx.workdir / JSONL_NAME
    argv = target.torch_argv(trace, jsonl, req.options, only=ctx.part.cases)
    ctx.record_tool("torch.profiler", argv, log=log)
    with ctx.follow(jsonl):
        res = ctx.run(argv, log=log, timeout_s=req.timeout_s, env=target.env(), cwd=target.cwd)
    events = run_store.read_events(jsonl)
    rows, device = run_store.rows_of(events), run_store.device_of(events)
    exit_ev = next((e for e in events if e.get("event") == "exit"), {})
    exit_status = exit_ev.get("status")
    error = program_error(exit_ev, res.log_text(50_000)) if exit_status else []
    if not trace.exists():
        why = _why(rows) or proc.last_line(res.log_text(20_000))
        raise WorkloadFailed(f"no torch.profiler trace was written (exit status {res.returncode}): {why}",
                             log=ctx.final(log))
    notes: list[str] = []
    try:
        summary = summarize(trace, ctx.final_dir, rows, device, by_range=req.by_range or req.range is not None,
                            notes=notes, workdir=ctx.workdir)
    except BadReport:
        if not exit_status:
            raise
        raise ProgramFailed(f"the program exited with status {exit_status} before anything was profiled: "
                            f"{error[-1] if error else proc.last_line(res.log_text(20_000))}",
                            log=ctx.final(log), lines=error if exit_ev.get("exception") else []) from None
    if req.range is not None:
        summary = _within(summary, req.range, notes)
    return TorchPart(summary=ctx.with_final_paths(summary), rows=rows, device=device, returncode=res.returncode,
                     exit_status=exit_status, notes=notes, error=error)


def program_error(exit_event: dict[str, Any], log_text: str) -> list[str]:
    """A failed program's last error lines: the end of its traceback in its output, its exception last (from
    the wrapper's exit event when the output has none)."""
    lines = proc.error_tail(log_text)
    exc = exit_event.get("exception")
    if exc and (not lines or lines[-1].strip() != exc):
        where = exit_event.get("where")
        lines = ([f"at {where}"] if where else []) + [str(exc)]
    return lines


def _combine(outs: list[PartOutcome[TorchPart]], run_dir: Path, *, parallel: bool, interrupted: bool
             ) -> TorchResult:
    """The run's result from its parts: one part's as it is; several parts' summaries concatenated (each part's
    trace stays in its folder), their rows and notes joined. Raises the first part's error when none finished."""
    ok = [o for o in outs if o.error is None and o.value]
    if not ok:
        if outs and outs[0].error is not None:
            raise outs[0].error
        raise KeyboardInterrupt if interrupted else WorkloadFailed("no part of the run finished")
    vals = [o.value for o in ok if o.value is not None]
    rows = [r for v in vals for r in v.rows]
    device: dict[str, Any] = next((v.device for v in vals if v.device), {})
    summary = vals[0].summary if not parallel else _concat(concat(v.summary for v in vals), run_dir, rows)
    if parallel:
        atomic_write_text(run_dir / SUMMARY_NAME, summary.to_json())
    failed = [o for o in outs if o.error is not None]
    rc = max(v.returncode for v in vals)
    exit_status = next((v.exit_status for v in vals if v.exit_status), None)
    status = "complete" if rc == 0 and not failed and not interrupted else "incomplete"
    first = ok[0].dir or run_dir
    run_store.finish(run_dir, status, returncode=rc, trace=str((first / tool.TRACE_NAME).relative_to(run_dir)),
                     table=str((first / tool.TABLE_NAME).relative_to(run_dir)), device=device or None,
                     **({"reason": "interrupted"} if interrupted else {}))
    warnings = [f"the program exited with status {exit_status}; its trace up to then was kept"] if exit_status \
        else []
    warnings += [f"part {o.part.index} failed: {_one_line(o.error)}" for o in failed if o.error is not None]
    return TorchResult(run_dir=run_dir, status=status, summary=summary, trace=first / tool.TRACE_NAME,
                       table=first / tool.TABLE_NAME, log=first / LOG_NAME, returncode=rc, rows=rows, device=device,
                       notes=[n for v in vals for n in v.notes], warnings=warnings,
                       failed_cases=[r for r in rows if r.get("status") != "ok"], program_status=exit_status,
                       program_error=next((v.error for v in vals if v.error), []))


def _concat(s: Summary, run_dir: Path, rows: list[dict[str, Any]]) -> Summary:
    meta = dict(s.meta)
    meta["run_dir"] = str(run_dir)
    meta["workload_rows"] = [{k: r.get(k) for k in ("spec", "status", "reason", "median_ms")} for r in rows]
    return replace(s, meta=meta)


def _one_line(e: BaseException) -> str:
    return e.one_line() if isinstance(e, ProfctlError) else f"{type(e).__name__}: {e}"


def _within(s: Summary, name: str, notes: list[str]) -> Summary:
    """What ran inside range `name`. A torch trace has no NVTX domains (the program's NVTX ranges are mirrored as
    record_function ranges of the same name), so ``DOMAIN@NAME``, as nsys and ncu take it, selects range NAME."""
    sel = within_range(s, name)
    dom, sep, bare = name.partition("@")
    if is_empty(sel) and sep and dom and bare:
        sel = within_range(s, bare)
        if not is_empty(sel):
            notes.append(f"--range {name}: torch.profiler records no NVTX domain, so this is every range named "
                         f"{bare!r}, whatever its domain")
    if is_empty(sel):
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
              notes: list[str], workdir: Path | None = None) -> Summary:
    """The trace as a Summary (its tool version = the child's torch) kept as summary.json in `workdir` (default:
    `run_dir`, the folder the summary names as its run)."""
    s = torch_trace.read(trace, by_range=by_range, notes=notes)
    version = device.get("torch")
    if version and not s.sources[0].tool_version:
        s = replace(s, sources=(replace(s.sources[0], tool_version=str(version)),))
    meta = dict(s.meta)
    meta["run_dir"] = str(run_dir)
    meta["workload_rows"] = [{k: r.get(k) for k in ("spec", "status", "reason", "median_ms")} for r in rows]
    s = replace(s, meta=meta)
    atomic_write_text((workdir or run_dir) / SUMMARY_NAME, s.to_json())
    return s
