"""torch.profiler: run the workload under it (``--torch-trace``) in a fresh run directory, then read the trace.

Nothing external to find: the profiler is PyTorch's, inside the workload child (workloads/torch_profile.py). Its
version is the child's torch version, taken from the workload's ``device`` event. The run directory
``reports/<UTC time>-torch-<random>/`` holds ``trace.json.gz`` (Chrome/Perfetto), ``trace.key_averages.txt``,
``workload.jsonl`` (the workload's rows), ``torch.log`` (the child's output), ``summary.json`` and the manifest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profctl import proc, runs
from profctl.errors import WorkloadFailed
from profctl.workload import WorkloadArgs, child_env

TRACE_NAME = "trace.json.gz"
TABLE_NAME = "trace.key_averages.txt"
LOG_NAME = "torch.log"
JSONL_NAME = "workload.jsonl"
SUMMARY_NAME = "summary.json"


@dataclass(frozen=True)
class TorchOptions:
    """What torch.profiler records besides CPU ops and GPU activity (each costs time and trace size)."""

    shapes: bool = False
    memory: bool = False
    stacks: bool = False

    def argv(self) -> list[str]:
        return ([*(["--torch-shapes"] if self.shapes else []), *(["--torch-memory"] if self.memory else []),
                 *(["--torch-stacks"] if self.stacks else [])])


@dataclass(frozen=True)
class TorchRun:
    run_dir: Path
    trace: Path
    table: Path
    log: Path
    jsonl: Path
    returncode: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    device: dict[str, Any] = field(default_factory=dict)

    @property
    def torch_version(self) -> str | None:
        v = self.device.get("torch")
        return str(v) if v else None

    def failed_rows(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r.get("status") != "ok"]


def child_argv(wl: WorkloadArgs, trace: Path, jsonl: Path, opts: TorchOptions) -> list[str]:
    """The workload's command line with the torch.profiler options."""
    return wl.resolved().child_argv(jsonl=jsonl, extra=["--torch-trace", str(trace), *opts.argv()])


def run(wl: WorkloadArgs, *, opts: TorchOptions | None = None, reports: Path | str | None = None,
        timeout_s: float = proc.DEFAULT_TIMEOUT_S, argv: list[str] | None = None) -> TorchRun:
    """Profile the workload; raise WorkloadFailed (naming the log) when no trace comes out."""
    opts = opts or TorchOptions()
    r = wl.resolved()
    run_dir = runs.new_run("torch", root=reports, argv=argv,
                           extra={"device": r.device, "torch_options": opts.argv(), "workload": r.manifest_dict()})
    trace, log, jsonl = run_dir / TRACE_NAME, run_dir / LOG_NAME, run_dir / JSONL_NAME
    cmd = child_argv(r, trace, jsonl, opts)
    runs.record_tool(run_dir, "torch.profiler", cmd, log=LOG_NAME)
    # recording(): 'incomplete' on Ctrl-C/SIGTERM, 'failed' with the reason on an error; else our own status
    with runs.recording(run_dir):
        res = proc.run(cmd, log=log, timeout_s=timeout_s, env=child_env(), check=False)
        rows, device = read_jsonl(jsonl)
        if not trace.exists():
            why = _why(rows) or proc._last_line(res.log_text(20_000))
            raise WorkloadFailed(f"the workload wrote no torch.profiler trace (exit status {res.returncode}): "
                                 f"{why}", log=log)
        status = "complete" if res.returncode == 0 else "incomplete"
        runs.finish(run_dir, status, returncode=res.returncode, trace=TRACE_NAME, table=TABLE_NAME)
    return TorchRun(run_dir=run_dir, trace=trace, table=run_dir / TABLE_NAME, log=log, jsonl=jsonl,
                    returncode=res.returncode, rows=rows, device=device)


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The workload's result rows and its device event; a torn last line (a killed child) is skipped."""
    rows: list[dict[str, Any]] = []
    device: dict[str, Any] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return rows, device
    for line in text.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("event") == "row":
            rows.append(ev)
        elif ev.get("event") == "device":
            device = ev
    return rows, device


def _why(rows: list[dict[str, Any]]) -> str:
    bad = [r for r in rows if r.get("status") != "ok"]
    if rows and len(bad) == len(rows):
        r = bad[0]
        return f"no case ran ({len(bad)} failed; first: {r.get('status')}: {r.get('reason')})"
    return ""


def summarise(tr: TorchRun, *, by_range: bool = True, notes: list[str] | None = None) -> Any:
    """Read the run's trace into a Summary (Source version = the child's torch) and keep it as summary.json."""
    from dataclasses import replace

    from profctl.fsutil import atomic_write_text
    from profctl.readers import torch_trace

    s = torch_trace.read(tr.trace, by_range=by_range, notes=notes)
    if tr.torch_version and not s.sources[0].tool_version:
        s = replace(s, sources=(replace(s.sources[0], tool_version=tr.torch_version),))
    meta = dict(s.meta)
    meta["run_dir"] = str(tr.run_dir)
    meta["workload_rows"] = [{k: r.get(k) for k in ("spec", "status", "reason", "median_ms")} for r in tr.rows]
    s = replace(s, meta=meta)
    atomic_write_text(tr.run_dir / SUMMARY_NAME, s.to_json())
    return s
