"""`profctl nsys` end to end on a GPU, checked against `nsys stats` on the same report.

Run on the GPU machine: PROFCTL_NSYS=$NSYS python3 -m pytest -m gpu tests/gpu/test_nsys_gpu.py
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app
from profctl.readers import nsys_sqlite
from profctl.tools import nsys as adapter

pytestmark = pytest.mark.gpu


def _stats_csv(exe: Path, report: Path, name: str, tmp: Path) -> list[dict[str, str]]:
    """`nsys stats` on a copy of `report` (it writes its own .sqlite beside the report it reads)."""
    import shutil

    report = Path(shutil.copy(report, tmp / report.name))
    out = tmp / "stats"
    subprocess.run([str(exe), "stats", "--force-export=true", "--format=csv", f"--output={out}",
                    f"--report={name}", str(report)], check=True, capture_output=True, timeout=300)
    text = (tmp / f"stats_{name}.csv").read_text()
    return list(csv.DictReader(io.StringIO(text)))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("nsys")
    res = CliRunner().invoke(app, ["nsys", "--backend", "sdpa-flash,eager", "--seqlen", "512", "--heads", "8",
                                   "--pass", "fwd+bwd", "--warmup", "2", "--iters", "3", "--reports", str(tmp),
                                   "--format", "markdown"])
    assert res.exit_code == 0, res.output
    dirs = [d for d in tmp.iterdir() if d.is_dir()]
    assert len(dirs) == 1
    return dirs[0]


def test_run_dir_has_report_log_and_summary(run_dir: Path) -> None:
    assert (run_dir / "profile.nsys-rep").stat().st_size > 0
    assert (run_dir / "profile.sqlite").stat().st_size > 0
    assert "nsys" in (run_dir / "nsys.log").read_text()
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["schema"] == "profctl.summary/1"
    classes = {k["kernel_class"] for k in s["kernels"]}
    assert {"flash_fwd", "flash_bwd"} <= classes


def test_kernel_table_equals_nsys_stats(run_dir: Path, tmp_path: Path) -> None:
    exe = adapter.find()
    rows = _stats_csv(exe, run_dir / "profile.nsys-rep", "cuda_gpu_kern_sum", tmp_path)
    summary = nsys_sqlite.read(run_dir / "profile.sqlite")
    ours = {k.name: k for k in summary.kernels if k.extra.get("kind") == "kernel"}
    assert len(rows) == len(ours)
    for r in rows:
        k = ours[r["Name"]]
        assert k.count == int(r["Instances"])
        assert k.total_ns == pytest.approx(float(r["Total Time (ns)"]), abs=0.5)
        assert k.med_ns == pytest.approx(float(r["Med (ns)"]), abs=0.5)
        assert k.min_ns == float(r["Min (ns)"]) and k.max_ns == float(r["Max (ns)"])
        assert k.std_ns == pytest.approx(float(r["StdDev (ns)"]), abs=0.5)


def test_backward_ranges_project_backward_kernels(run_dir: Path) -> None:
    """profctl pushes `<backend>.bwd` on autograd's thread too, so the backward kernels project into it."""
    from profctl.nvtx import parse_range

    s = nsys_sqlite.read(run_dir / "profile.sqlite", by_range=True)
    keys = [(k, parse_range(k.nvtx_range)) for k in s.kernels]
    bwd = [k for k, key in keys if key is not None and (key.backend, key.pass_) == ("sdpa-flash", "bwd")]
    assert any(k.kernel_class == "flash_bwd" and "borrowed_launches" not in k.extra for k in bwd)
    r = next(r for r in s.ranges if r.name == "sdpa-flash.bwd" and r.domain == "profctl")
    assert r.gpu_ops and r.gpu_ops > 0


def test_window_keeps_only_measured_iterations(run_dir: Path) -> None:
    s = nsys_sqlite.read(run_dir / "profile.sqlite", window="profiler-api")
    fwd = next(k for k in s.kernels if k.kernel_class == "flash_fwd")
    assert fwd.count == 3  # --iters 3 of sdpa-flash; warm-up and setup launches are outside the windows
