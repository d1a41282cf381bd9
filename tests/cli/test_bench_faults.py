"""Nothing is lost: a point that crashes the workload process, or hangs, becomes a row and the sweep goes on."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app

TINY = ["--device", "cpu", "--heads", "2", "--head-dim", "8", "--iters", "2", "--warmup", "0", "-f", "json",
        "--baseline", "none"]


def test_crash_becomes_a_row_and_the_sweep_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFCTL_FAULT", "crash:sdpa-math")
    r = CliRunner().invoke(app, ["bench", *TINY, "--seqlen", "16,32", "--backend", "eager,sdpa-math,sdpa-flash",
                                 "--reports", str(tmp_path)])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [(x["backend"], x["seqlen_q"], x["status"]) for x in rows] == [
        ("eager", 16, "ok"), ("sdpa-math", 16, "crashed"), ("sdpa-flash", 16, "ok"),
        ("eager", 32, "ok"), ("sdpa-math", 32, "crashed"), ("sdpa-flash", 32, "ok")]
    crashed = rows[1]
    assert "exit 139" in crashed["reason"] and "workload.log" in crashed["reason"]


def test_hang_is_killed_at_the_point_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFCTL_FAULT", "hang:eager")
    r = CliRunner().invoke(app, ["bench", *TINY, "--seqlen", "16", "--backend", "eager,sdpa-math",
                                 "--timeout", "8", "--reports", str(tmp_path)])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [(x["backend"], x["status"]) for x in rows] == [("eager", "timeout"), ("sdpa-math", "ok")]
    (run,) = tmp_path.iterdir()
    assert json.loads((run / "manifest.json").read_text())["status"] == "complete"
