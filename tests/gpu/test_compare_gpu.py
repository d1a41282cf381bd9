"""`profctl compare` on the GPU: runs of one workload compare as unchanged (three runs a side: the run is the unit of
noise; one run a side never fails the gate and says the runs limit it); sdpa-math run under the label of an
sdpa-flash run is a large regression that fails the CI gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app

pytestmark = pytest.mark.gpu

SHAPE = ["--device", "cuda", "--seqlen", "4096", "--heads", "32", "--head-dim", "128", "--dtype", "bf16",
         "--warmup", "10", "--iters", "60", "--baseline", "none", "--no-check", "-q"]


def _bench(reports: Path, backend: str) -> Path:
    before = set(reports.iterdir()) if reports.exists() else set()
    r = CliRunner().invoke(app, ["bench", *SHAPE, "--backend", backend, "--label", "attn",
                                 "--reports", str(reports)])
    assert r.exit_code == 0, r.output
    (new,) = set(reports.iterdir()) - before
    m = json.loads((new / "manifest.json").read_text())
    assert m["status"] == "complete" and m["label"] == "attn"
    assert m["device"]["sm_count"] > 0 and m["device"]["cuda"]
    return new


def _compare(a: Path | str, b: Path | str) -> tuple[int, dict]:
    r = CliRunner().invoke(app, ["compare", str(a), str(b), "--format", "json", "--fail-if-slower", "5%"])
    return r.exit_code, json.loads(r.stdout)


def test_same_workload_twice_is_unchanged_and_math_is_a_regression(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    a, *more_a = [_bench(reports, "sdpa-flash") for _ in range(3)]
    b, *more_b = [_bench(reports, "sdpa-flash") for _ in range(3)]
    code, doc = _compare(a, b)
    (row,) = doc["rows"]
    assert code == 0, doc
    assert row["verdict"] in ("unchanged", "inconclusive"), row
    assert row["runs_base"] == row["runs_new"] == 1 and row["run_noise_measured"] is None
    assert row["ci_lo"] <= row["ratio"] <= row["ci_hi"]

    code, doc = _compare(",".join(map(str, [a, *more_a])), ",".join(map(str, [b, *more_b])))
    (row,) = doc["rows"]
    assert code == 0, doc
    assert row["runs_base"] == row["runs_new"] == 3 and row["run_noise_measured"] is not None, row
    assert row["verdict"] == "unchanged", row

    c = _bench(reports, "sdpa-math")
    code, doc = _compare(a, c)
    (row,) = doc["rows"]
    assert code == 1, doc
    assert row["verdict"] == "slower" and row["ratio"] > 1.5, row
    assert (row["backend_base"], row["backend_new"]) == ("sdpa-flash", "sdpa-math")
