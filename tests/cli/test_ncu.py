"""`profctl ncu` and `profctl report` on ncu files through typer's CliRunner, on this CPU-only machine: every
error before ncu runs, and the reports read back. The profiling itself runs in tests/gpu/test_ncu_gpu.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app

Get = Callable[[str], Path]


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        return CliRunner()


def _one_line_error(args: list[str], code: int, text: str, env: dict[str, str] | None = None) -> str:
    r = _runner().invoke(app, args, env=env)
    assert r.exit_code == code, (args, r.exit_code, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert text in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def fake_ncu(tmp_path: Path) -> Path:
    """A stand-in that only answers --version: enough to get past find(); it never profiles."""
    p = tmp_path / "ncu"
    p.write_text("#!/bin/sh\necho 'Version 2025.3.1.0'\n")
    p.chmod(0o755)
    return p


def test_ncu_option_errors(tmp_path: Path, fake_ncu: Path) -> None:
    env = {"PROFCTL_NCU": str(fake_ncu)}
    _one_line_error(["ncu", "--recipe", "nope"], 2, "unknown recipe 'nope'", env)
    _one_line_error(["ncu", "--replay-mode", "sometimes"], 2, "--replay-mode 'sometimes'", env)
    _one_line_error(["ncu", "--clock-control", "max"], 2, "--clock-control 'max'", env)
    _one_line_error(["ncu", "--cache-control", "some"], 2, "--cache-control 'some'", env)
    _one_line_error(["ncu", "--launch-count", "0"], 2, "--launch-count must be positive", env)
    _one_line_error(["ncu", "--kernel", "flash(("], 2, "not a valid regular expression", env)
    _one_line_error(["ncu", "--no-nvtx"], 2, "NVTX", env)
    _one_line_error(["ncu", "--format", "xml"], 2, "unknown format", env)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsummary: s\nmetrics:\n  - name: not-a-metric\n    label: l\n    means: m\n"
                   "    read: r\n")
    _one_line_error(["ncu", "--recipe", str(bad)], 2, f"{bad}:4:", env)


def test_ncu_not_found_and_no_gpu(tmp_path: Path, fake_ncu: Path) -> None:
    _one_line_error(["ncu"], 3, "PROFCTL_NCU", {"PROFCTL_NCU": str(tmp_path / "missing")})
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this test is about a machine without a GPU")
    _one_line_error(["ncu", "--seqlen", "64"], 2, "no CUDA GPU", {"PROFCTL_NCU": str(fake_ncu)})


def test_report_reads_ncu_files(shared_fixture: Get) -> None:
    pytest.importorskip("ncu_report")
    for name in ("attn_tc.ncu-rep", "attn_tc_raw.csv", "flash_sol.ncu-rep", "flash_sol_details.csv"):
        r = _runner().invoke(app, ["report", str(shared_fixture(name)), "--format", "json", "--by-range"])
        assert r.exit_code == 0, (name, r.stderr)
        doc = json.loads(r.stdout)
        assert doc["kernels"] and all(k["tool"] == "ncu" for k in doc["kernels"])
    a = json.loads(_runner().invoke(app, ["report", str(shared_fixture("attn_tc.ncu-rep")), "-f", "json"]).stdout)
    b = json.loads(_runner().invoke(app, ["report", str(shared_fixture("attn_tc_raw.csv")), "-f", "json"]).stdout)
    ka = {(k["short_name"], k["total_ns"]) for k in a["kernels"]}
    assert ka == {(k["short_name"], k["total_ns"]) for k in b["kernels"]} and len(ka) == 10


def test_report_errors_on_bad_ncu_files(shared_fixture: Get, tmp_path: Path) -> None:
    pytest.importorskip("ncu_report")
    data = shared_fixture("flash_sol.ncu-rep").read_bytes()
    cut = tmp_path / "cut.ncu-rep"
    cut.write_bytes(data[: len(data) // 3])
    _one_line_error(["report", str(cut)], 5, "truncated Nsight Compute report")
    future = tmp_path / "future.ncu-rep"
    future.write_bytes(data.replace(b"2025.3.1.0", b"2099.1.0.0"))
    _one_line_error(["report", str(future)], 5, "newer than this reader")
    csv = tmp_path / "cut.csv"
    text = shared_fixture("attn_tc_raw.csv").read_text()
    csv.write_text(text[: len(text) - 3000])
    _one_line_error(["report", str(csv)], 5, "truncated ncu CSV")
