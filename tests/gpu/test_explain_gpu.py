"""The "why and where" path on a real GPU with the real ncu (pytest -m gpu tests/gpu): profctl ncu with the
stalls and explain recipes on a program of one's own and on built-in backends, then the source view and explain
on what it wrote. Clocks are never touched (--clock-control none)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app
from profctl.tools import ncu as adapter

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]


def _ncu_or_skip() -> None:
    try:
        adapter.find()
    except Exception as e:  # pragma: no cover - depends on the machine
        pytest.skip(f"ncu not available: {e}")


def _run(*args: str) -> tuple[int, str, str]:
    try:
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        runner = CliRunner()
    r = runner.invoke(app, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_stalls_recipe_on_a_program_finds_the_planted_line(tmp_path: Path) -> None:
    _ncu_or_skip()
    reports = str(tmp_path / "reports")
    script = str(ROOT / "tests" / "data" / "planted" / "planted_triton.py")
    code, out, err = _run("ncu", "--recipe", "stalls", "--clock-control", "none", "--kernel", "row_stats",
                          "--reports", reports, "--", sys.executable, script)
    assert code == 0, err
    assert "acc += tl.sum(x * (r + 1.0), axis=1)" in out  # the source view printed after the tables
    code, out, err = _run("report", "latest", "--reports", reports, "--view", "source", "-f", "json")
    assert code == 0, err
    k = json.loads(out)["kernels"][0]
    assert k["base_name"] == "row_stats"
    assert "PLANT: tl.sum" in k["lines"][0]["text"]
    assert any("standard.py" in v for v in k["lines"][0]["via"])


def test_explain_recipe_on_two_backends_then_explain_latest(tmp_path: Path) -> None:
    _ncu_or_skip()
    reports = str(tmp_path / "reports")
    code, _, err = _run("ncu", "--recipe", "explain", "--clock-control", "none", "-b", "triton,sdpa-cudnn",
                        "-s", "1024", "--heads", "8", "--reports", reports)
    assert code == 0, err
    code, out, err = _run("explain", "latest", "--reports", reports, "--kernel", "_fwd_kernel", "--vs", "cudnn",
                          "-f", "json")
    assert code == 0, err
    doc = json.loads(out)
    total = sum(f["us"] for f in doc["factors"]) + doc["remainder_us"]
    gap = (doc["a"]["duration_ns"] - doc["b"]["duration_ns"]) / 1e3
    assert total == pytest.approx(gap, abs=max(0.5, 0.02 * abs(gap)))
    assert doc["a"]["roofs"]["binding"] in ("tensor", "sfu", "dram")  # the shape came from profctl's NVTX range
    assert doc["a"]["lines"] and doc["b"]["instructions"]
