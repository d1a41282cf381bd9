"""The answers of profctl's MCP server (profctl.mcp_server), sized for a model: a few summary lines first (the
verdict, the first cause with its line and saving, the % of the floor and what is left), then the CLI's JSON,
long lists paged and said, never cut silently. Pure functions of the CLI's JSON and the call's outcome: no
process, no SDK."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profctl.errors import UsageError
from profctl.roofs import row_roofs
from profctl.schema.bench import BenchRow


@dataclass
class Outcome:
    """One command line run by a worker: its exit status, the JSON it printed, its error line, the record."""

    argv: list[str]
    exit_code: int
    data: Any
    error: str | None
    record: Path
    produced: Path | None
    wall_s: float
    timed_out: bool = False


#: what each exit status of profctl means (README, "Exit codes"), said beside every error
EXIT_MEANING = {
    0: "done", 1: "the work failed", 2: "bad arguments, refused before anything ran",
    3: "a tool is not installed or not found", 4: "a tool ran and failed or timed out",
    5: "an unreadable or damaged report or run", 6: "the two runs are not comparable",
    7: "a selection matched nothing", 8: "the program exited non-zero; what the tool recorded is kept",
    70: "an internal error of profctl's", 130: "interrupted",
}


# ------------------------------------------------------------------------------------------ paging
def page(data: Any, number: int, size: int) -> tuple[Any, list[dict[str, Any]]]:
    """`data` with every long list (the data itself, or one or two levels into it) cut to page `number` of `size`
    rows, and what was cut: never silently (a list with fewer pages is empty past its last, and says so). A page
    past every list's last is an error. size 0: whole."""
    if number < 1:
        raise UsageError(f"page {number}: pages start at 1")
    info: list[dict[str, Any]] = []

    def cut(value: Any, path: str) -> Any:
        if size <= 0 or not isinstance(value, list) or len(value) <= size:
            return value
        pages = -(-len(value) // size)
        info.append({"path": path or ".", "page": number, "pages": pages, "rows": len(value), "size": size,
                     "next": f"page={number + 1}" if number < pages else None})
        return value[(number - 1) * size:number * size]

    if isinstance(data, dict):
        shown: Any = {k: {k2: cut(v2, f"{k}.{k2}") for k2, v2 in v.items()} if isinstance(v, dict) else cut(v, k)
                      for k, v in data.items()}
    else:
        shown = cut(data, "")
    last = max((p["pages"] for p in info), default=1)
    if number > last:
        raise UsageError(f"page {number}: the answer has {last} page(s) of {size} rows")
    return shown, info


# ------------------------------------------------------------------------------------------ summaries
def shape_label(r: dict[str, Any]) -> str:
    """b1 s4096 h32 d128 bf16 [causal] fwd: the case a row measured."""
    sq, skv = r.get("seqlen_q"), r.get("seqlen_kv")
    s = f"s{sq}" if sq == skv or skv is None else f"sq{sq} skv{skv}"
    return " ".join(str(x) for x in (f"b{r.get('batch')}", s, f"h{r.get('heads')}", f"d{r.get('head_dim')}",
                                      r.get("dtype"), "causal" if r.get("causal") else None, r.get("pass"))
                    if x is not None)


def _ms(v: float) -> str:
    return f"{v:.3g} ms" if v >= 0.01 else f"{v * 1e3:.3g} us"


def bench_summary(rows: list[dict[str, Any]], stop_pct: float) -> tuple[list[str], dict[str, Any]]:
    """One line per point (time, rate, % of its roof and what is left), and the stopping figures."""
    lines: list[str] = []
    floors: list[dict[str, Any]] = []
    for r in rows:
        b = BenchRow.of(r)
        what = f"{b.backend} {shape_label(r)}"
        if b.status != "ok" or b.median_ms is None:
            lines.append(f"{what}: {b.status}: {b.reason}")
            continue
        med, tf = float(b.median_ms), b.tflops
        line = f"{what}: {_ms(med)}" + (f", {tf:.3g} TFLOP/s" if tf else "")
        if b.pct_of_roof is not None and b.roof_ms is not None:
            left = max(med - float(b.roof_ms), 0.0)
            line += f", {b.pct_of_roof:.0f} % of the {b.roof} roof ({_ms(left)} left)"
            floors.append({"case": what, "floor": f"{b.roof} roof", "pct_of_floor": b.pct_of_roof,
                           "left_ms": left})
        else:
            line += ", no roof here (a CPU or an unknown GPU)"
        lines.append(line)
    near = bool(floors) and all(float(f["pct_of_floor"]) >= stop_pct for f in floors)
    stop = {"stop": near, "floors": floors, "last_change_beyond_noise": None,
            "why": (f"every point is at {stop_pct:g} % of its roof or more" if near else
                    "one run cannot tell a change from noise: judge a change with `ab` (interleaved A/B)")}
    return lines, stop


def ab_summary(data: dict[str, Any], stop_pct: float) -> tuple[list[str], dict[str, Any]]:
    """The verdict and interval per case, B's % of its roof, and whether the change was beyond noise."""
    result = data.get("result") or {}
    gpu = (result.get("new") or {}).get("gpu")
    lines: list[str] = []
    floors: list[dict[str, Any]] = []
    beyond: list[bool] = []
    for r in result.get("rows") or []:
        what = f"{r.get('backend_new')} vs {r.get('backend_base')}, {shape_label(r)}"
        if r.get("ratio") is None:
            lines.append(f"{what}: not judged: {r.get('note') or r.get('verdict')}")
            continue
        lo, hi, nf = r.get("ci_lo"), r.get("ci_hi"), r.get("noise_floor")
        ci = f"95% CI {lo - 1:+.1%}..{hi - 1:+.1%}" if lo is not None and hi is not None else "no interval"
        line = f"{what}: {r['ratio'] - 1:+.1%} time: {r.get('verdict')} ({ci}" + (
            f", noise floor ±{nf:.1%})" if nf is not None else ")")
        beyond.append(r.get("verdict") in ("faster", "slower"))
        roofs = row_roofs({**r, "backend": r.get("backend_new")}, gpu) if r.get("new_ms") else None
        if roofs is not None:
            h = roofs.against(float(r["new_ms"]) / 1e3)
            line += f"; B at {h.pct:.0f} % of the {h.roof.name} roof ({_ms(h.left_s * 1e3)} left)"
            floors.append({"case": what, "floor": f"{h.roof.name} roof", "pct_of_floor": h.pct,
                           "left_ms": h.left_s * 1e3})
        lines.append(line)
    near = bool(floors) and all(float(f["pct_of_floor"]) >= stop_pct for f in floors)
    changed = any(beyond) if beyond else None
    why = (f"B is at {stop_pct:g} % of its roof or more" if near else
           "the last change was within noise and no floor is known here: nothing measurable to chase"
           if changed is False and not floors else
           "the last change was beyond noise: measure the next one" if changed else
           "the last change was within noise; the floor is still ahead: try another change")
    return lines, {"stop": near or (changed is False and not floors), "floors": floors,
                   "last_change_beyond_noise": changed, "why": why}


def explain_summary(data: dict[str, Any], stop_pct: float) -> tuple[list[str], dict[str, Any]]:
    """The verdict, the first cause with its line and saving, the % of the practical best and what is left."""
    lines = [str(data.get("verdict") or data.get("headline") or "")]
    causes = data.get("causes") or []
    if causes:
        c = causes[0]
        where = ", ".join(f"{Path(str(x.get('file'))).name}:{x.get('line')}" for x in (c.get("lines") or [])[:3])
        lines.append(f"first cause: {c.get('id')} ({c.get('title')})" + (f" at {where}" if where else "")
                     + (f", saves {c['saving_us']:.3g} us" if c.get("saving_us") is not None else "")
                     + (f"; fix: {c.get('fix')}" if c.get("fix") else ""))
    fa = ((data.get("floor") or {}).get("a")) or {}
    floors: list[dict[str, Any]] = []
    if fa.get("pct_of_attainable") is not None and fa.get("attainable_us") is not None:
        left = max(float(fa.get("duration_us") or 0) - float(fa["attainable_us"]), 0.0)
        lines.append(f"{fa['pct_of_attainable']:.0f} % of its practical best ({fa['attainable_us']:.4g} us, "
                     f"{fa.get('binding')}); {left:.3g} us left")
        floors.append({"case": (data.get("a") or {}).get("kernel"), "floor": f"practical best ({fa.get('binding')})",
                       "pct_of_floor": fa["pct_of_attainable"], "left_us": left})
    healthy = bool(data.get("healthy"))  # profctl's own verdict: at the roof with nothing a fix removes
    near = healthy or (not causes and bool(floors) and float(floors[0]["pct_of_floor"]) >= stop_pct)
    return lines, {"stop": near, "floors": floors, "last_change_beyond_noise": None,
                   "why": "healthy: nothing measurable left to fix" if healthy else
                   f"at {stop_pct:g} % of its practical best or more" if near else
                   "the causes above are what is left: change, then judge it with `ab`"}


def ncu_summary(data: dict[str, Any], stop_pct: float) -> tuple[list[str], dict[str, Any]]:
    """Per kernel profiled: its time, what bounds it, its roof; then the next step (explain)."""
    ds = data.get("diagnosis") or []
    lines: list[str] = []
    floors: list[dict[str, Any]] = []
    for d in sorted(ds, key=lambda d: -float(d.get("duration_ns") or 0))[:5]:
        line = (f"{d.get('kernel')}" + (f" ({d.get('backend')})" if d.get("backend") else "")
                + f": {float(d.get('duration_ns') or 0) / 1e3:.4g} us, {d.get('bound')}"
                + (f", {d.get('limiter')} {d['limiter_pct']:.0f} %" if d.get("limiter_pct") is not None else ""))
        if d.get("roof_pct") is not None:
            line += f", {d['roof_pct']:.0f} % of the {d.get('roof')} roof"
            floors.append({"case": d.get("kernel"), "floor": f"{d.get('roof')} roof", "pct_of_floor": d["roof_pct"]})
        lines.append(line)
    if len(ds) > 5:
        lines.append(f"... and {len(ds) - 5} more kernel(s) in the data")
    lines.append("next: explain this run with kernel=NAME for the causes, their lines and savings")
    near = bool(floors) and all(float(f["pct_of_floor"]) >= stop_pct for f in floors)
    return lines, {"stop": near, "floors": floors, "last_change_beyond_noise": None,
                   "why": f"at {stop_pct:g} % of the roof or more" if near else "explain says what is left"}


def other_summary(tool: str, data: Any) -> list[str]:
    """report, compare, runs, show: what the data holds, in a line or three."""
    if tool == "runs" and isinstance(data, list):
        last = data[-1] if data else {}
        return [f"{len(data)} run(s)" + (f"; the newest: {last.get('run_id')} ({last.get('kind')}, "
                                          f"{last.get('status')})" if last else "")]
    if not isinstance(data, dict):
        return [f"{tool}: {type(data).__name__} of {len(data) if hasattr(data, '__len__') else 1}"]
    if tool == "show":
        m = data.get("manifest") or {}
        return [f"run {m.get('run_id')}: {m.get('kind')}, {data.get('status')}, {len(data.get('files') or [])} "
                f"file(s), {len(data.get('rows') or [])} bench row(s)"]
    rows = data.get("rows") or (data.get("result") or {}).get("rows")
    if tool == "compare" and isinstance(rows, list):
        counts = data.get("counts") or {}
        return [f"{len(rows)} case(s): " + (", ".join(f"{n} {v}" for v, n in counts.items()) or "none judged")]
    ks = data.get("kernels") or (data.get("summary") or {}).get("kernels")
    if isinstance(ks, list) and ks:
        top = sorted(ks, key=lambda k: -float(k.get("total_ns") or 0))[:3]
        return [f"{len(ks)} kernel(s); the most time: " + "; ".join(
            f"{k.get('short_name') or k.get('name')} {float(k.get('total_ns') or 0) / 1e3:.4g} us x{k.get('count')}"
            for k in top)]
    return [f"{tool}: " + ", ".join(f"{k} ({len(v)})" if isinstance(v, list) else k for k, v in data.items())[:300]]


def summarize(tool: str, data: Any, stop_pct: float) -> tuple[list[str], dict[str, Any] | None]:
    """The lines that lead an answer and, for a timing or a diagnosis, the stopping rule's figures."""
    if data is None:
        return [], None
    if tool == "bench" and isinstance(data, list):
        return bench_summary(data, stop_pct)
    if tool == "ab" and isinstance(data, dict):
        return ab_summary(data, stop_pct)
    if tool == "explain" and isinstance(data, dict) and "causes" in data:
        return explain_summary(data, stop_pct)
    if tool == "ncu" and isinstance(data, dict):
        return ncu_summary(data, stop_pct)
    return other_summary(tool, data), None


def answer(tool: str, o: Outcome, *, page_no: int, page_rows: int, stop_pct: float) -> dict[str, Any]:
    """The structured answer: the summary first, then the exit status and its meaning, where the call was kept,
    the stopping rule, and the CLI's JSON (long lists paged)."""
    lines, stop = summarize(tool, o.data, stop_pct)
    shown, paged = page(o.data, page_no, page_rows)
    if o.exit_code:
        lines.insert(0, f"error: {o.error} (exit {o.exit_code}: {EXIT_MEANING.get(o.exit_code, 'failed')})")
    if paged:
        lines.append("paged: " + "; ".join(f"{p['path']} page {p['page']} of {p['pages']} ({p['rows']} rows)"
                                           for p in paged))
    return {"summary": "\n".join(ln for ln in lines if ln), "tool": tool, "ok": o.exit_code == 0,
            "exit_code": o.exit_code, "exit_meaning": EXIT_MEANING.get(o.exit_code, "failed"), "error": o.error,
            "command": " ".join(["profctl", *o.argv]), "record": str(o.record),
            "run": str(o.produced) if o.produced else None, "wall_s": round(o.wall_s, 3),
            "time_limit_hit": o.timed_out, "stop": stop, "paged": paged, "data": shown}
