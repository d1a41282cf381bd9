"""`profctl runs` / `profctl show`, and the run store as `profctl bench` fills it: interrupted and concurrent runs."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl import run_store
from profctl.cli import app
from tests.conftest import sigint_as_in_a_terminal

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--device", "cpu", "--seqlen", "32", "--heads", "2", "--head-dim", "16", "--iters", "5", "--warmup", "1",
        "--baseline", "none"]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _bench(tmp_path: Path, *args: str) -> Path:
    r = CliRunner().invoke(app, ["bench", *TINY, "-q", "--reports", str(tmp_path), *args])
    assert r.exit_code == 0, r.output
    return max(tmp_path.iterdir(), key=lambda p: p.stat().st_mtime_ns)


def test_runs_lists_and_show_prints(runner: CliRunner, tmp_path: Path) -> None:
    a = _bench(tmp_path, "--backend", "eager", "--label", "ref")
    other = run_store.new_run("nsys", root=tmp_path, argv=["profctl", "nsys", "-b", "eager"])
    run_store.record_tool(other, "nsys", ["nsys", "profile", "-o", "x"], version="2025.3.1", log="nsys.log")
    run_store.finish(other, "complete")
    r = runner.invoke(app, ["runs", "--reports", str(tmp_path), "--format", "json"])
    assert r.exit_code == 0, r.output
    listed = json.loads(r.stdout)
    assert [x["manifest"]["kind"] for x in listed] == ["bench", "nsys"]
    assert listed[0]["status"] == "complete" and listed[0]["manifest"]["label"] == "ref"
    r = runner.invoke(app, ["runs", "--reports", str(tmp_path), "--kind", "nsys", "--format", "csv"])
    assert r.exit_code == 0 and other.name in r.stdout and a.name not in r.stdout
    r = runner.invoke(app, ["runs", "--reports", str(tmp_path)])
    assert r.exit_code == 0 and "bench" in r.stdout

    r = runner.invoke(app, ["show", a.name[-6:], "--reports", str(tmp_path), "--format", "markdown"])
    assert r.exit_code == 0, r.output
    for needle in ("| status | complete |", "| label | ref |", "bench.json", "events.jsonl", "workload.log",
                   "| ref (eager) |", "tool workload", "| PyTorch |"):
        assert needle in r.stdout, needle
    r = runner.invoke(app, ["show", str(other), "--format", "json"])
    doc = json.loads(r.stdout)
    assert doc["manifest"]["tools"][0]["version"] == "2025.3.1" and doc["rows"] is None
    r = runner.invoke(app, ["show", "latest", "--reports", str(tmp_path)])
    assert r.exit_code == 0 and other.name in r.stdout


def test_machine_output_of_runs_is_whole(runner: CliRunner, tmp_path: Path) -> None:
    """Issue 29 item 7: `runs -f csv` cut the command with an ellipsis (csv and json are always whole) and put
    the tables' "-" where nothing was recorded; the table may cut, the data may not."""
    argv = ["profctl", "bench", "--device", "cpu", "-b", "eager,sdpa-math", "-s", "128,256,512,1024", "--heads",
            "4", "--label", "a-label-long-enough-that-the-command-line-runs-past-seventy-characters"]
    a = run_store.new_run("bench", root=tmp_path, argv=argv)
    run_store.finish(a, "complete", device={"name": "cpu"}, points=16, rows=16)
    plain = run_store.new_run("nsys", root=tmp_path, argv=["profctl", "nsys", "-b", "eager"])  # no device, no points
    run_store.finish(plain, "complete")
    r = runner.invoke(app, ["runs", "--reports", str(tmp_path), "-f", "csv"])
    assert r.exit_code == 0, r.output
    got = list(csv.DictReader(io.StringIO(r.stdout)))
    assert got[0]["command"] == " ".join(argv) and "…" not in r.stdout
    assert got[1]["gpu"] == "" and got[1]["points"] == ""  # nothing recorded: empty, not "-"
    r = runner.invoke(app, ["runs", "--reports", str(tmp_path), "-f", "markdown"])
    assert r.exit_code == 0 and "…" in r.stdout  # the table a person reads is cut, and says so


def test_show_unknown_run_is_one_line(runner: CliRunner, tmp_path: Path) -> None:
    r = runner.invoke(app, ["show", "nope", "--reports", str(tmp_path)])
    assert r.exit_code == 2 and r.stderr.strip().count("\n") == 0 and "no run 'nope'" in r.stderr
    assert "Traceback" not in r.output
    r = runner.invoke(app, ["runs", "--reports", str(tmp_path), "--format", "yaml"])
    assert r.exit_code == 2 and "unknown format" in r.stderr


def test_bench_manifest_records_tools_environment_and_clocks(tmp_path: Path) -> None:
    d = _bench(tmp_path, "--backend", "sdpa-math,eager", "--label", "sdpa-math=attn,eager=ref")
    m = run_store.read_manifest(d)
    assert m["status"] == "complete" and m["ended"] and m["rows"] == m["points"] == 2
    assert m["labels"] == {"sdpa-math": "attn", "eager": "ref"}
    assert m["tools"][0]["name"] == "workload" and "profctl.workloads.attention" in " ".join(m["tools"][0]["argv"])
    assert m["device"]["torch"] and m["environment"]["torch"]
    assert set(m["clocks"]) >= {"throttle_reasons", "sm_clock_mhz_min", "clock_warnings"}
    rows = json.loads((d / "bench.json").read_text())
    assert {r["backend"]: r["label"] for r in rows} == {"sdpa-math": "attn", "eager": "ref"}
    assert all(len(r["times_ms"]) == 5 for r in rows)


