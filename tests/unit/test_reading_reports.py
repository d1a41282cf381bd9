"""What a kernel engineer reads: verdicts that account for launch gaps, two inputs of one case (the later is used
and a note says which), kernel names elided in the middle with the full name kept, paths that mean something on
another machine, tables that use a pipe's width, axes that do not flatten a 2x difference, and head dims a
backend pads or refuses."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from profctl import readers
from profctl.analysis.backend_table import LAUNCH_BOUND_GAP, bound
from profctl.analysis.backend_table import build as compare
from profctl.analysis.crosstool import join
from profctl.render.tables import display_path, elide, elide_rows, numeric_columns, text_console
from profctl.schema import KernelRow, Source, Summary
from tests.conftest import DATA, ROOT

SHAPE = "b1,sq1024,skv1024,h32,kv32,d128,bf16,full,bhsd"


def kernel(name: str, rng: str, ns: float, tool: str = "nsys", metrics: dict[str, float] | None = None,
           cls: str = "flash_fwd", count: int = 1) -> KernelRow:
    return KernelRow(tool=tool, name=name, short_name=name.split("<")[0].split("(")[0].replace("void ", ""),
                     kernel_class=cls, nvtx_range=rng, count=count, total_ns=ns * count, avg_ns=ns, med_ns=ns,
                     min_ns=ns, max_ns=ns, std_ns=0.0, metrics=metrics or {})


def summary(path: str, tool: str, rows: list[KernelRow]) -> Summary:
    return Summary(sources=(Source(path=path, tool=tool, tool_version="2025.3.1"),), kernels=tuple(rows))


def bench_row(backend: str, ms: float, source: str = "bench.json") -> dict:
    return {"backend": backend, "batch": 1, "seqlen_q": 1024, "seqlen_kv": 1024, "heads": 32, "kv_heads": 32,
            "head_dim": 128, "dtype": "bf16", "causal": False, "pass": "fwd", "layout": "bhsd", "device": "cuda",
            "status": "ok", "median_ms": ms, "_source": source}


RANGE = f"fa4[{SHAPE}]/measure/fa4.fwd"
TC = {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active": 62.0,
      "dram__throughput.avg.pct_of_peak_sustained_elapsed": 24.0,
      "sm__throughput.avg.pct_of_peak_sustained_elapsed": 54.0}


# ------------------------------------------------------------------------------------------- bound
def test_bound_accounts_for_the_gap_first() -> None:
    assert bound(62, 24, 54) == "tensor"
    assert bound(62, 24, 54, gap=0.78) == "launch-bound"       # the gap is the story, not the tensor pipe
    assert bound(62, 24, 54, gap=LAUNCH_BOUND_GAP) == "tensor"  # at the threshold: still the kernel's verdict
    assert bound(10, 85, 20, gap=0.2) == "DRAM" and bound(None, None, None, gap=0.9) == "launch-bound"


def test_a_kernel_filling_a_fifth_of_its_iteration_is_launch_bound() -> None:
    """FA4 at seqlen 1024 on the H100: 31.5 us of kernel in a 144 us iteration (78 % gap), tensor pipe 62 %."""
    nsys = summary("nsys.sqlite", "nsys", [kernel("flash_fwd_sm90", RANGE, 31_500)])
    ncu = summary("ncu.ncu-rep", "ncu", [kernel("flash_fwd_sm90", RANGE, 33_300, "ncu", TC)])
    c = compare(join([nsys, ncu], [bench_row("fa4", 0.144)], device="NVIDIA H100 80GB HBM3"))
    (row,) = c.rows
    assert row.launch_overhead == pytest.approx(1 - 31.5 / 144) and row.tensor_pct == 62
    assert row.bound == "launch-bound"
    c = compare(join([nsys, ncu], [bench_row("fa4", 0.036)], device="NVIDIA H100 80GB HBM3"))
    assert c.rows[0].bound == "tensor"  # the kernel fills its iteration: now the pipe says it


# ------------------------------------------------------------------------------------------- two inputs, one case
def test_two_reports_of_one_case_keep_the_later_and_say_so(tmp_path: Path) -> None:
    a = summary(str(tmp_path / "20261121T201340Z-nsys-aaaaaa" / "profile.sqlite"), "nsys",
                [kernel("flash_fwd_sm90", RANGE, 30_000)])
    b = summary(str(tmp_path / "20261122T101010Z-nsys-bbbbbb" / "profile.sqlite"), "nsys",
                [kernel("flash_fwd_sm90", RANGE, 40_000)])
    view = join([a, b])
    (k,) = view.kernels  # one kernel, not one per report (their times were summed before)
    assert k.tools["nsys"].per_iter_ns == 40_000
    (note,) = [n for n in view.notes if "both hold" in n]
    assert "20261121T201340Z-nsys-aaaaaa/profile.sqlite" in note and "20261122T101010Z-nsys-bbbbbb" in note
    assert note.endswith("20261122T101010Z-nsys-bbbbbb/profile.sqlite, is used for them")


def test_two_bench_files_of_one_case_keep_the_later_and_say_so() -> None:
    view = join([], [bench_row("fa4", 0.2, "old.json"), bench_row("eager", 1.0, "old.json"),
                     bench_row("fa4", 0.1, "new.json")])
    c = compare(view)
    assert {r.backend: r.time_ms for r in c.rows} == {"fa4": 0.1, "eager": 1.0}
    assert any("old.json and new.json both hold 1 case(s) (fa4 fwd" in n and "new.json, is used" in n
               for n in c.notes)


def test_two_ncu_recipes_on_one_case_join_without_a_note() -> None:
    tc = summary("tc.ncu-rep", "ncu", [kernel("k", RANGE, 1000, "ncu", {"tensor": 60.0})])
    dram = summary("dram.ncu-rep", "ncu", [kernel("k", RANGE, 1000, "ncu", {"dram__bytes.sum": 5e6})])
    view = join([tc, dram])
    (k,) = view.kernels
    assert set(k.tools["ncu"].metrics) == {"tensor", "dram__bytes.sum"} and not view.notes
    again = summary("tc2.ncu-rep", "ncu", [kernel("k", RANGE, 1000, "ncu", {"tensor": 70.0})])
    view = join([tc, again])
    assert view.kernels[0].tools["ncu"].metrics["tensor"] == 70.0 and "tc2.ncu-rep, is used" in view.notes[0]


# ------------------------------------------------------------------------------------------- names
def test_elide_keeps_both_ends() -> None:
    name = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_128x128x128_4x1x1_kernel0_0"
    short = elide(name, 40)
    assert len(short) == 40 and short.startswith("cudnn_generated_fort") and short.endswith("4x1x1_kernel0_0")
    assert "…" in short and elide("flash_fwd_kernel", 40) == "flash_fwd_kernel"


def test_terminal_tables_keep_full_names_in_footnotes() -> None:
    a = "nvjet_sm90_tst_128x256_64x4_1x2_h_bz_coopA_NNN_with_a_long_tail_that_differs_AAAA"
    b = "nvjet_sm90_tst_128x256_64x4_1x2_h_bz_coopA_NNN_with_a_long_tail_that_differs_BBBB"
    rows, notes = elide_rows([{"kernel": a, "ms": "1.0"}, {"kernel": b, "ms": "2.0"}, {"kernel": a, "ms": "3"}])
    assert rows[0]["kernel"] != rows[1]["kernel"]  # the differing tails survive
    assert rows[0]["kernel"].endswith("[1]") and rows[2]["kernel"].endswith("[1]") and rows[1]["kernel"].endswith("[2]")
    assert notes == [f"[1] {a}", f"[2] {b}"]
    from profctl.render.tables import print_table

    con, buf = text_console()
    print_table(con, "kernels", [{"kernel": a, "ms": "1.0"}])
    text = buf.getvalue()
    assert a in text and "[1]" in text


def test_number_columns_right_text_left() -> None:
    rows = [{"field": "status", "value": "complete", "ms": "1.5", "share": "12%"}, {"field": "x", "value": "-",
                                                                                   "ms": "-", "share": "3.1%"}]
    assert numeric_columns(rows) == {"ms", "share"}


# ------------------------------------------------------------------------------------------- paths
def test_paths_relative_to_here_or_to_the_run(tmp_path: Path) -> None:
    assert display_path(tmp_path / "a" / "x.sqlite", cwd=tmp_path) == os.path.join("a", "x.sqlite")
    other = "/tmp/pr/20261121T201340Z-nsys-cb98e6/profile.sqlite"  # the machine the summary was made on
    assert display_path(other, cwd=tmp_path) == "20261121T201340Z-nsys-cb98e6/profile.sqlite"
    assert display_path("/home/someone/exports/attn.sqlite", cwd=tmp_path) == "attn.sqlite"
    assert display_path("reports/x.json", cwd=tmp_path) == "reports/x.json"


# ------------------------------------------------------------------------------------------- a pipe's width
def test_tables_use_the_full_width_in_a_pipe(tmp_path: Path) -> None:
    """Piped (`| less`, `> file`), a table is not squeezed into 80 columns: one row is one line."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="80")
    env.pop("FORCE_COLOR", None)
    for args in (["report", str(DATA / "bench_h100_s4096.json.gz")],
                 ["report", str(DATA / "nsys_profctl_fwdbwd.sqlite.gz"), "--limit", "5"],
                 ["recipes"]):
        out = subprocess.run([sys.executable, "-m", "profctl", *args], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=120).stdout
        body = [ln for ln in out.splitlines() if ln.startswith("│")]
        assert body and max(len(ln) for ln in out.splitlines()) > 100, args
        if args[-1].endswith("bench_h100_s4096.json.gz"):
            assert sum("sdpa-cudnn" in ln for ln in body) == 2  # two rows, each on one line


