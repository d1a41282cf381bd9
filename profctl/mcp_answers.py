"""The answers of profctl's MCP server (profctl.mcp_server), sized for a model: a few summary lines first (the
verdict, the first cause with its line and saving, the % of the floor and what is left), then the CLI's JSON
within a budget of characters (long lists paged, big values cut to a stub that says how to get them), the whole
of it one call away (the file, a page, `fields`, `kernel`), never cut silently. The text a model reads is the
summary and where the rest is, not the structured data again. Pure functions of the CLI's JSON and the call's
outcome: no process, no SDK."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profctl.errors import NothingMatched, UsageError
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
    #: the JSON as the command printed it (its length is the whole answer's)
    data_text: str | None = None


#: what each exit status of profctl means (README, "Exit codes"), said beside every error
EXIT_MEANING = {
    0: "done", 1: "the work failed", 2: "bad arguments, refused before anything ran",
    3: "a tool is not installed or not found", 4: "a tool ran and failed or timed out",
    5: "an unreadable or damaged report or run", 6: "the two runs are not comparable",
    7: "a selection matched nothing", 8: "the program exited non-zero; what the tool recorded is kept",
    70: "an internal error of profctl's", 130: "interrupted",
}


#: characters an answer may take, its text and its structured content each (about 2,000 tokens)
DEFAULT_BUDGET = 8000
#: the most characters the summary takes of the budget, and of the command line said in it
SUMMARY_SHARE, COMMAND_CHARS = 4, 600
#: fields that name a kernel in a row (what `kernel` matches)
NAME_FIELDS = ("name", "short_name", "kernel", "kernel_name", "main_kernel", "demangled")


def size(value: Any) -> int:
    """Characters of `value` as the answer's compact JSON."""
    return len(json.dumps(value, default=str, separators=(",", ":")))


# ------------------------------------------------------------------------------------------ narrowing
def rows_of(data: Any) -> Iterable[tuple[str, list[Any]]]:
    """(path, list) of the lists an answer pages: the data itself, or one or two levels into it."""
    if isinstance(data, list):
        yield ".", data
    elif isinstance(data, dict):
        for k, v in data.items():
            if isinstance(v, list):
                yield k, v
            elif isinstance(v, dict):
                yield from ((f"{k}.{k2}", v2) for k2, v2 in v.items() if isinstance(v2, list))


def only_kernel(data: Any, pattern: str) -> Any:
    """`data` with the rows that name a kernel cut to those whose name matches `pattern` (a regex, as explain's
    --kernel); refused where no list names kernels, NothingMatched where none matches."""
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise UsageError(f"kernel: {pattern!r} is not a regex: {e}") from None
    named = [(path, rows) for path, rows in rows_of(data)
             if rows and all(isinstance(r, dict) and any(f in r for f in NAME_FIELDS) for r in rows)]
    if not named:
        raise UsageError("kernel: no list of kernels in this answer to pick from; leave kernel out")

    def keep(rows: list[Any]) -> list[Any]:
        return [r for r in rows if any(rx.search(str(r.get(f))) for f in NAME_FIELDS if r.get(f) is not None)]

    names = {id(rows) for _, rows in named}
    if not any(keep(rows) for _, rows in named):
        some = sorted({str(r.get("short_name") or r.get("name") or r.get("kernel")) for _, rows in named
                       for r in rows})[:8]
        raise NothingMatched(f"kernel: {pattern!r} matches no kernel here (some: {', '.join(some)})")
    if isinstance(data, list):
        return keep(data)
    return {k: keep(v) if id(v) in names else
            {k2: keep(v2) if id(v2) in names else v2 for k2, v2 in v.items()} if isinstance(v, dict) else v
            for k, v in data.items()}


_MISSING = object()


