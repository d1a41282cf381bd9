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
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profctl import run_store
from profctl.errors import ProfctlError, UsageError
from profctl.fsutil import atomic_write_json, atomic_write_text
from profctl.mcp_answers import DEFAULT_BUDGET, EXIT_MEANING, Outcome, answer, text_of

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
    budget: int = DEFAULT_BUDGET
    #: the workload options the MCP workload takes: the CLI's one definition (profctl.cli._workload_options), less
    #: --memory-limit (the tools' memory_limit_gib), passed in by profctl.cli.mcp_cmd (this module imports no CLI)
    workload: tuple[Any, ...] = ()


class Busy(ProfctlError):
    """A GPU call found its GPU held by another profctl job past the wait: refused, nothing ran."""

    exit_code = 4


# ------------------------------------------------------------------------------------------ the GPU lock
@contextlib.contextmanager
def gpu_lock(reports: Path, gpu: int | None, *, wait_s: float, what: str) -> Iterator[None]:
    """Hold GPU `gpu` (None: the CPU, for a timing call on it) for one job: an flock on
    ``<reports>/.mcp/gpu<gpu>.lock`` (``cpu.lock``; every profctl MCP server on this store shares it, and every
    call of this server: each opens its own descriptor). A second caller waits up to `wait_s`, then gets
    :class:`Busy` naming who holds it."""
    path = reports / ".mcp" / (f"gpu{gpu}.lock" if gpu is not None else "cpu.lock")
    what_is = f"GPU {gpu}" if gpu is not None else "the CPU (another timing call)"
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
                    raise Busy(f"{what_is} is busy ({holder}); waited {wait_s:g} s: call again when it is done, "
                               "one timing job at a time per device") from None
                time.sleep(0.1)
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
             gpu: int | None, limit_s: float, timing: bool = False,
             ran: Callable[[float, float], None] | None = None) -> tuple[Outcome, float]:
    """Run `argv` (a profctl command line) in a worker process with a deadline, under its device's lock when it
    times something (`timing`: GPU `gpu`, or the CPU when `gpu` is None) or uses a GPU, and keep the call as a run of
    kind ``mcp-<tool>``. Returns the outcome and the seconds it waited for the lock; `ran(start, end)` is told when
    the worker ran (monotonic seconds)."""
    record = run_store.new_run(f"mcp-{tool}", root=cfg.reports, argv=["profctl", *argv], env=False,
                               extra={"mcp": {"tool": tool, "arguments": arguments, "time_limit_s": limit_s}})
    out, log = record / "answer.json", record / "call.log"
    t0 = time.monotonic()
    try:
        lock = gpu_lock(cfg.reports, gpu, wait_s=cfg.lock_wait_s, what=f"mcp {tool}") \
            if gpu is not None or timing else contextlib.nullcontext()
        with lock:
            start = time.monotonic()
            pid, rc, timed_out = _work(worker, argv, out, log, limit_s)
            if ran is not None:
                ran(start, time.monotonic())
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
    return (Outcome(argv, rc, data, error, record, produced, time.monotonic() - t0, timed_out,
                    data_text=text if data is not None else None), start - t0)


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


# ------------------------------------------------------------------------------------------ command lines
def items(name: str, values: Sequence[Any] | None) -> str | None:
    """A typed list as one comma list for the CLI; an item that would read as two items is refused (the answer
    names the input). A value that starts with '-' is a value: the command line gives it as ``--flag=VALUE``."""
    if values is None:
        return None
    if not values:
        raise UsageError(f"{name}: an empty list; leave it out for the default")
    out = []
    for v in values:
        t = str(v).lower() if isinstance(v, bool) else str(v)
        if "," in t or not t.strip():
            raise UsageError(f"{name}: {t!r}: give each item on its own, not a comma list")
        out.append(t)
    return ",".join(out)


