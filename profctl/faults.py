"""Fault injection for profctl's own tests, in one place: ``PROFCTL_FAULT=<kind>:<backend>`` makes a point of that
backend (its name or its label) fail the way real points fail, where they fail, so the tests can check that a
sweep records the failure and goes on. Unset (as everywhere but in those tests), nothing happens.

* ``crash`` / ``hang`` / ``sigkill``: in the workload child, when a case starts (:func:`in_workload`): the
  process ends abruptly, as a segfault or a CUDA fault would, blocks, or is killed by SIGKILL as the kernel's
  out-of-memory killer kills it.
* ``kill-worker``: in a pipeline's part on a Dask worker process (a cluster's: a local cluster's workers are
  threads of profctl's own process), when the child reports that a point started (:func:`on_worker`): the worker
  process ends a second later (a real crash comes during the point)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

ENV = "PROFCTL_FAULT"


def _asked(spec: Any) -> str:
    """The fault kind asked for `spec`'s backend, or ''."""
    kind, _, backend = os.environ.get(ENV, "").partition(":")
    return kind if backend in (spec.backend, spec.label) else ""


def in_workload(spec: Any) -> None:
    """In the workload child as case `spec` starts: ``crash`` exits with 139, ``hang`` sleeps for an hour,
    ``sigkill`` kills it with SIGKILL."""
    kind = _asked(spec)
    if kind == "crash":
        os._exit(139)
    if kind == "hang":
        time.sleep(3600)
    if kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)


def on_worker(spec: Any, *, worker: bool) -> None:
    """In a pipeline's part as point `spec` starts: ``kill-worker`` ends this process (exit 70) a second later,
    when it is a Dask worker process of its own (`worker`)."""
    if worker and _asked(spec) == "kill-worker":
        time.sleep(1.0)
        os._exit(70)
