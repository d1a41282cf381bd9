"""The Proton pipeline (``profctl proton``): Triton kernels recorded by Proton's instrumentation backend -- each
case of profctl's Triton forward with its steps in scopes, or a user's Python program -- and each timeline read
into per-scope figures (profctl.analysis.timeline).

Run directory, per case ``case-<i>`` (a program: ``proton``): ``<name>.chrome_trace`` (Proton's timeline; or
``<name>.hatchet`` with ``--data tree``), ``<name>.log`` (the child's output: Proton's buffer warnings land there),
``<name>.timeline.json`` (the figures, so reports need not read the trace again), ``<name>.drops.json`` (what
Proton said it dropped); ``workload.jsonl`` (the children's events) and the manifest (with each case's phases
and their seconds, and what was sampled).

By default (``--ctas N``) the trace holds about N CTAs of each launch: Proton's own writer holds every record of
every CTA in memory as JSON objects (28 GB and most of two minutes at b1 h32 s4096, 1,024 CTAs), so the child
tallies every CTA's records (each scope's count and cycles), hands Proton a sample, and for profctl's forward,
only where the records cannot give the cycles, records one more launch in Proton's tree format
(profctl.workloads.proton_ctas, timeline.apply_sample). Progress: each step of a child (``phase`` events) and
profctl's reading reach `on_progress` as they end.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profctl import proc, run_store
from profctl.analysis import timeline
from profctl.analysis.timeline import overhead_note
from profctl.errors import (
    BadReport,
    NothingMatched,
    ProgramFailed,
    ToolFailed,
    ToolNotFound,
    UsageError,
    WorkloadFailed,
)
from profctl.fsutil import atomic_write_text
from profctl.pipelines.base import ProtonTarget, Request, Result, Target
from profctl.pipelines.executors import PartContext, PartOutcome, gather
from profctl.pipelines.targets import cuda_usable
from profctl.pipelines.torchprof_pipeline import program_error
from profctl.readers import proton_trace, proton_tree
from profctl.tools import proton as tool

JSONL_NAME = "workload.jsonl"
#: the scoped kernel slower than the plain one by more than this is said in the output
OVERHEAD_WARN = 0.10


@dataclass(frozen=True, kw_only=True)
class ProtonRequest(Request):
    """How Proton records, how many launches time the cost of looking (the built-in forward; 0: not timed),
    and which CTA's critical path and timeline to show (None: each kernel's longest)."""

    options: tool.ProtonOptions = field(default_factory=tool.ProtonOptions)
    overhead_iters: int = 20
    cta: int | None = None


@dataclass
class Recording:
    """One case's (or the program's) timeline: its files, the figures, and what it cost."""

    name: str
    output: Path
    log: Path
    report: Any  # profctl.analysis.timeline.TimelineReport
    case: dict[str, Any] | None = None
    overhead: dict[str, Any] | None = None
    phases: list[dict[str, Any]] = field(default_factory=list)
    sampled: dict[str, Any] | None = None


@dataclass(kw_only=True)
class ProtonResult(Result):
    recordings: list[Recording]
    device: dict[str, Any] = field(default_factory=dict)
    triton: str | None = None
    notes: list[str] = field(default_factory=list)
    program_status: int | None = None
    program_error: list[str] = field(default_factory=list)


def run(req: ProtonRequest, on_progress: Callable[[dict[str, Any]], None] | None = None) -> ProtonResult:
    """Record the target under Proton; UsageError for what Proton cannot record here (no GPU, a backend
    without scopes), ToolNotFound/ToolFailed when Proton is missing or too old, NothingMatched when no kernel
    with a scope ran, ProgramFailed when the program failed before anything was recorded. `on_progress` hears
    each step as it ends (``{"event": "phase", "name": case, "phase", "seconds", "what"}``; any thread)."""
    if req.timeout_s <= 0:
        raise UsageError(f"--timeout must be positive, got {req.timeout_s}")
    if req.overhead_iters < 0:
        raise UsageError(f"--overhead must be >= 0 launches, got {req.overhead_iters}")
    with req.executor.session() as ex:
        target = ex.ask(req.target.resolve)
        check_gpu(target)
        if not isinstance(target, ProtonTarget):
            raise UsageError("profctl proton records Triton kernels: profctl's Triton forward (--backend triton) or "
                             f"your own program (-- python SCRIPT.py), not the {target.kind} workload")
        argvs = _argvs(target, req)  # refuses unsupported cases before anything runs
        triton = ex.ask(tool.check, argvs[0][0])
        ex.prepare(target.device)
        run_dir = run_store.new_run("proton", root=req.reports, argv=list(req.command) if req.command else None,
                                    extra={**target.manifest(), "proton": req.options.describe(_default_buffer(target)),
                                           "triton": triton})
        with run_store.recording(run_dir):
            part = functools.partial(_part, req=req, target=target)
            outs, interrupted = gather(ex.map_parts(part, range(len(target.cases())), run_dir=run_dir,
                                                    device=target.device,
                                                    on_event=lambda p, e: _progress(on_progress, e)))
            res = _combine(outs, run_dir, triton)
            if interrupted:
                raise KeyboardInterrupt
    return res


def _progress(on_progress: Callable[[dict[str, Any]], None] | None, ev: dict[str, Any]) -> None:
    if on_progress is not None and ev.get("event") == "phase":
        on_progress(ev)


def _default_buffer(target: Target) -> str:
    return "global" if target.cases() else "shared"


def _argvs(target: ProtonTarget, req: ProtonRequest) -> list[list[str]]:
    cases: list[int | None] = list(range(len(target.cases()))) or [None]
    return [target.proton_argv(Path("x"), Path("x.jsonl"), req.options, i) for i in cases]


def check_gpu(target: Target) -> None:
    """UsageError when nothing here can record: a target on the CPU, or no usable CUDA GPU."""
    if target.runs_on_cpu() or not cuda_usable():
        raise UsageError("profctl proton records on a GPU (Proton's instrumentation backend runs kernels there), and "
                         "no CUDA GPU is usable here; to read a trace recorded elsewhere: profctl report "
                         "FILE.chrome_trace")


@dataclass
class ProtonPart:
    recordings: list[Recording]
    device: dict[str, Any]
    exit_status: int | None
    error: list[str]
    notes: list[str]


def _part(ctx: PartContext, *, req: ProtonRequest, target: ProtonTarget) -> ProtonPart:
    """Each case in its own child (the program in one): the cost of looking first, then the recording."""
    target = ctx.localize(target)
    cases: list[int | None] = (list(ctx.part.cases) if ctx.part.cases is not None
                               else list(range(len(target.cases())))) or [None]
    tail = run_store.EventTail(ctx.workdir / JSONL_NAME)
    out = ProtonPart([], {}, None, [], [])
    for i in cases:
        name = "proton" if i is None else f"case-{i}"
        rec = _record(ctx, req, target, i, name, tail, out)
        note = _overhead_line(rec.overhead)
        if note:
            rec.report.warnings.append(note)
        rec.report.meta["overhead"] = rec.overhead
        _save(rec)
        out.recordings.append(rec)
    return out


def _run_following(ctx: PartContext, argv: list[str], log: Path, req: ProtonRequest, target: ProtonTarget,
                   tail: run_store.EventTail, name: str,
                   phases: list[dict[str, Any]]) -> tuple[Any, list[dict[str, Any]]]:
    """Run a Proton child, passing its ``phase`` events on as they come; its result and all its events."""
    events: list[dict[str, Any]] = []

    def pump(final: bool = False) -> None:
        for ev in tail.read(final=final):
            events.append(ev)
            if ev.get("event") == "phase":
                _phase(ctx, name, phases, str(ev.get("phase")), float(ev.get("seconds") or 0.0), ev.get("what"))

    with proc.polling(pump, 0.5, "profctl-proton-phases", final=lambda: pump(final=True)):
        res = ctx.run(argv, log=log, timeout_s=req.timeout_s, env=target.env(), cwd=target.cwd)
    return res, events


def _phase(ctx: PartContext, name: str, phases: list[dict[str, Any]], phase: str, seconds: float,
           what: Any = None) -> None:
    ph = {"phase": phase, "seconds": round(seconds, 3), **({"what": str(what)} if what else {})}
    phases.append(ph)
    ctx.emit({"event": "phase", "name": name, **ph})


def _overhead(events: list[dict[str, Any]], req: ProtonRequest, name: str, phases: list[dict[str, Any]],
              log: Path, notes: list[str]) -> dict[str, Any] | None:
    """The cost of looking as the recording child measured it before recording (its ``overhead`` event): the
    plain and the scoped kernel's median times; a note when it was asked for and not measured."""
    ev = next((e for e in events if e.get("event") == "overhead"), None)
    if ev is None or ev.get("error") or not ev.get("plain_median_us"):
        why = (ev or {}).get("error") or "the child said nothing of it"
        notes.append(f"{name}: the cost of looking was not measured ({why}; log {log})")
        return None
    plain, scoped = ev.get("plain_median_us"), ev.get("scoped_median_us")
    took = sum(float(p.get("seconds") or 0.0) for p in phases if p.get("phase") in ("time-plain", "compile"))
    return {"plain_us": plain, "scoped_us": scoped, "launches": req.overhead_iters, "method": ev.get("method"),
            "seconds": round(took, 3),
            "ratio": scoped / plain if plain and scoped else None, "clock_mhz": ev.get("clock_mhz")}


