"""Bench rows as a rich table, Markdown or CSV; JSON is the rows themselves."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from rich.markup import escape
from rich.table import Table

from profctl.pipelines.bench_pipeline import BenchResult
from profctl.pipelines.bench_rows import PROCESSES_APART
from profctl.render.tables import console, fit_columns, markdown, terminal_width, text_console
from profctl.schema.bench import ATTENTION_CASE_FIELDS, BenchRow
from profctl.spec import is_mask_refusal

_PASS = ATTENTION_CASE_FIELDS.index("pass")
#: the columns `--csv` writes, in order (every scalar row field; lists and dicts are left to --json): the case
#: (the backend's causal alignment beside its mask), then what was measured
CSV_COLUMNS = (
    "backend", *ATTENTION_CASE_FIELDS[:_PASS], "causal_align", *ATTENTION_CASE_FIELDS[_PASS:],
    "status", "reason", "flops", "median_ms", "min_ms", "max_ms", "mean_ms", "std_ms",
    "iters", "fwd_median_ms", "bwd_median_ms", "tflops", "peak_tflops", "pct_of_peak", "suspect", "speedup",
    "baseline", "peak_mem_bytes", "workspace_bytes", "rel_error", "tolerance", "check", "clock_warning",
    "iqr_ratio", "noise_warning", "host_ms", "host_warning", "roof", "roof_ms", "pct_of_roof", "peak_host_mem_bytes",
    "peak_mem_where",
)


def _mib(b: Any, where: Any = None) -> str:
    """Bytes in MiB; ``(host)`` when the figure is the host's peak resident memory (a CPU run)."""
    return f"{b / 2**20:,.0f} MiB" + (f" ({where})" if where else "") if isinstance(b, (int, float)) else "-"


def display_rows(res: BenchResult) -> list[dict[str, str]]:
    out = []
    roofs = any(r.roof for r in res.rows)
    for r in res.rows:
        if r.is_model:
            out.append(model_row(r))
            continue
        rate = r.tflops
        rate_s = "-" if rate is None else (f"{rate:,.1f}" if rate >= 1 else f"{rate:.3f}")
        if r.suspect:
            rate_s += " (!)"
        pct = r.pct_of_peak
        clk = r.clocks or {}
        err = r.rel_error
        out.append({
            "backend": backend_name(r),
            "shape": r.shape_label(),
            "pass": str(r.pass_),
            "status": _status(r),
            "median ms": f"{r.median_ms:.4f}" if r.ok else "-",
            "TFLOP/s": rate_s,
            "% peak": f"{pct:.0f}%" if pct is not None else "-",
            **({"of roof": f"{r.pct_of_roof:.0f}% {r.roof}" if r.pct_of_roof is not None else "-"} if roofs else {}),
            "speedup": f"{r.speedup:.2f}x" if r.speedup else "-",
            "peak mem": _mib(r.peak_mem_bytes, r.peak_mem_where),
            "rel err": (f"{err:.1e}" + ("" if r.check != "fail" else " FAIL")) if err is not None else "-",
            "SM MHz": f"{clk['sm_clock_mhz_median']:.0f}" if clk.get("sm_clock_mhz_median") else "-",
        })
    return out


def _status(r: BenchRow) -> str:
    """A row's status, and for a failed point its reason cut to 80 characters (an ellipsis says so; the whole
    reason is printed under the table and kept in the data formats)."""
    reason = r.reason or ""
    return str(r.status) if r.ok else f"{r.status}: {reason if len(reason) <= 80 else reason[:79] + '…'}"


def backend_name(r: BenchRow) -> str:
    """The backend as a table shows it: ``label (backend)`` when the run or the function named its rows."""
    label = r.label
    return f"{label} ({r.backend})" if label and label != r.backend else str(r.backend)


def _rate(v: Any) -> str:
    return "-" if v is None else (f"{v:,.1f}" if v >= 1 else f"{v:.3g}")


