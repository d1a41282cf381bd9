"""`profctl bench` on a GPU: every installed backend, clocks sampled, OOM recorded as a row."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app

pytestmark = pytest.mark.gpu


def test_bench_gpu_rows(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["bench", "--device", "cuda", "--backend", "sdpa-flash,sdpa-cudnn,eager",
                                 "--seqlen", "2048", "--heads", "16", "--head-dim", "128", "--dtype", "bf16",
                                 "--causal", "false,true", "--iters", "10", "-f", "json", "--reports", str(tmp_path)])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    ok = [x for x in rows if x["status"] == "ok"]
    assert {x["backend"] for x in ok} >= {"sdpa-flash", "eager"}
    for x in ok:
        assert x["check"] == "pass" and x["peak_mem_bytes"] > 0
        assert x["peak_tflops"] and 0 < x["pct_of_peak"] < 100 and not x["suspect"]
        assert x["clocks"].get("clock_samples", 0) > 0, "NVML sampled the SM clock during the point"
    flash = {x["causal"]: x for x in ok if x["backend"] == "sdpa-flash"}
    eager = {x["causal"]: x for x in ok if x["backend"] == "eager"}
    assert flash[False]["speedup"] > 1.5 and flash[True]["speedup"] > flash[False]["speedup"]
    assert eager[False]["speedup"] == pytest.approx(1.0)


def test_host_bound_steps_are_told_from_kernel_bound_ones(tmp_path: Path) -> None:
    """A 128-token point's kernel is shorter than launching it, so its steps time the host (host_warning); at 4096
    tokens and 32 heads the kernel is far longer than its launch (host_ms well under the step, no warning)."""
    def rows(*shape: str) -> list[dict]:
        r = CliRunner().invoke(app, ["bench", "--device", "cuda", "-b", "sdpa-flash", *shape, "--head-dim", "128",
                                     "--dtype", "bf16", "--baseline", "none", "--iters", "30", "-f", "json",
                                     "--reports", str(tmp_path)])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    (tiny,) = rows("--seqlen", "128", "--heads", "1")
    assert tiny["status"] == "ok" and tiny["host_ms"] > 0 and "host-bound steps" in tiny["host_warning"]
    (big,) = rows("--seqlen", "4096", "--heads", "32")
    assert big["status"] == "ok" and 0 < big["host_ms"] < 0.5 * big["median_ms"] and "host_warning" not in big


def test_oom_is_a_row_and_the_sweep_goes_on(tmp_path: Path) -> None:
    # sdpa-math materialises the score matrix: 8 x 32 x 65536^2 bf16 is 2 TiB, far beyond any GPU
    r = CliRunner().invoke(app, ["bench", "--device", "cuda", "--backend", "sdpa-math,sdpa-flash", "--batch", "8",
                                 "--seqlen", "65536", "--heads", "32", "--head-dim", "64", "--iters", "2",
                                 "--warmup", "0", "--no-check", "--baseline", "none", "-f", "json",
                                 "--reports", str(tmp_path)])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert rows[0]["backend"] == "sdpa-math" and rows[0]["status"] == "oom"
    assert "memory" in rows[0]["reason"].lower()
    assert rows[1]["backend"] == "sdpa-flash" and rows[1]["status"] == "ok"


def test_bench_fp8_triton_rows(tmp_path: Path) -> None:
    """`--dtype fp8 -b triton,sdpa-flash`: triton's FP8 forward passes the fp8 check with % peak against the FP8
    peak; sdpa-flash's fp8 rows are unsupported, named in the warning before the sweep; bf16 rows run as ever."""
    r = CliRunner().invoke(app, ["bench", "--device", "cuda", "--backend", "triton,sdpa-flash", "--seqlen", "2048",
                                 "--heads", "16", "--head-dim", "128", "--dtype", "bf16,fp8", "--causal", "false,true",
                                 "--iters", "10", "-f", "json", "--reports", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "sdpa-flash cannot take --dtype fp8" in r.stderr
    rows = json.loads(r.stdout)
    fp8 = [x for x in rows if x["dtype"] == "fp8" and x["backend"] == "triton"]
    assert len(fp8) == 2 and all(x["status"] == "ok" and x["check"] == "pass" for x in fp8), fp8
    bf16_peak = next(x["peak_tflops"] for x in rows if x["dtype"] == "bf16" and x["status"] == "ok")
    for x in fp8:
        assert x["tolerance"] == 5e-2 and x["peak_tflops"] > 1.9 * bf16_peak  # the FP8 dense peak, not bf16's
        assert 0 < x["pct_of_peak"] < 100 and not x["suspect"]
    assert all(x["status"] == "unsupported" for x in rows if x["dtype"] == "fp8" and x["backend"] == "sdpa-flash")
    assert all(x["status"] == "ok" for x in rows if x["dtype"] == "bf16")


def test_a_run_of_two_gpu_processes_and_compare_takes_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--processes 2` on a GPU: every point timed in two fresh processes (the row their lower middle, every step
    kept); a GPU run is one process by default; `compare` of two such runs judges 2 processes a side."""
    monkeypatch.delenv("PROFCTL_BENCH_PROCESSES", raising=False)
    args = ["bench", "--device", "cuda", "-b", "sdpa-flash", "--seqlen", "4096", "--heads", "32", "--head-dim", "128",
            "--dtype", "bf16", "--baseline", "none", "--iters", "20", "-f", "json"]
    runs = []
    for k in range(2):
        r = CliRunner().invoke(app, [*args, "--processes", "2", "--reports", str(tmp_path / f"p{k}")])
        assert r.exit_code == 0, r.output
        (row,) = json.loads(r.stdout)
        assert row["processes"] == 2 and row["times_per_process"] == [20, 20] and len(row["times_ms"]) == 40
        assert row["median_ms"] == min(row["process_medians_ms"]) and row["check"] == "pass"
        (run,) = (tmp_path / f"p{k}").iterdir()
        assert (run / "events-2.jsonl").exists() and (run / "workload-2.log").exists()
        runs.append(run)
    c = CliRunner().invoke(app, ["compare", str(runs[0]), str(runs[1]), "-f", "json"])
    assert c.exit_code == 0, c.output
    (cmp,) = json.loads(c.stdout)["rows"]
    assert cmp["processes_base"] == 2 and cmp["processes_new"] == 2 and cmp["runs_base"] == 1
    r = CliRunner().invoke(app, [*args, "--reports", str(tmp_path / "one")])
    assert r.exit_code == 0 and "processes" not in json.loads(r.stdout)[0]
