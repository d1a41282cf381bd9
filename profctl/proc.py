"""The one place profctl starts external processes.

Rules kept here so no caller can forget them: argument lists only (never a shell), a timeout on every call,
stdout and stderr written to a log file kept beside the report, and a failure turned into a typed error that
names the log.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profctl.errors import ToolFailed, ToolNotFound, ToolTimeout

DEFAULT_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class ProcResult:
    argv: tuple[str, ...]
    returncode: int
    log: Path
    wall_s: float

    def log_text(self, limit: int = 2_000_000) -> str:
        """The captured output (stdout and stderr interleaved), at most `limit` characters from the end."""
        try:
            data = self.log.read_bytes()
        except OSError:
            return ""
        return data[-limit:].decode("utf-8", errors="replace")


def run(
    argv: Sequence[str],
    *,
    log: Path,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    env: Mapping[str, str | None] | None = None,
    cwd: Path | None = None,
    check: bool = True,
    classify: Callable[[ProcResult], Exception | None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    die_with_parent: bool = False,
) -> ProcResult:
    """Run `argv`, output to `log`; raise ToolTimeout/ToolFailed (or what `classify` returns) on failure.

    `classify` sees every finished result (even exit 0) and may return a more specific error, e.g. ncu's
    ERR_NVGPUCTRPERM, which ncu reports with exit status 0 on some versions. `cancelled`, asked about twice a
    second while the process runs, stops it when it answers True (a part on a worker whose run was cancelled):
    the process and everything it started are killed and KeyboardInterrupt is raised, as for Ctrl-C.
    `die_with_parent`: the kernel kills the process when the thread that started it dies (Linux; a Dask worker
    process that dies takes its children with it instead of leaving them on the GPU).
    """
    argv = [str(a) for a in argv]
    if not argv:
        raise ValueError("empty argv")
    log = Path(log)
    log.parent.mkdir(parents=True, exist_ok=True)
    full_env = _environment(env) if env is not None else None
    t0 = time.perf_counter()
    with open(log, "ab") as out:
        out.write(("$ " + " ".join(_quote(a) for a in argv) + "\n").encode())
        out.flush()
        try:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=full_env,
                cwd=cwd,
                start_new_session=True,  # so a timeout can kill the tool and everything it started
                preexec_fn=_die_with_parent if die_with_parent and _PRCTL is not None else None,
            )
        except FileNotFoundError as e:
            raise ToolNotFound(f"cannot run {argv[0]}: not found") from e
        except PermissionError as e:
            raise ToolNotFound(f"cannot run {argv[0]}: permission denied") from e
        try:
            rc = _wait(proc, timeout_s, cancelled)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise ToolTimeout(f"{Path(argv[0]).name} ran past its {timeout_s:.0f} s timeout and was killed",
                              log=log) from None
        except KeyboardInterrupt:
            _kill_group(proc)
            raise
    res = ProcResult(tuple(argv), rc, log, time.perf_counter() - t0)
    if classify is not None:
        err = classify(res)
        if err is not None:
            raise err
    if check and rc != 0:
        tail = last_line(res.log_text(20_000))
        raise ToolFailed(f"{Path(argv[0]).name} exited with status {rc}: {tail}", log=log)
    return res


def _environment(env: Mapping[str, str | None] | None) -> dict[str, str]:
    """This process's environment with `env` on top (a value None removes the variable)."""
    full = dict(os.environ)
    for k, v in (env or {}).items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    return full


