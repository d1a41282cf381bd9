"""`profctl torch` end to end on the CPU, and `profctl report` on torch traces, through the real CLI."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app

ITERS = 2


def _one_line_error(r: object) -> None:
    assert r.exit_code != 0  # type: ignore[attr-defined]
    err = r.stderr.strip().splitlines()  # type: ignore[attr-defined]
    assert len(err) == 1 and err[0].startswith("profctl: error:"), err
    assert "Traceback" not in r.stderr + r.stdout  # type: ignore[attr-defined]


def test_torch_cpu_end_to_end(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, [
        "torch", "--device", "cpu", "-b", "sdpa-flash,eager", "--seqlen", "64", "--heads", "2",
        "--head-dim", "16", "--pass", "fwd+bwd", "--warmup", "1", "--iters", str(ITERS), "--shapes",
        "--format", "json", "--reports", str(tmp_path / "reports")])
    assert r.exit_code == 0, r.output
    assert "no GPU activity" in r.stderr
    s = json.loads(r.stdout)
    run_dir = Path(s["meta"]["run_dir"])
    assert run_dir.parent == tmp_path / "reports" and "-torch-" in run_dir.name
    for f in ("trace.json.gz", "trace.key_averages.txt", "summary.json", "manifest.json", "torch.log"):
        assert (run_dir / f).is_file(), f
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "complete"
    assert "aten::bmm" in (run_dir / "trace.key_averages.txt").read_text()

    # the trace holds the measured iterations only: count the raw events independently
    with gzip.open(run_dir / "trace.json.gz", "rt") as f:
        ev = json.load(f)["traceEvents"]
    fwd_ranges = [e for e in ev if e.get("cat") == "user_annotation" and e["name"] == "eager.fwd"]
    assert len(fwd_ranges) == ITERS
    assert any("Input Dims" in e.get("args", {}) for e in ev if e.get("cat") == "cpu_op")  # --shapes

    # a CPU run: no kernels, its CPU ops (self times) in cpu_ops
    assert s["kernels"] == [] and s["meta"]["holds"] == "cpu_ops_only"
    rows = {(k["name"], k["nvtx_range"]): k for k in s["cpu_ops"]}
    case = next(k["nvtx_range"].split("/")[0] for k in s["cpu_ops"]
                if (k["nvtx_range"] or "").startswith("eager["))
    bmm = rows[("aten::bmm", f"{case}/measure/eager.fwd")]
    assert bmm["count"] == 2 * ITERS  # two matmuls per forward
    sdpa = [k for k in s["cpu_ops"] if k["op_class"] == "flash_fwd" and "sdpa-flash.fwd" in k["nvtx_range"]]
    assert sdpa and all(k["count"] == ITERS for k in sdpa)
    names = {r["name"]: r for r in s["ranges"]}
    assert names["eager.fwd"]["count"] == ITERS and names["measure"]["count"] == 2

    # read back: the table and the CSV show the CPU ops (there being no kernel), the note said once
    r = CliRunner().invoke(app, ["report", str(run_dir / "trace.json.gz"), "--limit", "5"])
    assert r.exit_code == 0, r.output
    assert "CPU ops (self time)" in r.stdout and "aten::bmm" in r.stdout
    assert r.stderr.count("no GPU activity") <= 1
    r = CliRunner().invoke(app, ["report", str(run_dir / "trace.json.gz"), "-f", "csv"])
    header, *lines = r.stdout.splitlines()
    assert header.startswith("tool,name,op_class") and any(ln.startswith("torch,aten::bmm,gemm,") for ln in lines)


def test_report_reads_a_foreign_trace(shared_fixture: Callable[[str], Path]) -> None:
    p = shared_fixture("torch_trace.json.gz")
    r = CliRunner().invoke(app, ["report", str(p), "--format", "json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert sum(k["count"] for k in s["kernels"]) == 69
    r = CliRunner().invoke(app, ["report", str(p), "--format", "markdown"])
    assert r.exit_code == 0 and "flash_fwd_kernel" in r.stdout


@pytest.mark.parametrize(("content", "gz"), [
    (b"{ not json at all", False),
    (b'{"hello": "world"}', False),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1}, {"ph": "X", "ca', False),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1}, {"ph": "X", "ca', True),
])
def test_report_bad_traces_are_one_line_errors(tmp_path: Path, content: bytes, gz: bool) -> None:
    p = tmp_path / ("bad.json.gz" if gz else "bad.json")
    p.write_bytes(gzip.compress(content) if gz else content)
    r = CliRunner().invoke(app, ["report", str(p)])
    _one_line_error(r)


def test_report_truncated_gzip_is_one_line(shared_fixture: Callable[[str], Path], tmp_path: Path) -> None:
    data = shared_fixture("torch_trace.json.gz").read_bytes()
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[: len(data) * 2 // 3])
    r = CliRunner().invoke(app, ["report", str(p)])
    _one_line_error(r)
    assert "truncated" in r.stderr


def test_torch_bad_options_are_one_line(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["torch", "--device", "cpu", "--format", "yaml", "--reports", str(tmp_path)])
    _one_line_error(r)
    assert r.exit_code == 2
    r = CliRunner().invoke(app, ["torch", "--device", "cpu", "--iters", "0", "--reports", str(tmp_path)])
    _one_line_error(r)