def _overhead_line(o: dict[str, Any] | None) -> str | None:
    return overhead_note(o.get("plain_us"), o.get("scoped_us"), OVERHEAD_WARN) if o else None


def _record(ctx: PartContext, req: ProtonRequest, target: ProtonTarget, i: int | None, name: str,
            tail: run_store.EventTail, part: ProtonPart) -> Recording:
    base = ctx.workdir / name
    log = ctx.workdir / f"{name}.log"
    timed = req.overhead_iters if i is not None else 0
    argv = target.proton_argv(base, ctx.workdir / JSONL_NAME, req.options, i, timed)
    ctx.record_tool("proton", argv, log=log)
    phases: list[dict[str, Any]] = []
    ctx.emit({"event": "phase", "name": name, "phase": "record-start", "seconds": 0.0,
              "what": "recording with Proton (a child: " +
                      (f"{timed} launches timed with and without scopes, " if timed else "") +
                      "compile, run, dump)"})
    t0 = time.perf_counter()
    res, events = _run_following(ctx, argv, log, req, target, tail, name, phases)
    child_s = time.perf_counter() - t0
    if any(e.get("event") == "no-sampling" for e in events):
        why = next((e.get("error") for e in events if e.get("event") == "no-sampling"), None)
        raise ToolFailed(f"Proton cannot be given a sample of CTAs here ({why}); --ctas all records every CTA, "
                         "as Proton alone does", log=ctx.final(log))
    part.device = next(({k: v for k, v in e.items() if k != "event"} for e in events if e.get("event") == "device"),
                       part.device)
    done = next((e for e in events if e.get("event") in ("recorded", "exit")), {})
    if done.get("event") == "exit" and done.get("status"):
        part.exit_status = int(done["status"])
        part.error = _program_error(done, res.log_text(50_000))
    out = tool.output(base, req.options.data)
    text = res.log_text()
    if not out.is_file() or out.stat().st_size == 0:
        raise _nothing(res, out, text, ctx.final(log), done, part)
    sampled = next((e for e in events if e.get("event") == "sampled"), None)
    _phase(ctx, name, phases, "child", child_s, "the Proton child, start to exit (import, compile, run, dump)")
    t1 = time.perf_counter()
    report = _read(out, text, req, done, ctx.final(out), sampled)
    _phase(ctx, name, phases, "read", time.perf_counter() - t1,
           f"profctl read {out.name} ({out.stat().st_size / 1e6:.1f} MB) and made its figures")
    report.meta["phases"] = phases
    if sampled is not None:
        report.meta["sampled"] = {k: v for k, v in sampled.items() if k != "event"}
    overhead = _overhead(events, req, name, phases, ctx.final(log), part.notes) if timed else None
    return Recording(name=name, output=ctx.final(out), log=ctx.final(log), case=done.get("case"), report=report,
                     phases=phases, sampled=report.meta.get("sampled"), overhead=overhead)