def _wait(proc: subprocess.Popen[bytes], timeout_s: float, cancelled: Callable[[], bool] | None) -> int:
    """The exit status; TimeoutExpired past `timeout_s`; KeyboardInterrupt once `cancelled()` says so."""
    if cancelled is None:
        return proc.wait(timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return proc.wait(timeout=max(0.0, min(0.5, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
            if cancelled():
                raise KeyboardInterrupt("cancelled") from None


class Running:
    """A child started by `spawn`: poll it, wait for it, or kill it with everything it started."""

    def __init__(self, argv: Sequence[str], proc: subprocess.Popen[bytes], log: Path, deadline: float) -> None:
        self.argv = tuple(argv)
        self.proc = proc
        self.log = log
        self.deadline = deadline
        self.t0 = time.perf_counter()

    def poll(self) -> int | None:
        """The exit status, or None while running; kills the child and raises ToolTimeout past its deadline."""
        rc = self.proc.poll()
        if rc is None and time.perf_counter() > self.deadline:
            self.kill()
            raise ToolTimeout(f"{Path(self.argv[0]).name} ran past its timeout and was killed", log=self.log)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            _kill_group(self.proc)


def spawn(argv: Sequence[str], *, log: Path, timeout_s: float = DEFAULT_TIMEOUT_S,
          env: Mapping[str, str | None] | None = None, cwd: Path | None = None, die_with_parent: bool = False,
          stdin_pipe: bool = False) -> Running:
    """Start `argv` without waiting (same rules as `run`: argv list, output to `log`, a deadline). `stdin_pipe`:
    the child reads what the caller writes to ``Running.proc.stdin`` (a warm workload process fed its cases)."""
    argv = [str(a) for a in argv]
    log = Path(log)
    log.parent.mkdir(parents=True, exist_ok=True)
    full_env = _environment(env)
    out = open(log, "ab")  # noqa: SIM115 - the child writes to it after we return
    out.write(("$ " + " ".join(_quote(a) for a in argv) + "\n").encode())
    out.flush()
    try:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
                                env=full_env, cwd=cwd, start_new_session=True,
                                preexec_fn=_die_with_parent if die_with_parent and _PRCTL is not None else None)
    except FileNotFoundError as e:
        raise ToolNotFound(f"cannot run {argv[0]}: not found") from e
    finally:
        out.close()
    return Running(argv, proc, log, time.perf_counter() + timeout_s)


def _prctl() -> Any:
    """libc's prctl, looked up before any fork (the child must not load anything between fork and exec)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).prctl
        fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        return fn
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


#: lines the profilers' own libraries print on their way out (Kineto's USDT probes, nsys/ncu banners): never
#: the reason a program failed
_NOISE = re.compile(r"^(USDT:|STAGE:|==PROF==|\[W\w* [\d:.]+ )|SyncActivityProfilerHandler|ActivityProfilerController")


@contextlib.contextmanager
def polling(pump: Callable[[], None], interval_s: float, name: str,
            final: Callable[[], None] | None = None) -> Iterator[None]:
    """While the block runs (a child writing its log or events), call `pump` every `interval_s` seconds in a
    daemon thread; at the end once more (`final`, else `pump`), after the thread stopped, so what the child wrote
    last is not missed."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(interval_s):
            pump()

    t = threading.Thread(target=loop, name=name, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(timeout=5)
        (final or pump)()


def last_line(text: str) -> str:
    """The line of a log most likely to say why a process failed: the last that is not the profiler's noise
    (preferring one that names an error)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("$ ")]
    real = [ln for ln in lines if not _NOISE.search(ln)] or lines
    errors = [ln for ln in real if re.search(r"(?i)\berror\b|^[\w.]*(Error|Exception)\b", ln)]
    return (errors or real)[-1][:300] if real else "(no output)"


def error_tail(text: str, lines: int = 6) -> list[str]:
    """The last lines of a program's output that say why it failed: the end of its last Python traceback (the
    innermost frame and the exception), else its last lines that are not a profiler's noise."""
    all_lines = [ln.rstrip() for ln in text.splitlines() if ln.strip() and not ln.startswith("$ ")]
    real = [ln for ln in all_lines if not _NOISE.search(ln)]
    starts = [i for i, ln in enumerate(real) if ln.startswith("Traceback (most recent call last)")]
    if starts:
        block = real[starts[-1] + 1:]
        frames = [i for i, ln in enumerate(block) if ln.lstrip().startswith('File "')]
        exc = next((i for i, ln in enumerate(block) if not ln.startswith(" ")), len(block))
        first = max((i for i in frames if i < exc), default=0)
        return block[first:][:lines]
    return real[-min(3, lines):]


def _quote(a: str) -> str:
    return shlex.quote(a)


def capture(argv: Sequence[str], *, timeout_s: float = 60.0) -> str:
    """Run a short query (e.g. `nsys --version`) and return its stdout; raise ToolNotFound/ToolFailed."""
    argv = [str(a) for a in argv]
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except FileNotFoundError as e:
        raise ToolNotFound(f"cannot run {argv[0]}: not found") from e
    except subprocess.TimeoutExpired as e:
        raise ToolTimeout(f"{' '.join(argv)} did not answer within {timeout_s:.0f} s") from e
    if cp.returncode != 0:
        msg = (cp.stderr or cp.stdout).strip().splitlines()
        raise ToolFailed(f"{' '.join(argv)} exited with status {cp.returncode}: {msg[-1] if msg else ''}")
    return cp.stdout
