"""Warm workload processes (issue 24): one long-lived child per worker process (so per GPU), fed part after part
(``python -m profctl.workloads.attention --serve``, workloads/serve.py), instead of a child per part. Python, torch
and the CUDA context cost seconds per start; a sweep of short shapes spent most of its time there.

A :class:`WarmPool` holds the warm children of one session on one worker and is owned by that session: the
executor makes one per worker when the session starts (profctl.pipelines.dask_executor: a worker plugin, so the
child can start while the workers are still coming up) and closes it when the session ends -- no process-wide
state, nothing registered at import. A child that dies (a case crashed it, a point timed out and was killed, a CUDA
error broke its context) is replaced by a fresh one at the next batch; the case it died in is a ``crashed`` row as
before. At most one child per pool: a child for another command line replaces it, so its GPU memory is freed. The
children also die with their worker (PR_SET_PDEATHSIG).

Only bench's built-in workloads run warm. nsys and ncu start the process they profile themselves (neither can
attach to a process that is already running), so their parts start a child each; torch.profiler parts do the
same (their trace is written per process).
"""

from __future__ import annotations

import json
import shutil
import tempfile
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
    running: proc.Running
    log: Path
    spawned: float = field(default_factory=time.time)
    batches: int = 0

    def alive(self) -> bool:
        return self.running.proc.poll() is None

    def send(self, cases: Sequence[int], jsonl: Path) -> None:
        """Ask for a batch: the child runs `cases` and writes their events, then an ``idle`` event, to `jsonl`."""
        stdin = self.running.proc.stdin
        assert stdin is not None
        stdin.write((json.dumps({"cases": [int(i) for i in cases], "jsonl": str(jsonl)}) + "\n").encode())
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
        stdin = self.running.proc.stdin
        try:
            if stdin is not None:
                stdin.close()
        except OSError:
            pass

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """End of input, then a kill if it has not exited within `grace_s`."""
        self.end_input()
        try:
            self.running.proc.wait(timeout=grace_s)
        except Exception:
            self.running.kill()


def key_of(argv: Sequence[str], env: Mapping[str, str | None]) -> str:
    return json.dumps([list(map(str, argv)), sorted((k, v) for k, v in env.items())])


class WarmPool:
    """The warm children of one session on one worker (at most one alive). `base_env`: what every child gets on
    top of the worker's environment (None: unset), e.g. the submitting process's thread settings."""

    def __init__(self, base_env: Mapping[str, str | None] | None = None) -> None:
        self.base_env: dict[str, str | None] = dict(base_env or {})
        self._children: dict[str, WarmChild] = {}
        self._dirs: list[Path] = []
        self.started = 0  # children started over the pool's life

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
        """Stop every child of the pool: all told at once that their input ended, then each waited for (and
        killed past `grace_s`)."""
        children = [self._children.pop(k) for k in list(self._children)]
        for c in children:
            c.end_input()
        deadline = time.monotonic() + grace_s
        for c in children:
            c.stop(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        """Stop the children and remove their logs' folders (each part copied what it needed)."""
        self.stop_all()
        for d in self._dirs:
            shutil.rmtree(d, ignore_errors=True)
        self._dirs.clear()

    def describe(self) -> dict[str, Any]:
        return {"children_started": self.started}