#: the MCP input's name of a CLI workload option where it differs (lists named in the plural)
MCP_NAME = {"backend": "backends", "pass_": "passes"}
def workload_argv(w: dict[str, Any], memory_limit_gib: float | None, options: Sequence[Any]) -> list[str]:
    """The CLI's workload options for the typed inputs `w` (None, and device auto: the CLI's default), in the
    CLI's order, each one word (``--seqlen=-5``: a value the CLI checks, never an option)."""
    argv: list[str] = []
    for o in options:
        name = MCP_NAME.get(o.name, o.name)
        v = w.get(name)
        if v is None or (o.name == "device" and v == "auto"):
            continue
        if o.many:
            items(name, v)
        argv += o.argv(v)
    if memory_limit_gib is not None:
        argv += [f"--memory-limit={memory_limit_gib:g}"]
    return argv


def resolve_refs(refs: Sequence[str], reports: Path, name: str) -> list[str]:
    """Run references as the CLI takes them; one that would read as an option is refused."""
    for r in refs:
        if r.startswith("-"):
            raise UsageError(f"{name}: {r!r} reads as an option: give it as ./{r}")
    return [resolve_ref(r, reports) for r in refs]


class Service:
    """What the tools share: the guards, the worker, and one way to run a call and answer it. Timing calls take
    turns (the device's lock); a CPU timing call that another call ran beside says so in its summary."""

    def __init__(self, cfg: Config, worker: Worker) -> None:
        self.cfg = cfg
        self.worker = worker
        self._mutex = threading.Lock()
        self._spans: list[tuple[str, float, float | None]] = []  # (tool, start, end) of calls' workers

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
                     device: str | None = "cpu", timing: bool = False, time_limit_s: float | None = None,
                     page_no: int = 1, fields: list[str] | None = None, kernel: str | None = None) -> Any:
        """The tool result of one call: `build()` makes its command line (a bad input refused in one line, nothing
        run), then a thread runs it (the event loop keeps serving)."""
        import anyio

        try:
            argv = build()
            limit = self.limit(time_limit_s)
        except ProfctlError as e:
            return _result(refusal(tool, [], e), True)
        a, bad = await anyio.to_thread.run_sync(functools.partial(
            self.call, tool, argv, arguments, gpu=gpu_of(device), limit_s=limit, page_no=page_no, timing=timing,
            fields=fields, kernel=kernel))
        return _result(a, bad)

    def _ran(self, tool: str) -> Callable[[float, float], None]:
        def note(start: float, end: float) -> None:
            with self._mutex:
                self._spans = [sp for sp in self._spans if sp[2] is None or sp[2] > time.monotonic() - 3600]
                self._spans.append((tool, start, end))
        return note

    def _beside(self, start: float, end: float, me: int) -> list[str]:
        """The other calls whose workers ran while [start, end] did."""
        with self._mutex:
            spans = list(self._spans)
        return [f"{t} ({min(e or end, end) - max(s, start):.1f} s of it)" for i, (t, s, e) in enumerate(spans)
                if i != me and s < end and (e is None or e > start)]

    def call(self, tool: str, argv: list[str], arguments: dict[str, Any], *, gpu: int | None = None,
             limit_s: float | None = None, page_no: int = 1, timing: bool = False,
             fields: list[str] | None = None, kernel: str | None = None) -> tuple[dict[str, Any], bool]:
        """(the answer, whether it is an error) of one command line; blocking (the server runs it in a thread)."""
        cut = argv.index("--") if "--" in argv else len(argv)  # a program's command line stays last
        argv = [*argv[:cut], "--reports", str(self.cfg.reports), *argv[cut:]]
        with self._mutex:  # a span open while the worker runs, so a timing call sees a call that outlives it
            me = len(self._spans)
            self._spans.append((tool, float("inf"), None))
        got: list[tuple[float, float]] = []

        def ran(start: float, end: float) -> None:
            got.append((start, end))
            with self._mutex:
                self._spans[me] = (tool, start, end)

        try:
            o, waited = run_call(self.cfg, self.worker, tool, argv, arguments=arguments, gpu=gpu,
                                 limit_s=limit_s or self.cfg.time_limit_s, timing=timing, ran=ran)
        except ProfctlError as e:
            return refusal(tool, argv, e), True
        finally:
            with self._mutex:
                if not got:
                    self._spans[me] = (tool, 0.0, 0.0)
        beside = self._beside(*got[0], me) if timing and gpu is None and got else []
        try:
            a = answer(tool, o, page_no=page_no, page_rows=self.cfg.page_rows, stop_pct=self.cfg.stop_pct,
                       budget=self.cfg.budget, fields=fields, kernel=kernel, waited_s=waited, beside=beside)
        except ProfctlError as e:  # a page past the last, a field or kernel that names nothing: said
            a = {**refusal(tool, argv, e), "record": str(o.record), "run": str(o.produced) if o.produced else None,
                 "full": {"path": str(o.record / "answer.json"), "chars": len(o.data_text or "")}
                 if o.data is not None else None}
        atomic_write_text(o.record / "summary.txt", a["summary"] + "\n")
        atomic_write_json(o.record / "mcp.json", {k: v for k, v in a.items() if k != "data"})
        return a, not a["ok"]


