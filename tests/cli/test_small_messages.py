"""Messages and small ones (issue 48 section 3): the fault a message names, lines that fit the terminal without
hiding the fix, a suggestion that works, tables that fit, and -o that means the file."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from profctl.cli import app

SHAPE = "b1,sq512,skv512,h8,kv8,d64,fp32,full,bhsd"
FIX = "run --pass fwd, or a GPU"
FLEX_BWD = ("flex has no backward on the CPU in torch 2.13.0+cpu (FlexAttention does not support backward on CPU): "
            + FIX)


def _row(**kw: Any) -> Any:
    from profctl.schema.bench import BenchRow

    row = {"backend": "eager", "batch": 1, "seqlen_q": 64, "seqlen_kv": 64, "heads": 2, "kv_heads": 2,
           "head_dim": 16, "dtype": "fp32", "causal": False, "pass": "fwd", "device": "cpu", "status": "ok"}
    return BenchRow(row | kw)


# ------------------------------------------------------------------------------------------- --docs 256+0
@pytest.mark.parametrize("docs", [(256, 0), (0, 256), (128, 0, 128)])
def test_an_empty_document_is_named_as_the_fault(docs: tuple[int, ...]) -> None:
    from profctl.shapes import doc_lengths

    with pytest.raises(ValueError) as e:
        doc_lengths(docs, 256)
    msg = str(e.value)
    assert "add up to" not in msg and "empty" in msg and "0 tokens" in msg, msg


def test_docs_256_plus_0_on_the_command_line_names_the_empty_document(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["bench", "--device", "cpu", "-b", "eager", "-s", "256", "--docs", "256+0",
                                 "--reports", str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert "empty" in r.stderr and "add up to" not in r.stderr, r.stderr


def test_lengths_that_do_not_add_up_still_say_so() -> None:
    from profctl.shapes import doc_lengths

    with pytest.raises(ValueError, match="add up to 32, not the sequence's 64"):
        doc_lengths((16, 16), 64)


# ------------------------------------------------------------------------------------------- not run here
def _not_run_result() -> Any:
    from profctl.pipelines.bench_pipeline import BenchResult

    rows = [_row(backend="eager", **{"pass": "bwd"}),
            _row(backend="flex", status="unsupported", reason=FLEX_BWD, **{"pass": "bwd"})]
    return BenchResult(run_dir=Path("r"), rows=rows, points=2)


def test_not_run_here_keeps_the_whole_reason() -> None:
    from profctl.render.bench_view import what_ran

    lines = [ln for ln in what_ran(_not_run_result(), ["flex", "eager"]) if ln.startswith("not run here")]
    assert lines == [f"not run here: flex (1 point(s)): {FLEX_BWD}"]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("columns", [300, 80, 60])
def test_a_long_note_fits_the_terminal_and_keeps_the_fix(monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    from profctl.cli import _messages

    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setenv("COLUMNS", str(columns))
    _messages.note(f"not run here: flex (1 point(s)): {FLEX_BWD}", fit=True)
    out = tty.getvalue()
    lines = out.splitlines()
    assert all(len(ln) <= columns for ln in lines), out
    assert " ".join(out.split()).endswith(FIX), out  # nothing cut, the fix last
    assert len(lines) == (1 if columns >= len(out) else len(lines)), out
    if columns == 300:
        assert len(lines) == 1


def test_a_note_into_a_pipe_is_one_whole_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from profctl.cli import _messages

    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stderr", pipe)
    monkeypatch.setenv("COLUMNS", "40")
    _messages.note(f"not run here: flex (1 point(s)): {FLEX_BWD}", fit=True)
    assert pipe.getvalue() == f"profctl: not run here: flex (1 point(s)): {FLEX_BWD}\n"


# ------------------------------------------------------------------------------------------- proton -b triton
def test_proton_on_a_cpu_machine_suggests_nothing_it_then_refuses(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from profctl.pipelines import proton_pipeline

    monkeypatch.setattr(proton_pipeline, "cuda_usable", lambda: False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    r = CliRunner().invoke(app, ["proton", "-b", "triton", "-s", "128", "--device", "cpu",
                                 "--reports", str(tmp_path)])
    assert "TRITON_INTERPRET" not in r.stderr, r.stderr
    assert "records on a GPU" in r.stderr and "profctl report" in r.stderr, r.stderr
    assert r.exit_code == 2, r.output


# ------------------------------------------------------------------------------------------- 80 columns
def _drawn(fn: Any, width: int) -> str:
    con = Console(width=width, force_terminal=True, color_system=None, record=True, file=io.StringIO())
    fn(con)
    return con.export_text()


def test_the_not_shown_note_fits_80_columns() -> None:
    from profctl.render.tables import print_table

    rows = [{"tool": "nsys", "class": "gemm", "kernel": "k" * 30, "range": "r" * 30, "count": "3",
             "total": "5.045 ms", "share": "10.8%", "avg": "1.682 ms", "med": "1.682 ms", "min": "1.678 ms",
             "max": "1.686 ms", "domain": "profctl", "style": "push/pop", "GPU ops": "12", "peak mem": "1 GiB"}]
    out = _drawn(lambda con: print_table(con, "t", rows), 80)
    assert "not shown in 80 columns" in out
    assert all(len(ln) <= 80 for ln in out.splitlines()), out
    said = " ".join(out[out.index("(not shown"):].split())
    for c in ("min", "max", "domain", "style"):
        assert c in said


def test_the_bench_shape_column_does_not_wrap_at_80_columns() -> None:
    from profctl.render.tables import print_table

    rows = [{"shape": "b1 s4096 h32 d128 bf16 causal", "backend": b, "status": s, "ms": "3.2116",
             "main kernel": "-", "time from": "bench"}
            for b, s in (("eager", "ok"), ("flash-attn", "unsupported: flash-attn is not installed (pip install "
                                                          "'profctl[flash]'); No module named 'flash_attn'"))]
    out = _drawn(lambda con: print_table(con, "Backends", rows), 80)
    assert all(len(ln) <= 80 for ln in out.splitlines()), out
    assert _shape_lines(out) == [1, 1], out  # an empty and a low-value column leave room for it
    out = _drawn(lambda con: print_table(con, "Backends", [r | {"time from": "bench + nsys"} for r in rows]), 70)
    assert _shape_lines(out) == [2, 2], out  # "b1 s4096 h32 d128" over "bf16 causal", not a word a line


def _shape_lines(out: str) -> list[int]:
    """How many lines each row's shape (the first column) takes: a row starts where its second cell is not empty."""
    counts: list[int] = []
    for ln in out.splitlines():
        cells = [c.strip() for c in ln.split("│")[1:-1]]
        if len(cells) < 2 or not cells[0]:
            continue
        if cells[1]:
            counts.append(1)
        elif counts:
            counts[-1] += 1
    return counts