# ------------------------------------------------------------------------------------------- axes
def _axes(fig):
    return fig.axes


def test_bars_are_linear_and_lines_go_log_only_across_decades() -> None:
    pytest.importorskip("matplotlib")
    from profctl.render.backend_table_plots import by_seqlen_figure

    with gzip.open(DATA / "bench_h100_s4096.json.gz", "rt") as f:
        rows = json.load(f)
    c = compare(join([], rows, device="NVIDIA H100 80GB HBM3"))
    fig = by_seqlen_figure(c, lambda r: r.time_ms, ylabel="ms", title="t", logy=True)
    for ax in _axes(fig):  # one sequence length: bars
        assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0 and "log" not in ax.get_ylabel()
    lines = []
    for r in rows:
        for s, f in ((1024, 0.1), (4096, 1.0), (16384, 12.0)):
            lines.append(dict(r, seqlen_q=s, seqlen_kv=s, median_ms=(r.get("median_ms") or 0) * f or None))
    fig = by_seqlen_figure(compare(join([], lines)), lambda r: r.time_ms, ylabel="ms", title="t", logy=True)
    assert all(ax.get_yscale() == "log" and "log scale" in ax.get_ylabel() for ax in _axes(fig))
    narrow = [dict(r, seqlen_q=s, seqlen_kv=s, median_ms=r["median_ms"] * f) for r in rows
              if r["backend"] in ("fa4", "sdpa-cudnn") for s, f in ((4096, 1.0), (8192, 2.0))]  # within 2.2x
    fig = by_seqlen_figure(compare(join([], narrow)), lambda r: r.time_ms, ylabel="ms", title="t", logy=True)
    assert all(ax.get_yscale() == "linear" for ax in _axes(fig))