def refusal(tool: str, argv: list[str], e: ProfctlError) -> dict[str, Any]:
    """The answer for a call refused before its command ran: the one-line error and its exit meaning."""
    meaning = "refused: the device is busy, nothing ran" if isinstance(e, Busy) else EXIT_MEANING.get(e.exit_code,
                                                                                                      "")
    return {"summary": f"error: {e.one_line()} (exit {e.exit_code}: {meaning})", "tool": tool, "ok": False,
            "exit_code": e.exit_code, "exit_meaning": meaning, "error": e.one_line(),
            "command": " ".join(["profctl", *argv]), "record": None, "run": None, "full": None, "stop": None,
            "paged": [], "elided": [], "data": None}


# ------------------------------------------------------------------------------------------ the server
def serve(cfg: Config, worker: Worker) -> None:
    """Run the MCP server over stdio until the client closes it."""
    make_server(cfg, worker).run("stdio")


def make_server(cfg: Config, worker: Worker) -> Any:
    """The MCP server with every tool; an input the schema refuses (missing, of the wrong type, not an input of
    the tool) and a tool that does not exist are answered as profctl answers a bad command line: one line, exit 2,
    nothing run (the SDK would answer with the validation library's text)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from pydantic import ValidationError

    from profctl._version import __version__

    class ProfctlServer(MCPServer):
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            tools = {t.name: t for t in self._tool_manager.list_tools()}
            if name not in tools:
                return _result(refusal(name, [], UsageError(
                    f"{name}: no such tool{_near(name, tools)}; the tools: {', '.join(sorted(tools))}")), True)
            props = tools[name].parameters.get("properties") or {}
            extra = [k for k in arguments or {} if k not in props]
            if extra:
                return _result(refusal(name, [], UsageError(
                    f"{name}: {extra[0]}: not an input of {name}{_near(extra[0], props)} (its inputs: "
                    f"{', '.join(props)})")), True)
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as e:
                if isinstance(e, UnexpectedToolError) or not isinstance(e.__cause__, ValidationError):
                    raise
                return _result(refusal(name, [], UsageError(bad_input(name, e.__cause__))), True)

    server = ProfctlServer("profctl", version=__version__, instructions=INSTRUCTIONS)
    register(server, Service(cfg, worker))
    return server


def _near(word: str, names: Any) -> str:
    import difflib

    close = difflib.get_close_matches(word, list(names), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def bad_input(tool: str, e: Any) -> str:
    """One line for the inputs the schema refused: where, and what is wrong, in profctl's words (no URL)."""
    out = []
    for err in e.errors(include_url=False):
        loc = ".".join(str(x) for x in err.get("loc", ()) if not str(x).endswith("Arguments")) or "input"
        kind = err.get("type", "")
        if kind == "missing":
            out.append(f"{loc}: a required input is missing")
        elif kind == "extra_forbidden":
            out.append(f"{loc}: not an input of {tool}")
        else:
            got = repr(err.get("input"))
            out.append(f"{loc}: {str(err.get('msg', 'invalid')).lower()} (got {got[:60]})")
    return f"{tool}: " + "; ".join(out[:4]) + (f"; and {len(out) - 4} more" if len(out) > 4 else "")