def only_fields(data: Any, fields: list[str]) -> Any:
    """`data` with only the dotted paths in `fields` (lists are passed through: ``kernels.short_name`` is every
    kernel's; a key holding dots, such as a metric name, is one step: ``kernels.metrics.gpu__time_duration.sum``).
    A path that names nothing is refused, naming the keys there."""
    matched: set[int] = set()

    def pick(v: Any, paths: list[tuple[int, str]]) -> Any:
        if any(p == "" for _, p in paths):
            matched.update(i for i, p in paths if p == "")
            return v
        if isinstance(v, list):
            got = [pick(x, paths) for x in v]
            kept = [g for g in got if g is not _MISSING]
            return kept if kept else _MISSING
        if not isinstance(v, dict):
            return _MISSING
        out = {}
        for k, x in v.items():
            sub = [(i, "" if p == k else p[len(k) + 1:]) for i, p in paths if p == k or p.startswith(f"{k}.")]
            if sub:
                got = pick(x, sub)
                if got is not _MISSING:
                    out[k] = got
        return out if out else _MISSING

    got = pick(data, list(enumerate(fields)))
    missing = [f for i, f in enumerate(fields) if i not in matched]
    if missing:
        top = list(data) if isinstance(data, dict) else \
            sorted({k for r in data if isinstance(r, dict) for k in r}) if isinstance(data, list) else []
        raise UsageError(f"fields: {', '.join(missing)}: not in this answer's data (its keys: "
                         f"{', '.join(map(str, top[:20]))}); a path is keys joined by '.', lists passed through")
    return got


# ------------------------------------------------------------------------------------------ the budget
def _stub(path: str, chars: int) -> str:
    return f"<cut: {chars:,} chars; fields={path.replace('[]', '')}>"


def _elide(v: Any, limit: int, path: str, sizes: dict[int, int], cut: list[tuple[str, int]], *, row: bool,
           keep: frozenset[int] = frozenset()) -> Any:
    """`v` with every value over `limit` characters cut: a row of a list (and the data itself) is kept and its
    values cut; a flat dict or list keeps what fits and says how many more; anything else becomes a stub that
    names the field that gets it."""
    n = sizes.get(id(v))
    if n is None:
        n = sizes[id(v)] = size(v)
    if n <= limit:
        return v
    if isinstance(v, str):
        cut.append((path, n))
        return v[:max(limit - 30, 10)] + f"... ({len(v):,} chars)"
    before = len(cut)
    if isinstance(v, dict):
        out: Any = {k: _elide(x, limit, f"{path}.{k}" if path else str(k), sizes, cut, row=False, keep=keep)
                    for k, x in v.items()}
    elif isinstance(v, list):
        out = [_elide(x, limit, f"{path}[]", sizes, cut, row=True, keep=keep) for x in v]
    else:
        return v
    if row or id(v) in keep or size(out) <= limit:
        return out
    flat = all(not isinstance(x, (dict, list)) for x in (out.values() if isinstance(out, dict) else out))
    if flat and len(out) > 1:
        kept, used = [], 20
        for item in (out.items() if isinstance(out, dict) else out):
            used += size(item) + 1
            if used > limit:
                break
            kept.append(item)
        if kept:
            cut.append((path, n))
            more = len(out) - len(kept)
            if isinstance(out, dict):
                return {**dict(kept), "...": f"{more} more keys: fields={path.replace('[]', '')}.KEY"}
            return [*kept, f"... {more} more items: fields={path.replace('[]', '')}"]
    del cut[before:]  # what was cut inside it goes with it
    cut.append((path, n))
    return _stub(path, n)


def fit(data: Any, budget: int) -> tuple[Any, list[dict[str, Any]], int]:
    """`data` cut to `budget` characters of JSON: values over a limit cut (the biggest first, the limit halved
    until it fits), rows kept; what was cut, by field (`path`, how many, their characters, how to get them); and
    the limit it took. Data that still does not fit is one stub."""
    if size(data) <= budget:
        return data, [], budget
    sizes: dict[int, int] = {}
    keep = frozenset(id(rows) for _, rows in rows_of(data))  # the lists paged: their rows are kept, never a stub
    limit = budget
    while limit >= 64:
        cut: list[tuple[str, int]] = []
        out = _elide(data, limit, "", sizes, cut, row=True, keep=keep)
        if size(out) <= budget:
            by: dict[str, list[int]] = {}
            for path, n in cut:
                by.setdefault(path, []).append(n)
            return out, sorted(({"path": p, "count": len(ns), "chars": sum(ns),
                                 "get": f"fields=[\"{p.replace('[]', '')}\"]"} for p, ns in by.items()),
                               key=lambda e: -e["chars"]), limit
        limit //= 2
    n = size(data)
    return _stub("", n), [{"path": ".", "count": 1, "chars": n, "get": "page, fields or kernel"}], 0


