"""The warm workload process's loop (workloads/serve.py): a batch at a time, each batch's events and an ``idle``
line in the file the request names, status 2 for a request that is not one, 3 (and no further batch) after a
batch that broke the CUDA context; and the attention workload under --serve, a real child fed on stdin."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from profctl.workloads.serve import serve


def test_batches_write_their_events_and_idle(tmp_path: Path) -> None:
    ran: list[list[int]] = []

    def batch(cases, emit):  # type: ignore[no-untyped-def]
        ran.append(list(cases))
        for i in cases:
            emit({"event": "row", "index": i})
        return 0

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    reqs = [json.dumps({"cases": [0, 2], "jsonl": str(a)}), "", json.dumps({"cases": [1], "jsonl": str(b)})]
    assert serve(batch, lambda: {"event": "device", "name": "cpu"}, reqs) == 0
    assert ran == [[0, 2], [1]]
    ev = [json.loads(x)["event"] for x in a.read_text().splitlines()]
    assert ev == ["device", "row", "row", "idle"]
    assert [json.loads(x)["event"] for x in b.read_text().splitlines()] == ["device", "row", "idle"]


def test_a_bad_request_and_a_broken_context(tmp_path: Path) -> None:
    assert serve(lambda c, e: 0, dict, ["not json"]) == 2
    reqs = [json.dumps({"cases": [0], "jsonl": str(tmp_path / "x")})] * 3
    calls: list[int] = []
    assert serve(lambda c, e: calls.append(1) or 3, dict, reqs) == 3
    assert len(calls) == 1


def test_the_attention_workload_serves_batches_on_stdin(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    stdin = "".join(json.dumps({"cases": c, "jsonl": str(p)}) + "\n" for c, p in (([0, 1], a), ([2], b)))
    r = subprocess.run([sys.executable, "-m", "profctl.workloads.attention", "--serve", "--backend", "sdpa-math,eager",
                        "--seqlen", "16,24", "--heads", "2", "--head-dim", "8", "--device", "cpu", "--iters", "2",
                        "--warmup", "0"], input=stdin, text=True, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in a.read_text().splitlines() if json.loads(x)["event"] == "row"]
    assert [x["index"] for x in rows] == [0, 1] and all(x["status"] == "ok" for x in rows)
    assert [json.loads(x)["event"] for x in b.read_text().splitlines()][-1] == "idle"
    assert r.stdout.count("serve: batch of") == 2


def test_a_child_the_session_starts_is_fed_by_the_worker_that_adopts_it(tmp_path: Path) -> None:
    """Issue 31: on a local cluster the session starts each worker's warm child before the workers (it loads
    while Dask starts); the worker adopts it, feeds it through a FIFO, and reads its exit status from the file
    the session writes when it reaps it. No Dask here: the session's and the worker's halves, in one process."""
    import os
    import signal
    import time

    from profctl import run_store
    from profctl.pipelines.warm import EarlyChildren, WarmPool, key_of

    if not EarlyChildren.possible():
        import pytest

        pytest.skip("FIFOs and /proc: Linux")
    argv = [sys.executable, "-m", "profctl.workloads.attention", "--serve", "--backend", "eager", "--seqlen", "16,24",
            "--heads", "2", "--head-dim", "8", "--device", "cpu", "--iters", "2", "--warmup", "0"]
    early = EarlyChildren()
    try:
        adoption = early.spawn("cpu0", argv, {"PYTHONUNBUFFERED": "1"}, key_of(argv, {}))
        pool = WarmPool(adopt=adoption)
        child, new = pool.child(argv, {})
        assert not new and child.fifo == adoption.fifo and child.alive()
        jsonl = tmp_path / "a.jsonl"
        child.send([1], jsonl)
        deadline = time.monotonic() + 120
        while not any(e.get("event") == "idle" for e in run_store.read_events(jsonl)) and time.monotonic() < deadline:
            time.sleep(0.05)
        evs = run_store.read_events(jsonl)
        assert [e["event"] for e in evs] == ["device", "ready", "start", "row", "idle"]
        assert evs[3]["index"] == 1 and evs[3]["status"] == "ok" and evs[1]["import_s"] >= 0
        # a second command line replaces it: the adopted child ends at the end of its input (status 0)
        other, new = pool.child([*argv, "--seed", "1"], {})
        deadline = time.monotonic() + 30
        while child.running.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert new and child.running.proc.poll() == 0 and other.fifo is None
        pool.close()
        # an adopted child that dies by a signal: the status its parent saw
        adoption = early.spawn("cpu1", argv, {}, key_of(argv, {}))
        pool = WarmPool(adopt=adoption)
        child, _ = pool.child(argv, {})
        os.killpg(adoption.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while child.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.running.proc.poll() == -signal.SIGKILL
        pool.close()
    finally:
        early.close()
    assert not early.dir.exists()


def test_a_bench_child_ends_without_pythons_shutdown_once_its_rows_are_written(tmp_path: Path) -> None:
    """--exit-fast (what bench passes its children, which no profiler wraps): every row is on disk, the status is
    the workload's, and the interpreter's shutdown (0.4 s with torch: atexit handlers, module teardown) is not
    run; without it, it is."""
    prog = ("import atexit, runpy, sys; atexit.register(lambda: print('SHUTDOWN', flush=True)); "
            "sys.argv = ['attention', *sys.argv[1:]]; runpy.run_module('profctl.workloads.attention', "
            "run_name='__main__')")
    for fast in (True, False):
        jsonl = tmp_path / f"{fast}.jsonl"
        r = subprocess.run([sys.executable, "-c", prog, "--backend", "sdpa-math,eager", "--seqlen", "16,24",
                            "--heads", "2", "--head-dim", "8", "--device", "cpu", "--iters", "2", "--warmup", "0",
                            "--jsonl", str(jsonl), *(["--exit-fast"] if fast else [])],
                           text=True, capture_output=True, timeout=300)
        assert r.returncode == 0, r.stderr
        rows = [json.loads(x) for x in jsonl.read_text().splitlines() if json.loads(x)["event"] == "row"]
        assert [x["index"] for x in rows] == [0, 1, 2, 3] and all(x["status"] == "ok" for x in rows)
        assert ("SHUTDOWN" in r.stdout) is not fast, (fast, r.stdout[-300:])