def _program_error(exit_event: dict[str, Any], log_text: str) -> list[str]:
    return program_error(exit_event, log_text)


def _nothing(res: Any, out: Path, text: str, log: Path, done: dict[str, Any], part: ProtonPart) -> Exception:
    """Why no timeline came out, as the error to raise."""
    if "Proton cannot be imported" in text:
        return ToolNotFound(f"Proton cannot be imported by the program's Python: {proc.last_line(text)}", log=log)
    problem = tool.log_problem(text)
    if problem:
        return ToolFailed(problem, log=log)
    if part.exit_status:
        why = part.error[-1] if part.error else proc.last_line(text)
        return ProgramFailed(f"the program exited with status {part.exit_status} before Proton recorded a scope: "
                             f"{why}", log=log, lines=part.error)
    if res.returncode and not done:
        return WorkloadFailed(f"the Proton child failed (exit status {res.returncode}): {proc.last_line(text)}",
                              log=log)
    return NothingMatched(f"Proton's trace is empty ({out.name}): no Triton kernel with a Proton scope ran (a "
                          "non-Triton program, or kernels without pl.scope / pl.enter_scope in their @triton.jit "
                          "code); the program ran to its end", log=log)


def _read(out: Path, log_text: str, req: ProtonRequest, done: dict[str, Any], final: Path,
          sampled: dict[str, Any] | None = None) -> Any:
    """The recording's figures, with what Proton said it dropped and the clock the child saw; a sampled trace
    made whole with the child's tallies and Proton's tree of every CTA (``<name>.hatchet`` beside it)."""
    drops = proton_trace.drops_in_log(log_text)
    clock = done.get("clock_mhz") or None
    if req.options.data == "tree":
        rep = timeline.from_tree(proton_tree.read(out), clock_mhz=clock)
        said = drops.describe()
        if said:
            rep.warnings.append(said)
    else:
        rep = timeline.analyze(proton_trace.read(out, drops=drops), clock_mhz=clock, cta=req.cta)
        if sampled is not None:
            tree_file = tool.output(out.with_name(out.name.rsplit(".", 1)[0]), "tree")
            tree = None
            if tree_file.is_file() and tree_file.stat().st_size:
                try:
                    tree = proton_tree.read(tree_file)
                except BadReport as e:
                    rep.warnings.append(f"Proton's tree of every CTA was not read: {e.one_line()}")
            timeline.apply_sample(rep, sampled, tree)
    rep.source = str(final)
    if clock:
        rep.notes.append(f"times at the SM clock NVML reported right after the launch: {clock} MHz")
    if drops.warps or drops.parser:
        atomic_write_text(out.with_name(out.name.rsplit(".", 1)[0] + ".drops.json"), json.dumps(drops.to_dict()))
    return rep


