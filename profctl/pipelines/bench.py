"""The bench pipeline (`profctl bench`): run a sweep in a child process, one case at a time, and turn its
events into rows.

The sweep runs in the target's program (``python -m workloads.attention``) so that a crash (a CUDA fault, a
segfault) or a hang in one backend costs only that point: the row records the point's status and a new child
starts at the next point. Every finished row is already on disk (the child appends it to events.jsonl), so an
interrupted sweep keeps what finished. NVML clocks, power and throttle reasons are sampled per point here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profctl import devices, flops, runs
from profctl.errors import ProfctlError, UsageError, WorkloadFailed
from profctl.nvml import Sampler, clock_warning
from profctl.pipelines.base import OnProgress, Progress, Request, Result
from profctl.pipelines.targets import Model, Workload
from profctl.shapes import label_of_row
from profctl.spec import BUILTIN_BACKENDS, AttentionSpec, ModelSpec

if TYPE_CHECKING:
    import pandas as pd

SHAPE_KEYS = ("batch", "seqlen_q", "seqlen_kv", "heads", "kv_heads", "head_dim", "dtype", "causal", "pass",
              "layout", "device")
MODEL_KEYS = ("model", "layers", "kv_heads", "mode", "batch", "seqlen", "dtype", "device", "memory_limit_gib")
EVENTS = "events.jsonl"
LOG = "workload.log"
#: exit statuses of a workload child that are not a crash: 0 ran, 1 no case ran, 3 a CUDA error broke the context
_CLEAN_EXITS = (0, 1, 3)


@dataclass(frozen=True, kw_only=True)
class BenchRequest(Request):
    """A sweep to time. `baseline` is added to the backends when missing (speedups are against it);
    `label` names what the run measures so `profctl compare` can pair runs of different backends."""

    baseline: str | None = "eager"
    point_timeout_s: float = 900.0
    label: str | dict[str, str] | None = None


@dataclass(kw_only=True)
class BenchResult(Result):
    """The rows of a sweep, the device it ran on and where its files are."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    device: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False
    baseline: str | None = None

    def to_dataframe(self) -> pd.DataFrame:
        import pandas as pd

        flat = []
        for r in self.rows:
            d = {k: v for k, v in r.items() if k not in ("clocks", "times_ms")}
            d.update({f"clock_{k}": v for k, v in (r.get("clocks") or {}).items() if not isinstance(v, list)})
            flat.append(d)
        return pd.DataFrame(flat)

    @property
    def clock_warnings(self) -> list[str]:
        return [f"{r['backend']} {label_of_row(r)}: {r['clock_warning']}" for r in self.rows
                if r.get("clock_warning")]


def check(req: BenchRequest) -> None:
    """UsageError for options the sweep cannot honour, found before anything runs (or torch is imported)."""
    if req.baseline is not None and req.baseline not in BUILTIN_BACKENDS:
        raise UsageError(f"unknown baseline {req.baseline!r}; choose from {', '.join(BUILTIN_BACKENDS)} or 'none'")
    if req.point_timeout_s <= 0:
        raise UsageError(f"--timeout must be positive, got {req.point_timeout_s:g}")
    if isinstance(req.target, Workload) and req.target.backends():
        parse_labels(req.label, list(req.target.backends()))


def run(req: BenchRequest, on_progress: OnProgress | None = None) -> BenchResult:
    """Run the sweep; return every point's row, failed ones included (a row per point, whatever happened)."""
    check(req)
    target = req.target.resolve()
    if not isinstance(target, (Workload, Model)):
        raise UsageError(f"profctl bench times the attention and model workloads, not a {target.kind}")
    backends = list(target.backends())
    labels = parse_labels(req.label, backends)
    if req.baseline and req.baseline not in backends:
        target = target.with_backends([*backends, req.baseline])
    run_dir = runs.new_run("bench", root=req.reports, argv=list(req.command) if req.command else None,
                           label=",".join(sorted(set(labels.values()))) or None,
                           extra={**target.manifest(), "labels": labels or None})
    sweep = _Sweep(req, target, run_dir, on_progress)
    error: BaseException | None = None
    try:
        with runs.sigterm_as_interrupt():  # a cancelled CI job keeps its finished points too
            sweep.run_all()
    except KeyboardInterrupt:
        sweep.interrupted = True
        sweep.stop()
    except BaseException as e:
        error = e
        sweep.stop()
    finally:
        sweep.sampler.stop()
    return _finish(req, sweep, run_dir, labels, error)


