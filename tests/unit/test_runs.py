"""The run store: unique directories under concurrency, atomic manifests, interrupted and killed runs, lookup."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from profctl import run_store
from profctl.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]


def test_new_run_manifest_has_the_environment(tmp_path: Path) -> None:
    d = run_store.new_run("bench", root=tmp_path, argv=["profctl", "bench", "-b", "eager"], label="attn")
    m = json.loads((d / "manifest.json").read_text())
    assert m["status"] == "running" and m["kind"] == "bench" and m["label"] == "attn"
    assert m["command"] == ["profctl", "bench", "-b", "eager"] and m["pid"] == os.getpid()
    assert m["run_id"] == d.name and d.parent == tmp_path
    env = m["environment"]
    import torch

    assert env["torch"] == torch.__version__.split("+")[0] or env["torch"] == torch.__version__
    assert env["cuda"] == torch.version.cuda  # read from torch/version.py or torch itself
    for key in ("flash_attn", "fa4", "platform"):
        assert key in env


def test_git_revision_of_a_work_tree_and_outside_one(tmp_path: Path) -> None:
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:  # pragma: no cover
        pytest.skip("git not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "k.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "k.py"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "k"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    g = run_store.git_revision(repo)
    assert g is not None and g["commit"] == head and g["dirty"] is False
    (repo / "k.py").write_text("x = 2\n")
    assert run_store.git_revision(repo)["dirty"] is True  # type: ignore[index]
    outside = tmp_path / "plain"
    outside.mkdir()
    assert run_store.git_revision(outside) is None


def test_concurrent_new_runs_get_distinct_directories(tmp_path: Path) -> None:
    n = 24
    barrier = threading.Barrier(n)
    out: list[Path] = []
    lock = threading.Lock()

    def make() -> None:
        barrier.wait()
        d = run_store.new_run("bench", root=tmp_path, env=False)
        with lock:
            out.append(d)

    threads = [threading.Thread(target=make) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({p.name for p in out}) == n
    assert all(json.loads((p / "manifest.json").read_text())["run_id"] == p.name for p in out)


def test_concurrent_processes_get_distinct_directories(tmp_path: Path) -> None:
    code = ("import sys; from profctl import run_store; "
            "print(run_store.new_run('bench', root=sys.argv[1], env=False).name)")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT) for _ in range(8)]
    names = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(set(names)) == 8 and sorted(names) == sorted(x.name for x in tmp_path.iterdir())


def test_manifest_writes_are_atomic_under_sigkill(tmp_path: Path) -> None:
    """A writer killed at any moment leaves a complete manifest; readers never see half of one."""
    d = run_store.new_run("bench", root=tmp_path, env=False)
    code = ("import sys, itertools; from pathlib import Path; from profctl import run_store\n"
            "d = Path(sys.argv[1])\n"
            "for i in itertools.count(): run_store.update_manifest(d, i=i, pad='x' * 200_000)\n")
    p = subprocess.Popen([sys.executable, "-c", code, str(d)], cwd=ROOT)
    try:
        seen: set[int] = set()
        deadline = time.monotonic() + 30
        while len(seen) < 20 and time.monotonic() < deadline:
            m = json.loads((d / "manifest.json").read_text())  # raises if a reader ever sees a torn file
            seen.add(m.get("i"))
        assert len(seen) >= 5, "the writer never got going"
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.kill()
        p.wait()
    m = json.loads((d / "manifest.json").read_text())
    assert m["run_id"] == d.name and len(m["pad"]) == 200_000
    leftovers = [x.name for x in d.iterdir() if x.name != "manifest.json"]
    assert all(x.endswith(".tmp") for x in leftovers)  # at most the killed writer's temp file
    assert [x.path.name for x in run_store.list_runs(tmp_path)] == [d.name]  # ... which listing ignores


def test_failed_serialisation_keeps_the_old_manifest(tmp_path: Path) -> None:
    d = run_store.new_run("bench", root=tmp_path, env=False)
    before = (d / "manifest.json").read_text()
    with pytest.raises(TypeError):
        run_store.update_manifest(d, bad=object())
    assert (d / "manifest.json").read_text() == before


def test_recording_marks_complete_incomplete_failed(tmp_path: Path) -> None:
    a = run_store.new_run("nsys", root=tmp_path, env=False)
    with run_store.recording(a):
        pass
    assert run_store.read_manifest(a)["status"] == "complete"

    b = run_store.new_run("nsys", root=tmp_path, env=False)
    with pytest.raises(KeyboardInterrupt), run_store.recording(b):
        raise KeyboardInterrupt
    assert run_store.read_manifest(b)["status"] == "incomplete"

    c = run_store.new_run("nsys", root=tmp_path, env=False)
    from profctl.errors import ToolTimeout

    with pytest.raises(ToolTimeout), run_store.recording(c):
        raise ToolTimeout("nsys ran past its timeout and was killed", log="x.log")
    m = run_store.read_manifest(c)
    assert m["status"] == "failed" and "timeout" in m["reason"] and m["ended"]

    e = run_store.new_run("nsys", root=tmp_path, env=False)
    with run_store.recording(e):
        run_store.finish(e, "incomplete", reason="3 of 4 points")
    assert run_store.read_manifest(e)["reason"] == "3 of 4 points"  # a status set inside is kept


def test_sigterm_inside_recording_marks_incomplete(tmp_path: Path) -> None:
    code = ("import sys, time; from profctl import run_store\n"
            "d = run_store.new_run('torch', root=sys.argv[1], env=False); print(d, flush=True)\n"
            "with run_store.recording(d):\n"
            "    run_store.record_tool(d, 'python', ['python', '-c', 'pass'], version='3')\n"
            "    time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert p.stdout is not None
    d = Path(p.stdout.readline().strip())
    deadline = time.monotonic() + 30
    while not run_store.read_manifest(d)["tools"] and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)
    m = run_store.read_manifest(d)
    assert m["status"] == "incomplete" and m["reason"] == "interrupted"
    assert m["tools"][0]["argv"] == ["python", "-c", "pass"] and m["tools"][0]["version"] == "3"


def test_a_killed_run_shows_as_incomplete(tmp_path: Path) -> None:
    code = "import sys, time; from profctl import run_store; run_store.new_run('ncu', root=sys.argv[1], env=False); " \
           "time.sleep(60)"
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT)
    deadline = time.monotonic() + 30
    while not list(tmp_path.glob("*/manifest.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    (info,) = run_store.list_runs(tmp_path)
    assert info.status == "running"
    p.kill()
    p.wait()
    (info,) = run_store.list_runs(tmp_path)
    assert info.manifest["status"] == "running"  # nothing on disk changed ...
    assert info.status == "incomplete" and "ended without finishing" in (info.note or "")  # ... but it is shown


def test_load_run_by_id_part_latest_and_errors(tmp_path: Path) -> None:
    a = run_store.new_run("bench", root=tmp_path, env=False)
    time.sleep(0.01)
    b = run_store.new_run("nsys", root=tmp_path, env=False)
    run_store.update_manifest(b, started="9999-01-01T00:00:00+00:00")  # sorts last
    assert run_store.load_run(a.name, tmp_path).path == a
    assert run_store.load_run(str(b), tmp_path).path == b
    assert run_store.load_run(str(b / "manifest.json")).path == b
    assert run_store.load_run(a.name.rsplit("-", 1)[1], tmp_path).path == a
    assert run_store.load_run("latest", tmp_path).path == b
    with pytest.raises(UsageError, match="no run 'nope'"):
        run_store.load_run("nope", tmp_path)
    with pytest.raises(UsageError, match="matches 2 runs"):
        run_store.load_run("Z-", tmp_path)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "manifest.json").write_text("{not json")
    infos = {i.path.name: i for i in run_store.list_runs(tmp_path)}
    assert infos["junk"].status == "unreadable"
    assert infos["junk"].note is not None and "unreadable manifest" in infos["junk"].note


def test_clocks_seen_summarises_rows() -> None:
    rows: list[dict[str, Any]] = [
        {"clocks": {"sm_clock_mhz_min": 1700, "sm_clock_mhz_max": 1980, "throttle_reasons": ["sw_power_cap"],
                    "clock_samples": 9}, "clock_warning": "throttled: sw_power_cap"},
        {"clocks": {"sm_clock_mhz_min": 1900, "sm_clock_mhz_max": 1995, "throttle_reasons": [],
                    "clock_samples": 4}},
        {"clocks": {}},
    ]
    c = run_store.clocks_seen(rows)
    assert c == {"sampled_points": 2, "sm_clock_mhz_min": 1700, "sm_clock_mhz_max": 1995,
                 "throttle_reasons": ["sw_power_cap"], "clock_warnings": ["throttled: sw_power_cap"]}
