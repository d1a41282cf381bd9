"""profctl as a Model Context Protocol server (`profctl mcp`): a kernel agent's instrument.

An agent that tunes a kernel needs what a person gets from profctl -- the same measurements, the same JSON -- in
answers sized for a model, with guards for a loop nobody watches, and a rule that says when to stop. So every tool
runs one profctl command line (the same argv a person would type, `-f json`) in a worker process with a deadline
(the CLI's own code path: the JSON is the CLI's), under a per-GPU lock, and writes a run directory of kind
`mcp-<tool>` to the run store (the argv, the CLI's JSON, its log, the summary) so a person can open what the agent
saw. Each answer leads with a short summary (the verdict, the first cause with its line and saving, the % of the
floor and what is left), then the data, long lists paged, never cut silently.

No shell anywhere: argv lists only. The SDK (`mcp`, the `agent` extra) is imported by :func:`serve` alone, so
`profctl --help` does not pay for it; the tools' annotations are real objects (no ``from __future__ import
annotations`` here) because the SDK reads them to make each tool's input schema.
"""

import contextlib
import fcntl
import functools
import json
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profctl import run_store
from profctl.errors import ProfctlError, UsageError
from profctl.fsutil import atomic_write_json, atomic_write_text
from profctl.roofs import row_roofs
from profctl.schema.bench import BenchRow

#: what each exit status of profctl means (README, "Exit codes"), said beside every error
EXIT_MEANING = {
    0: "done", 1: "the work failed", 2: "bad arguments, refused before anything ran",
    3: "a tool is not installed or not found", 4: "a tool ran and failed or timed out",
    5: "an unreadable or damaged report or run", 6: "the two runs are not comparable",
    7: "a selection matched nothing", 8: "the program exited non-zero; what the tool recorded is kept",
    70: "an internal error of profctl's", 130: "interrupted",
}
#: the exit status said for a call stopped at its time limit (a tool that ran past its timeout: 4)
TIME_LIMIT_EXIT = 4
#: seconds a worker has, after SIGTERM, to mark its run incomplete and stop its children, before SIGKILL
GRACE_S = 10.0
#: the worker: runs one profctl command line (argv without "profctl") in this process, its standard output to the
#: first path and its standard error to the second, and exits with the command's status (profctl.cli.mcp_cmd)
Worker = Callable[[list[str], str, str], None]


@dataclass(frozen=True)
class Config:
    """The guards of one server: the run store, the most a call may take, the GPU-memory limit, how long a GPU
    call waits for another to finish, rows per page, and the % of the floor at which a loop should stop."""

    reports: Path
    time_limit_s: float = 600.0
    memory_limit_gib: float | None = None
    lock_wait_s: float = 60.0
    page_rows: int = 25
    stop_pct: float = 90.0


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


class Busy(ProfctlError):
    """A GPU call found its GPU held by another profctl job past the wait: refused, nothing ran."""

    exit_code = 4


# ------------------------------------------------------------------------------------------ the GPU lock
@contextlib.contextmanager
def gpu_lock(reports: Path, gpu: int, *, wait_s: float, what: str) -> Iterator[None]:
    """Hold GPU `gpu` for one job: an flock on ``<reports>/.mcp/gpu<gpu>.lock`` (every profctl MCP server on this
    store shares it). A second caller waits up to `wait_s`, then gets :class:`Busy` naming who holds it."""
    path = reports / ".mcp" / f"gpu{gpu}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 400, 0).decode(errors="replace").strip() or "another profctl job"
                    raise Busy(f"GPU {gpu} is busy ({holder}); waited {wait_s:g} s: call again when it is done, "
                               "one GPU job at a time per GPU") from None
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{what}, pid {os.getpid()}, since {time.strftime('%H:%M:%S')}".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def gpu_of(device: str | None) -> int | None:
    """The GPU a workload call would use (the first of CUDA_VISIBLE_DEVICES, else 0); None on the CPU."""
    if device == "cpu":
        return None
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


