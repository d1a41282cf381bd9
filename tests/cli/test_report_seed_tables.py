"""`profctl report ROWS --table NAME`: each seed's table from one command, in the terminal, Markdown, CSV, JSON and
HTML, and the options a table does not take refused in one line."""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app
from tests.conftest import DATA

runner = CliRunner()
#: each preset and the rows it is tested on (recorded where they have the shapes, else constructed)
CASES = {
    "seed-004-forward": ["bench_h100_b1h32d128_fwd.json.gz"],
    "seed-004-time-per-token": ["bench_h100_b1h32d128_fwd.json.gz"],
    "seed-004-memory-per-token": ["bench_h100_b1h32d128_fwd.json.gz"],
    "seed-002-batch": ["batch_scaling_constructed.json.gz"],
    "seed-003-torch-triton": ["torch_triton_constructed.json.gz"],
}
FIRST_COLUMNS = {"seed-004-forward": ["Seq Length", "Standard (eager)", "Flash Attn 2 (sdpa-flash)"],
                 "seed-004-time-per-token": ["Sequence", "1K", "2K"],
                 "seed-004-memory-per-token": ["Sequence", "1K", "2K"],
                 "seed-002-batch": ["Batch Size", "Problem Size (BxSxHxD)", "ms", "Speedup vs Batch=1",
                                    "Efficiency"],
                 "seed-003-torch-triton": ["seq_len", "d_model", "precision", "ft_torch", "bt_torch", "fbt_torch"]}


def run(*args: str):
    return runner.invoke(app, ["report", *args])


def one_line_error(res, code: int, needle: str) -> None:
    assert res.exit_code == code, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("profctl: error:") and needle in lines[0], res.output


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json", "html"])
def test_one_command_per_seed_table(name: str, fmt: str, tmp_path: Path) -> None:
    out = tmp_path / f"t.{fmt}"
    res = run(*(str(DATA / f) for f in CASES[name]), "--table", name, "-f", fmt, "-o", str(out))
    assert res.exit_code == 0, res.output
    text = out.read_text()
    cols = FIRST_COLUMNS[name]
    if fmt == "csv":
        head = next(csv.reader(io.StringIO(text)))
        assert [c for c in head if c in cols] == cols
    elif fmt == "json":
        assert json.loads(text)["panels"][0]["columns"][:len(cols)] == cols
    elif fmt == "markdown":
        assert "| " + " | ".join(cols) in text
    elif fmt == "html":
        assert all(f">{c}</th>" in text for c in cols) and "<script" not in text
    else:
        assert all(c in text for c in cols[:2]) and "note:" in text


def test_forward_table_in_the_terminal_names_the_stand_ins() -> None:
    res = run(str(DATA / "seed004_h200_constructed.json.gz"), "--table", "seed-004-forward")
    assert res.exit_code == 0, res.output
    assert "Triton FP8 (triton)" in res.output and "Best Speedup" in res.output
    assert "No FlashAttention-3 here" in res.output and "marked constructed" in res.output


def test_gpu_names_the_panel_and_baseline_the_standard(tmp_path: Path) -> None:
    res = run(str(DATA / "bench_h100_s4096.json.gz"), "--table", "seed-004-forward", "--gpu", "H100 SXM5",
              "--baseline", "sdpa-math", "-f", "markdown")
    assert res.exit_code == 0, res.output
    assert "## H100 SXM5: forward pass time (ms)" in res.output and "| Standard (sdpa-math) |" in res.output


@pytest.mark.parametrize("name", list(CASES))
def test_a_gpu_nothing_names_is_empty_data_not_prose(name: str, tmp_path: Path) -> None:
    """Issue 29 item 7: rows that do not name their GPU put "GPU not named" in the CSV's gpu column. The data
    formats leave it empty (JSON null); the titles and a note say it in words. (Each preset's rows with their
    GPU names taken out, as a bench JSON file of an older profctl has them.)"""
    files = []
    for f in CASES[name]:
        with gzip.open(DATA / f, "rt") as fh:
            rows = json.load(fh)
        for r in rows:
            r.pop("gpu_name", None)
        files.append(str(tmp_path / f.replace(".gz", "")))
        Path(files[-1]).write_text(json.dumps(rows))
    res = run(*files, "--table", name, "-f", "csv")
    assert res.exit_code == 0, res.output
    assert {r["gpu"] for r in csv.DictReader(io.StringIO(res.stdout))} == {""}
    doc = json.loads(run(*files, "--table", name, "-f", "json").stdout)
    assert {p["context"]["gpu"] for p in doc["panels"]} == {None}
    assert doc["panels"][0]["title"].startswith("GPU not named:")
    assert any(n.startswith("GPU not named: these rows do not say which GPU") for n in doc["notes"])
    res = run(*files, "--table", name, "--gpu", "H100 SXM5", "-f", "csv")
    assert {r["gpu"] for r in csv.DictReader(io.StringIO(res.stdout))} == {"H100 SXM5"}


@pytest.mark.parametrize(("args", "code", "needle"), [
    (["--table", "seed-999"], 2, "choose from seed-004-forward"),
    (["--table", "seed-004-forward", "--pivot", "ms"], 2, "--pivot and --table seed-004-forward contradict"),
    (["--table", "seed-004-forward", "--view", "summary"], 2, "contradict"),
    (["--table", "seed-004-forward", "--title", "x"], 2, "--title"),
    (["--table", "seed-002-batch"], 7, "two or more batch sizes"),
])
def test_refused_in_one_line(args: list[str], code: int, needle: str) -> None:
    one_line_error(run(str(DATA / "bench_h100_b1h32d128_fwd.json.gz"), *args), code, needle)


def test_a_table_needs_bench_rows(shared_fixture) -> None:
    res = run(str(shared_fixture("attn.sqlite")), "--table", "seed-004-forward")
    assert res.exit_code == 7 and "no bench rows" in res.output and "Traceback" not in res.output


def test_the_help_says_each_layout_not_only_the_seed_it_comes_from() -> None:
    # issue 39 item 9: `--table seed-004-forward` named documents a user does not have; the help says each layout
    import re

    from profctl.analysis.seed_tables import PRESETS
    from profctl.cli._report_more import TABLE_HELP

    for name in PRESETS:
        m = re.search(rf"{re.escape(name)} \(([^)]*)\)", TABLE_HELP)
        assert m and ("a row per" in m.group(1) or "the same" in m.group(1)), name