def _result(a: dict[str, Any], is_error: bool) -> Any:
    """The SDK's tool result: the summary and where the rest is as text for the model (not the data again), the
    answer as structured data."""
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(type="text", text=text_of(a))], structured_content=a,
                          is_error=is_error)


INSTRUCTIONS = (
    "profctl measures GPU attention kernels. A loop: bench (or ncu with recipe 'explain') -> explain (the causes, "
    "their lines and savings) -> change the kernel -> ab (old vs new, interleaved: a verdict with an interval) -> "
    "stop when an answer's stop.stop is true (at the floor, or nothing measurable left). Every answer leads with "
    "a summary and fits a budget; data holds the CLI's JSON, long lists paged (paged, page=N), big values cut "
    "(elided: ask fields=[...] or kernel=REGEX for them); the whole JSON is the file full.path. Every call is kept "
    "in the run store as a run of kind mcp-<tool>; 'latest' means the newest run that is not such a record. "
    "Timing calls (bench, ab, ncu) take turns."
)


# ------------------------------------------------------------------------------------------ the tools
PAGE_DOC = "page N of the long lists (the answer's paged says how many)"
FIELDS_DOC = ("only these fields of the data, keys joined by '.' through lists (e.g. [\"kernels.short_name\", "
              "\"kernels.metrics.gpu__time_duration.sum\"]): what an answer cut (elided) is one call away")


def workload_model(options: Sequence[Any]) -> Any:
    """The workload input: every CLI workload option (profctl.cli._workload_options, the one definition), typed
    (a CLI comma list is a list: it sweeps), with the CLI's help; left out, the CLI's default."""
    from pydantic import ConfigDict, Field, create_model

    fields: dict[str, Any] = {}
    for o in options:
        typ: Any = list[o.item] if o.many else o.item  # type: ignore[name-defined]
        fields[MCP_NAME.get(o.name, o.name)] = (typ | None, Field(None, description=f"{o.help} (the CLI's {o.flag})"))
    model = create_model("Workload", __config__=ConfigDict(extra="forbid"), **fields)
    model.__doc__ = "The workload options, as `profctl bench` takes them; a list sweeps. Left out: the CLI's default."
    return model


def register(server: Any, svc: Service) -> None:
    """Every tool, with typed inputs (the SDK makes their schemas from these signatures)."""
    from pydantic import Field

    wl = workload_model(svc.cfg.workload)
    _timing_tools(server, svc, wl, Field)
    _ncu_tool(server, svc, wl, Field)
    _explain_tool(server, svc, Field)
    _reading_tools(server, svc, Field)


