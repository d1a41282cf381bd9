"""Warm workload processes on Dask workers (issue 24): one long-lived child per worker process (so per GPU),
started on the worker's first part and fed part after part (``python -m profctl.workloads.attention --serve``,
workloads/serve.py), instead of a child per part. Python, torch and the CUDA context cost seconds per start; a
sweep of short shapes spent most of its time there.

A child that dies (a case crashed it, a point timed out and was killed, a CUDA error broke its context) is
replaced by a fresh one at the next batch; the case it died in is a ``crashed`` row as before. One child per
worker process at most: a child for another command line (another run on a long-lived cluster) replaces it, so
its GPU memory is freed. The children die with the worker (PR_SET_PDEATHSIG) and are stopped at its exit.

Only bench's built-in workloads run warm. nsys and ncu start the process they profile themselves (neither can
attach to a process that is already running), so their parts start a child each; torch.profiler parts do the
same (their trace is written per process).
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from profctl import proc

#: how long a warm child may live (its per-point timeouts are the parent's to enforce)
LIFETIME_S = 7 * 24 * 3600.0


@dataclass
class WarmChild:
    """A running ``--serve`` workload process: its command line (the key), the process, its own log."""

    key: str
    running: proc.Running
    log: Path

    def alive(self) -> bool:
        return self.running.proc.poll() is None

    def send(self, cases: Sequence[int], jsonl: Path) -> None:
        """Ask for a batch: the child runs `cases` and writes their events, then an ``idle`` event, to `jsonl`."""
        stdin = self.running.proc.stdin
        assert stdin is not None
        stdin.write((json.dumps({"cases": [int(i) for i in cases], "jsonl": str(jsonl)}) + "\n").encode())
        stdin.flush()

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

    def stop(self) -> None:
        """End of input (the child exits 0), then a kill if it does not within 10 s."""
        stdin = self.running.proc.stdin
        try:
            if stdin is not None:
                stdin.close()
            self.running.proc.wait(timeout=10)
        except Exception:
            self.running.kill()


_CHILDREN: dict[str, WarmChild] = {}
_LOGS: list[Path] = []


def child(argv: Sequence[str], env: dict[str, str]) -> tuple[WarmChild, bool]:
    """The live warm child for this command line and environment, started if there is none (True: started now).
    Any other warm child of this process is stopped first: one per worker, so one per GPU."""
    key = json.dumps([list(map(str, argv)), sorted(env.items())])
    c = _CHILDREN.get(key)
    if c is not None and c.alive():
        return c, False
    stop_all()
    log_dir = Path(tempfile.mkdtemp(prefix="profctl-warm-"))
    _LOGS.append(log_dir)
    log = log_dir / "workload.log"
    running = proc.spawn(argv, log=log, timeout_s=LIFETIME_S, env=env, die_with_parent=True, stdin_pipe=True)
    c = _CHILDREN[key] = WarmChild(key, running, log)
    return c, True


def stop_all() -> None:
    """Stop every warm child of this process (and forget the dead ones)."""
    for k in list(_CHILDREN):
        _CHILDREN.pop(k).stop()


def _at_exit() -> None:
    stop_all()
    for d in _LOGS:
        shutil.rmtree(d, ignore_errors=True)


atexit.register(_at_exit)
