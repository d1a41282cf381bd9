"""`profctl torch` on a GPU: only the measured iterations are recorded, and forward and backward kernels land
in the ranges of profctl's NVTX scheme (backward ones launched from autograd's thread included)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app

pytestmark = pytest.mark.gpu

ITERS = 3


def _run(tmp_path: Path, *extra: str) -> dict:
    r = CliRunner().invoke(app, [
        "torch", "--device", "cuda", "-b", "sdpa-flash,eager", "--pass", "fwd+bwd", "--seqlen", "512",
        "--heads", "4", "--head-dim", "64", "--dtype", "bf16", "--warmup", "2", "--iters", str(ITERS),
        "--no-check", "--format", "json", "--reports", str(tmp_path / "reports"), *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _rows(s: dict, pattern: str, suffix: str) -> list[dict]:
    return [k for k in s["kernels"] if pattern in k["name"] and (k["nvtx_range"] or "").endswith(suffix)]


@pytest.mark.parametrize("nvtx", ["--nvtx", "--no-nvtx"])
def test_torch_cuda_measured_iterations_and_ranges(tmp_path: Path, nvtx: str) -> None:
    s = _run(tmp_path, nvtx)
    assert s["meta"]["gpu_activity"] is True
    # FlashAttention's forward is flash_fwd_kernel or, on small shapes, flash_fwd_splitkv_kernel (+ a combine)
    fwd = [k for k in _rows(s, "pytorch_flash::flash_fwd", "/measure/sdpa-flash.fwd") if "combine" not in k["name"]]
    assert sum(k["count"] for k in fwd) == ITERS, [k["name"][:60] for k in s["kernels"]]  # no warm-up launches
    bwd = _rows(s, "flash_bwd_dq_dk_dv", "/measure/sdpa-flash.bwd")
    assert sum(k["count"] for k in bwd) == ITERS
    assert all(k["extra"]["pass"] == {"bwd": k["count"]} for k in bwd)
    soft = _rows(s, "softmax", "/measure/eager.fwd")
    assert sum(k["count"] for k in soft) == ITERS
    unattributed = [k for k in s["kernels"] if not k["nvtx_range"]]
    assert unattributed == []
    ranges = {r["name"]: r for r in s["ranges"]}
    bwd_range = ranges["sdpa-flash.bwd"]  # one row per range text, as nsys groups them; paths in extra
    assert any(p.endswith("/measure/sdpa-flash.bwd") for p in bwd_range["extra"]["paths"])
    assert bwd_range["gpu_ops"] and bwd_range["gpu_proj_total_ns"] > 0
    run_dir = Path(s["meta"]["run_dir"])
    assert (run_dir / "trace.json.gz").stat().st_size > 0
    assert "flash" in (run_dir / "trace.key_averages.txt").read_text()
