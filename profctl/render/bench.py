"""Bench rows as a rich table, Markdown or CSV; JSON is the rows themselves."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from profctl.pipelines.bench import BenchResult
from profctl.shapes import label_of_row as shape_label

#: the columns `--csv` writes, in order (every scalar row field; lists and dicts are left to --json)
CSV_COLUMNS = (
    "backend", "batch", "seqlen_q", "seqlen_kv", "heads", "kv_heads", "head_dim", "dtype", "causal", "causal_align",
    "pass", "layout", "device", "status", "reason", "flops", "median_ms", "min_ms", "max_ms", "mean_ms", "std_ms",
    "iters", "fwd_median_ms", "bwd_median_ms", "tflops", "peak_tflops", "pct_of_peak", "suspect", "speedup",
    "baseline", "peak_mem_bytes", "workspace_bytes", "rel_error", "tolerance", "check", "clock_warning",
    "iqr_ratio", "noise_warning",
)


def _mib(b: Any) -> str:
    return f"{b / 2**20:,.0f} MiB" if isinstance(b, (int, float)) else "-"


def display_rows(res: BenchResult) -> list[dict[str, str]]:
    out = []
    for r in res.rows:
        if r.get("workload") == "model":
            out.append(model_row(r))
            continue
        ok = r.get("status") == "ok"
        rate = r.get("tflops")
        rate_s = "-" if rate is None else (f"{rate:,.1f}" if rate >= 1 else f"{rate:.3f}")
        if r.get("suspect"):
            rate_s += " (!)"
        pct = r.get("pct_of_peak")
        clk = r.get("clocks") or {}
        err = r.get("rel_error")
        out.append({
            "backend": backend_name(r),
            "shape": shape_label(r),
            "pass": r["pass"],
            "status": r["status"] if ok else f"{r['status']}: {(r.get('reason') or '')[:80]}",
            "median ms": f"{r['median_ms']:.4f}" if ok else "-",
            "TFLOP/s": rate_s,
            "% peak": f"{pct:.0f}%" if pct is not None else "-",
            "speedup": f"{r['speedup']:.2f}x" if r.get("speedup") else "-",
            "peak mem": _mib(r.get("peak_mem_bytes")),
            "rel err": (f"{err:.1e}" + ("" if r.get("check") != "fail" else " FAIL")) if err is not None else "-",
            "SM MHz": f"{clk['sm_clock_mhz_median']:.0f}" if clk.get("sm_clock_mhz_median") else "-",
        })
    return out


def backend_name(r: dict[str, Any]) -> str:
    """The backend as a table shows it: ``label (backend)`` when the run or the function named its rows."""
    label = r.get("label")
    return f"{label} ({r['backend']})" if label and label != r["backend"] else str(r["backend"])


def _rate(v: Any) -> str:
    return "-" if v is None else (f"{v:,.1f}" if v >= 1 else f"{v:.3g}")


def model_row(r: dict[str, Any]) -> dict[str, str]:
    """A model step's row: time, throughput in the seeds' units (tokens/s, samples/s), MFU, attention's share
    of the step, memory."""
    ok = r.get("status") == "ok"
    mfu, share = r.get("mfu"), r.get("attn_share")
    layers = f" l{r['layers']}" if r.get("layers") else ""
    return {
        "backend": backend_name(r),
        "model": f"{r.get('model')}{layers} b{r.get('batch')} s{r.get('seqlen')} {r.get('dtype')}",
        "mode": r.get("mode", ""),
        "status": r["status"] if ok else f"{r['status']}: {(r.get('reason') or '')[:80]}",
        "median ms": f"{r['median_ms']:.3f}" if ok else "-",
        "tokens/s": _rate(r.get("tokens_per_s")) if ok else "-",
        "samples/s": _rate(r.get("samples_per_s")) if ok else "-",
        "TFLOP/s": _rate(r.get("tflops")) + (" (!)" if r.get("suspect") else "") if ok else "-",
        "MFU": f"{100 * mfu:.1f}%" if ok and mfu is not None else "-",
        "attn share": f"{100 * share:.0f}%" if ok and share is not None else "-",
        "speedup": f"{r['speedup']:.2f}x" if r.get("speedup") else "-",
        "peak mem": _mib(r.get("peak_mem_bytes")),
    }


def _device_name(res: BenchResult) -> str:
    return str(res.device.get("name") or res.device.get("nvml_name") or "cpu")


def not_run(res: BenchResult) -> dict[str, tuple[int, str]]:
    """{backend: (points, first reason)} of the backends whose every point was refused here (``unsupported``:
    not installed, not on this device): the terminal table leaves them out and says so in one line each."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in res.rows:
        by.setdefault(str(r["backend"]), []).append(r)
    return {b: (len(rs), _first_clause(str(rs[0].get("reason") or "unsupported")))
            for b, rs in by.items() if all(r.get("status") == "unsupported" for r in rs)}


