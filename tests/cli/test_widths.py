"""Tables fit the terminal (issue 39.2): at 80 and 120 columns no number wraps or is cut, no word is split, long
kernel names are elided in the middle, and the columns that do not fit are left out, low-value ones first, and
said under the table. Checked on rich consoles of those widths and in a real pseudo-terminal."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from profctl.render.tables import fit_columns, print_table
from tests.conftest import H100, ROOT

WIDTHS = (80, 120)
KERNEL = ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_"
          "execute_kernel__5x_cublas")
REPORT_ROWS = [
    {"tool": "nsys", "class": "gemm", "kernel": KERNEL, "range": "", "count": "3", "total": "5.045 ms",
     "share": "10.8%", "avg": "1.682 ms", "med": "1.682 ms", "min": "1.678 ms", "max": "1.686 ms"},
    {"tool": "nsys", "class": "elementwise", "kernel": "elementwise_kernel", "range": "", "count": "6",
     "total": "4.666 ms", "share": "10.0%", "avg": "777.72 us", "med": "778.00 us", "min": "776.37 us",
     "max": "778.48 us"},
]
NOTE = ("under 0.15 ms per iteration: so short a GPU time can be launch-bound and differ between processes by more "
        "than the interval shows; confirm with another run")
COMPARE_ROWS = [
    {"case": "attn", "shape": "b1 s1024 h32 d128 bf16 causal", "pass": "fwd", "base ms": "0.1001",
     "new ms": "0.1099", "time change": "+9.8%", "CI": "-19.7%..+22.4%", "noise floor": "±2.1%",
     "base TFLOP/s": "171.7", "new TFLOP/s": "156.4", "TFLOP/s change": "-8.9%", "verdict": "inconclusive",
     "note": NOTE},
]
BENCH_ROWS = [
    {"backend": "sdpa-flash", "shape": "b1 s32 h2 d16 fp32", "pass": "fwd", "status": "ok", "median ms": "0.1259",
     "TFLOP/s": "0.001", "speedup": "0.57x", "peak mem": "232 MiB (host)", "rel err": "3.8e-07"},
]
RUNS_ROWS = [
    {"run": "20261127T105319Z-bench-8d84bd", "kind": "bench", "status": "complete",
     "started": "2026-11-27 10:53:19", "duration": "0.0 s", "label": "attn", "gpu": "NVIDIA H100 80GB HBM3",
     "points": "4/4", "command": "profctl bench -b sdpa-flash --seqlen 1024,4096 --causal false,true"},
]
TABLES = {"report": (REPORT_ROWS, ("5.045 ms", "777.72 us", "10.8%")),
          "compare": (COMPARE_ROWS, ("+9.8%", "0.1099", "inconclusive", "-19.7%..+22.4%")),
          "bench": (BENCH_ROWS, ("3.8e-07", "0.1259")),
          "runs": (RUNS_ROWS, ("20261127T105319Z-bench-8d84bd", "complete"))}


def drawn(rows: list[dict[str, Any]], width: int) -> str:
    con = Console(width=width, force_terminal=True, color_system=None, record=True, file=io.StringIO())
    print_table(con, "t", rows)
    return con.export_text()


def table_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln[:1] in "┏┃┡│└"]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(TABLES))
def test_tables_fit_without_cutting_a_number(name: str, width: int) -> None:
    rows, whole = TABLES[name]
    out = drawn(rows, width)
    lines = table_lines(out)
    assert lines and all(len(ln) <= width for ln in lines), out
    cells = [c.strip() for ln in lines for c in re.split("[│┃]", ln)]
    shown = fit_columns(rows, width).widths
    for value in whole:  # each on one line, whole, in its cell (when its column is shown)
        col = next(c for r in rows for c, v in r.items() if v == value)
        if col in shown:
            assert value in cells, (value, out)


@pytest.mark.parametrize("width", WIDTHS)
def test_words_are_not_split_and_left_out_columns_are_said(width: int) -> None:
    out = drawn(COMPARE_ROWS, width)
    fit = fit_columns(COMPARE_ROWS, width)
    assert "verdict" in fit.widths and "note" in fit.widths and "time change" in fit.widths
    words = {w for ln in table_lines(out) for c in re.split("[│┃]", ln) for w in c.split()}
    assert set(NOTE.split()) <= words, out  # every word of the note whole on some line
    assert fit.dropped and f"not shown in {width} columns: {', '.join(fit.dropped)}" in " ".join(out.split())
    assert all(len(ln) <= width for ln in out.splitlines()), out  # the note under the table too (issue 48.3)
    assert "noise floor" in fit.dropped  # low-value columns go first
    assert "case" in fit.widths or width == 80


def test_long_kernel_names_elide_in_the_middle_and_low_value_columns_go_first() -> None:
    out = drawn(REPORT_ROWS, 80)
    fit = fit_columns(REPORT_ROWS, 80)
    assert {"range", "min", "max"} <= set(fit.dropped)  # an empty column, then spreads beside the average
    assert {"kernel", "count", "total", "share", "avg"} <= set(fit.widths)
    assert re.search(r"│ sm80_xmma_gemm\S*…\S*cublas \[1\] +│", out), out
    assert f"[1] {KERNEL}" in out  # the whole name in the footnote


def test_a_wide_enough_terminal_or_a_pipe_changes_nothing() -> None:
    assert fit_columns(REPORT_ROWS, 400).dropped == ()
    assert fit_columns(REPORT_ROWS, None).widths == {}


def _in_pty(args: list[str], width: int) -> str:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, width, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(TERM="xterm", NO_COLOR="1", PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
    p = subprocess.Popen([sys.executable, "-m", "profctl", *args], stdin=slave, stdout=slave, stderr=slave,
                         env=env, cwd=ROOT, close_fds=True)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert p.wait(timeout=120) == 0, out
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode()).replace("\r\n", "\n")


@pytest.mark.parametrize("width", WIDTHS)
def test_report_in_a_real_terminal(width: int) -> None:
    out = _in_pty(["report", str(H100 / "attn.sqlite.gz"), "--limit", "5"], width)
    lines = table_lines(out)
    assert lines and all(len(ln) <= width for ln in lines), out
    cells = [c.strip() for ln in lines for c in re.split("[│┃]", ln)]
    assert "kernel" in cells and "total" in cells and "5.045 ms" in cells and "10.8%" in cells, out
    assert f"not shown in {width} columns" in out
    assert Path(H100 / "attn.sqlite.gz").exists()