# ------------------------------------------------------------------------------------------ running a call
def resolve_ref(ref: str, reports: Path) -> str:
    """'latest' as a person means it: the newest run that is not one of these servers' own records (each call
    writes one, which would otherwise be 'latest'). Anything else as given."""
    if ref not in ("latest", "last"):
        return ref
    runs = [r for r in run_store.list_runs(reports) if not r.kind.startswith("mcp-")]
    if not runs:
        raise UsageError(f"no runs under {reports}")
    return str(runs[-1].path)


def run_call(cfg: Config, worker: Worker, tool: str, argv: list[str], *, arguments: dict[str, Any],
             gpu: int | None, limit_s: float) -> Outcome:
    """Run `argv` (a profctl command line) in a worker process with a deadline, under the GPU's lock when it uses
    one, and keep the call as a run of kind ``mcp-<tool>``."""
    record = run_store.new_run(f"mcp-{tool}", root=cfg.reports, argv=["profctl", *argv], env=False,
                               extra={"mcp": {"tool": tool, "arguments": arguments, "time_limit_s": limit_s}})
    out, log = record / "answer.json", record / "call.log"
    t0 = time.monotonic()
    try:
        lock = gpu_lock(cfg.reports, gpu, wait_s=cfg.lock_wait_s, what=f"mcp {tool}") if gpu is not None \
            else contextlib.nullcontext()
        with lock:
            pid, rc, timed_out = _work(worker, argv, out, log, limit_s)
    except Busy as e:
        run_store.finish(record, "failed", reason=e.one_line())
        raise
    text = out.read_text(encoding="utf-8", errors="replace") if out.is_file() else ""
    try:
        data = json.loads(text) if text.strip() else None
    except json.JSONDecodeError:
        data = None
    produced = _produced(cfg.reports, pid)
    error = _error_line(log) if rc else None
    if timed_out:
        error = (f"time limit hit: the call ran past {limit_s:g} s and was stopped (worker process {pid} and what "
                 f"it started)" + (f"; what had finished is kept in {produced}" if produced else ""))
        rc = TIME_LIMIT_EXIT
    run_store.finish(record, "complete" if rc == 0 else "failed", returncode=rc, reason=error,
                     produced_run=str(produced) if produced else None)
    return Outcome(argv, rc, data, error, record, produced, time.monotonic() - t0, timed_out)


def _work(worker: Worker, argv: list[str], out: Path, log: Path, limit_s: float) -> tuple[int, int, bool]:
    """(pid, exit status, timed out) of `argv` run by `worker` in a fresh process (spawned: nothing of this one's
    threads or event loop is copied), stopped at `limit_s`: SIGTERM (the command marks its run incomplete and
    kills its children), then SIGKILL to the worker's process group."""
    proc = multiprocessing.get_context("spawn").Process(target=worker, args=(argv, str(out), str(log)),
                                                         daemon=False)
    proc.start()
    pid = int(proc.pid or 0)
    proc.join(limit_s)
    timed_out = proc.is_alive()
    if timed_out:
        for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)
            proc.join(wait)
            if not proc.is_alive():
                break
    return pid, proc.exitcode if proc.exitcode is not None and proc.exitcode >= 0 else 130, timed_out


def _produced(reports: Path, pid: int) -> Path | None:
    """The run directory the worker's command made (its manifest names the worker's pid), if any."""
    mine = [r for r in run_store.list_runs(reports) if r.manifest.get("pid") == pid and not r.kind.startswith("mcp-")]
    return mine[-1].path if mine else None