def _first_clause(reason: str, width: int = 90) -> str:
    reason = reason.split(": ModuleNotFoundError")[0].split(": ImportError")[0]
    return reason if len(reason) <= width else reason[: width - 1] + "…"


def what_ran(res: BenchResult, requested: list[str]) -> list[str]:
    """What the sweep did, in words: which backends ran where, a baseline added, backends that could not run."""
    ran = list(dict.fromkeys(str(r["backend"]) for r in res.rows if r.get("status") == "ok"))
    ok = sum(1 for r in res.rows if r.get("status") == "ok")
    if any(r.get("workload") == "model" for r in res.rows):  # model steps: which models, in which modes
        cases = len({(r.get("model"), r.get("layers"), r.get("batch"), r.get("seqlen"), r.get("dtype"))
                     for r in res.rows})
        what = (f"{', '.join(dict.fromkeys(str(r.get('model')) for r in res.rows))}, {cases} size"
                f"{'s' if cases != 1 else ''}, {', '.join(dict.fromkeys(str(r.get('mode')) for r in res.rows))}")
    else:
        shapes = len({shape_label(r) for r in res.rows})
        what = (f"{shapes} shape{'s' if shapes != 1 else ''}, "
                f"{', '.join(dict.fromkeys(str(r.get('pass')) for r in res.rows))}")
    lines = [f"ran {', '.join(ran) or 'nothing'} on {_device_name(res)}: {ok} of {len(res.rows)} point"
             f"{'s' if len(res.rows) != 1 else ''} ({what})"
             + ("" if requested else "; backends: the defaults for "
                f"{res.rows[0].get('device') if res.rows else 'this device'}")]
    if res.baseline and requested and res.baseline not in requested:
        lines.append(f"{res.baseline} was added as the baseline for the speedup column "
                     "(--baseline none leaves it out, --baseline NAME picks another)")
    for b, (n, why) in not_run(res).items():
        lines.append(f"not run here: {b} ({n} point(s)): {why}")
    return lines


def print_table(res: BenchResult, con: Any = None) -> None:
    from rich.markup import escape
    from rich.table import Table

    from profctl.render.tables import console

    con = con or console()
    dev = _device_name(res)
    t = Table(title=f"profctl bench — {dev}" + (f", speedup vs {res.baseline}" if res.baseline else ""),
              header_style="bold")
    skip = set(not_run(res))
    pairs = [(r, raw) for r, raw in zip(display_rows(res), res.rows, strict=True) if raw["backend"] not in skip]
    if not pairs:
        con.print("no point ran" + (f" (not run here: {', '.join(sorted(skip))})" if skip else ""))
        return
    # a column with nothing in it (no peak known on a CPU, no NVML, no memory counter) is left out
    cols = [c for c in pairs[0][0] if c in ("backend", "shape", "pass", "status", "median ms")
            or any(r[c] != "-" for r, _ in pairs)]
    for c in cols:
        t.add_column(c, justify="left" if c in ("backend", "shape", "pass", "status", "model", "mode") else "right",
                     overflow="fold", max_width=60 if c == "status" else None)
    prev = None
    for r, raw in pairs:
        key = (shape_label(raw), raw.get("pass"), raw.get("model"), raw.get("mode"))
        if prev is not None and key != prev:
            t.add_section()
        prev = key
        style = None if raw["status"] == "ok" else "dim"
        if raw.get("suspect") or raw.get("check") == "fail":
            style = "red"
        t.add_row(*(escape(str(r[c])) for c in cols), style=style)
    con.print(t)
    for w in [*res.clock_warnings, *res.noise_warnings, *res.warnings]:
        con.print(f"[yellow]warning:[/] {escape(w)}")
    for raw in res.rows:
        if raw.get("suspect"):
            con.print(f"[red]suspect:[/] {raw['backend']} {shape_label(raw)}: {raw['suspect_reason']} — "
                      "check the FLOP count and the timing")
        if raw.get("check") == "fail":
            con.print(f"[red]wrong result:[/] {raw['backend']} {shape_label(raw)}: relative error "
                      f"{raw['rel_error']:.2e} > tolerance {raw['tolerance']:.0e}")


def to_text(res: BenchResult) -> str:
    """The terminal table as plain text (for `-f table -o FILE`)."""
    from profctl.render.tables import text_console

    con, buf = text_console(200)
    print_table(res, con)
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
    from profctl.render.tables import markdown

    dev = res.device.get("name") or "cpu"
    return f"profctl bench on {dev}\n\n" + markdown([
        {k: v for k, v in r.items()} for r in display_rows(res)])
