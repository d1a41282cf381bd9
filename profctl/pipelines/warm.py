"""Warm workload processes (issue 24): one long-lived child per worker process (so per GPU), fed part after part
(``python -m profctl.workloads.attention --serve``, workloads/serve.py), instead of a child per part. Python, torch
and the CUDA context cost seconds per start; a sweep of short shapes spent most of its time there.

A :class:`WarmPool` holds the warm children of one session on one worker and is owned by that session: the
executor makes one per worker when the session starts (profctl.pipelines.dask_executor: a worker plugin) and
closes it when the session ends -- no process-wide state, nothing registered at import. On a local cluster
the session starts the children itself, before the workers (:class:`EarlyChildren`: Python, torch and the
CUDA context load while Dask starts), and each worker adopts its own: the child reads its batches from a FIFO
the worker writes to, and the session reaps it and leaves its exit status in a file the worker reads.

A child that dies (a case crashed it, a point timed out and was killed, a CUDA error broke its context) is
replaced by a fresh one at the next batch; the case it died in is a ``crashed`` row as before. At most one child
per pool: a child for another command line replaces it, so its GPU memory is freed. A child dies with the
process that started it (PR_SET_PDEATHSIG); an adopted one also ends when its worker does (its FIFO closes).

Only bench's built-in workloads run warm. nsys and ncu start the process they profile themselves (neither can
attach to a process that is already running), so their parts start a child each; torch.profiler parts do the
same (their trace is written per process).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profctl import proc

#: how long a warm child may live (its per-point timeouts are the parent's to enforce)
LIFETIME_S = 7 * 24 * 3600.0
#: how long a closing pool waits for a child to exit at the end of its input before killing it
STOP_GRACE_S = 2.0

#: the command of a warm child, asked where the child runs: (argv, environment on top of the worker's)
WarmCommand = Callable[[], tuple[Sequence[str], Mapping[str, str]]]


@dataclass
class WarmChild:
    """A running ``--serve`` workload process: its command line and environment (the key), the process, its
    own log, and when it was started (``time.time()``, the clock of the workload's events)."""

    key: str
    running: Any  # proc.Running, or AdoptedRunning for a child the session started
    log: Path
    spawned: float = field(default_factory=time.time)
    batches: int = 0
    fifo: str | None = None  # where an adopted child reads its batches (None: its stdin)
    _fd: int | None = None

    def alive(self) -> bool:
        return self.running.proc.poll() is None

    def send(self, cases: Sequence[int], jsonl: Path) -> None:
        """Ask for a batch: the child runs `cases` and writes their events, then an ``idle`` event, to `jsonl`."""
        line = (json.dumps({"cases": [int(i) for i in cases], "jsonl": str(jsonl)}) + "\n").encode()
        if self.fifo is not None:
            if self._fd is None:  # read-write: never blocks, and the child finds the request whenever it opens
                self._fd = os.open(self.fifo, os.O_RDWR)
            os.write(self._fd, line)
        else:
            stdin = self.running.proc.stdin
            assert stdin is not None
            stdin.write(line)
            stdin.flush()
        self.batches += 1

    def log_size(self) -> int:
        try:
            return self.log.stat().st_size
        except OSError:
            return 0

    def copy_log(self, start: int, dst: Path) -> None:
        """What the child printed since byte `start` of its log, appended to the part's log `dst`."""
        try:
            with open(self.log, "rb") as fi, open(dst, "ab") as fo:
                fi.seek(start)
                shutil.copyfileobj(fi, fo)
        except OSError:
            pass

    def end_input(self) -> None:
        """End of input: the child finishes its batch and exits 0."""
        if self.fifo is not None:
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None
            return
        stdin = self.running.proc.stdin
        try:
            if stdin is not None:
                stdin.close()
        except OSError:
            pass

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """End of input, then a kill if it has not exited within `grace_s`."""
        self.end_input()
        deadline = time.monotonic() + grace_s
        while self.running.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.running.proc.poll() is None:
            self.running.kill()


def key_of(argv: Sequence[str], env: Mapping[str, str | None]) -> str:
    return json.dumps([list(map(str, argv)), sorted((k, v) for k, v in env.items())])


class WarmPool:
    """The warm children of one session on one worker (at most one alive). `base_env`: what every child gets on
    top of the worker's environment (None: unset), e.g. the submitting process's thread settings."""

    def __init__(self, base_env: Mapping[str, str | None] | None = None, adopt: Adoption | None = None) -> None:
        self.base_env: dict[str, str | None] = dict(base_env or {})
        self._children: dict[str, WarmChild] = {}
        self._dirs: list[Path] = []
        self.started = 0  # children started over the pool's life
        if adopt is not None:  # started by the session for this worker: its first parts go there
            self._children[adopt.key] = WarmChild(adopt.key, AdoptedRunning(adopt.pid, Path(adopt.exit)),
                                                  Path(adopt.log), spawned=adopt.spawned, fifo=adopt.fifo)

    def child(self, argv: Sequence[str], env: Mapping[str, str]) -> tuple[WarmChild, bool]:
        """The live warm child for this command line and environment, started if there is none (True: started
        now). Any other child of the pool is stopped first: one per worker, so one per GPU."""
        full = {**self.base_env, **env}
        key = key_of(argv, full)
        c = self._children.get(key)
        if c is not None and c.alive():
            return c, False
        self.stop_all()
        log_dir = Path(tempfile.mkdtemp(prefix="profctl-warm-"))
        self._dirs.append(log_dir)
        log = log_dir / "workload.log"
        running = proc.spawn(argv, log=log, timeout_s=LIFETIME_S, env=full, die_with_parent=True, stdin_pipe=True)
        c = self._children[key] = WarmChild(key, running, log)
        self.started += 1
        return c, True

    def prestart(self, command: WarmCommand) -> WarmChild:
        """Start the child `command` describes now, without waiting for it (it gets Python, torch and the CUDA
        context ready while the first part is on its way)."""
        argv, env = command()
        return self.child(argv, dict(env))[0]

    def stop_all(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop every child of the pool: all told at once that their input ended, then each of its own waited for
        (and killed past `grace_s`)."""
        children = [self._children.pop(k) for k in list(self._children)]
        for c in children:
            c.end_input()
        deadline = time.monotonic() + grace_s
        for c in children:
            if c.fifo is None:  # an adopted child is its parent's to wait for (EarlyChildren.close)
                c.stop(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        """Stop the children and remove their logs' folders (each part copied what it needed)."""
        self.stop_all()
        for d in self._dirs:
            shutil.rmtree(d, ignore_errors=True)
        self._dirs.clear()

    def describe(self) -> dict[str, Any]:
        return {"children_started": self.started}


# ------------------------------------------------------------------------------ children the session starts
@dataclass(frozen=True)
class Adoption:
    """A warm child the session started before its workers, for one worker to adopt: its pid, the FIFO it reads
    its batches from, its log, the file the session writes its exit status to, its key, when it started."""

    pid: int
    fifo: str
    log: str
    exit: str
    key: str
    spawned: float


def _running(pid: int) -> bool:
    """Whether `pid` runs (not gone, not a zombie waiting for its parent: Linux's /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


class AdoptedRunning:
    """What a part asks of its child (``proc.poll()``, ``kill()``) for a child another process started and reaps:
    the exit status comes from the file its parent writes."""

    def __init__(self, pid: int, exit_file: Path) -> None:
        self.pid, self.exit_file = pid, exit_file
        self.proc = self  # Running.proc.poll()
        self._rc: int | None = None

    def poll(self) -> int | None:
        if self._rc is None:
            self._rc = self._read()
            if self._rc is None and not _running(self.pid):
                deadline = time.monotonic() + 2.0  # its parent writes the status within milliseconds
                while self._rc is None and time.monotonic() < deadline:
                    time.sleep(0.01)
                    self._rc = self._read()
                self._rc = -1 if self._rc is None else self._rc
        return self._rc

    def _read(self) -> int | None:
        try:
            return int(self.exit_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)  # its own session: it and what it started
        deadline = time.monotonic() + 2.0
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)


class EarlyChildren:
    """The warm children a session starts itself, one per local worker, before the workers exist; each reads its
    batches from a FIFO (``--requests``), dies with this process, and is reaped here (its status in a file its
    worker reads). :meth:`close` ends those still running."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="profctl-early-"))
        self._children: list[tuple[int, Path, threading.Thread]] = []

    @staticmethod
    def possible() -> bool:
        return sys.platform.startswith("linux") and hasattr(os, "mkfifo")

    def spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str | None], key: str) -> Adoption:
        fifo, log, exit_file = self.dir / f"{name}.fifo", self.dir / f"{name}.log", self.dir / f"{name}.exit"
        os.mkfifo(fifo, 0o600)
        running = proc.spawn([*argv, "--requests", str(fifo)], log=log, timeout_s=LIFETIME_S, env=env,
                             die_with_parent=True)

        def reap() -> None:
            rc = running.proc.wait()
            with contextlib.suppress(OSError):
                tmp = exit_file.with_suffix(".tmp")
                tmp.write_text(str(rc))
                tmp.replace(exit_file)

        t = threading.Thread(target=reap, name=f"profctl-reap-{name}", daemon=True)
        t.start()
        self._children.append((running.proc.pid, exit_file, t))
        return Adoption(running.proc.pid, str(fifo), str(log), str(exit_file), key, time.time())

    def close(self, grace_s: float = 0.5) -> None:
        """The children still running after `grace_s` (their workers closed their FIFOs: they are exiting; their
        work is done) are killed, each with what it started; the folder goes."""
        deadline = time.monotonic() + grace_s
        for pid, exit_file, reaper in self._children:
            while not exit_file.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            if not exit_file.exists():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
            reaper.join(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)