def model_row(r: BenchRow) -> dict[str, str]:
    """A model step's row: time, throughput in the seeds' units (tokens/s, samples/s), MFU, attention's share
    of the step, memory."""
    ok = r.ok
    mfu, share = r.mfu, r.attn_share
    layers = f" l{r.layers}" if r.layers else ""
    return {
        "backend": backend_name(r),
        "model": f"{r.model}{layers} b{r.batch} s{r.seqlen} {r.dtype}",
        "mode": str(r.mode) if "mode" in r else "",
        "status": _status(r),
        "median ms": f"{r.median_ms:.3f}" if ok else "-",
        "tokens/s": _rate(r.tokens_per_s) if ok else "-",
        "samples/s": _rate(r.samples_per_s) if ok else "-",
        "TFLOP/s": _rate(r.tflops) + (" (!)" if r.suspect else "") if ok else "-",
        "MFU": f"{100 * mfu:.1f}%" if ok and mfu is not None else "-",
        "attn share": f"{100 * share:.0f}%" if ok and share is not None else "-",
        "speedup": f"{r.speedup:.2f}x" if r.speedup else "-",
        "peak mem": _mib(r.peak_mem_bytes, r.peak_mem_where),
    }


def _device_name(res: BenchResult) -> str:
    return str(res.device.get("name") or res.device.get("nvml_name") or "cpu")


def not_run(res: BenchResult) -> dict[str, tuple[int, str]]:
    """{backend: (points, first reason)} of the backends whose every point was refused here (``unsupported``:
    not installed, not on this device): the terminal table leaves them out and says so in one line each."""
    by: dict[str, list[BenchRow]] = {}
    for r in res.rows:
        by.setdefault(str(r.backend), []).append(r)
    return {b: (len(rs), _first_clause(str(rs[0].reason or "unsupported")))
            for b, rs in by.items() if all(r.status == "unsupported" for r in rs)}


def _first_clause(reason: str) -> str:
    """A reason without the exception chain an import left on it; never cut (its end is often the fix: a line
    under the table is wrapped to the terminal, not shortened)."""
    return reason.split(": ModuleNotFoundError")[0].split(": ImportError")[0]


def what_ran(res: BenchResult, requested: list[str]) -> list[str]:
    """What the sweep did, in words: which backends ran where on how many of the planned points, a baseline
    added, backends that could not run."""
    ran = list(dict.fromkeys(str(r.backend) for r in res.rows if r.ok))
    ok = sum(1 for r in res.rows if r.ok)
    planned = max(res.points or 0, len(res.rows))
    unfinished = planned - len(res.rows)
    what = "; ".join(x for x in (_what(res.rows), "none finished" if not res.rows else
                                 f"{unfinished} not finished" if unfinished else "") if x)
    lines = [f"ran {', '.join(ran) or 'nothing'} on {_device_name(res)}: {ok} of {planned} point"
             f"{'s' if planned != 1 else ''}" + (f" ({what})" if what else "")
             + ("" if requested else "; backends: the defaults for "
                f"{res.rows[0].device if res.rows else 'this device'}")]
    if res.baseline and requested and res.baseline not in requested:
        lines.append(f"{res.baseline} was added as the baseline for the speedup column "
                     "(--baseline none leaves it out, --baseline NAME picks another)")
    for b, (n, why) in not_run(res).items():
        lines.append(f"not run here: {b} ({n} point(s)): {why}")
    for (b, why), n in mask_not_run(res).items():
        lines.append(f"not run here: {b} ({n} point(s)): {why}")
    return lines


def mask_not_run(res: BenchResult) -> dict[tuple[str, str], int]:
    """{(backend, reason): points} of the points refused for a mask the backend has no native form of (--window,
    --docs: never run with a full mask instead), of backends that ran other points: one line each under the table."""
    skip = set(not_run(res))
    out: dict[tuple[str, str], int] = {}
    for r in res.rows:
        if r.status == "unsupported" and str(r.backend) not in skip and is_mask_refusal(r.reason):
            key = (str(r.backend), str(r.reason))
            out[key] = out.get(key, 0) + 1
    return out


