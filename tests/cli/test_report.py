"""`profctl report`: the per-kernel summary it always printed, and the comparison view (tables, CSV, JSON, HTML)
over reports of several tools, bench JSON files and run directories."""

from __future__ import annotations

import base64
import csv
import gzip
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app

DATA = Path(__file__).resolve().parent.parent / "data"
FIXTURE_SHAPE = "b4,sq2048,skv2048,h16,kv16,d128,bf16,causal,bhsd"
runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, ["report", *args])


def one_line_error(res, code: int, needle: str) -> None:
    assert res.exit_code == code, res.output
    assert "Traceback" not in res.output
    err = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("profctl: error:") and needle in err[0], res.output


@pytest.fixture
def fixtures(shared_fixture) -> list[Path]:
    return [shared_fixture(n) for n in ("attn.sqlite", "attn_tc.ncu-rep", "torch_trace.json.gz")]


@pytest.fixture
def bench_json(tmp_path: Path) -> Path:
    p = tmp_path / "bench.json"
    with gzip.open(DATA / "bench_h100_s4096.json.gz", "rb") as f:
        p.write_bytes(f.read())
    return p


# ------------------------------------------------------------------------------------------------ kept
def test_single_report_keeps_summary_view(fixtures):
    res = run(str(fixtures[0]), "-f", "json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["schema"] == "profctl.summary/1" and len(d["kernels"]) == 37
    res = run(str(fixtures[0]), "-f", "markdown", "--limit", "3")
    assert res.exit_code == 0 and res.output.startswith("## Kernels")


# ------------------------------------------------------------------------------------------------ compare
def test_three_tools_compare_markdown(fixtures):
    res = run(*map(str, fixtures), "-f", "markdown", "--shape", FIXTURE_SHAPE)
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.startswith("# profctl comparison")
    assert "H100 SXM5" in out and "## eager: time by kernel class" in out
    line = next(ln for ln in out.splitlines() if "| sdpa-flash |" in ln and "| fwd |" in ln and "b4 s2048" in ln)
    assert "| 0.2737 |" in line and "| flash_fwd_kernel |" in line


def test_compare_csv_and_json(fixtures, tmp_path):
    out = tmp_path / "cmp.csv"
    res = run(*map(str, fixtures), "-f", "csv", "-o", str(out))
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    flash = next(r for r in rows if r["backend"] == "sdpa-flash" and r["pass"] == "fwd")
    assert float(flash["time_ms"]) == pytest.approx(0.273669)
    assert flash["tools"] == "bench" or set(flash["tools"].split()) == {"ncu", "nsys", "torch"}
    res = run(*map(str, fixtures), "-f", "json", "--shape", FIXTURE_SHAPE)
    d = json.loads(res.output)
    assert d["schema"] == "profctl.comparison/1"
    k = next(k for k in d["kernels"] if k["short_name"] == "flash_fwd_kernel")
    assert set(k["tools"]) == {"nsys", "ncu", "torch"} and k["match"] == "exact"
    assert d["roofline"] and d["peak"]["model"] == "H100 SXM5"


def test_bench_json_input(bench_json):
    res = run(str(bench_json), "-f", "markdown", "--gpu", "NVIDIA H100 80GB HBM3")
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if "| fa4 |" in ln and "causal" not in ln)
    assert "| 0.3884 |" in line and "| 707.7 |" in line and "| 8.27x |" in line and "| 160 MiB |" in line


def test_bench_json_table(bench_json):
    res = run(str(bench_json))
    assert res.exit_code == 0, res.output
    assert "Backends" in res.output and "sdpa-cudnn" in res.output


def test_html_from_fixtures(fixtures, tmp_path):
    out = tmp_path / "r.html"
    res = run(*map(str, fixtures), "--format", "html", "-o", str(out), "--title", "fixture report",
              "--shape", FIXTURE_SHAPE)
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "<title>fixture report</title>" in text
    imgs = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)
    assert len(imgs) == 5
    import matplotlib.image as mpimg

    for b in imgs:
        img = mpimg.imread(io.BytesIO(base64.b64decode(b)), format="png")
        assert img.shape[0] > 200 and img.shape[1] > 300 and img[..., :3].std() > 0.05