def shown_within(data: Any, page_no: int, page_rows: int, budget: int) -> tuple[Any, list[dict[str, Any]],
                                                                                list[dict[str, Any]]]:
    """Page `number` of `data` within `budget` characters: (what is shown, the lists paged, the values cut). The
    rows per page are `page_rows`, fewer where page 1 would fit only with values of 256 characters or more cut
    (every page the same size, so page N follows page N-1)."""
    rows = page_rows or max((len(r) for _, r in rows_of(data)), default=0)  # 0: whole, unless it does not fit
    while rows > 1:
        first, _ = page(data, 1, rows)
        if fit(first, budget)[2] >= 256:
            break
        rows //= 2
    shown, paged = page(data, page_no, rows)
    shown, elided, _ = fit(shown, budget)
    stubs = [e["path"].replace("[]", "") for e in elided]
    paged = [p for p in paged if not any(p["path"] == x or p["path"].startswith(f"{x}.") for x in stubs)]
    return shown, paged, elided[:12]


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
    """The verdict, the first cause with its line and saving, the % of the practical best and what is left; where
    the report lacks the counters a practical best needs, that, and how to record them."""
    lines = [str(data.get("verdict") or data.get("headline") or "no verdict: see data")]
    causes = data.get("causes") or []
    if causes:
        c = causes[0]
        where = ", ".join(f"{Path(str(x.get('file'))).name}:{x.get('line')}" for x in (c.get("lines") or [])[:3])
        lines.append(f"first cause: {c.get('id')} ({c.get('title')})" + (f" at {where}" if where else "")
                     + (f", saves {c['saving_us']:.3g} us" if c.get("saving_us") is not None else "")
                     + (f"; fix: {c.get('fix')}" if c.get("fix") else ""))
        if len(causes) > 1:
            lines.append(f"{len(causes) - 1} more cause(s): " + ", ".join(str(x.get("id")) for x in causes[1:6]))
    fa = ((data.get("floor") or {}).get("a")) or {}
    floors: list[dict[str, Any]] = []
    best, binding = fa.get("attainable_us"), fa.get("binding")
    if fa.get("pct_of_attainable") is not None and best and binding:
        left = max(float(fa.get("duration_us") or 0) - float(best), 0.0)
        lines.append(f"{fa['pct_of_attainable']:.0f} % of its practical best ({best:.4g} us, {binding}); "
                     f"{left:.3g} us left")
        floors.append({"case": (data.get("a") or {}).get("kernel"), "floor": f"practical best ({binding})",
                       "pct_of_floor": fa["pct_of_attainable"], "left_us": left})
    elif fa:
        missing = [str(m).split(" (")[0] for m in fa.get("missing") or []]
        lines.append("no practical best: the report lacks the counters of "
                     + (", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
                        if missing else "the units' throughput")
                     + "; record them with `ncu --recipe explain`")
    healthy = bool(data.get("healthy"))  # profctl's own verdict: at the roof with nothing a fix removes
    near = healthy or (not causes and bool(floors) and float(floors[0]["pct_of_floor"]) >= stop_pct)
    return lines, {"stop": near, "floors": floors, "last_change_beyond_noise": None,
                   "why": "healthy: nothing measurable left to fix" if healthy else
                   f"at {stop_pct:g} % of its practical best or more" if near else
                   "the causes above are what is left: change, then judge it with `ab`" if causes else
                   "no floor is known: record the explain recipe's counters to know what is left"}


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