def _error_line(log: Path) -> str | None:
    """The command's one-line error (``profctl: error: ...``), as the CLI printed it."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    errs = [ln.removeprefix("profctl: error: ") for ln in lines if ln.startswith("profctl: error: ")]
    return errs[-1] if errs else (lines[-1] if lines else None)


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


# ------------------------------------------------------------------------------------------ command lines
def items(name: str, values: Sequence[Any] | None) -> str | None:
    """A typed list as one comma list for the CLI; an item that would read as two items or as an option is
    refused (the answer names the input)."""
    if values is None:
        return None
    if not values:
        raise UsageError(f"{name}: an empty list; leave it out for the default")
    out = []
    for v in values:
        t = str(v).lower() if isinstance(v, bool) else str(v)
        if "," in t or t.startswith("-") or not t.strip():
            raise UsageError(f"{name}: {t!r}: give each item on its own, not a comma list or an option")
        out.append(t)
    return ",".join(out)


#: (input name, the CLI's flag) of the workload options, in the CLI's order
WORKLOAD_FLAGS = (("backends", "--backend"), ("batch", "--batch"), ("seqlen", "--seqlen"), ("heads", "--heads"),
                  ("kv_heads", "--kv-heads"), ("head_dim", "--head-dim"), ("dtype", "--dtype"),
                  ("causal", "--causal"), ("passes", "--pass"), ("layout", "--layout"))


def workload_argv(w: dict[str, Any], memory_limit_gib: float | None) -> list[str]:
    """The CLI's workload options for the typed inputs `w` (None: the CLI's default)."""
    argv: list[str] = []
    for name, flag in WORKLOAD_FLAGS:
        v = items(name, w.get(name))
        if v is not None:
            argv += [flag, v]
    for name, flag in (("device", "--device"), ("warmup", "--warmup"), ("iters", "--iters"), ("seed", "--seed")):
        if w.get(name) is not None:
            argv += [flag, str(w[name])]
    if memory_limit_gib is not None:
        argv += ["--memory-limit", f"{memory_limit_gib:g}"]
    return argv


class Service:
    """What the tools share: the guards, the worker, and one way to run a call and answer it."""

    def __init__(self, cfg: Config, worker: Worker) -> None:
        self.cfg = cfg
        self.worker = worker

    def limit(self, asked: float | None) -> float:
        """The call's time limit: what it asked, never past the server's."""
        if asked is not None and asked <= 0:
            raise UsageError(f"time_limit_s must be positive, got {asked:g}")
        return min(asked, self.cfg.time_limit_s) if asked is not None else self.cfg.time_limit_s

    def memory(self, asked: float | None) -> float | None:
        """The call's GPU-memory limit (GiB): what it asked, never past the server's."""
        caps = [x for x in (asked, self.cfg.memory_limit_gib) if x is not None]
        if any(x <= 0 for x in caps):
            raise UsageError("memory_limit_gib must be positive")
        return min(caps) if caps else None

    async def answer(self, tool: str, build: Callable[[], list[str]], arguments: dict[str, Any], *,
                     device: str | None = "cpu", time_limit_s: float | None = None, page_no: int = 1) -> Any:
        """The tool result of one call: `build()` makes its command line (a bad input refused in one line, nothing
        run), then a thread runs it (the event loop keeps serving)."""
        import anyio

        try:
            argv = build()
            limit = self.limit(time_limit_s)
        except ProfctlError as e:
            return _result(refusal(tool, [], e), True)
        a, bad = await anyio.to_thread.run_sync(functools.partial(
            self.call, tool, argv, arguments, gpu=gpu_of(device), limit_s=limit, page_no=page_no))
        return _result(a, bad)

    def call(self, tool: str, argv: list[str], arguments: dict[str, Any], *, gpu: int | None = None,
             limit_s: float | None = None, page_no: int = 1) -> tuple[dict[str, Any], bool]:
        """(the answer, whether it is an error) of one command line; blocking (the server runs it in a thread)."""
        cut = argv.index("--") if "--" in argv else len(argv)  # a program's command line stays last
        argv = [*argv[:cut], "--reports", str(self.cfg.reports), *argv[cut:]]
        try:
            o = run_call(self.cfg, self.worker, tool, argv, arguments=arguments, gpu=gpu,
                         limit_s=limit_s or self.cfg.time_limit_s)
        except ProfctlError as e:
            return refusal(tool, argv, e), True
        try:
            a = answer(tool, o, page_no=page_no, page_rows=self.cfg.page_rows, stop_pct=self.cfg.stop_pct)
        except ProfctlError as e:  # a page past the last: said, never an empty page
            a = {**refusal(tool, argv, e), "record": str(o.record), "run": str(o.produced) if o.produced else None}
        atomic_write_text(o.record / "summary.txt", a["summary"] + "\n")
        atomic_write_json(o.record / "mcp.json", {k: v for k, v in a.items() if k != "data"})
        return a, not a["ok"]


def refusal(tool: str, argv: list[str], e: ProfctlError) -> dict[str, Any]:
    """The answer for a call refused before its command ran: the one-line error and its exit meaning."""
    meaning = "refused: the GPU is busy, nothing ran" if isinstance(e, Busy) else EXIT_MEANING.get(e.exit_code, "")
    return {"summary": f"error: {e.one_line()} (exit {e.exit_code}: {meaning})", "tool": tool, "ok": False,
            "exit_code": e.exit_code, "exit_meaning": meaning, "error": e.one_line(),
            "command": " ".join(["profctl", *argv]), "record": None, "run": None, "stop": None, "paged": [],
            "data": None}


# ------------------------------------------------------------------------------------------ the server
def serve(cfg: Config, worker: Worker) -> None:
    """Run the MCP server over stdio until the client closes it."""
    from mcp.server.mcpserver import MCPServer

    from profctl._version import __version__

    server = MCPServer("profctl", version=__version__, instructions=INSTRUCTIONS)
    register(server, Service(cfg, worker))
    server.run("stdio")


def _result(a: dict[str, Any], is_error: bool) -> Any:
    """The SDK's tool result: the summary and the answer as text for the model, the answer as structured data."""
    from mcp.types import CallToolResult, TextContent

    text = a["summary"] + "\n\n" + json.dumps(a, default=str, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=a, is_error=is_error)