def _timing_tools(server: Any, svc: Service, workload_model: Any, field: Any) -> None:
    from typing import Annotated

    from mcp.types import CallToolResult

    limit_doc = field(None, description="seconds before the call is stopped (at most the server's --timeout)")
    mem_doc = field(None, description="GiB: points whose memory estimate is over it are refused (oom rows)")
    page_doc = field(1, description=PAGE_DOC)
    fields_doc = field(None, description=FIELDS_DOC)

    async def bench(workload: workload_model,
                    baseline: Annotated[str | None, field(None, description="the backend the speedup column is "
                                                          "against; none: no speedup column")] = None,
                    time_limit_s: Annotated[float | None, limit_doc] = None,
                    memory_limit_gib: Annotated[float | None, mem_doc] = None,
                    page: Annotated[int, page_doc] = 1,
                    fields: Annotated[list[str] | None, fields_doc] = None) -> CallToolResult:
        """Time backends or your functions over shapes (profctl bench -f json): per point the time, TFLOP/s, and
        the % of its speed-of-light roof with what is left (on a GPU, for a known shape)."""
        def build() -> list[str]:
            argv = ["bench", *workload_argv(workload.model_dump(), svc.memory(memory_limit_gib), svc.cfg.workload)]
            return argv + ([f"--baseline={baseline}"] if baseline else []) + [
                f"--timeout={svc.limit(time_limit_s):g}", "-f", "json"]
        return await svc.answer("bench", build, {"workload": workload.model_dump(exclude_none=True),
                                                 "baseline": baseline}, device=workload.device, timing=True,
                                time_limit_s=time_limit_s, page_no=page, fields=fields)

    async def ab(a: Annotated[str, field(description="A: the backend or path/file.py:fn before the change")],
                 b: Annotated[str, field(description="B: the backend or path/file.py:fn after the change")],
                 workload: workload_model,
                 rounds: Annotated[int | None, field(None, description="interleaved rounds of A then B")] = None,
                 threshold_pct: Annotated[float | None, field(None, description="changes smaller than this % "
                                                                "count as unchanged")] = None,
                 time_limit_s: Annotated[float | None, limit_doc] = None,
                 memory_limit_gib: Annotated[float | None, mem_doc] = None,
                 page: Annotated[int, page_doc] = 1,
                 fields: Annotated[list[str] | None, fields_doc] = None) -> CallToolResult:
        """B against A (backends or path/file.py:fn functions), interleaved in one process (profctl bench --ab):
        the change with its interval, the verdict (faster, slower, unchanged, inconclusive), B's % of its roof,
        and whether to stop."""
        def build() -> list[str]:
            pair = items("a, b", [a, b]) or ""
            argv = ["bench", f"--ab={pair}",
                    *workload_argv(workload.model_dump(), svc.memory(memory_limit_gib), svc.cfg.workload)]
            argv += [f"--rounds={rounds}"] if rounds is not None else []
            argv += [f"--threshold={threshold_pct:g}%"] if threshold_pct is not None else []
            return [*argv, f"--timeout={svc.limit(time_limit_s):g}", "-f", "json"]
        return await svc.answer("ab", build, {"a": a, "b": b, "workload": workload.model_dump(exclude_none=True)},
                                device=workload.device, timing=True, time_limit_s=time_limit_s, page_no=page,
                                fields=fields)

    server.add_tool(bench)
    server.add_tool(ab)


def _ncu_tool(server: Any, svc: Service, workload_model: Any, field: Any) -> None:
    from typing import Annotated

    from mcp.types import CallToolResult

    recipe_doc = field("explain", description="the ncu recipe: explain (the counters explain needs), another that "
                                              "`profctl recipes` lists, or a .yaml")

    async def ncu(recipe: Annotated[str, recipe_doc] = "explain",
                  workload: workload_model | None = None,
                  program: Annotated[list[str] | None, field(None, description="your program's argv (no shell), "
                                                                   "e.g. [\"python\", \"my_kernel.py\"]")] = None,
                  kernel: Annotated[str | None, field(None, description="profile only kernels whose name matches "
                                                      "this regex (ncu's --kernel-name)")] = None,
                  launch_count: Annotated[int | None, field(None, description="profile at most N launches")] = None,
                  clock_control: Annotated[str | None, field(None, description="base or none")] = None,
                  time_limit_s: Annotated[float | None, field(None, description="seconds before the call is "
                                                              "stopped (at most the server's --timeout)")] = None,
                  memory_limit_gib: Annotated[float | None, field(None, description="GiB: points whose memory "
                                                                  "estimate is over it are refused")] = None,
                  page: Annotated[int, field(1, description=PAGE_DOC)] = 1,
                  fields: Annotated[list[str] | None, field(None, description=FIELDS_DOC)] = None) -> CallToolResult:
        """Nsight Compute with a recipe on the built-in workload (or your functions as backends) or on your program
        (profctl ncu -f json): per kernel its time, what bounds it, its roof. Then `explain` the run."""
        def build() -> list[str]:
            if program is not None and workload is not None:
                raise UsageError("give workload or program, not both")
            argv = ["ncu", f"--recipe={recipe}"]
            if workload is not None:
                argv += workload_argv(workload.model_dump(), svc.memory(memory_limit_gib), svc.cfg.workload)
            argv += [f"--kernel={kernel}"] if kernel else []
            argv += [f"--launch-count={launch_count}"] if launch_count is not None else []
            argv += [f"--clock-control={clock_control}"] if clock_control else []
            argv += [f"--timeout={svc.limit(time_limit_s):g}", "-f", "json"]
            return argv + (["--", *program] if program else [])
        device = workload.device if workload is not None else "cuda"
        return await svc.answer("ncu", build, {"recipe": recipe, "program": program, "kernel": kernel},
                                device=device, timing=True, time_limit_s=time_limit_s, page_no=page, fields=fields)

    server.add_tool(ncu)


