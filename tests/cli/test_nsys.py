"""`profctl report` on nsys exports and `profctl nsys` option errors, through the real CLI (typer's CliRunner)."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app

DATA = Path(__file__).resolve().parent.parent / "data"


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.stdout, r.stderr


def _one_error_line(code: int, err: str) -> str:
    assert code != 0
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_report_sqlite_json_follows_schema(shared_fixture: Callable[[str], Path]) -> None:
    code, out, _ = _run("report", str(shared_fixture("attn.sqlite")), "--format", "json")
    assert code == 0
    d = json.loads(out)
    assert d["schema"] == "profctl.summary/1"
    assert d["sources"][0]["tool"] == "nsys"
    assert sum(k["count"] for k in d["kernels"] if k["extra"]["kind"] == "kernel") == 161
    assert all(k["nvtx_range"] is None for k in d["kernels"])
    assert {r["name"] for r in d["ranges"]} >= {"sdpa_flash.fwd.it0", "naive.bwd.it2"}


def test_report_by_range_adds_breakdown(shared_fixture: Callable[[str], Path]) -> None:
    code, out, _ = _run("report", str(shared_fixture("attn.sqlite")), "--format", "json", "--by-range")
    assert code == 0
    d = json.loads(out)
    per_range = [k for k in d["kernels"] if k["nvtx_range"]]
    assert any(k["nvtx_range"] == "sdpa_flash.fwd.it1" and k["short_name"] == "flash_fwd_kernel" for k in per_range)


def test_report_table_prints_kernels_and_ranges(shared_fixture: Callable[[str], Path]) -> None:
    code, out, _ = _run("report", str(shared_fixture("attn.sqlite")), "--format", "markdown", "--limit", "5")
    assert code == 0
    assert "## Kernels" in out and "## NVTX ranges" in out and "sdpa_math.fwd.it0" in out


def test_report_matches_recorded_nsys_stats(data_file: Callable[[str], Path]) -> None:
    """The profctl-made GPU capture against `nsys stats` 2025.3.1 output recorded on the same report
    (tests/data/README.md): every kernel row and every projected range row."""
    db = data_file("nsys_profctl_fwdbwd.sqlite")
    code, out, _ = _run("report", str(db), "--format", "json")
    assert code == 0
    d = json.loads(out)
    ks = {k["name"]: k for k in d["kernels"] if k["extra"]["kind"] == "kernel"}
    rows = _csv(DATA / "nsys_profctl_fwdbwd_stats" / "cuda_gpu_kern_sum.csv")
    assert len(rows) == len(ks) == 26
    for r in rows:
        k = ks[r["Name"]]
        assert k["count"] == int(r["Instances"])
        assert k["total_ns"] == float(r["Total Time (ns)"])
        assert (k["min_ns"], k["max_ns"]) == (float(r["Min (ns)"]), float(r["Max (ns)"]))
        for ours, col in (("avg_ns", "Avg (ns)"), ("med_ns", "Med (ns)"), ("std_ns", "StdDev (ns)")):
            assert k[ours] == pytest.approx(float(r[col]), abs=0.051)  # nsys prints one decimal
    proj = {r["extra"]["nsys_name"]: r for r in d["ranges"] if r["extra"]["proj_instances"]}
    prow = _csv(DATA / "nsys_profctl_fwdbwd_stats" / "nvtx_gpu_proj_sum.csv")
    assert len(prow) == len(proj) == 12
    for r in prow:
        x = proj[r["Range"]]
        e = x["extra"]
        assert e["proj_instances"] == int(r["Range Instances"])
        assert x["gpu_proj_total_ns"] == float(r["Total Proj Time (ns)"])
        assert e["proj_range_total_ns"] == float(r["Total Range Time (ns)"])
        assert x["gpu_ops"] == int(r["Total GPU Ops"])
        assert (e["proj_min_ns"], e["proj_max_ns"]) == (float(r["Proj Min (ns)"]), float(r["Proj Max (ns)"]))
        for ours, col in (("proj_med_ns", "Proj Med (ns)"), ("proj_std_ns", "Proj StdDev (ns)"),
                          ("avg_level", "Avg Range Lvl"), ("avg_children", "Avg Num Child")):
            assert e[ours] == pytest.approx(float(r[col]), abs=0.051)
    mem = {k["name"]: k for k in d["kernels"] if k["extra"]["kind"] in ("memcpy", "memset")}
    for r in _csv(DATA / "nsys_profctl_fwdbwd_stats" / "cuda_gpu_mem_time_sum.csv"):
        assert mem[r["Operation"]]["count"] == int(r["Count"])
        assert mem[r["Operation"]]["total_ns"] == float(r["Total Time (ns)"])


def test_shared_fixture_matches_recorded_nsys_stats(shared_fixture: Callable[[str], Path]) -> None:
    """attn.sqlite (not written by profctl) against `nsys stats` run on its .nsys-rep on the GPU machine."""
    code, out, _ = _run("report", str(shared_fixture("attn.sqlite")), "--format", "json")
    assert code == 0
    d = json.loads(out)
    ks = {k["name"]: k for k in d["kernels"] if k["extra"]["kind"] == "kernel"}
    rows = _csv(DATA / "attn_nsys_stats" / "cuda_gpu_kern_sum.csv")
    assert len(rows) == len(ks) == 34
    for r in rows:
        assert ks[r["Name"]]["count"] == int(r["Instances"])
        assert ks[r["Name"]]["total_ns"] == float(r["Total Time (ns)"])
        assert ks[r["Name"]]["med_ns"] == pytest.approx(float(r["Med (ns)"]), abs=0.051)
    proj = {r["extra"]["nsys_name"]: r for r in d["ranges"] if r["extra"]["proj_instances"]}
    prow = _csv(DATA / "attn_nsys_stats" / "nvtx_gpu_proj_sum.csv")
    assert {r["Range"] for r in prow} == set(proj)  # no `.bwd.` range: nsys projects none either
    for r in prow:
        assert proj[r["Range"]]["gpu_proj_total_ns"] == float(r["Total Proj Time (ns)"])
        assert proj[r["Range"]]["gpu_ops"] == int(r["Total GPU Ops"])


@pytest.mark.parametrize("content, expect", [
    (b"not a report at all\n", "not a report profctl knows"),
    (b"SQLite format 3\x00" + b"\x00" * 60, "truncated"),
])
def test_report_bad_files_one_line(tmp_path: Path, content: bytes, expect: str) -> None:
    p = tmp_path / "bad.sqlite"
    p.write_bytes(content)
    code, _, err = _run("report", str(p))
    assert expect in _one_error_line(code, err)


def test_report_foreign_sqlite_one_line(tmp_path: Path) -> None:
    import sqlite3

    p = tmp_path / "foreign.sqlite"
    c = sqlite3.connect(p)
    c.execute("CREATE TABLE t (x)")
    c.commit()
    c.close()
    code, _, err = _run("report", str(p), "--format", "json")
    assert "not an Nsight Systems export" in _one_error_line(code, err)
    assert code == 5


def test_report_nsys_rep_without_nsys_says_so(shared_fixture: Callable[[str], Path], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from profctl.tools import nsys as adapter

    if adapter.candidates():
        pytest.skip("nsys is installed here; the GPU tests cover exporting")
    rep = shared_fixture("attn.nsys-rep")  # a copy in tmp_path, no .sqlite beside it
    code, _, err = _run("report", str(rep))
    line = _one_error_line(code, err)
    assert "needs nsys" in line and "nsys export --type sqlite" in line
    assert code == 3


def test_report_nsys_rep_uses_fresh_export_beside_it(shared_fixture: Callable[[str], Path],
                                                     tmp_path: Path) -> None:
    rep = shared_fixture("attn.nsys-rep")
    beside = shared_fixture("attn.sqlite")  # copied after the report: newer, so used instead of exporting
    os.utime(beside, ns=(rep.stat().st_mtime_ns + 10**9,) * 2)
    code, out, _ = _run("report", str(rep), "--format", "json")
    assert code == 0
    assert json.loads(out)["sources"][0]["path"] == str(tmp_path / "attn.sqlite")


@pytest.mark.parametrize("args, expect", [
    (["--trace", "nvtx,osrt"], "--trace must include cuda"),
    (["--trace", "cuda,bogus"], "unknown bogus"),
    (["--capture", "sometimes"], "--capture 'sometimes'"),
    (["--format", "yaml"], "unknown format"),
    (["--timeout", "0"], "--timeout must be positive"),
])
def test_nsys_option_errors(args: list[str], expect: str) -> None:
    code, _, err = _run("nsys", "--backend", "sdpa-flash", *args)
    assert expect in _one_error_line(code, err)
    assert code == 2


def test_nsys_on_cpu_refuses() -> None:
    code, _, err = _run("nsys", "--device", "cpu", "--backend", "sdpa-math")
    assert "needs a CUDA GPU" in _one_error_line(code, err)