def test_run_directories(tmp_path, bench_json, shared_fixture):
    """A run directory is read by the files profctl writes there; a directory of run directories by its children."""
    runs = tmp_path / "reports"
    b = runs / "20261121T000000Z-bench-aaaaaa"
    b.mkdir(parents=True)
    shutil.copy(bench_json, b / "bench.json")
    (b / "manifest.json").write_text(json.dumps({"kind": "bench", "device": {"name": "NVIDIA H100 80GB HBM3"}}))
    n = runs / "20261121T000001Z-nsys-bbbbbb"
    n.mkdir()
    shutil.copy(shared_fixture("attn.sqlite"), n / "profile.sqlite")
    res = run(str(runs), "-f", "json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["device"] == "NVIDIA H100 80GB HBM3"
    tools = {t for r in d["rows"] for t in r["tools"]}
    assert tools == {"bench", "nsys"}
    res = run(str(b), "-f", "csv")
    assert res.exit_code == 0 and res.output.startswith("shape_key,")


def test_cpu_bench_and_torch_run(tmp_path):
    """The no-GPU path: a CPU `profctl bench` and `profctl torch` run, then the HTML report over both."""
    root = tmp_path / "runs"
    common = ["--device", "cpu", "-s", "64,128", "--heads", "2", "-d", "16", "--iters", "2", "--warmup", "1"]
    r1 = runner.invoke(app, ["bench", *common, "--reports", str(root), "-q", "--json", str(tmp_path / "b.json")])
    assert r1.exit_code == 0, r1.output
    r2 = runner.invoke(app, ["torch", *common, "--reports", str(root), "-f", "json"])
    assert r2.exit_code == 0, r2.output
    out = tmp_path / "cpu.html"
    res = run(str(root), "-f", "html", "-o", str(out))
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert text.count("data:image/png;base64,") >= 3
    assert "sdpa-flash" in text and "tools: torch, bench" in text


def test_errors_are_one_line(tmp_path, bench_json):
    one_line_error(run(str(tmp_path / "nope.sqlite")), 5, "no such file")
    one_line_error(run(str(bench_json), "-f", "pdf"), 2, "unknown format")
    one_line_error(run(str(bench_json), "--view", "summary"), 2, "bench rows have no per-kernel summary")
    one_line_error(run(str(bench_json), "--shape", "b1,zz"), 2, "--shape")
    empty = tmp_path / "empty"
    empty.mkdir()
    one_line_error(run(str(empty)), 5, "no bench.json")
    bad = tmp_path / "bad.json"
    bad.write_text('[{"backend": "fa4", "status": "ok"}]')
    one_line_error(run(str(bad)), 5, "lacks")


def test_pivot_published_table(bench_json):
    res = run(str(bench_json), "--pivot", "tflops,ms", "-f", "markdown")
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert head[:9] == ["batch", "seqlen_q", "seqlen_kv", "heads", "kv_heads", "head_dim", "dtype", "causal", "pass"]
    assert head.index("fa4 TFLOP/s") < head.index("eager TFLOP/s")
    body = [dict(zip(head, (c.strip() for c in ln.strip("|").split("|")), strict=True)) for ln in lines[2:]]
    assert len(body) == 2  # causal and non-causal
    full = next(r for r in body if r["causal"] == "no")
    assert full["fa4 TFLOP/s"] == "707.7" and full["fa4 ms"] == "0.3884" and full["flash-attn ms"] == "-"
    res = run(str(bench_json), "--pivot", "memory", "-f", "csv")
    assert res.exit_code == 0 and "sdpa-math MiB" in res.output.splitlines()[0]
    one_line_error(run(str(bench_json), "--pivot", "watts"), 2, "--pivot")


def test_tokens_keeps_the_strong_scaling_diagonal(bench_json, tmp_path):
    rows = json.loads(bench_json.read_text())
    more = [dict(r, batch=b, seqlen_q=s, seqlen_kv=s) for r in rows for b, s in ((1, 4096), (2, 2048), (2, 4096))]
    p = tmp_path / "strong.json"
    p.write_text(json.dumps(more))
    res = run(str(p), "--tokens", "4096", "--pivot", "ms", "-f", "csv")
    assert res.exit_code == 0, res.output
    got = list(csv.DictReader(io.StringIO(res.output)))
    assert sorted((r["batch"], r["seqlen_q"]) for r in got) == [("1", "4096"), ("1", "4096"), ("2", "2048"),
                                                                ("2", "2048")]
    one_line_error(run(str(p), "--tokens", "7"), 2, "no bench row")