def runs_rows(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The CLI's runs (oldest first, each with its whole manifest) as an agent reads them: newest first, one small
    row a run (`show RUN` gives its manifest)."""
    out = []
    for r in reversed(data):
        m = r.get("manifest") or {}
        cmd = " ".join(str(a) for a in m.get("command") or [])
        out.append({"run_id": m.get("run_id") or Path(str(r.get("path"))).name, "kind": m.get("kind"),
                    "status": r.get("status") or m.get("status"), "started": m.get("started"),
                    "label": m.get("label"), "note": r.get("note"),
                    "command": cmd if len(cmd) <= 200 else cmd[:197] + "...", "path": r.get("path")})
    return out


def _kernel_line(k: dict[str, Any]) -> str:
    """A kernel of a report: its time and count, or (a Proton trace: cycles, no time) its scopes' shares."""
    name = k.get("short_name") or k.get("name") or k.get("kernel") or "?"
    if k.get("total_ns") is not None:
        return f"{name} {float(k['total_ns']) / 1e3:.4g} us" + (f" x{k['count']}" if k.get("count") else "")
    scopes = sorted(k.get("scopes") or [], key=lambda sc: -float(sc.get("share") or sc.get("total_cycles") or 0))
    bits = [f"{k[f]} {f}" for f in ("ctas", "warps") if k.get(f) is not None]
    if k.get("max_cta_span") is not None:
        bits.append(f"a CTA spans {float(k['max_cta_span']):,.0f} cycles")
    share = ", ".join(f"{sc.get('name')} {float(sc['share']):.0%}" if sc.get("share") is not None else
                      f"{sc.get('name')} {float(sc.get('total_cycles') or 0):,.0f} cycles" for sc in scopes[:4])
    return f"{name}" + (f" ({', '.join(bits)})" if bits else "") + (f": {share}" if share else "")


def other_summary(tool: str, data: Any) -> list[str]:
    """report, compare, runs, show: what the data holds, in a line or three."""
    if tool == "runs" and isinstance(data, list):
        if not data:
            return ["no runs in the store"]
        new = data[0]
        kinds: dict[str, int] = {}
        for r in data:
            kinds[str(r.get("kind"))] = kinds.get(str(r.get("kind")), 0) + 1
        return [f"{len(data)} run(s); the newest: {new.get('run_id')} ({new.get('kind')}, {new.get('status')}, "
                f"{new.get('started')})", "kinds: " + ", ".join(f"{k} {n}" for k, n in sorted(
                    kinds.items(), key=lambda kv: -kv[1])[:8]), "newest first; one run in full: show RUN"]
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
    if isinstance(ks, list) and ks and all(isinstance(k, dict) for k in ks):
        top = sorted(ks, key=lambda k: -float(k.get("total_ns") or k.get("max_cta_span") or 0))[:3]
        return [f"{len(ks)} kernel(s); the most time: " + "; ".join(_kernel_line(k) for k in top)]
    if isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows):
        ok = [r for r in rows if r.get("time_ms") is not None or r.get("median_ms") is not None]
        return [f"{len(rows)} row(s), {len(ok)} timed" + ("; the fastest: " + "; ".join(
            f"{r.get('backend')} {r.get('shape_key') or shape_label(r)} "
            f"{_ms(float(r.get('time_ms') or r.get('median_ms') or 0))}"
            for r in sorted(ok, key=lambda r: float(r.get("time_ms") or r.get("median_ms") or 0))[:3])
            if ok else "")]
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


def _capped(lines: list[str], limit: int, tail: list[str] | None = None) -> str:
    """The summary's lines within `limit` characters (each line at most 600), saying how many more there were;
    the `tail` lines (where the rest is) always kept."""
    def one(ln: str) -> str:
        return ln if len(ln) <= 600 else ln[:597] + "..."

    end = [one(ln) for ln in tail or [] if ln]
    room = limit - sum(len(ln) + 1 for ln in end)
    out: list[str] = []
    body = [one(ln) for ln in lines if ln]
    for i, ln in enumerate(body):
        if len(ln) + 1 > room - (60 if i < len(body) - 1 else 0):
            out.append(f"... and {len(body) - i} more line(s) in the data")
            break
        out.append(ln)
        room -= len(ln) + 1
    return "\n".join(out + end)