INSTRUCTIONS = (
    "profctl measures GPU attention kernels. A loop: bench (or ncu with recipe 'explain') -> explain (the causes, "
    "their lines and savings) -> change the kernel -> ab (old vs new, interleaved: a verdict with an interval) -> "
    "stop when an answer's stop.stop is true (at the floor, or nothing measurable left). Every answer leads with "
    "a summary; data holds the CLI's JSON; long lists are paged (paged, page=N). Every call is kept in the run "
    "store as a run of kind mcp-<tool>; 'latest' means the newest run that is not such a record."
)


# ------------------------------------------------------------------------------------------ the tools
def register(server: Any, svc: Service) -> None:
    """Every tool, with typed inputs (the SDK makes their schemas from these signatures)."""
    from pydantic import BaseModel, Field

    class Workload(BaseModel):
        """The workload options, as `profctl bench` takes them; a list sweeps. Left out: the CLI's default."""

        backends: list[str] | None = Field(None, description="built-in backends (sdpa-flash, sdpa-cudnn, "
                                           "sdpa-efficient, sdpa-math, eager, triton, flash-attn, fa4) or your "
                                           "function as path/file.py:fn")
        seqlen: list[int] | None = None
        batch: list[int] | None = None
        heads: list[int] | None = None
        kv_heads: list[int] | None = None
        head_dim: list[int] | None = None
        dtype: list[str] | None = Field(None, description="bf16, fp16, fp32, fp8")
        causal: list[bool] | None = None
        passes: list[str] | None = Field(None, description="fwd, bwd, fwd+bwd")
        layout: list[str] | None = Field(None, description="bhsd, bshd")
        device: str = Field("auto", description="auto, cuda or cpu")
        warmup: int | None = None
        iters: int | None = None
        seed: int | None = None

    _timing_tools(server, svc, Workload, Field)
    _ncu_tool(server, svc, Workload, Field)
    _reading_tools(server, svc, Field)