class _Sweep:
    """The state of one running sweep: its points, the child process running them, the rows so far."""

    def __init__(self, req: BenchRequest, target: Workload | Model, run_dir: Path,
                 on_progress: OnProgress | None) -> None:
        self.req, self.target, self.run_dir, self.on_progress = req, target, run_dir, on_progress
        self.specs = target.cases()
        self.events = runs.EventTail(run_dir / EVENTS)
        self.log = run_dir / LOG
        self.sampler = Sampler().start()
        self.device: dict[str, Any] = {"nvml_name": self.sampler.name, "driver": self.sampler.driver}
        self.rows: dict[int, dict[str, Any]] = {}
        self.child: Any = None
        self.current: int | None = None
        self.started = 0.0
        self.interrupted = False

    def run_all(self) -> None:
        """One child after another, each resuming after the last point seen, until every point has a row."""
        next_index = 0
        while next_index < len(self.specs):
            argv = self.target.argv(jsonl=self.events.path, skip=next_index)
            self.child = self.req.executor.spawn(
                argv, log=self.log, env=self.target.env(),
                timeout_s=self.req.point_timeout_s * (len(self.specs) - next_index) + 300)
            runs.record_tool(self.run_dir, "workload", list(argv), log=LOG, skip=next_index)
            self.current = None
            next_index = self._follow(next_index)

    def _follow(self, start: int) -> int:
        """Follow the running child to its end (or kill it at a point's timeout); the next point to run."""
        while True:
            self._take(self.events.read())
            rc = self.child.proc.poll()
            if self.current is not None and time.monotonic() - self.started > self.req.point_timeout_s:
                self.child.kill()
                i = self.current
                self.rows[i] = failed_row(self.specs[i], "timeout", f"no result after "
                                          f"{self.req.point_timeout_s:.0f} s; killed (log: {self.log})")
                self._progress(i, self.rows[i])
                return i + 1
            if rc is not None:
                return self._on_exit(rc, start)
            time.sleep(0.05)

    def _on_exit(self, rc: int, start: int) -> int:
        """The next point after the child ended: past the point it died in, else past its last row."""
        self._take(self.events.read(final=True))  # rows written just before exit
        i = self.current
        if i is not None and i not in self.rows:
            self.rows[i] = failed_row(self.specs[i], "crashed",
                                      f"workload process died (exit {rc}) during this point; see {self.log}")
            self._progress(i, self.rows[i])
            return i + 1
        done = max(self.rows) + 1 if self.rows else start
        if done <= start:
            # ended before starting any point: a broken environment, not a backend failure
            how = f"exited with status {rc}" if rc not in _CLEAN_EXITS else f"ended (status {rc})"
            raise WorkloadFailed(f"the workload process {how} before running any case", log=self.log)
        return done

    def _take(self, evs: list[dict[str, Any]]) -> None:
        for ev in evs:
            kind = ev.get("event")
            if kind == "device":
                self.device.update({k: v for k, v in ev.items() if k != "event"})
            elif kind == "start":
                self.current, self.started = int(ev["index"]), time.monotonic()
                self.sampler.take()  # drop samples from between points
                self._progress(self.current, None)
            elif kind == "row":
                i = int(ev["index"])
                self.rows[i] = make_row(self.specs[i], ev, self.sampler.take(), self.device)
                self.current = None if self.current == i else self.current
                self._progress(i, self.rows[i])

    def _progress(self, i: int, row: dict[str, Any] | None) -> None:
        if self.on_progress is not None:
            self.on_progress(Progress(i, len(self.specs), self.specs[i], row))

    def stop(self) -> None:
        """Kill the child and keep every row it finished (read from the start: an interrupt may have come
        between reading a line and handling it)."""
        if self.child is not None:
            try:
                self.child.kill()
            except BaseException:  # a second Ctrl-C while stopping: the rows on disk are still read
                pass
        try:
            evs = runs.read_events(self.events.path)
        except BaseException:
            return
        for ev in evs:
            if ev.get("event") == "device":
                for k, v in ev.items():
                    if k != "event":
                        self.device.setdefault(k, v)
            elif ev.get("event") == "row":
                i = int(ev.get("index", -1))
                if 0 <= i < len(self.specs) and i not in self.rows:
                    self.rows[i] = make_row(self.specs[i], ev, {}, self.device)