def answer(tool: str, o: Outcome, *, page_no: int, page_rows: int, stop_pct: float,
           budget: int = DEFAULT_BUDGET, fields: list[str] | None = None, kernel: str | None = None,
           waited_s: float = 0.0, beside: list[str] | None = None) -> dict[str, Any]:
    """The structured answer within `budget` characters: the summary first, then the exit status and its meaning,
    where the call was kept and the whole data (`full`: the CLI's JSON as a file), the stopping rule, and the data
    paged, narrowed (`kernel`, `fields`) and cut to fit (`elided`: what, and how to get it). `waited_s`: how long
    a timing call waited for another; `beside`: the calls that ran beside it (its time may be disturbed)."""
    data = o.data
    if tool == "runs" and isinstance(data, list):
        data = runs_rows(data)
    if kernel and data is not None:
        data = only_kernel(data, kernel)
    lines, stop = summarize(tool, data, stop_pct)
    if fields and data is not None:
        data = only_fields(data, fields)
    if o.exit_code:
        lines.insert(0, f"error: {o.error} (exit {o.exit_code}: {EXIT_MEANING.get(o.exit_code, 'failed')})")
    if waited_s >= 0.5:
        lines.append(f"waited {waited_s:.1f} s for another timing call to finish (timing calls take turns)")
    if beside:
        lines.append(f"disturbed: {', '.join(beside)} ran beside it; its times may be slower than alone: "
                     "time it again")
    full = o.record / "answer.json"
    full_chars = len(o.data_text) if o.data_text is not None else size(o.data) if o.data is not None else 0
    if stop and len(stop.get("floors") or []) > 12:
        stop = {**stop, "floors": stop["floors"][:12], "floors_more": len(stop["floors"]) - 12}
    cmd = " ".join(["profctl", *o.argv])
    a: dict[str, Any] = {
        "summary": "", "tool": tool, "ok": o.exit_code == 0, "exit_code": o.exit_code,
        "exit_meaning": EXIT_MEANING.get(o.exit_code, "failed"), "error": o.error,
        "command": cmd if len(cmd) <= COMMAND_CHARS else cmd[:COMMAND_CHARS - 3] + "...",
        "record": str(o.record), "run": str(o.produced) if o.produced else None,
        "full": {"path": str(full), "chars": full_chars} if o.data is not None else None,
        "wall_s": round(o.wall_s, 3), "time_limit_hit": o.timed_out, "stop": stop, "paged": [], "elided": [],
        "data": None}
    if data is not None:
        a["summary"] = _capped(lines, budget // SUMMARY_SHARE)
        room = budget - size(a) - 1200  # the paged and elided notes and the lines below take the rest
        a["data"], a["paged"], a["elided"] = shown_within(data, page_no, page_rows, max(room, 200))
    notes = []
    if a["paged"]:
        notes.append("paged: " + "; ".join(f"{p['path']} page {p['page']} of {p['pages']} ({p['rows']} rows"
                                           f"{', next: ' + p['next'] if p['next'] else ''})" for p in a["paged"][:4]))
    if a["elided"]:
        notes.append(f"cut to fit {budget:,} characters: " + "; ".join(
            f"{e['path']} ({e['count']} x, {e['chars']:,} chars)" for e in a["elided"][:4])
            + "; ask fields=[...] (and kernel=NAME) for them, or read full.path")
    a["summary"] = _capped(lines, budget // SUMMARY_SHARE, notes)
    return a


def text_of(a: dict[str, Any]) -> str:
    """The answer's text for the model: the summary, then where everything else is (the structured content holds
    the data; the whole of it is `full.path`); never the data again."""
    more = [f"exit {a['exit_code']} ({a['exit_meaning']}); ran: {a['command']}"]
    if a.get("record"):
        more.append(f"kept as run {a['record']}" + (f"; the command's run: {a['run']}" if a.get("run") else ""))
    if a.get("full"):
        more.append(f"the whole data ({a['full']['chars']:,} chars): {a['full']['path']}")
    if a.get("data") is not None:
        d = a["data"]
        keys = ", ".join(map(str, list(d)[:15])) if isinstance(d, dict) else f"a list of {len(d)}" \
            if isinstance(d, list) else type(d).__name__
        more.append(f"structured_content.data: {keys}; narrow with fields=[\"a.b\"], kernel=REGEX (report), "
                    "page=N")
    if a.get("stop"):
        more.append(f"stop: {str(a['stop'].get('stop')).lower()}: {a['stop'].get('why')}")
    return a["summary"] + "\n\n" + "\n".join(more)