def _timing_tools(server: Any, svc: Service, workload_model: Any, field: Any) -> None:
    from typing import Annotated

    from mcp.types import CallToolResult

    limit_doc = field(None, description="seconds before the call is stopped (at most the server's --timeout)")
    mem_doc = field(None, description="GiB: points whose memory estimate is over it are refused (oom rows)")

    async def bench(workload: workload_model, baseline: str | None = None,
                    time_limit_s: Annotated[float | None, limit_doc] = None,
                    memory_limit_gib: Annotated[float | None, mem_doc] = None, page: int = 1) -> CallToolResult:
        """Time backends or your functions over shapes (profctl bench -f json): per point the time, TFLOP/s, and
        the % of its speed-of-light roof with what is left (on a GPU, for a known shape)."""
        def build() -> list[str]:
            w = workload.model_dump()
            argv = ["bench", *workload_argv(_no_auto(w), svc.memory(memory_limit_gib))]
            return argv + (["--baseline", baseline] if baseline else []) + [
                "--timeout", f"{svc.limit(time_limit_s):g}", "-f", "json"]
        return await svc.answer("bench", build, {"workload": workload.model_dump(exclude_none=True),
                                                 "baseline": baseline}, device=workload.device,
                                time_limit_s=time_limit_s, page_no=page)

    async def ab(a: str, b: str, workload: workload_model,
                 rounds: int | None = None,
                 threshold_pct: Annotated[float | None, field(None, description="changes smaller than this % "
                                                                "count as unchanged")] = None,
                 time_limit_s: Annotated[float | None, limit_doc] = None,
                 memory_limit_gib: Annotated[float | None, mem_doc] = None, page: int = 1) -> CallToolResult:
        """B against A (backends or path/file.py:fn functions), interleaved in one process (profctl bench --ab):
        the change with its interval, the verdict (faster, slower, unchanged, inconclusive), B's % of its roof,
        and whether to stop."""
        def build() -> list[str]:
            pair = items("a, b", [a, b]) or ""
            argv = ["bench", "--ab", pair, *workload_argv(_no_auto(workload.model_dump()), svc.memory(
                memory_limit_gib))]
            argv += ["--rounds", str(rounds)] if rounds is not None else []
            argv += ["--threshold", f"{threshold_pct:g}%"] if threshold_pct is not None else []
            return [*argv, "--timeout", f"{svc.limit(time_limit_s):g}", "-f", "json"]
        return await svc.answer("ab", build, {"a": a, "b": b, "workload": workload.model_dump(exclude_none=True)},
                                device=workload.device, time_limit_s=time_limit_s, page_no=page)

    server.add_tool(bench)
    server.add_tool(ab)


def _no_auto(w: dict[str, Any]) -> dict[str, Any]:
    """The workload without the CLI's own default device (the command line a person would type)."""
    return {**w, "device": None} if w.get("device") == "auto" else w


def _ncu_tool(server: Any, svc: Service, workload_model: Any, field: Any) -> None:
    from typing import Annotated

    from mcp.types import CallToolResult

    async def ncu(recipe: str = "explain", workload: workload_model | None = None,
                  program: Annotated[list[str] | None, field(None, description="your program's argv (no shell), "
                                                                   "e.g. [\"python\", \"my_kernel.py\"]")] = None,
                  kernel: str | None = None, launch_count: int | None = None,
                  clock_control: Annotated[str | None, field(None, description="base or none")] = None,
                  time_limit_s: float | None = None, memory_limit_gib: float | None = None,
                  page: int = 1) -> CallToolResult:
        """Nsight Compute with a recipe on the built-in workload (or your functions as backends) or on your program
        (profctl ncu -f json): per kernel its time, what bounds it, its roof. Then `explain` the run."""
        def build() -> list[str]:
            if program is not None and workload is not None:
                raise UsageError("give workload or program, not both")
            argv = ["ncu", "--recipe", recipe]
            if workload is not None:
                argv += workload_argv(_no_auto(workload.model_dump()), svc.memory(memory_limit_gib))
            argv += ["--kernel", kernel] if kernel else []
            argv += ["--launch-count", str(launch_count)] if launch_count is not None else []
            argv += ["--clock-control", clock_control] if clock_control else []
            argv += ["--timeout", f"{svc.limit(time_limit_s):g}", "-f", "json"]
            return argv + (["--", *program] if program else [])
        device = workload.device if workload is not None else "cuda"
        return await svc.answer("ncu", build, {"recipe": recipe, "program": program, "kernel": kernel},
                                device=device, time_limit_s=time_limit_s, page_no=page)

    server.add_tool(ncu)