def _what(rows: list[BenchRow]) -> str:
    """The finished rows' cases in words: models and modes, or shapes and passes ('' without rows)."""
    if not rows:
        return ""
    if any(r.is_model for r in rows):  # model steps: which models, in which modes
        model = [str(r.model).split("[")[0] for r in rows]  # a point that ran names its cut: llama-7b[layers=4]
        cases = len({(m, r.layers, r.batch, r.seqlen, r.dtype) for m, r in zip(model, rows, strict=True)})
        return (f"{', '.join(dict.fromkeys(model))}, {cases} size"
                f"{'s' if cases != 1 else ''}, {', '.join(dict.fromkeys(str(r.mode) for r in rows))}")
    shapes = len({r.shape_label() for r in rows})
    return f"{shapes} shape{'s' if shapes != 1 else ''}, {', '.join(dict.fromkeys(str(r.pass_) for r in rows))}"


def to_console(res: BenchResult, con: Any = None) -> None:
    con = con or console()
    dev = _device_name(res)
    t = Table(title=f"profctl bench — {dev}" + (f", speedup vs {res.baseline}" if res.baseline else ""),
              header_style="bold")
    skip = set(not_run(res))
    masked = {k[0] for k in mask_not_run(res)}
    pairs = [(r, raw) for r, raw in zip(display_rows(res), res.rows, strict=True) if raw.backend not in skip
             and not (raw.backend in masked and raw.status == "unsupported" and is_mask_refusal(raw.reason))]
    if not pairs:
        con.print("no point ran" + (f" (not run here: {', '.join(sorted(skip))})" if skip else ""))
        return
    # a column with nothing in it (no peak known on a CPU, no NVML, no memory counter) is left out
    cols = [c for c in pairs[0][0] if c in ("backend", "shape", "pass", "status", "median ms")
            or any(r[c] != "-" for r, _ in pairs)]
    # on a terminal: numbers never wrap, and columns that do not fit are left out (said under the table)
    fit = fit_columns([{c: r[c] for c in cols} for r, _ in pairs], terminal_width(con))
    cols = [c for c in cols if not fit.widths or c in fit.widths]
    for c in cols:
        fixed = fit.widths.get(c)
        t.add_column(c, justify="left" if c in ("backend", "shape", "pass", "status", "model", "mode") else "right",
                     overflow="fold", width=fixed, max_width=60 if c == "status" and fixed is None else None)
    prev = None
    for r, raw in pairs:
        key = (raw.shape_label(), raw.pass_, raw.model, raw.mode)
        if prev is not None and key != prev:
            t.add_section()
        prev = key
        style = None if raw.ok else "dim"
        if raw.suspect or raw.check == "fail":
            style = "red"
        t.add_row(*(escape(str(r[c])) for c in cols), style=style)
    con.print(t)
    for line in fit.note_lines():
        con.print(escape(line), soft_wrap=True, style="dim")
    for w in warning_lines(res):
        con.print(f"[yellow]warning:[/] {escape(w)}", soft_wrap=True)
    for kind, line in problem_lines(res):
        con.print(f"[red]{kind}:[/] {escape(line)}", soft_wrap=True)


#: more timing-spread warnings than this are said in one line
NOISE_LINES = 4


def warning_lines(res: BenchResult) -> list[str]:
    """The run's warnings, one line each: clock warnings, host-bound steps, the timing-spread warnings (summarised),
    the rest."""
    return [*res.clock_warnings, *res.host_warnings, *noise_lines(res.rows), *process_lines(res.rows),
            *res.warnings]