# ------------------------------------------------------------------------------------------- head dims
def test_head_dim_warnings_name_backends_and_why() -> None:
    from profctl.spec import HEAD_DIMS, head_dim_warnings

    (w,) = head_dim_warnings(["flash-attn", "fa4", "sdpa-flash", "sdpa-cudnn", "eager"], [70], ["bf16"])
    assert "flash-attn and sdpa-flash zero-pad it to 72" in w
    assert "fa4 and sdpa-cudnn refuse it" in w and "multiples of 8" in w
    (w,) = head_dim_warnings(["flash-attn", "sdpa-cudnn", "eager"], [320], ["bf16"])
    assert "flash-attn refuses it (the kernels stop at head dim 256" in w and "sdpa-cudnn refuses" in w
    assert head_dim_warnings(["flash-attn", "fa4", "sdpa-flash", "sdpa-cudnn", "eager"], [64, 128], ["bf16"]) == []
    assert head_dim_warnings(["eager", "sdpa-math"], [70, 320], ["fp32"]) == []
    assert all(r.source for r in HEAD_DIMS.values())


def test_readers_see_the_same_kernels_twice(tmp_path: Path) -> None:
    """The same nsys export given twice (two run directories holding it): kernel time is not doubled."""
    from tests.conftest import copy_data

    s1 = copy_data(DATA, "profctl_bwd_nvtx.sqlite", tmp_path)
    d = tmp_path / "again"
    d.mkdir()
    shutil.copy(s1, d / "profctl_bwd_nvtx.sqlite")
    one = readers.read(s1, by_range=True)
    two = readers.read(d / "profctl_bwd_nvtx.sqlite", by_range=True)
    single = compare(join([one]))
    double = compare(join([one, two]))
    assert [r.kernel_ms for r in single.rows] == [r.kernel_ms for r in double.rows]
    assert any("both hold" in n for n in double.notes)
