"""--workers: a sweep spread over Dask worker processes -- a real LocalCluster of CPU workers, no mocks -- gives
the serial sweep's rows; a point that crashes its child or kills its worker is a row and the rest finishes; Ctrl-C
keeps every finished row; without --workers Dask is never imported, and without Dask --workers is one line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl import run_store
from profctl.cli import app
from tests.conftest import sigint_as_in_a_terminal

pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--device", "cpu", "--heads", "2", "--head-dim", "8", "--iters", "2", "--warmup", "0", "--baseline", "none",
        "-f", "json"]
SAME = ("backend", "batch", "seqlen_q", "seqlen_kv", "heads", "kv_heads", "head_dim", "dtype", "causal", "pass",
        "layout", "device", "status", "flops")


def _bench(tmp_path: Path, *args: str) -> tuple[list[dict], Path]:
    r = CliRunner().invoke(app, ["bench", *TINY, "--reports", str(tmp_path), *args])
    assert r.exit_code == 0, r.output
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir() and not d.name.startswith(".")]
    return json.loads(r.stdout), run


def test_two_workers_give_the_serial_rows_and_a_crash_is_a_row(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFCTL_FAULT", "crash:sdpa-math")
    sweep = ["--backend", "eager,sdpa-math,sdpa-flash", "--seqlen", "16"]
    serial, _ = _bench(tmp_path / "serial", *sweep)
    spread, run = _bench(tmp_path / "spread", *sweep, "--workers", "2")
    assert [{k: r[k] for k in SAME} for r in spread] == [{k: r[k] for k in SAME} for r in serial]
    assert [r["status"] for r in spread] == ["ok", "crashed", "ok"]
    m = run_store.read_manifest(run)
    assert m["status"] == "complete" and m["executor"]["name"] == "dask" and len(m["executor"]["workers"]) == 2
    parts = m["parts"]  # warm workers: a part per case, dealt as workers free up
    assert len(parts) == 3 and sum(p["cases"] for p in parts) == 3 and {p["dir"] for p in parts} == \
        {d.name for d in run.iterdir() if d.is_dir()}
    for r in spread:  # each row says where it ran; a crash names its part's log, which is there
        assert r["host"] and "gpu_index" not in r
        if r["status"] == "crashed":
            log = Path(r["reason"].rsplit("see ", 1)[1])
            assert log.parent.parent == run and log.name == "workload.log" and log.is_file()
    assert all(t["log"].startswith("part-") for t in m["tools"])


def test_one_warm_child_per_worker_fed_case_after_case(tmp_path: Path) -> None:
    """Issue 24: eight single-case parts over two workers start two workload children, not eight; the rows
    are the serial sweep's."""
    sweep = ["--backend", "eager,sdpa-math", "--seqlen", "16,24,32,40"]
    serial, _ = _bench(tmp_path / "serial", *sweep)
    spread, run = _bench(tmp_path / "spread", *sweep, "--workers", "2")
    assert [{k: r[k] for k in SAME} for r in spread] == [{k: r[k] for k in SAME} for r in serial]
    m = run_store.read_manifest(run)
    assert len(m["parts"]) == 8
    starts = [t for t in m["tools"] if t["name"] == "workload"]
    assert 1 <= len(starts) <= 2 and all(t.get("warm") for t in starts)
    assert all("--serve" in t["argv"] for t in starts)
    used = {p["worker"] for p in m["parts"]}
    assert len(starts) == len(used)  # one child per worker that ran parts
    logs = sorted(run.glob("part-*/workload.log"))
    assert len(logs) == 8 and all("fwd: median" in p.read_text() for p in logs)  # each part's own output