def noise_lines(rows: list[BenchRow]) -> list[str]:
    """The rows' timing-spread warnings: one line each for up to NOISE_LINES of them, else one line for all of
    them (on a busy CPU most points spread alike; each row's noise_warning keeps its own numbers)."""
    noisy = [r for r in rows if r.noise_warning]
    if len(noisy) <= NOISE_LINES:
        return [f"{r.backend} {r.shape_label()}: {r.noise_warning}" for r in noisy]
    worst = max(noisy, key=lambda r: r.iqr_ratio or 0.0)
    first, more = noisy[0], noisy[1:]
    names = ", ".join(f"{r.backend} {r.shape_label()}" for r in more[:2]) + (", ..." if len(more) > 2 else "")
    return [f"{first.backend} {first.shape_label()} and {len(more)} more of the {len(rows)} points ({names}): "
            f"timings spread: the middle half of their steps spans up to {worst.iqr_ratio or 0:.0%} of the median "
            f"(worst: {worst.backend} {worst.shape_label()}); medians may move between runs (a busy machine, "
            "host-bound steps): more --iters, or profile them (each row's noise_warning has its numbers)"]


def process_lines(rows: list[BenchRow]) -> list[str]:
    """The rows whose processes' medians differ or some of whose processes timed nothing (bench --processes): one
    line each for up to NOISE_LINES of them, else one line for the medians (a CPU machine's processes differ alike
    at every point) and the failures' rows line by line."""
    said = [r for r in rows if r.process_warning]
    if len(said) <= NOISE_LINES:
        return [f"{r.backend} {r.shape_label()}: {r.process_warning}" for r in said]
    apart = [r for r in said if (r.process_spread or 0.0) > PROCESSES_APART]
    out = [f"{r.backend} {r.shape_label()}: {r.process_warning}" for r in said if r.process_failures]
    if apart:
        worst = max(apart, key=lambda r: r.process_spread or 0.0)
        out.insert(0, f"{len(apart)} of the {len(rows)} points: their processes' medians differ, by up to "
                      f"{worst.process_spread or 0:.2f}x (worst: {worst.backend} {worst.shape_label()}); a process "
                      "keeps its speed for its life (the machine's state): each row is its processes' middle, and "
                      "compare takes each process as a run (each row's process_warning has its numbers)")
    return out


def problem_lines(res: BenchResult) -> list[tuple[str, str]]:
    """(kind, line) for every result that is wrong or suspect: never hidden, whatever else is left out."""
    out = []
    for raw in res.rows:
        if raw.suspect:
            out.append(("suspect", f"{raw.backend} {raw.shape_label()}: {raw.suspect_reason} — check the FLOP "
                                   "count and the timing"))
        if raw.check == "fail":
            err = f"relative error {raw.rel_error:.2e}" if raw.rel_error is not None else \
                str(raw.get("check_reason") or "the output does not match the reference")
            tol = f" > tolerance {raw.tolerance:.0e}" if raw.rel_error is not None and raw.tolerance else ""
            out.append(("wrong result", f"{raw.backend} {raw.shape_label()}: {err}{tol}"))
    return out


def failure_lines(res: BenchResult) -> list[str]:
    """One line per point that failed to run (error, crashed, oom, timeout), with its whole reason: what the
    table shows cut, and what -q must still say. Backends that could not run here at all are said by what_ran."""
    skip = set(not_run(res))
    return [f"{r.backend} {r.shape_label()}{' ' + str(r.pass_) if r.pass_ else ''}: {r.status}: {r.reason}"
            for r in res.rows if not r.ok and r.backend not in skip and r.status != "unsupported"]


def to_text(res: BenchResult) -> str:
    """The terminal table as plain text (for `-f table -o FILE`)."""
    con, buf = text_console(200)
    to_console(res, con)
    return buf.getvalue()


def to_json(res: BenchResult) -> str:
    return json.dumps(res.rows, indent=1, default=str) + "\n"


def to_csv(res: BenchResult) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), extrasaction="ignore")
    w.writeheader()
    for r in res.rows:
        w.writerow({k: r.get(k) for k in CSV_COLUMNS})
    return buf.getvalue()


def to_markdown(res: BenchResult) -> str:
    dev = res.device.get("name") or "cpu"
    return f"profctl bench on {dev}\n\n" + markdown([
        {k: v for k, v in r.items()} for r in display_rows(res)])
