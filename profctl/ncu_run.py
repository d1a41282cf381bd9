"""The `profctl ncu` pipeline: NVTX filters from profctl's scheme, one ncu invocation with a timeout and a
kept log, the report read back, every launch checked against the filter, and the diagnosis.

Run directory: ``<reports>/<UTC timestamp>-ncu-<random>/`` with ``profile.ncu-rep``, ``ncu.log`` (ncu and the
workload's output), ``workload.jsonl`` (one row per case) and ``summary.json`` (the Summary, with the recipe,
the ncu command line, the wall times and the diagnosis in ``meta``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from profctl import proc, runs
from profctl.adapters import ncu as adapter
from profctl.diagnose import Diagnosis, backend_of, diagnose
from profctl.errors import NothingMatched, ProfctlError, RecipeError, ToolFailed
from profctl.fsutil import atomic_write_text
from profctl.recipes import Recipe
from profctl.schema import Summary
from profctl.workload import WorkloadArgs, child_env
from workloads import nvtx_scheme


@dataclass(frozen=True)
class NcuRequest:
    recipe: Recipe
    wl: WorkloadArgs  # resolved, device cuda
    exe: Path
    kernel: str | None = None
    launch_count: int | None = None
    replay_mode: str | None = None
    clock_control: str | None = None
    cache_control: str | None = None
    timeout_s: float = 1800.0
    reports_dir: Path | None = None  # None: $PROFCTL_REPORTS or ./reports
    cc: tuple[int, int] | None = None  # None: ask the GPU


@dataclass
class NcuResult:
    summary: Summary
    diagnosis: list[Diagnosis]
    recipe: Recipe
    cc: tuple[int, int] | None
    run_dir: Path
    report: Path
    launches: int
    ncu_wall_s: float
    total_wall_s: float
    warnings: list[str] = field(default_factory=list)


def passes(pass_: str) -> list[str]:
    return ["fwd", "bwd"] if pass_ == "fwd+bwd" else [pass_]


def case_filters(wl: WorkloadArgs) -> list[str]:
    """One ncu NVTX expression per (case, pass), as workloads.nvtx_scheme writes them (for messages)."""
    out: list[str] = []
    for spec in wl.specs():
        for p in passes(spec.pass_):
            f = nvtx_scheme.ncu_filter(spec.backend, p, spec.shape_key)
            if f not in out:
                out.append(f)
    return out


def nvtx_filters(wl: WorkloadArgs) -> list[str]:
    """The ``--nvtx-include`` expressions: ONE regex that selects the measured range of every requested case and
    pass, ``profctl@(<case>|...)/measure/(<backend>.<pass>|...)/``.

    One expression, because ncu 2025.3 honours only the first of several --nvtx-include options (seen on the
    H100: with three, only the first backend's kernels were profiled). Each level alternates over exact,
    escaped names (no '/' inside a group), and a pass range only ever nests in its own backend's case range,
    so the product selects exactly the requested (case, pass) pairs.
    """
    import re

    cases: list[str] = []
    leaves: list[str] = []
    for spec in wl.specs():
        c = re.escape(nvtx_scheme.case_range(spec.backend, spec.shape_key))
        if c not in cases:
            cases.append(c)
        for p in passes(spec.pass_):
            leaf = re.escape(nvtx_scheme.pass_range(spec.backend, p))
            if leaf not in leaves:
                leaves.append(leaf)

    def group(xs: list[str]) -> str:
        return xs[0] if len(xs) == 1 else "(" + "|".join(xs) + ")"

    return [f"regex:{nvtx_scheme.DOMAIN}@{group(cases)}/{nvtx_scheme.MEASURE}/{group(leaves)}/"]


def device_cc() -> tuple[int, int]:
    import torch

    major, minor = torch.cuda.get_device_capability(0)
    return int(major), int(minor)


def run_ncu(req: NcuRequest, *, t_start: float | None = None) -> NcuResult:
    t0 = t_start if t_start is not None else time.perf_counter()
    rec = req.recipe
    cc = req.cc or device_cc()
    metrics = tuple(rec.metric_names(cc))
    sections = tuple(rec.sections_for(cc))
    if not metrics and not sections and not rec.set_name:
        raise RecipeError(f"{rec.path}: recipe {rec.name} has no metric for compute capability {cc[0]}.{cc[1]}")
    filters = nvtx_filters(req.wl)
    run_dir = runs.new_run(
        "ncu",
        root=req.reports_dir,
        extra={"recipe": rec.name, "recipe_path": rec.path, "cc": f"{cc[0]}.{cc[1]}"},
    )
    report = run_dir / "profile.ncu-rep"
    log = run_dir / "ncu.log"
    jsonl = run_dir / "workload.jsonl"
    target = req.wl.child_argv(jsonl=jsonl)
    opts = adapter.ProfileOptions(
        metrics=metrics,
        sections=sections,
        set_name=rec.set_name,
        nvtx_include=tuple(filters),
        kernel_regex=req.kernel,
        launch_count=req.launch_count,
        replay_mode=req.replay_mode,
        clock_control=req.clock_control,
        cache_control=req.cache_control,
    )
    argv = adapter.profile_argv(req.exe, report, opts, target)
    runs.update_manifest(run_dir, ncu=str(req.exe), ncu_argv=argv, nvtx_include=filters, workload_argv=target)
    t_ncu = time.perf_counter()
    try:
        res = proc.run(
            argv,
            log=log,
            timeout_s=req.timeout_s,
            env=child_env(),
            check=False,
            classify=lambda r: _classify(r, rec, filters, jsonl, req),
        )
    except ProfctlError as e:
        runs.finish(run_dir, "failed", error=e.one_line())
        raise
    except KeyboardInterrupt:
        runs.finish(run_dir, "incomplete")
        raise
    ncu_wall = time.perf_counter() - t_ncu
    try:
        warnings: list[str] = []
        if not report.exists():
            raise ToolFailed(f"ncu exited with status {res.returncode} and wrote no report", log=log)
        if res.returncode != 0:
            warnings.append(f"ncu/the workload exited with status {res.returncode}; the report was kept (see {log})")

        from profctl.readers import read

        summary = read(report, by_range=True)
        launches = summary.meta.get("launches", [])
        _check_metrics(summary, metrics, rec, run_dir, log)
        rows = _workload_rows(jsonl)
        warnings += _check_launches(launches, rows, req.wl)
        diag = diagnose(summary, rec, cc, backend_order=req.wl.backends())
        total = time.perf_counter() - t0
        meta = dict(summary.meta)
        meta.update(
            {
                "recipe": rec.name,
                "cc": f"{cc[0]}.{cc[1]}",
                "ncu_argv": argv,
                "nvtx_include": filters,
                "ncu_wall_s": round(ncu_wall, 3),
                "total_wall_s": round(total, 3),
                "run_dir": str(run_dir),
                "workload": [{k: r.get(k) for k in ("index", "spec", "status", "reason")} for r in rows],
                "diagnosis": [d.to_dict() for d in diag],
                "warnings": warnings,
            }
        )
        summary = replace(summary, meta=meta)
        atomic_write_text(run_dir / "summary.json", summary.to_json() + "\n")
        runs.finish(
            run_dir,
            "complete",
            launches=len(launches),
            ncu_wall_s=round(ncu_wall, 3),
            total_wall_s=round(total, 3),
            warnings=warnings,
        )
    except ProfctlError as e:
        runs.finish(run_dir, "failed", error=e.one_line())
        raise
    return NcuResult(
        summary=summary,
        diagnosis=diag,
        recipe=rec,
        cc=cc,
        run_dir=run_dir,
        report=report,
        launches=len(launches),
        ncu_wall_s=ncu_wall,
        total_wall_s=total,
        warnings=warnings,
    )


# ------------------------------------------------------------ checks
def _workload_rows(jsonl: Path) -> list[dict[str, Any]]:
    if not jsonl.exists():
        return []
    out = []
    for line in jsonl.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if obj.get("event") == "row":
            out.append(obj)
    return out


def _case_word(row: dict[str, Any]) -> str:
    spec = row.get("spec") or {}
    return f"{spec.get('backend', '?')} {spec.get('pass', '')}".strip()


def _why_nothing(rows: list[dict[str, Any]], filters: list[str], req: NcuRequest, log_text: str) -> str:
    parts = []
    if "NVTX disabled" in log_text:
        parts.append("the workload ran without NVTX ranges (it printed 'NVTX disabled': install the nvtx package)")
    bad = [r for r in rows if r.get("status") != "ok"]
    ok = [r for r in rows if r.get("status") == "ok"]
    for r in bad:
        parts.append(f"{_case_word(r)}: {r.get('status')}: {r.get('reason')}")
    if not rows:
        parts.append("the workload finished no case (see the log)")
    elif ok and not parts:
        parts.append(f"{len(ok)} case(s) ran but no launch matched the NVTX filter {' '.join(filters)}")
    if req.kernel:
        parts.append(f"--kernel {req.kernel!r} must also match")
    if req.launch_count is not None:
        parts.append(f"--launch-count {req.launch_count}")
    return "; ".join(parts)


def _classify(
    res: proc.ProcResult, rec: Recipe, filters: list[str], jsonl: Path, req: NcuRequest
) -> ProfctlError | None:
    text = res.log_text()
    f = adapter.diagnose_log(text, res.returncode)
    if f is None:
        return None
    if f.kind == "metric":
        where = [f"{m} ({rec.where(m)})" for m in f.metrics] or [rec.path]
        return RecipeError(f"ncu does not know metric {', '.join(where)}: {f.message}", log=res.log)
    if f.kind == "nothing":
        return adapter.failure_error(
            f, log=res.log, why_nothing=_why_nothing(_workload_rows(jsonl), filters, req, text)
        )
    if f.kind == "error" and res.returncode != 0 and (res.log.parent / "profile.ncu-rep").exists():
        return None  # the workload failed part-way; the launches profiled so far are kept
    return adapter.failure_error(f, log=res.log)


def _check_metrics(summary: Summary, metrics: tuple[str, ...], rec: Recipe, run_dir: Path, log: Path) -> None:
    """A requested metric that no launch has is a name ncu does not know: ncu 2025.3 prints '(!) n/a' for it and
    exits 0, so this is where an unknown metric is caught, with the recipe line that names it."""
    if not summary.kernels:
        return
    present = {k for row in summary.kernels for k in row.metrics}
    missing = [m for m in metrics if m not in present]
    if missing:
        where = ", ".join(f"{m} ({rec.where(m)})" for m in missing)
        raise RecipeError(
            f"ncu does not know metric {where}: it reported n/a for every launch; report kept in {run_dir}", log=log
        )


def _check_launches(launches: list[dict[str, Any]], rows: list[dict[str, Any]], wl: WorkloadArgs) -> list[str]:
    """Every launch must sit in a measured range of a requested case; say which case profiled nothing."""
    warnings = []
    outside = [ln for ln in launches if f"/{nvtx_scheme.MEASURE}/" not in (ln.get("nvtx_range") or "")]
    if outside:
        warnings.append(
            f"{len(outside)} launch(es) outside the measured NVTX ranges "
            f"(ids {', '.join(str(x['id']) for x in outside[:10])})"
        )
    seen = {backend_of(ln.get("nvtx_range")) for ln in launches}
    for spec in wl.specs():
        for p in passes(spec.pass_):
            if (spec.backend, p, spec.shape_key) in seen:
                continue
            row = next((r for r in rows if (r.get("spec") or {}) == spec.to_dict()), None)
            why = (
                f"{row.get('status')}: {row.get('reason')}"
                if row and row.get("status") != "ok"
                else "no launch matched"
            )
            warnings.append(f"{spec.case_id} {p}: nothing profiled ({why})")
    if not launches:
        raise NothingMatched("ncu wrote a report with no launch in it")
    return warnings