def _reading_tools(server: Any, svc: Service, field: Any) -> None:
    from typing import Annotated

    from mcp.types import CallToolResult

    root = svc.cfg.reports
    page_t = Annotated[int, field(1, description=PAGE_DOC)]
    fields_t = Annotated[list[str] | None, field(None, description=FIELDS_DOC)]

    async def report(paths: Annotated[list[str], field(description="reports (nsys .nsys-rep/.sqlite, ncu .ncu-rep, "
                                                       "torch.profiler or Proton traces, bench JSON; plain, .gz or "
                                                       ".xz), run directories, run ids or 'latest'")],
                     by_range: Annotated[bool, field(False, description="kernels per NVTX range")] = False,
                     kernel: Annotated[str | None, field(None, description="only the kernels whose name matches "
                                                         "this regex (each kernel's metrics in full: with fields)")]
                     = None,
                     page: page_t = 1, fields: fields_t = None) -> CallToolResult:
        """Any nsys, ncu, torch.profiler or Proton report, or bench output or a run, read into profctl's summary
        (profctl report -f json): the kernels with the most time first."""
        def build() -> list[str]:
            if not paths:
                raise UsageError("paths: give at least one report or run")
            return ["report", *resolve_refs(paths, root, "paths")] + (["--by-range"] if by_range else []) + [
                "-f", "json"]
        return await svc.answer("report", build, {"paths": paths, "by_range": by_range, "kernel": kernel},
                                page_no=page, fields=fields, kernel=kernel)

    async def compare(base: Annotated[str, field(description="the run or report before: a run directory, run id, "
                                                 "'latest' or a report")],
                      new: Annotated[str, field(description="the run or report after, as base")],
                      threshold_pct: Annotated[float | None, field(None, description="changes smaller than this % "
                                                                   "count as unchanged")] = None,
                      by: Annotated[str | None, field(None, description="pair bench rows by 'label' (else "
                                                      "backend) or by 'backend' [default: label]")] = None,
                      force: Annotated[bool, field(False, description="compare runs that differ in device or "
                                                   "shape anyway")] = False,
                      page: page_t = 1, fields: fields_t = None) -> CallToolResult:
        """NEW against BASE (runs or reports): change per case or kernel with intervals and verdicts (profctl
        compare -f json)."""
        def build() -> list[str]:
            argv = ["compare", *resolve_refs([base, new], root, "base, new")]
            argv += [f"--threshold={threshold_pct:g}%"] if threshold_pct is not None else []
            return argv + ([f"--by={by}"] if by else []) + (["--force"] if force else []) + ["-f", "json"]
        return await svc.answer("compare", build, {"base": base, "new": new}, page_no=page, fields=fields)

    async def runs(kind: Annotated[str | None, field(None, description="only runs of this kind: bench, nsys, ncu, "
                                                     "torch, ab, or mcp-<tool> for this server's own calls")] = None,
                   status: Annotated[str | None, field(None, description="only runs with this status: complete, "
                                                       "failed, incomplete, running")] = None,
                   page: page_t = 1, fields: fields_t = None) -> CallToolResult:
        """The runs in the store, newest first, a row each (id, kind, status, started, command; profctl runs -f
        json, whose manifests are in full.path); the agent's own calls are kind mcp-*."""
        def build() -> list[str]:
            return ["runs", *([f"--kind={kind}"] if kind else []), *([f"--status={status}"] if status else []),
                    "-f", "json"]
        return await svc.answer("runs", build, {"kind": kind, "status": status}, page_no=page, fields=fields)

    async def show(run: Annotated[str, field("latest", description="a run directory, run id or 'latest'")]
                   = "latest", page: page_t = 1, fields: fields_t = None) -> CallToolResult:
        """One run: what ran, on what, its status, files and rows (profctl show -f json)."""
        return await svc.answer("show", lambda: ["show", *resolve_refs([run], root, "run"), "-f", "json"],
                                {"run": run}, page_no=page, fields=fields)

    for fn in (report, compare, runs, show):
        server.add_tool(fn)