@pytest.mark.parametrize(("label", "needle"), [
    # (a plain --label with several backends now names the run: issue 39 item 10, tests/cli/test_bench.py)
    ("flash-attn=x", "not in this run's backends"),
    ("eager=a,sdpa-math=a", "two backends under one label"),
])
def test_bad_labels_are_one_line(runner: CliRunner, tmp_path: Path, label: str, needle: str) -> None:
    r = runner.invoke(app, ["bench", *TINY, "--backend", "eager,sdpa-math", "--label", label,
                            "--reports", str(tmp_path)])
    assert r.exit_code == 2 and needle in r.stderr and "Traceback" not in r.output


def test_interrupted_bench_keeps_finished_rows_and_is_incomplete(tmp_path: Path) -> None:
    """SIGINT after the first row: exit 130, manifest 'incomplete', every row on disk kept in bench.json."""
    argv = [sys.executable, "-m", "profctl", "bench", "--device", "cpu", "--backend", "eager",
            "--seqlen", "64,128,256,512,1024,2048", "--heads", "4", "--head-dim", "32", "--iters", "400",
            "--warmup", "1", "--baseline", "none", "-q", "--reports", str(tmp_path)]
    p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=sigint_as_in_a_terminal)
    try:
        deadline = time.monotonic() + 120
        events: list[Path] = []
        while time.monotonic() < deadline:
            events = list(tmp_path.glob("*/events.jsonl"))
            if events and '"event": "row"' in events[0].read_text():
                break
            assert p.poll() is None, p.communicate()
            time.sleep(0.02)
        else:
            pytest.fail("no row within 120 s")
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    run_dir = events[0].parent
    m = run_store.read_manifest(run_dir)
    assert m["status"] == "incomplete" and m["reason"] == "interrupted" and m["ended"]
    rows = json.loads((run_dir / "bench.json").read_text())
    on_disk = [json.loads(x) for x in events[0].read_text().splitlines() if x.strip()]
    finished = sorted(e["index"] for e in on_disk if e["event"] == "row")
    assert 1 <= len(rows) == len(finished) < 6 and m["rows"] == len(rows) and m["points"] == 6
    assert all(r["status"] == "ok" and r["times_ms"] for r in rows)
    # what it says counts as the store does: N of the 6 planned points (issue 21, class 7)
    assert f"{len(rows)} of 6 points" in err and f"{6 - len(rows)} not finished" in err, err
    assert f"interrupted; {len(rows)} finished row(s) were kept in" in err
    # the child was stopped with its parent: no workload process left behind
    time.sleep(0.5)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(events[0]) not in ps
    # and `profctl runs` shows it as such
    r = CliRunner().invoke(app, ["runs", "--reports", str(tmp_path), "--status", "incomplete", "--format", "csv"])
    assert run_dir.name in r.stdout


@pytest.mark.parametrize("command", [
    ["torch", "--device", "cpu", "-b", "sdpa-math", "-s", "1024,2048,4096", "--heads", "4", "--iters", "400"],
    ["bench", "--device", "cpu", "--ab", "eager,sdpa-math", "-s", "256,512", "--heads", "4", "--iters", "20",
     "--rounds", "200"],
])
def test_ctrl_c_names_the_run_directory(tmp_path: Path, command: list[str]) -> None:
    """Issue 29 item 8: Ctrl-C of a torch or A/B run said only "interrupted (a run directory made before ...)".
    Every command names the run directory it made, which keeps what had finished."""
    p = subprocess.Popen([sys.executable, "-m", "profctl", *command, "--reports", str(tmp_path)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=sigint_as_in_a_terminal)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(tmp_path.glob("*/manifest.json")):
            assert p.poll() is None, p.communicate()
            time.sleep(0.05)
        time.sleep(2.0)  # the workload is running
        assert p.poll() is None, p.communicate()
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    (run_dir,) = list(tmp_path.iterdir())
    assert p.returncode == 130, err
    last = err.strip().splitlines()[-1]
    assert last == f"profctl: error: interrupted; what had finished is kept in {run_dir} (profctl show " \
                   f"{run_dir.name})", err
    assert run_store.read_manifest(run_dir)["status"] == "incomplete"


def test_ctrl_c_before_a_run_directory_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupt before any run directory exists says that, not 'a run directory made before keeps ...'."""
    from profctl.cli import _guard

    assert _guard._interrupted(time.time() + 3600) == "interrupted before any run directory was made"


def test_two_benches_at_once_never_collide(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "profctl", "bench", *TINY, "--backend", "eager", "-q", "--reports", str(tmp_path)]
    procs = [subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    dirs = sorted(tmp_path.iterdir())
    assert len(dirs) == 2
    pids = set()
    for d in dirs:
        m = run_store.read_manifest(d)
        assert m["status"] == "complete" and m["rows"] == 1
        pids.add(m["pid"])
        ev = [json.loads(x) for x in (d / "events.jsonl").read_text().splitlines()]
        assert sum(e["event"] == "row" for e in ev) == 1  # each run's events are its own
    assert len(pids) == 2 and os.getpid() not in pids
