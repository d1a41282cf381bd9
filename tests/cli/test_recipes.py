"""`profctl recipes` through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from profctl.cli import app


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        return CliRunner()


def test_list_names_every_builtin() -> None:
    r = _runner().invoke(app, ["recipes", "--format", "json"])
    assert r.exit_code == 0, r.stderr
    names = {x["recipe"] for x in json.loads(r.stdout)}
    assert {"tensor-core", "dram", "sm-throughput", "occupancy", "speed-of-light", "memory", "full"} <= names
    r = _runner().invoke(app, ["recipes"])
    assert r.exit_code == 0 and "tensor-core" in r.stdout


def test_show_one_per_compute_capability() -> None:
    r = _runner().invoke(app, ["recipes", "tensor-core", "--cc", "8.0"])
    assert r.exit_code == 0, r.stderr
    assert "sm__pipe_tensor_op_hmma_cycles_active" in r.stdout and "read:" in r.stdout
    assert "sm__inst_executed_pipe_tensor_op_gmma" not in r.stdout  # Hopper only
    r = _runner().invoke(app, ["recipes", "tensor-core", "--cc", "9.0", "--format", "json"])
    doc = json.loads(r.stdout)
    assert "sm__inst_executed_pipe_tensor_op_gmma.sum" in [m["name"] for m in doc["metrics"]]
    assert doc["thresholds"]["tensor_low_pct"] == 40
    r = _runner().invoke(app, ["recipes", "occupancy", "--format", "markdown"])
    assert r.exit_code == 0 and r.stdout.startswith("# occupancy") and "## Thresholds" in r.stdout


def test_user_recipe_by_path(tmp_path: Path) -> None:
    p = tmp_path / "mine.yaml"
    p.write_text("name: mine\nsummary: s\nmetrics:\n  - name: gpu__time_duration.sum\n    label: t\n"
                 "    means: m\n    read: r\n")
    r = _runner().invoke(app, ["recipes", str(p)])
    assert r.exit_code == 0 and "gpu__time_duration.sum" in r.stdout


def test_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsummary: s\nmetrics:\n  - name: sm__x.sum\n    label: t\n    means: m\n    read: r\n"
                   "    unit: ns\n")
    for args, code, text in ((["recipes", str(bad)], 2, f"{bad}:8: unknown metric key 'unit'"),
                             (["recipes", "nope"], 2, "unknown recipe 'nope'"),
                             (["recipes", "tensor-core", "--cc", "hopper"], 2, "--cc 'hopper'"),
                             (["recipes", "--format", "xml"], 2, "unknown format")):
        r = _runner().invoke(app, args)
        assert r.exit_code == code, (args, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and text in lines[0] and "Traceback" not in r.stderr, (args, r.stderr)
