"""Bench rows side by side per GPU: runs of two machines, an older run that does not name its GPU."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from typer.testing import CliRunner

from profctl.analysis.by_gpu import gpu_of, table
from profctl.cli import app

DATA = Path(__file__).resolve().parents[1] / "data"


def _rows() -> list[dict]:
    return [r for r in json.loads(gzip.decompress((DATA / "bench_h100_s4096.json.gz").read_bytes()))
            if r["status"] == "ok"]


def _on(rows: list[dict], name: str, host: str, index: int, scale: float) -> list[dict]:
    return [{**r, "gpu_name": name, "host": host, "gpu_index": index, "median_ms": r["median_ms"] * scale,
             "tflops": r["tflops"] / scale} for r in rows]


def test_columns_per_gpu_and_per_model() -> None:
    base = _rows()
    rows = _on(base, "NVIDIA H200", "b", 0, 0.8) + _on(base, "NVIDIA H200", "b", 1, 0.82) + \
        _on(base, "NVIDIA A100-SXM4-80GB", "a", 0, 2.0) + base
    gpus, t = table(rows, devices=[None] * (3 * len(base)) + ["NVIDIA H100 80GB HBM3"] * len(base))
    assert gpus == ["NVIDIA H200 b:0", "NVIDIA H200 b:1", "NVIDIA A100-SXM4-80GB a:0", "NVIDIA H100 80GB HBM3"]
    assert len(t) == len(base)
    first = t[0]
    assert first[f"{gpus[2]} ms"] == base[0]["median_ms"] * 2.0 and first[f"{gpus[3]} ms"] == base[0]["median_ms"]
    models, t2 = table(rows, per="model", devices=[None] * (3 * len(base)) + ["H100"] * len(base))
    assert models == ["NVIDIA H200", "NVIDIA A100-SXM4-80GB", "H100"]
    assert abs(t2[0]["NVIDIA H200 ms"] - base[0]["median_ms"] * 0.81) < 1e-9  # the median of its two GPUs


def test_a_row_without_gpu_fields_uses_the_run_device() -> None:
    r = {"device": "cuda", "status": "ok"}
    assert gpu_of(r, device="NVIDIA H100") == "NVIDIA H100" and gpu_of({"device": "cpu"}) == "cpu"


def test_report_by_gpu_reads_runs_of_two_machines(tmp_path: Path) -> None:
    base = _rows()
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_on(base, "NVIDIA H200", "b", 0, 0.8)))
    b.write_text(json.dumps(_on(base, "NVIDIA A100-SXM4-80GB", "a", 3, 2.0)))
    r = CliRunner().invoke(app, ["report", str(a), str(b), "--by", "gpu", "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["gpus"] == ["NVIDIA H200 b:0", "NVIDIA A100-SXM4-80GB a:3"] and len(out["rows"]) == len(base)
    r = CliRunner().invoke(app, ["report", str(a), str(b), "--by", "model", "--format", "markdown"])
    assert r.exit_code == 0 and "| NVIDIA H200 ms |" in r.stdout
    r = CliRunner().invoke(app, ["report", str(a), "--by", "card"])
    assert r.exit_code == 2 and "--by 'card'" in r.output