def _reading_tools(server: Any, svc: Service, field: Any) -> None:
    from mcp.types import CallToolResult

    root = svc.cfg.reports

    async def explain(report: str, kernel: str, report2: str | None = None, vs: str | None = None,
                      shape: str | None = None, page: int = 1) -> CallToolResult:
        """Why kernel A is slow (or slower than B), causes first: the verdict, each cause with its lines, evidence,
        fix and the time fixing it saves, the floor and what is left (profctl explain -f json). report: an
        .ncu-rep, a run directory, a run id or 'latest'."""
        def build() -> list[str]:
            argv = ["explain", resolve_ref(report, root)]
            argv += [resolve_ref(report2, root)] if report2 else []
            argv += ["--kernel", kernel] + (["--vs", vs] if vs else []) + (["--shape", shape] if shape else [])
            return [*argv, "-f", "json"]
        return await svc.answer("explain", build, {"report": report, "kernel": kernel, "report2": report2,
                                                   "vs": vs, "shape": shape}, page_no=page)

    async def report(paths: list[str], by_range: bool = False, page: int = 1) -> CallToolResult:
        """Any nsys, ncu or torch.profiler report, or bench output or a run, read into profctl's summary
        (profctl report -f json)."""
        def build() -> list[str]:
            if not paths:
                raise UsageError("paths: give at least one report or run")
            return ["report", *(resolve_ref(p, root) for p in paths)] + (["--by-range"] if by_range else []) + [
                "-f", "json"]
        return await svc.answer("report", build, {"paths": paths, "by_range": by_range}, page_no=page)

    async def compare(base: str, new: str, threshold_pct: float | None = None, by: str | None = None,
                      force: bool = False, page: int = 1) -> CallToolResult:
        """NEW against BASE (runs or reports): change per case or kernel with intervals and verdicts (profctl
        compare -f json)."""
        def build() -> list[str]:
            argv = ["compare", resolve_ref(base, root), resolve_ref(new, root)]
            argv += ["--threshold", f"{threshold_pct:g}%"] if threshold_pct is not None else []
            return argv + (["--by", by] if by else []) + (["--force"] if force else []) + ["-f", "json"]
        return await svc.answer("compare", build, {"base": base, "new": new}, page_no=page)

    async def runs(kind: str | None = None, status: str | None = None, page: int = 1) -> CallToolResult:
        """The runs in the store, oldest first (profctl runs -f json); the agent's own calls are kind mcp-*."""
        def build() -> list[str]:
            return ["runs", *(["--kind", kind] if kind else []), *(["--status", status] if status else []),
                    "-f", "json"]
        return await svc.answer("runs", build, {"kind": kind, "status": status}, page_no=page)

    async def show(run: str = "latest", page: int = 1) -> CallToolResult:
        """One run: what ran, on what, its status, files and rows (profctl show -f json)."""
        return await svc.answer("show", lambda: ["show", resolve_ref(run, root), "-f", "json"], {"run": run},
                                page_no=page)

    for fn in (explain, report, compare, runs, show):
        server.add_tool(fn)