def _explain_tool(server: Any, svc: Service, field: Any) -> None:
    """explain: a kernel of an ncu report (alone or against B), or a range of an nsys or torch.profiler timeline."""
    from typing import Annotated

    from mcp.types import CallToolResult

    root = svc.cfg.reports
    ref = "an .ncu-rep (plain, .gz, .xz), a run directory, a run id or 'latest'"

    async def explain(report: Annotated[str, field(description=f"kernel A's report: {ref}; with range, an nsys "
                                                   "export (.sqlite) or a torch.profiler trace")],
                      kernel: Annotated[str | None, field(None, description="regex picking kernel A (its name, base "
                                                          "name or NVTX path); `report` lists the kernels")] = None,
                      range: Annotated[str | None, field(None, description="instead of a kernel: the NVTX or "
                                                         "record_function range of a timeline to explain (why the "
                                                         "range is slow when its kernels are fast)")] = None,
                      report2: Annotated[str | None, field(None, description="a second report: B comes from it "
                                                           "(the same kernel or range before and after a change)")]
                      = None,
                      vs: Annotated[str | None, field(None, description="regex picking kernel B, or the range B "
                                                      "(default: kernel's, in report2; neither: A alone, against "
                                                      "its roofs)")] = None,
                      shape: Annotated[str | None, field(None, description="the attention shape for the roofs when "
                                                         "the NVTX range does not say it, e.g. "
                                                         "b1,s4096,h32,d128,bf16[,causal]")] = None,
                      ncu: Annotated[str | None, field(None, description="with range: an ncu report of the same "
                                                       "program: each kernel's verdict and floor")] = None,
                      page: Annotated[int, field(1, description=PAGE_DOC)] = 1,
                      fields: Annotated[list[str] | None, field(None, description=FIELDS_DOC)] = None
                      ) -> CallToolResult:
        """Why kernel A is slow (or slower than B), causes first: the verdict, each cause with its lines, evidence,
        fix and the time fixing it saves alone and with the others, the floor and what is left; or, with range, why
        a range of a timeline is slow: GPU-bound, host-bound, sync-bound or launch-bound, and what each fix saves
        (profctl explain -f json)."""
        def build() -> list[str]:
            argv = ["explain", *resolve_refs([report, *([report2] if report2 else [])], root, "report")]
            argv += [f"--kernel={kernel}"] if kernel else []
            argv += [f"--range={range}"] if range else []
            argv += [f"--ncu={resolve_refs([ncu], root, 'ncu')[0]}"] if ncu else []
            argv += ([f"--vs={vs}"] if vs else []) + ([f"--shape={shape}"] if shape else [])
            return [*argv, "-f", "json"]
        return await svc.answer("explain", build, {"report": report, "kernel": kernel, "range": range,
                                                   "report2": report2, "vs": vs, "shape": shape, "ncu": ncu},
                                page_no=page, fields=fields)

    server.add_tool(explain)