def _save(rec: Recording) -> None:
    """The figures beside the trace (``<name>.timeline.json``): reports read them instead of the trace."""
    p = timeline_path(Path(rec.output))
    rec.report.meta.update({"case": rec.case, "trace_bytes": Path(rec.output).stat().st_size})
    atomic_write_text(p, json.dumps(rec.report.to_dict()))


def timeline_path(output: Path) -> Path:
    """Where the figures of Proton's output `output` are kept in a run."""
    stem = output.name.rsplit(".", 1)[0] if output.suffix in (".chrome_trace", ".hatchet") else output.name
    return output.with_name(stem + ".timeline.json")


def _combine(outs: list[PartOutcome[ProtonPart]], run_dir: Path, triton: str) -> ProtonResult:
    ok = [o.value for o in outs if o.error is None and o.value is not None]
    if not ok:
        if outs and outs[0].error is not None:
            raise outs[0].error
        raise WorkloadFailed("no part of the run finished")
    recs = [r for v in ok for r in v.recordings]
    device = next((v.device for v in ok if v.device), {})
    status = next((v.exit_status for v in ok if v.exit_status), None)
    run_store.finish(run_dir, "complete" if not status else "incomplete", device=device or None,
                     traces=[str(Path(r.output).relative_to(run_dir)) for r in recs],
                     overhead=[r.overhead for r in recs], phases={r.name: r.phases for r in recs},
                     sampled={r.name: r.sampled for r in recs if r.sampled},
                     **({"reason": f"exit status {status}"} if status else {}))
    warnings = [f"the program exited with status {status}; its timeline up to then was kept"] if status else []
    return ProtonResult(run_dir=run_dir, status="complete" if not status else "incomplete", recordings=recs,
                        device=device, triton=triton, notes=[n for v in ok for n in v.notes], warnings=warnings,
                        program_status=status, program_error=next((v.error for v in ok if v.error), []))