def test_a_warm_child_that_crashes_is_a_row_and_a_fresh_child_goes_on(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFCTL_FAULT", "crash:sdpa-math")
    rows, run = _bench(tmp_path, "--backend", "sdpa-math,eager", "--seqlen", "16,24,32", "--workers", "2")
    assert [r["status"] for r in rows] == ["crashed", "ok"] * 3
    assert all("workload process died" in r["reason"] for r in rows if r["status"] == "crashed")
    m = run_store.read_manifest(run)
    starts = [t for t in m["tools"] if t["name"] == "workload"]
    assert 3 <= len(starts) <= 5  # a fresh child after each crash on a worker that still has cases to run


@contextlib.contextmanager
def _cluster(tmp_path: Path, workers: int, env: dict[str, str]) -> Iterator[str]:
    """A real Dask cluster of worker processes (a scheduler and `workers` Nanny-kept workers, as a user starts
    them: docs/cluster.md), with `env` in the workers' environment; its address."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    sched_file = tmp_path / "scheduler.json"
    py = [sys.executable, "-m"]
    procs = [subprocess.Popen([*py, "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(sched_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)]
    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            assert procs[0].poll() is None, "the Dask scheduler did not start"
            time.sleep(0.1)
        address = json.loads(sched_file.read_text())["address"]
        procs.append(subprocess.Popen([*py, "distributed.cli.dask_worker", address, "--nworkers", str(workers),
                                       "--nthreads", "1", "--no-dashboard", "--memory-limit", "0"], cwd=ROOT,
                                      env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))
        from distributed import Client

        with Client(address, timeout=60) as c:
            c.wait_for_workers(workers, timeout=60)
        yield address
    finally:
        for p in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)


def test_a_point_that_kills_its_worker_is_retried_once_then_a_row(tmp_path: Path) -> None:
    """On a cluster of worker processes (``--cluster``): a part per case; eager's worker process dies twice: its
    case is a row, the others ran. (A local cluster's workers are threads of profctl's process: the loss of one
    is the loss of the run, as for the serial loop.)"""
    # the dying workers leave their warm children's log folders behind (nothing runs in a process that ends at
    # once): in this test's own temporary folder, not /tmp
    (tmp_path / "tmp").mkdir()
    with _cluster(tmp_path / "cluster", 2, {"PROFCTL_FAULT": "kill-worker:eager",
                                           "TMPDIR": str(tmp_path / "tmp")}) as address:
        (tmp_path / "reports").mkdir()
        rows, run = _bench(tmp_path / "reports", "--backend", "eager,sdpa-math,sdpa-flash", "--seqlen", "16",
                           "--cluster", address)
    assert [(r["backend"], r["status"]) for r in rows] == [("eager", "crashed"), ("sdpa-math", "ok"),
                                                           ("sdpa-flash", "ok")]
    assert "died twice" in rows[0]["reason"]
    m = run_store.read_manifest(run)
    # a part per case: eager's part was lost twice (a row); a part queued behind it on the dying worker may be
    # lost with it and run again elsewhere
    lost = m["executor"]["lost_parts"]
    assert m["status"] == "complete" and len(lost) >= 2 and all(p["unfinished"] == 1 for p in lost)


def test_a_local_cluster_runs_its_workers_in_this_process_and_the_fault_does_not_fire(tmp_path: Path) -> None:
    """Issue 31: a local cluster's workers are threads of profctl's process (no 3-4 s worker-process start): the
    parts' pid is profctl's, and the kill-worker fault -- which would end profctl -- only fires in a worker
    process of its own."""
    code = ("import json, os, sys; from typer.testing import CliRunner; from profctl.cli import app; "
            f"r = CliRunner().invoke(app, ['bench', *{TINY!r}, '--reports', {str(tmp_path)!r}, '--backend', "
            "'eager,sdpa-math', '--seqlen', '16', '--workers', '2']); "
            "print(json.dumps({'pid': os.getpid(), 'code': r.exit_code, 'out': r.stdout}))")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PROFCTL_FAULT": "kill-worker:eager"})
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout.strip().splitlines()[-1])
    assert res["code"] == 0, res["out"]
    assert [r["status"] for r in json.loads(res["out"])] == ["ok", "ok"]
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    m = run_store.read_manifest(run)
    assert all(w["address"].startswith("inproc://") and f"/{res['pid']}/" in w["address"]
               for w in m["executor"]["workers"])


def test_ctrl_c_keeps_finished_rows_and_leaves_no_process(tmp_path: Path) -> None:
    """SIGINT to the whole process group (as a terminal sends it) while a point hangs on one worker."""
    argv = [sys.executable, "-m", "profctl", "bench", *TINY[:-2], "-q", "--backend", "eager,sdpa-math",
            "--seqlen", "16,32", "--workers", "2", "--reports", str(tmp_path)]
    p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PROFCTL_FAULT": "hang:sdpa-math"}, start_new_session=True,
                         preexec_fn=sigint_as_in_a_terminal)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            evs = [e for f in tmp_path.glob("*/part-*/events.jsonl") for e in run_store.read_events(f)]
            if sum(e["event"] == "row" for e in evs) >= 1 and sum(e["event"] == "start" for e in evs) >= 3:
                break  # one row, and both parts are in a hanging point
            assert p.poll() is None, p.communicate()
            time.sleep(0.1)
        else:
            pytest.fail("no row within 120 s")
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    (run,) = tmp_path.iterdir()
    m = run_store.read_manifest(run)
    assert m["status"] == "incomplete" and m["reason"] == "interrupted"
    rows = json.loads((run / "bench.json").read_text())
    assert [(r["backend"], r["status"]) for r in rows] == [("eager", "ok")] or \
        sorted((r["backend"], r["seqlen_q"]) for r in rows) == [("eager", 16), ("eager", 32)]
    time.sleep(1.0)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(run) not in ps  # the hanging workload children were killed with their parts


def test_without_workers_dask_is_not_imported(tmp_path: Path) -> None:
    code = ("import sys; from typer.testing import CliRunner; from profctl.cli import app; "
            f"r = CliRunner().invoke(app, ['bench', '--device', 'cpu', '--backend', 'eager', '--seqlen', '16', "
            f"'--heads', '2', '--head-dim', '8', '--iters', '2', '--warmup', '0', '-q', '--reports', "
            f"{str(tmp_path)!r}]); assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in ('dask', 'distributed') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_workers_without_dask_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # what an install without the extra looks like
    r = CliRunner().invoke(app, ["bench", *TINY, "--backend", "eager", "--seqlen", "16", "--workers", "2",
                                 "--reports", str(tmp_path)])
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == ["profctl: error: --workers/--gpus/--cluster need Dask, an optional "
                                             "extra: pip install 'profctl[cluster]'"]
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("args", "needle"), [
    (["--workers", "0"], "--workers must be at least 1"),
    (["--workers", "2", "--cluster", "tcp://localhost:8786"], "give one or the other"),
    (["--gpus", "0,x"], "--gpus '0,x'"),
    (["--gpus", "0"], "the workload runs on the CPU"),
    (["--cluster", "bogus"], "--cluster 'bogus' is not a scheduler address"),  # issue 29: was an internal error
    (["--cluster", "tcp://host:port"], "is not a scheduler address"),
])
def test_bad_worker_options_are_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    r = CliRunner().invoke(app, ["bench", *TINY, "--backend", "eager", "--seqlen", "16", *args,
                                 "--reports", str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert needle in r.output and len(r.output.strip().splitlines()) == 1
    assert not tmp_path.exists() or not list(tmp_path.iterdir())  # no run was started


def test_torch_profiles_each_part_and_joins_their_summaries(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["torch", "--device", "cpu", "--backend", "eager,sdpa-math", "--seqlen", "16",
                                 "--heads", "2", "--head-dim", "8", "--iters", "2", "--warmup", "0", "--workers", "2",
                                 "--format", "json", "--reports", str(tmp_path)])
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    (run,) = tmp_path.iterdir()
    traces = sorted(run.glob("part-*-cpu/trace.json.gz"))
    assert len(traces) == 2 and sorted(x["path"] for x in s["sources"]) == sorted(map(str, traces))
    assert s["meta"]["merged"] == 2 and len(s["meta"]["workload_rows"]) == 2
    m = run_store.read_manifest(run)
    assert m["status"] == "complete" and len(m["parts"]) == 2 and m["trace"].startswith("part-")
    assert json.loads((run / "summary.json").read_text())["sources"] == s["sources"]
    r = CliRunner().invoke(app, ["report", str(run), "--view", "summary", "--format", "json"])  # reads the parts
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.stdout)["sources"]) == 2


def test_workers_beyond_the_points_and_cores_are_not_started_and_it_says_so(tmp_path: Path) -> None:
    """Issue 29: --workers 64 for 3 points started 64 worker processes without a word."""
    r = CliRunner().invoke(app, ["bench", *TINY, "--backend", "eager", "--seqlen", "16,24,32", "--workers", "64",
                                 "--reports", str(tmp_path)])
    assert r.exit_code == 0, r.output
    n = min(3, os.cpu_count() or 1)
    assert "profctl: warning: --workers 64: " in r.output and f"starting {n} worker" in r.output
    (run,) = tmp_path.iterdir()
    m = run_store.read_manifest(run)
    assert len(m["executor"]["workers"]) == n and m["executor"]["notes"]
    assert [x["status"] for x in json.loads(r.stdout[r.stdout.index("["):])] == ["ok"] * 3


@pytest.mark.parametrize("command", ["torch", "bench"])
def test_the_default_relative_reports_folder_works_with_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                command: str) -> None:
    """Issue 29: with the default ./reports, a run over workers named its parts' files by absolute paths and
    failed comparing them with the relative run directory ('is not in the subpath of')."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PROFCTL_REPORTS", raising=False)
    args = [command, "--device", "cpu", "--backend", "eager,sdpa-math", "--seqlen", "16", "--heads", "2",
            "--head-dim", "8", "--iters", "2", "--warmup", "0", "--workers", "2", "--format", "json"]
    r = CliRunner().invoke(app, args + (["--baseline", "none"] if command == "bench" else []))
    assert r.exit_code == 0, r.output
    (run,) = (tmp_path / "reports").iterdir()
    m = run_store.read_manifest(run)
    assert m["status"] == "complete" and len(m["parts"]) == 2
    if command == "torch":
        assert (run / m["trace"]).is_file() and not Path(m["trace"]).is_absolute()
