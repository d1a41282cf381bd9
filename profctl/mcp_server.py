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
from profctl.mcp_answers import EXIT_MEANING, Outcome, answer

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
