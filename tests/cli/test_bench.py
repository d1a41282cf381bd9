"""`profctl bench` through typer's CliRunner, on the CPU with tiny shapes."""

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app

TINY = ["--device", "cpu", "--seqlen", "32,64", "--heads", "2", "--head-dim", "16", "--iters", "3", "--warmup", "1"]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_bench_json_rows(runner: CliRunner, tmp_path: Path) -> None:
    r = runner.invoke(app, ["bench", *TINY, "--backend", "sdpa-flash,sdpa-cudnn", "--causal", "false,true",
                            "--json", "-", "--reports", str(tmp_path)])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    # 2 seqlens x 2 masks x (2 backends + the eager baseline added for speedups)
    assert len(rows) == 12
    assert {row["backend"] for row in rows} == {"sdpa-flash", "sdpa-cudnn", "eager"}
    for row in rows:
        for key in ("backend", "batch", "seqlen_q", "seqlen_kv", "heads", "kv_heads", "head_dim", "causal", "pass",
                    "dtype", "status", "flops", "median_ms", "tflops", "peak_mem_bytes", "rel_error"):
            assert key in row
    ok = [x for x in rows if x["status"] == "ok"]
    assert len(ok) == 8 and all(x["check"] == "pass" for x in ok)
    for x in ok:
        assert x["tflops"] == pytest.approx(x["flops"] / (x["median_ms"] * 1e-3) / 1e12)
        assert x["min_ms"] <= x["median_ms"] <= x["max_ms"]
    eager = [x for x in ok if x["backend"] == "eager"]
    assert all(x["speedup"] == pytest.approx(1.0) for x in eager)
    causal32 = next(x for x in ok if x["backend"] == "eager" and x["causal"] and x["seqlen_q"] == 32)
    assert causal32["flops"] == 4 * 1 * 2 * (32 * 33 // 2) * 16
    skipped = [x for x in rows if x["backend"] == "sdpa-cudnn"]
    assert all(x["status"] == "unsupported" and "CUDA only" in x["reason"] for x in skipped)
    # the run directory keeps the rows, the events and the manifest
    (run_dir,) = list(tmp_path.iterdir())
    assert json.loads((run_dir / "bench.json").read_text()) == rows
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["kind"] == "bench"


def test_bench_table_csv_markdown(runner: CliRunner, tmp_path: Path) -> None:
    out_csv, out_md = tmp_path / "b.csv", tmp_path / "b.md"
    r = runner.invoke(app, ["bench", *TINY, "--backend", "sdpa-math", "--baseline", "none", "--csv", str(out_csv),
                            "--markdown", str(out_md), "--reports", str(tmp_path / "r")])
    assert r.exit_code == 0, r.output
    assert "profctl bench" in r.stdout and "sdpa-math" in r.stdout
    rows = list(csv.DictReader(io.StringIO(out_csv.read_text())))
    assert [row["seqlen_q"] for row in rows] == ["32", "64"] and rows[0]["status"] == "ok"
    assert out_md.read_text().count("| sdpa-math |") == 2


@pytest.mark.parametrize(("args", "needle"), [
    (["--backend", "flash9"], "flash9"),
    (["--batch", "0"], "--batch"),
    (["--seqlen", "-128"], "-128"),
    (["--heads", "6", "--kv-heads", "4"], "--kv-heads 4 does not divide --heads 6"),
    (["--dtype", "fp4"], "fp4"),  # fp8 is a dtype now; its refusals: tests/unit/test_triton_fp8.py
    (["--seqlen", "abc"], "'abc'"),
    (["--baseline", "nobody"], "nobody"),
])
def test_bad_input_one_line(runner: CliRunner, tmp_path: Path, args: list[str], needle: str) -> None:
    r = runner.invoke(app, ["bench", "--device", "cpu", "--reports", str(tmp_path), *args])
    assert r.exit_code != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.output


@pytest.mark.parametrize(("args", "why"), [
    (["--backend", "fa4"], "fa4 runs on CUDA only, not on cpu"),
    (["--backend", "sdpa-cudnn,sdpa-efficient"], "sdpa-cudnn runs on CUDA only, not on cpu"),
    (["--backend", "triton", "--dtype", "fp8"], "triton runs on CUDA (or on the CPU under TRITON_INTERPRET=1)"),
    (["--backend", "triton,eager", "--dtype", "fp8"], "triton runs on CUDA (or on the CPU under TRITON_INTERPRET=1), "
                                                      "not on cpu; eager cannot take --dtype fp8"),
])
def test_nothing_can_run_here_is_refused_up_front(runner: CliRunner, tmp_path: Path, args: list[str], why: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29 item 10: `-b triton --dtype fp8 --device cpu` passed the up-front check and failed after making a
    run. What is known without loading a backend (its dtypes, CUDA only) refuses a sweep where no point can run
    here: one line, exit 1, no run directory."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    r = runner.invoke(app, ["bench", *TINY, *args, "--reports", str(tmp_path)])
    assert r.exit_code == 1, r.output
    (line,) = [ln for ln in r.stderr.splitlines() if not ln.startswith("profctl: warning")]
    assert line.startswith("profctl: error: no point can run: ") and why in line, line
    assert not list(tmp_path.iterdir())


def test_strict_fails_on_any_skipped_point(runner: CliRunner, tmp_path: Path) -> None:
    r = runner.invoke(app, ["bench", *TINY, "--backend", "sdpa-math,sdpa-efficient", "--strict", "--reports",
                            str(tmp_path)])
    assert r.exit_code == 1 and "a point failed: sdpa-efficient" in r.stderr


def test_python_api(tmp_path: Path) -> None:
    import profctl

    res = profctl.bench(backend=["eager", "sdpa-math"], seqlen=[32], heads=2, head_dim=16, device="cpu", iters=2,
                        warmup=0, reports=tmp_path)
    df = res.to_dataframe()
    assert list(df["backend"]) == ["eager", "sdpa-math"] and set(df["status"]) == {"ok"}


def test_bench_says_what_it_did(runner: CliRunner, tmp_path: Path) -> None:
    """A newcomer reads which backends ran where, that eager was added as the baseline, and which backends
    cannot run here -- in a line each, not as rows of a table; the data formats keep every row."""
    r = runner.invoke(app, ["bench", "--device", "cpu", "-s", "32", "--heads", "2", "-d", "16", "-n", "2",
                            "--warmup", "0", "-b", "sdpa-math,sdpa-cudnn", "--reports", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "ran sdpa-math, eager on cpu: 2 of 3 points" in r.stderr
    assert "eager was added as the baseline for the speedup column (--baseline none leaves it out" in r.stderr
    assert "not run here: sdpa-cudnn (1 point(s)): sdpa-cudnn runs on CUDA only, not on cpu" in r.stderr
    table = [ln for ln in r.stdout.splitlines() if ln.startswith("│")]
    assert any("sdpa-math" in ln for ln in table) and not any("sdpa-cudnn" in ln for ln in table)
    run = next(tmp_path.iterdir())
    assert {x["backend"] for x in json.loads((run / "bench.json").read_text())} == {"sdpa-math", "sdpa-cudnn",
                                                                                    "eager"}


def test_bench_table_to_a_file_is_the_table(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "table.txt"
    r = runner.invoke(app, ["bench", "--device", "cpu", "-s", "32", "--heads", "2", "-d", "16", "-n", "2",
                            "--warmup", "0", "-b", "eager", "--baseline", "none", "-o", str(out), "--reports",
                            str(tmp_path / "runs")])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "profctl bench — cpu" in text and "│ eager" in text and "\x1b[" not in text


def test_a_plain_label_names_the_run_of_several_backends(runner: CliRunner, tmp_path: Path) -> None:
    """Issue 39 item 10: `bench --label NAME` named a backend's rows, never the run: with two backends it was
    refused. It now names the run (`profctl runs` lists it); with one backend it still names its rows too."""
    r = runner.invoke(app, ["bench", "--device", "cpu", "-b", "sdpa-math,eager", "-s", "32", "--heads", "1", "-d",
                            "16", "-n", "1", "--warmup", "0", "--label", "before", "-f", "json",
                            "--reports", str(tmp_path)])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert {row["backend"] for row in rows} == {"sdpa-math", "eager"} and not any(row.get("label") for row in rows)
    (run_dir,) = tmp_path.iterdir()
    assert json.loads((run_dir / "manifest.json").read_text())["label"] == "before"
    listed = runner.invoke(app, ["runs", "--reports", str(tmp_path), "-f", "json"])
    assert '"before"' in listed.stdout


def test_timings_under_the_triton_interpreter_say_an_emulator_was_timed(runner: CliRunner, tmp_path: Path) -> None:
    """Issue 39 item 10: with TRITON_INTERPRET=1 a Triton kernel's row read "TFLOP/s 0.000" and nothing said that
    Triton's CPU emulator was what got timed. A user's function may launch Triton kernels: its row is named too."""
    fn = tmp_path / "my_fn.py"
    fn.write_text("import torch\n\ndef attn(q, k, v, is_causal=False, scale=None, enable_gqa=False):\n"
                  "    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=is_causal)\n")
    args = ["bench", "--device", "cpu", "-b", f"{fn}:attn", "-s", "32", "--heads", "1", "-d", "16", "-n", "1",
            "--warmup", "0", "--reports", str(tmp_path / "runs")]
    r = runner.invoke(app, args, env={"TRITON_INTERPRET": "1"})
    assert r.exit_code == 0, r.output
    (line,) = [ln for ln in r.output.splitlines() if "TRITON_INTERPRET=1" in ln]  # under the table
    assert "Triton's interpreter (an emulator on the CPU)" in line and "my_fn.attn" in line, line
    assert "eager" not in line  # a built-in without Triton kernels is not named
    r = runner.invoke(app, args, env={"TRITON_INTERPRET": None})
    assert r.exit_code == 0 and "TRITON_INTERPRET" not in r.output, r.output