def _finish(req: BenchRequest, sweep: _Sweep, run_dir: Path, labels: dict[str, str],
            error: BaseException | None) -> BenchResult:
    """Speedups, clock warnings, bench.json and the manifest's end; re-raise the error that stopped the sweep."""
    from profctl.fsutil import atomic_write_json

    ordered = [sweep.rows[i] for i in sorted(sweep.rows)]
    for r in ordered:
        name = labels.get(r["backend"]) or labels.get(r.get("backend_ref") or "")
        if name:
            r["label"] = name
    add_speedups(ordered, req.baseline)
    _add_clock_warnings(ordered)
    atomic_write_json(run_dir / "bench.json", ordered)
    done: dict[str, Any] = {"device": sweep.device, "points": len(sweep.specs), "rows": len(ordered),
                            "clocks": runs.clocks_seen(ordered)}
    if error is not None:
        reason = error.one_line() if isinstance(error, ProfctlError) else f"{type(error).__name__}: {error}"
        runs.finish(run_dir, "failed", reason=reason, **done)
        raise error
    if sweep.interrupted:
        done["reason"] = "interrupted"
    status = "incomplete" if sweep.interrupted or len(ordered) < len(sweep.specs) else "complete"
    runs.finish(run_dir, status, **done)
    return BenchResult(run_dir=run_dir, status=status, rows=ordered, device=sweep.device,
                       interrupted=sweep.interrupted, baseline=req.baseline,
                       failed_cases=[r for r in ordered if r.get("status") != "ok"])


def parse_labels(label: str | dict[str, str] | None, backends: list[str]) -> dict[str, str]:
    """{backend: label} from ``NAME`` (the run's only backend) or ``BACKEND=NAME,...``; UsageError otherwise."""
    if not label:
        return {}
    if isinstance(label, dict):
        pairs = dict(label)
    elif "=" in label:
        pairs = {}
        for part in label.split(","):
            b, sep, name = part.partition("=")
            if not sep:
                raise UsageError(f"--label {label!r}: mix of NAME and BACKEND=NAME; give BACKEND=NAME for each")
            pairs[b.strip()] = name.strip()
    else:
        if len(backends) != 1:
            raise UsageError(f"--label {label!r} names one backend but the run has {len(backends)} "
                             f"({', '.join(backends)}); give BACKEND=NAME,... instead")
        pairs = {backends[0]: label.strip()}
    for b, name in pairs.items():
        if b not in backends:
            raise UsageError(f"--label: backend {b!r} is not in this run's backends ({', '.join(backends)})")
        if not name or any(c in name for c in ",=[]"):
            raise UsageError(f"--label: {name!r} is not a usable label (non-empty, no ',', '=', '[', ']')")
    if len(set(pairs.values())) != len(pairs):
        raise UsageError(f"--label {label!r}: two backends under one label; a label names one backend in a run")
    return pairs