def test_report_of_bench_rows_at_80_columns_keeps_shapes_on_one_line() -> None:
    from tests.cli.test_widths import _in_pty
    from tests.conftest import DATA

    out = _in_pty(["report", str(DATA / "bench_h100_s4096.json.gz")], 80)
    assert "b1 s4096 h32 d128" in out, out
    lines = _shape_lines(out)
    assert lines and max(lines) <= 2, out
    assert all(len(ln) <= 80 for ln in out.splitlines()), out


# ------------------------------------------------------------------------------------------- bench -f json -o
def test_bench_json_into_a_file_prints_no_table(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    r = CliRunner().invoke(app, ["bench", "--device", "cpu", "-b", "eager", "-s", "64", "--heads", "1", "-d",
                                 "16", "--iters", "1", "--baseline", "none", "-f", "json", "-o", str(out),
                                 "--reports", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert out.is_file() and '"backend": "eager"' in out.read_text()
    assert r.stdout == "", r.stdout
    assert not re.search("[┃│┏]", r.stderr), r.stderr
    assert "profctl: run: " in r.stderr


# ------------------------------------------------------------------------------------------- the torch table
def _torch_summary() -> Any:
    from profctl.schema import CpuOpRow, Source, Summary

    ops = []
    for i, (b, op) in enumerate([(b, op) for b in ("eager", "sdpa-math", "sdpa-flash")
                                 for op in ("aten::bmm", "aten::_softmax", "aten::mul")]):
        ops.append(CpuOpRow(tool="torch", name=op, op_class="other", nvtx_range=f"{b}[{SHAPE}]/measure/{b}.fwd",
                            count=3, total_ns=1e6 * (10 - i), avg_ns=1e5, med_ns=1e5, min_ns=1e5, max_ns=1e5,
                            std_ns=0.0, cpu_total_ns=2e6))
    return Summary(sources=(Source(path="reports/20261128T164213Z-torch-10260c/trace.json.gz", tool="torch",
                                   tool_version="2.13.0"),), kernels=(), cpu_ops=tuple(ops))


def test_the_torch_table_shows_the_case_once() -> None:
    from profctl.render import summary_view
    from profctl.render.tables import console

    con = console()  # not a terminal: a pipe's console, as the quickstart prints it
    buf = io.StringIO()
    con.file = buf
    summary_view.to_console(_torch_summary(), con)
    out = buf.getvalue()
    table = [ln for ln in out.splitlines() if ln[:1] in "┏┃┡│└"]
    assert table and max(len(ln) for ln in table) <= 160, out
    assert out.count(SHAPE) == 1 and f"[…] in a range: {SHAPE}" in out, out  # said once, under the table
    assert "eager[…]/measure/eager.fwd" in out and "sdpa-flash[…]/measure/sdpa-flash.fwd" in out, out


def test_the_torch_table_names_each_of_several_cases() -> None:
    from profctl.render.summary_view import cpu_op_rows, shorten_ranges
    from profctl.schema import CpuOpRow, Source, Summary

    ops = [CpuOpRow(tool="torch", name="aten::bmm", op_class="gemm", nvtx_range=f"eager[{key}]/measure/eager.fwd",
                    count=1, total_ns=1e6, avg_ns=1e6, med_ns=1e6, min_ns=1e6, max_ns=1e6, std_ns=0.0)
           for key in (SHAPE, SHAPE.replace("sq512,skv512", "sq1024,skv1024"))]
    rows, legend = shorten_ranges(cpu_op_rows(Summary(sources=(Source(path="t", tool="torch"),), kernels=(),
                                                      cpu_ops=tuple(ops))))
    assert [r["range"] for r in rows] == ["eager[c1]/measure/eager.fwd", "eager[c2]/measure/eager.fwd"]
    other = SHAPE.replace("sq512,skv512", "sq1024,skv1024")
    assert legend == [f"[c1] in a range: {SHAPE}", f"[c2] in a range: {other}"]
