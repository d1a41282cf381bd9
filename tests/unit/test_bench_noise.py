"""Noise warnings on bench rows, on rows recorded on the H100: a host-bound decode step spreads wide, a
kernel-bound attention point does not."""

from __future__ import annotations

import gzip
import json
import statistics
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from profctl.cli import app
from profctl.pipelines.bench_pipeline import NOISE_IQR, add_noise_warnings
from profctl.schema.bench import BenchRow, bench_rows
from tests.conftest import DATA


def _rows(name: str) -> list[BenchRow]:
    with gzip.open(DATA / name, "rt") as f:
        d = json.load(f)
    return bench_rows(d if isinstance(d, list) else d["rows"])


def test_a_host_bound_decode_step_is_flagged_and_a_steady_one_is_not() -> None:
    rows = _rows("model_decode_h100.json.gz")
    add_noise_warnings(rows)
    by = {(r["backend"], r["seqlen"]): r for r in rows}
    wide = by[("sdpa-flash", 32768)]  # 10 steps from 3.1 to 4.7 ms
    assert wide["iqr_ratio"] > 0.2 and "middle half of 10 steps" in wide["noise_warning"]
    steady = by[("eager", 512)]
    assert steady["iqr_ratio"] < 0.05 and "noise_warning" not in steady
    for r in rows:  # the flag follows the spread of each row's own steps, on both sides of the limit
        q1, _, q3 = statistics.quantiles(r["times_ms"], n=4)
        assert ("noise_warning" in r) == ((q3 - q1) / r["median_ms"] > NOISE_IQR)
    assert 0 < sum("noise_warning" in r for r in rows) < len(rows)


def test_kernel_bound_attention_rows_are_not_flagged() -> None:
    rows = _rows("bench_h100_s4096.json.gz")
    add_noise_warnings(rows)
    ok = [r for r in rows if r.get("status") == "ok"]
    assert ok and all("iqr_ratio" in r for r in ok)
    assert not any("noise_warning" in r for r in rows)


def test_rows_without_enough_steps_or_not_ok_are_left_alone() -> None:
    rows = bench_rows([{"status": "ok", "median_ms": 1.0, "times_ms": [1.0, 2.0, 3.0]},
                       {"status": "oom", "median_ms": None, "times_ms": []}])
    add_noise_warnings(rows)
    assert rows == [{"status": "ok", "median_ms": 1.0, "times_ms": [1.0, 2.0, 3.0]},
                    {"status": "oom", "median_ms": None, "times_ms": []}]


def test_report_on_model_rows_says_which_rows_are_noisy(data_file: Callable[[str], Path]) -> None:
    r = CliRunner().invoke(app, ["report", str(data_file("model_decode_h100.json")), "-f", "markdown"])
    assert r.exit_code == 0, r.output
    assert "## Tokens/s against context" in r.stdout
    assert "warning: sdpa-flash llama-7b[layers=4]" in r.stderr and "timings spread" in r.stderr
    assert "warning: sdpa-flash llama-7b[layers=4] l4 decode b1 s32768 bf16: timings spread" in r.stderr
    assert "warning: eager llama-7b[layers=4] l4 decode b1 s512 bf16" not in r.stderr


def test_a_step_whose_host_time_nears_the_step_gets_a_host_warning() -> None:
    """host_ms is what the host took between a step's events: at 80 % of the median step or more (HOST_SHARE) the
    steps, queued back to back, time the host; below it, or on rows without host_ms (CPU rows, older runs) or not
    ok, nothing is said."""
    from profctl.pipelines.bench_rows import HOST_SHARE, add_host_warnings

    rows = bench_rows([
        {"backend": "triton", "status": "ok", "median_ms": 0.3456, "host_ms": 0.3401},  # a slow process of issue 50
        {"backend": "triton", "status": "ok", "median_ms": 0.2507, "host_ms": 0.1610},  # a fast one
        {"backend": "triton", "status": "ok", "median_ms": 1.0, "host_ms": HOST_SHARE * 1.0},  # on the limit
        {"backend": "eager", "status": "ok", "median_ms": 2.0},  # a CPU row: no host_ms
        {"backend": "eager", "status": "oom", "median_ms": None, "host_ms": 0.5},
    ])
    add_host_warnings(rows)
    flagged = ["host_warning" in r for r in rows]
    assert flagged == [True, False, True, False, False]
    w = rows[0]["host_warning"]
    assert "0.3401 ms a step" in w and "0.3456-ms median step (98%)" in w and "profctl nsys or ncu" in w
