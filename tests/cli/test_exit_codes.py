"""One documented exit code per kind of failure, and error lines that say only what the user can act on (issue 29
item 8): a selection that matches nothing is 7 in every command (it was 1, the failed gate's code, in some, and 5
in others); every code profctl exits with is in the README's table; an error names the user's file, never the
temporary copy profctl read, and calls a file what it is (not "a Chrome trace" for bench rows, not "nsys-sqlite"
for any SQLite file). Ctrl-C naming the run directory is in tests/cli/test_runs.py; errors naming only options
the user typed in tests/cli/test_options.py."""

from __future__ import annotations

import gzip
import json
import lzma
import re
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app
from tests.conftest import DATA, ROOT

PLANTED = DATA / "planted"


def run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args))
    assert "Traceback" not in r.output, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("profctl: note")]
    assert len(lines) == 1 and lines[0].startswith("profctl: error: "), r.output
    return r.exit_code, lines[0]


def _readme_codes() -> set[int]:
    text = (ROOT / "README.md").read_text()
    table = text[text.index("**Exit codes**"):]
    return {int(m) for m in re.findall(r"^\| (\d+) \|", table, flags=re.M)}


def test_every_exit_code_is_in_the_readme() -> None:
    """The codes profctl's errors carry and the CLI exits with literally, each a row of the README's table."""
    used: set[int] = set()
    for p in (ROOT / "profctl").rglob("*.py"):
        text = p.read_text()
        used |= {int(x) for x in re.findall(r"^\s+exit_code = (\d+)$", text, flags=re.M)}
        used |= {int(x) for x in re.findall(r"typer\.Exit\((\d+)\)", text)}
    assert {1, 2, 5, 6, 7, 130} <= used
    assert used <= _readme_codes(), f"not in the README's table: {sorted(used - _readme_codes())}"


@pytest.fixture
def seed_rows_of_one_batch() -> str:
    return str(DATA / "bench_h100_b1h32d128_fwd.json.gz")


@pytest.mark.parametrize("args", [
    ("explain", str(PLANTED / "attn_pair.ncu-rep.xz"), "--kernel", "flash_fwd", "--vs", "cudnn"),
    ("report", str(PLANTED / "planted_cuda.ncu-rep.xz"), "--view", "source", "--kernel", "nosuch"),
    ("report", str(PLANTED / "planted_cuda.ncu-rep.xz"), "--view", "stalls", "--kernel", "nosuch"),
    ("report", str(DATA / "nsys_profctl_fwdbwd.sqlite.gz"), "-f", "perfetto", "--range", "nope", "-o", "{tmp}/t.json"),
    ("report", str(DATA / "h100-sm90" / "torch_trace.json.gz"), "-f", "perfetto", "--range", "nope", "-o",
     "{tmp}/t.json"),
    ("report", str(DATA / "bench_h100_b1h32d128_fwd.json.gz"), "--table", "seed-002-batch"),
    ("report", str(DATA / "bench_h100_b1h32d128_fwd.json.gz"), "--table", "seed-003-torch-triton"),
    ("report", str(DATA / "bench_h100_b1h32d128_fwd.json.gz"), "--table", "seed-004-forward", "--tokens", "3"),
    ("report", str(DATA / "nsys_profctl_fwdbwd.sqlite.gz"), "--table", "seed-004-forward"),
])
def test_a_selection_that_matches_nothing_exits_7(args: tuple[str, ...], tmp_path: Path) -> None:
    if any("ncu-rep" in a for a in args):
        pytest.importorskip("ncu_report")
    code, line = run(*(a.format(tmp=tmp_path) for a in args))
    assert code == 7, line
    assert 7 in _readme_codes()


def test_errors_name_the_users_file_not_a_temporary_copy(tmp_path: Path) -> None:
    """A damaged compressed report is read through a decompressed copy in a temporary folder; the error names
    the file the user gave."""
    with gzip.open(DATA / "nsys_profctl_fwdbwd.sqlite.gz") as f:
        db = f.read()
    cut = tmp_path / "cut.sqlite.gz"
    cut.write_bytes(gzip.compress(db[: len(db) // 2]))
    cases = [("report", str(cut)), ("report", str(cut), "-f", "perfetto", "-o", str(tmp_path / "t.json"))]
    if _has_ncu_report():
        rep = tmp_path / "cut.ncu-rep.gz"
        with lzma.open(PLANTED / "planted_cuda.ncu-rep.xz") as f:
            rep.write_bytes(gzip.compress(f.read()[:200_000]))
        cases += [("report", str(rep)), ("report", str(rep), "--view", "source"),
                  ("explain", str(rep), "-k", "a", "--vs", "b")]
    for args in cases:
        code, line = run(*args)
        assert code == 5, line
        assert line.startswith(f"profctl: error: {args[1]}: ") and "profctl-unpack" not in line, line


def _has_ncu_report() -> bool:
    import importlib.util

    return importlib.util.find_spec("ncu_report") is not None


def test_a_file_is_called_what_it_is(tmp_path: Path) -> None:
    """A foreign SQLite file is not "nsys-sqlite", a list of bench rows not "a Chrome trace"."""
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as c:
        c.execute("CREATE TABLE t (a)")
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps([{"backend": "eager", "seqlen_q": 64, "ms": 1.0}]))
    for args in (("report", str(foreign), "--view", "source"), ("explain", str(foreign), "-k", "a", "--vs", "b"),
                 ("report", str(rows)), ("report", str(rows), "--view", "stalls")):
        code, line = run(*args)
        assert code == 5, line
        assert "nsys-sqlite" not in line and "Chrome" not in line and "bench-json" not in line, line
    assert "holds an SQLite file, not an Nsight Compute report" in run("report", str(foreign), "--view", "source")[1]
    assert "not a profctl bench" in run("report", str(rows))[1]


@pytest.mark.parametrize("cmd", [["bench", "--device", "cpu", "-b", "sdpa-math", "-s", "16", "--heads", "1"],
                                 ["torch", "--device", "cpu", "-b", "sdpa-math", "-s", "16", "--heads", "1"]])
def test_a_reports_folder_that_cannot_be_made_is_a_bad_argument(cmd: list[str]) -> None:
    # issue 39 item 9: /proc passes the access check (root may write it) but no folder can be made there: the run
    # directory fails before anything runs, which the README's table calls 2 (it was 1, a write after the work)
    rc, line = run(*cmd, "--reports", "/proc/profctl-reports")
    assert rc == 2 and "cannot create a run directory under /proc/profctl-reports" in line