# ------------------------------------------------------------------------------------------------ rows
def _base_row(spec: AttentionSpec | ModelSpec) -> dict[str, Any]:
    d = spec.to_dict()
    if isinstance(spec, ModelSpec):
        row: dict[str, Any] = {"workload": "model", "backend": spec.label, **{k: d[k] for k in MODEL_KEYS}}
    else:
        row = {"backend": spec.label, **{k: d[k] for k in SHAPE_KEYS}, "causal_align": spec.causal_align,
               "flops": flops.flops(spec)}
    if spec.label != spec.backend:
        row["backend_ref"] = spec.backend  # the function reference the label stands for
    return row


def failed_row(spec: AttentionSpec | ModelSpec, status: str, reason: str) -> dict[str, Any]:
    """The row of a point that produced no result (crashed, timeout)."""
    return {**_base_row(spec), "status": status, "reason": reason, "median_ms": None, "tflops": None,
            "peak_mem_bytes": None, "rel_error": None}


def make_row(spec: AttentionSpec | ModelSpec, ev: dict[str, Any], clocks: dict[str, Any],
             device: dict[str, Any]) -> dict[str, Any]:
    """A bench row from the workload's row event: FLOPs from the backend's causal alignment (a function backend
    reports its own; a model step counts its matmuls and attention, workloads/models.model_flops), TFLOP/s, % of
    the device's peak (for a model step: its MFU), a rate above the datasheet peak flagged as suspect."""
    if isinstance(spec, AttentionSpec) and ev.get("causal_align") and spec.causal and \
            ev["causal_align"] != spec.causal_align:
        spec = replace(spec, align=ev["causal_align"])
    row = _base_row(spec)
    for k, v in ev.items():
        if k not in ("event", "index", "spec", "t"):
            row[k] = v
    if isinstance(spec, ModelSpec):
        row["torch_dtype"], row["dtype"] = row.get("dtype"), spec.dtype  # profctl's name (bf16), torch's beside it
        row["flops"] = row.get("model_flops")
        if row.get("peak_mem_allocated_bytes") is not None:
            row["peak_mem_bytes"] = row["peak_mem_allocated_bytes"]
    for key in ("median_ms", "tflops", "rel_error", "peak_mem_bytes"):
        row.setdefault(key, None)
    med = row.get("median_ms")
    if row.get("status") == "ok" and med and row.get("flops"):
        rate = flops.tflops(row["flops"], med * 1e-3)
        row["tflops"] = rate
        name = device.get("name") if spec.device == "cuda" else None
        peak = devices.peak_tflops(name, spec.dtype)
        row["peak_tflops"] = peak
        row["pct_of_peak"] = 100.0 * rate / peak if peak else None
        if isinstance(spec, ModelSpec):
            row["mfu"] = rate / peak if peak else None
        row["suspect"] = bool(peak and rate > peak)
        if row["suspect"]:
            row["suspect_reason"] = f"{rate:.0f} TFLOP/s is above the {peak:.0f} TFLOP/s datasheet peak"
    row["clocks"] = clocks
    return row


def _case_key(r: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(r.get(k) for k in (MODEL_KEYS if r.get("workload") == "model" else SHAPE_KEYS))


def add_speedups(rows: list[dict[str, Any]], baseline: str | None) -> None:
    """Each row's speedup over the baseline's row of the same case (baseline time / time)."""
    if not baseline:
        return
    base = {_case_key(r): r for r in rows if r["backend"] == baseline and r.get("status") == "ok"}
    for r in rows:
        b = base.get(_case_key(r))
        r["baseline"] = baseline
        r["speedup"] = (b["median_ms"] / r["median_ms"]) if (b and r.get("status") == "ok" and r["median_ms"]) \
            else None


def _add_clock_warnings(rows: list[dict[str, Any]]) -> None:
    top = max((r["clocks"].get("sm_clock_mhz_max") or 0 for r in rows if r.get("clocks")), default=0) or None
    for r in rows:
        w = clock_warning(r.get("clocks") or {}, top)
        if w:
            r["clock_warning"] = w
