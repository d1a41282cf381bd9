"""The sweep behind `profctl bench`: run a sweep in a child process, one case at a time, and turn its results into rows.

The sweep runs in ``python -m workloads.attention`` so that a crash (a CUDA fault, a segfault) or a hang in one
backend costs only that point: the parent records the point's row with its status and starts a new child at
the next point. Every finished row is already on disk (the child appends it to events.jsonl), so an interrupted
sweep keeps what finished. NVML clocks, power and throttle reasons are sampled per point in the parent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profctl import devices, flops, proc, runs
from profctl.errors import UsageError
from profctl.fsutil import atomic_write_json
from profctl.nvml import Sampler, clock_warning
from profctl.workload import WorkloadArgs, child_env
from workloads.spec import BACKENDS, AttentionSpec

if TYPE_CHECKING:
    import pandas as pd

SHAPE_KEYS = ("batch", "seqlen_q", "seqlen_kv", "heads", "kv_heads", "head_dim", "dtype", "causal", "pass",
              "layout", "device")

ProgressFn = Callable[[int, int, AttentionSpec, dict[str, Any] | None], None]


@dataclass
class BenchResult:
    """The rows of a sweep, the device it ran on and where its files are."""

    rows: list[dict[str, Any]]
    device: dict[str, Any] = field(default_factory=dict)
    run_dir: Path | None = None
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
    def warnings(self) -> list[str]:
        return [f"{r['backend']} {shape_label(r)}: {r['clock_warning']}" for r in self.rows if r.get("clock_warning")]


def run_bench(
    wl: WorkloadArgs,
    *,
    baseline: str | None = "eager",
    reports: Path | str | None = None,
    point_timeout_s: float = 900.0,
    progress: ProgressFn | None = None,
    argv: list[str] | None = None,
    label: str | dict[str, str] | None = None,
) -> BenchResult:
    """Run the sweep `wl` describes; return every point's row, failed ones included.

    `label` names what the run measures, so that runs of different backends can be compared case by case
    (``profctl compare`` pairs rows by label and shape): one name for the run's only backend, or
    ``{backend: name}`` / ``"backend=name,..."``. Rows of unlabelled backends pair by backend name."""
    wl = wl.resolved()
    if baseline is not None and baseline not in BACKENDS:
        raise UsageError(f"unknown baseline {baseline!r}; choose from {', '.join(BACKENDS)} or 'none'")
    labels = parse_labels(label, wl.backends())
    if baseline and baseline not in wl.backends():
        wl = replace(wl, backend=f"{wl.backend},{baseline}")
    specs = wl.specs()
    run_dir = runs.new_run("bench", root=reports, argv=argv, label=",".join(sorted(set(labels.values()))) or None,
                           extra={"workload": wl.manifest_dict(), "labels": labels or None})
    events = run_dir / "events.jsonl"
    log = run_dir / "workload.log"
    sampler = Sampler().start()
    device: dict[str, Any] = {"nvml_name": sampler.name, "driver": sampler.driver}
    rows: dict[int, dict[str, Any]] = {}
    interrupted = False
    error: BaseException | None = None
    child: proc.Running | None = None
    offset = 0
    next_index = 0
    try:
        with runs.sigterm_as_interrupt():  # a cancelled CI job keeps its finished points too
            while next_index < len(specs):
                child = proc.spawn(wl.child_argv(jsonl=events, skip=next_index), log=log, env=child_env(),
                                   timeout_s=point_timeout_s * (len(specs) - next_index) + 300)
                runs.record_tool(run_dir, "workload", list(child.argv), log=log.name, skip=next_index)
                current: int | None = None
                started = 0.0
                while True:
                    offset, evs = _read_new(events, offset)
                    for ev in evs:
                        kind = ev.get("event")
                        if kind == "device":
                            device.update({k: v for k, v in ev.items() if k != "event"})
                        elif kind == "start":
                            current, started = int(ev["index"]), time.monotonic()
                            sampler.take()  # drop samples from between points
                            if progress:
                                progress(current, len(specs), specs[current], None)
                        elif kind == "row":
                            i = int(ev["index"])
                            rows[i] = _make_row(specs[i], ev, sampler.take(), device)
                            current = None
                            if progress:
                                progress(i, len(specs), specs[i], rows[i])
                    rc = child.proc.poll()
                    if current is not None and time.monotonic() - started > point_timeout_s:
                        child.kill()
                        rows[current] = _failed_row(specs[current], "timeout",
                                                    f"no result after {point_timeout_s:.0f} s; killed (log: {log})")
                        next_index = current + 1
                        break
                    if rc is not None:
                        offset, evs = _read_new(events, offset)  # rows written just before exit
                        for ev in evs:
                            if ev.get("event") == "row":
                                i = int(ev["index"])
                                rows[i] = _make_row(specs[i], ev, sampler.take(), device)
                                current = None if current == i else current
                        done = max(rows) + 1 if rows else next_index
                        if current is not None and current not in rows:
                            rows[current] = _failed_row(specs[current], "crashed",
                                                        f"workload process died (exit {rc}) during this point; "
                                                        f"see {log}")
                            done = current + 1
                        elif rc not in (0, 1, 3) and done == next_index:
                            # died before starting any point: a broken environment, not a backend failure
                            from profctl.errors import WorkloadFailed

                            raise WorkloadFailed(f"the workload process exited with status {rc} before running "
                                                 f"any case", log=log)
                        next_index = max(done, next_index)
                        if progress and current is not None:
                            progress(current, len(specs), specs[current], rows[current])
                        break
                    time.sleep(0.05)
    except KeyboardInterrupt:
        interrupted = True
        _stop(child)
        _catch_up(events, specs, rows, device)  # rows the child finished before it was stopped
    except BaseException as e:
        error = e
        _stop(child)
        _catch_up(events, specs, rows, device)
    finally:
        sampler.stop()
    ordered = [rows[i] for i in sorted(rows)]
    for r in ordered:
        if r["backend"] in labels:
            r["label"] = labels[r["backend"]]
    _add_speedups(ordered, baseline)
    _add_clock_warnings(ordered)
    result = BenchResult(rows=ordered, device=device, run_dir=run_dir, interrupted=interrupted, baseline=baseline)
    atomic_write_json(run_dir / "bench.json", ordered)
    done_fields: dict[str, Any] = {"device": device, "points": len(specs), "rows": len(ordered),
                                   "clocks": runs.clocks_seen(ordered)}
    if error is not None:
        from profctl.errors import ProfctlError

        reason = error.one_line() if isinstance(error, ProfctlError) else f"{type(error).__name__}: {error}"
        runs.finish(run_dir, "failed", reason=reason, **done_fields)
        raise error
    if interrupted:
        done_fields["reason"] = "interrupted"
    runs.finish(run_dir, "incomplete" if interrupted or len(ordered) < len(specs) else "complete", **done_fields)
    return result


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


def _stop(child: proc.Running | None) -> None:
    if child is None:
        return
    try:
        child.kill()
    except BaseException:  # a second Ctrl-C while stopping: the rows on disk are still read
        pass


def _catch_up(events: Path, specs: list[AttentionSpec], rows: dict[int, dict[str, Any]],
              device: dict[str, Any]) -> None:
    """Add every row event on disk that `rows` lacks (read from the start: an interrupt may have come between
    reading a line and handling it)."""
    try:
        _, evs = _read_new(events, 0)
    except BaseException:
        return
    for ev in evs:
        if ev.get("event") == "device":
            for k, v in ev.items():
                if k != "event":
                    device.setdefault(k, v)
        elif ev.get("event") == "row":
            i = int(ev.get("index", -1))
            if 0 <= i < len(specs) and i not in rows:
                rows[i] = _make_row(specs[i], ev, {}, device)


def _read_new(path: Path, offset: int) -> tuple[int, list[dict[str, Any]]]:
    """New complete JSON lines after `offset` (a line still being written is left for the next call)."""
    if not path.exists():
        return offset, []
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    out = []
    end = data.rfind(b"\n")
    if end < 0:
        return offset, []
    for line in data[: end + 1].splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return offset + end + 1, out


def _base_row(spec: AttentionSpec) -> dict[str, Any]:
    d = spec.to_dict()
    return {"backend": d["backend"], **{k: d[k] for k in SHAPE_KEYS}, "causal_align": spec.causal_align,
            "flops": flops.flops(spec)}


def _failed_row(spec: AttentionSpec, status: str, reason: str) -> dict[str, Any]:
    return {**_base_row(spec), "status": status, "reason": reason, "median_ms": None, "tflops": None,
            "peak_mem_bytes": None, "rel_error": None}


def _make_row(spec: AttentionSpec, ev: dict[str, Any], clocks: dict[str, Any], device: dict[str, Any]
              ) -> dict[str, Any]:
    row = _base_row(spec)
    for k, v in ev.items():
        if k not in ("event", "index", "spec", "t"):
            row[k] = v
    for key in ("median_ms", "tflops", "rel_error", "peak_mem_bytes"):
        row.setdefault(key, None)
    med = row.get("median_ms")
    if row.get("status") == "ok" and med:
        rate = flops.tflops(row["flops"], med * 1e-3)
        row["tflops"] = rate
        name = device.get("name") if spec.device == "cuda" else None
        peak = devices.peak_tflops(name, spec.dtype)
        row["peak_tflops"] = peak
        row["pct_of_peak"] = 100.0 * rate / peak if peak else None
        row["suspect"] = bool(peak and rate > peak)
        if row["suspect"]:
            row["suspect_reason"] = f"{rate:.0f} TFLOP/s is above the {peak:.0f} TFLOP/s datasheet peak"
    row["clocks"] = clocks
    return row


def _case_key(r: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(r.get(k) for k in SHAPE_KEYS)


def _add_speedups(rows: list[dict[str, Any]], baseline: str | None) -> None:
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


def shape_label(r: dict[str, Any]) -> str:
    skv = f"/{r['seqlen_kv']}" if r["seqlen_kv"] != r["seqlen_q"] else ""
    kv = f"/{r['kv_heads']}" if r["kv_heads"] != r["heads"] else ""
    return (f"b{r['batch']} s{r['seqlen_q']}{skv} h{r['heads']}{kv} d{r['head_dim']} {r['dtype']}"
            f"{' causal' if r['causal'] else ''}")
