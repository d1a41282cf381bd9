"""The seeds' table layouts from bench rows (profctl.analysis.seed_tables, profctl.render.seed_tables_view): each
preset on recorded H100 rows where they have the shapes, on constructed rows (tests/data/constructed_rows.py)
where they do not, and in every format."""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest

from profctl.analysis import seed_tables as st
from profctl.errors import NothingMatched, UsageError
from profctl.render import seed_tables_view
from tests.conftest import DATA

H100_SWEEP = "bench_h100_b1h32d128_fwd.json.gz"  # recorded: b1 h32 d128 fwd, seqlen 1k-16k, 4 backends
H100_S4096 = "bench_h100_s4096.json.gz"  # recorded: every backend at seqlen 4096
H200 = "seed004_h200_constructed.json.gz"
BATCH = "batch_scaling_constructed.json.gz"
TORCH_TRITON = "torch_triton_constructed.json.gz"


def rows(*names: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in names:
        with gzip.open(DATA / n, "rt") as f:
            out += json.load(f)
    return out


def texts(p: st.Panel) -> list[dict[str, str]]:
    return [{c: r[c].text for c in p.columns} for r in p.rows]


def median(rs_: list[dict[str, Any]], backend: str, seqlen: int, causal: bool = False, dtype: str = "bf16") -> float:
    return next(float(r["median_ms"]) for r in rs_ if r["backend"] == backend and r["seqlen_q"] == seqlen
                and r["causal"] == causal and r["dtype"] == dtype)


# ------------------------------------------------------------------------------------------------ seed 004
def test_forward_table_on_the_recorded_h100_sweep() -> None:
    data = rows(H100_SWEEP)
    t = st.build("seed-004-forward", data, device="H100 80GB HBM3")
    assert [p.context["causal"] for p in t.panels] == [False, True]
    p = t.panels[0]
    assert p.columns == ["Seq Length", "Standard (eager)", "Flash Attn 2 (sdpa-flash)", "cuDNN (sdpa-cudnn)",
                         "FA4 (fa4)", "Best Speedup", "Best"]
    assert p.title.startswith("H100 80GB HBM3: forward pass time (ms), batch=1, heads=32, dim=128, bf16")
    assert [r["Seq Length"] for r in texts(p)] == ["1024", "2048", "4096", "8192", "16384"]
    row = p.rows[2]  # 4096
    for col, backend in (("Standard (eager)", "eager"), ("Flash Attn 2 (sdpa-flash)", "sdpa-flash"),
                         ("cuDNN (sdpa-cudnn)", "sdpa-cudnn"), ("FA4 (fa4)", "fa4")):
        assert row[col].value == pytest.approx(median(data, backend, 4096))
    best = min(median(data, b, 4096) for b in ("sdpa-flash", "sdpa-cudnn", "fa4"))
    assert row["Best Speedup"].value == pytest.approx(median(data, "eager", 4096) / best)
    assert row["Best Speedup"].text == f"{median(data, 'eager', 4096) / best:.1f}x" and row["Best"].text == "FA4 (fa4)"
    notes = " ".join(t.notes)
    assert "No FlashAttention-3 here" in notes and "No fp8 rows" in notes and "constructed" not in notes


def test_forward_table_takes_triton_bf16_and_fp8_into_one_panel() -> None:
    t = st.build("seed-004-forward", rows(H200))
    assert len(t.panels) == 1 and t.panels[0].context["dtype"] == "bf16"
    p = t.panels[0]
    assert p.columns[-4:] == ["Triton bf16 (triton)", "Triton FP8 (triton)", "Best Speedup", "Best"]
    assert all(r["Triton FP8 (triton)"].value for r in p.rows)
    assert texts(p)[0]["Best"] == "Triton FP8 (triton)"  # at 1024 the constructed FP8 row is the fastest
    notes = " ".join(t.notes)
    assert "Triton FP8, the triton rows in dtype fp8" in notes and "not FA3" in notes
    assert "30 of these 30 rows are marked constructed" in notes


def test_fp8_rows_a_backend_refused_make_no_column() -> None:
    data = rows(H200)
    refused = [dict(r, backend=b, status="unsupported", median_ms=None) for r in data if r["dtype"] == "fp8"
               for b in ("eager", "sdpa-flash")]
    t = st.build("seed-004-forward", data + refused)
    assert t.panels[0].columns == st.build("seed-004-forward", data).panels[0].columns
    assert not any("left out" in n for n in t.notes)


def test_fp8_rows_alone_make_their_own_panel() -> None:
    fp8 = [r for r in rows(H200) if r["dtype"] == "fp8"]
    t = st.build("seed-004-forward", fp8)
    (p,) = t.panels
    assert p.context["dtype"] == "fp8" and "Triton FP8 (triton)" in p.columns
    assert {r["Standard (eager)"] for r in texts(p)} == {"-"}


def test_every_backend_at_one_length_says_what_it_left_out() -> None:
    t = st.build("seed-004-forward", rows(H100_S4096))
    p = t.panels[0]
    assert "flash-attn" in p.columns and texts(p)[0]["flash-attn"] == "N/A"  # not installed: unsupported
    assert any("left out: sdpa-efficient, sdpa-math" in n for n in t.notes)
    assert any(n.startswith("flash-attn: the flash-attn package") for n in t.notes)


def test_baseline_is_the_standard_column() -> None:
    t = st.build("seed-004-forward", rows(H100_S4096), baseline="sdpa-math")
    assert t.panels[0].columns[1] == "Standard (sdpa-math)"
    assert t.notes[0].startswith("Standard = sdpa-math")


def test_time_per_token_and_its_speedup_rows() -> None:
    data = rows(H100_SWEEP)
    t = st.build("seed-004-time-per-token", data)
    p = t.panels[0]
    assert p.columns == ["Sequence", "1K", "2K", "4K", "8K", "16K"]
    by = {r["Sequence"].text: r for r in p.rows}
    assert by["FA4 (fa4)"]["4K"].value == pytest.approx(median(data, "fa4", 4096) * 1e3 / 4096)
    sp = by["Speedup: Flash Attn 2 (sdpa-flash)"]["16K"]
    assert sp.value == pytest.approx(median(data, "eager", 16384) / median(data, "sdpa-flash", 16384))
    assert [r["Sequence"].text for r in p.rows][:4] == ["Standard (eager)", "Flash Attn 2 (sdpa-flash)",
                                                        "cuDNN (sdpa-cudnn)", "FA4 (fa4)"]


def test_memory_per_token_is_flat_for_fa4_and_grows_for_eager() -> None:
    t = st.build("seed-004-memory-per-token", rows(H100_SWEEP))
    by = {r["Sequence"].text: r for r in t.panels[0].rows}
    fa4 = [by["FA4 (fa4)"][c].value for c in ("1K", "2K", "4K", "8K", "16K")]
    assert fa4 == [pytest.approx(1 / 32)] * 5  # Q, K, V, O in bf16: 4 x 32 x 128 x 2 bytes per token
    eager = [by["Standard (eager)"][c].value or 0 for c in ("1K", "2K", "4K", "8K", "16K")]
    assert eager == sorted(eager) and eager[-1] > 10 * eager[0]
    assert not any(r["Sequence"].text.startswith("Speedup") for r in t.panels[0].rows)


# ------------------------------------------------------------------------------------------------ seed 002
def test_batch_scaling_speedup_and_efficiency() -> None:
    data = rows(BATCH)
    t = st.build("seed-002-batch", data)
    assert [p.context["backend"] for p in t.panels] == ["eager", "sdpa-flash"]
    p = t.panels[1]
    assert p.columns == ["Batch Size", "Problem Size (BxSxHxD)", "ms", "Speedup vs Batch=1", "Efficiency"]
    t1 = next(r["median_ms"] for r in data if r["backend"] == "sdpa-flash" and r["batch"] == 1)
    t8 = next(r["median_ms"] for r in data if r["backend"] == "sdpa-flash" and r["batch"] == 8)
    r8 = texts(p)[3]
    assert r8["Batch Size"] == "8" and r8["Problem Size (BxSxHxD)"] == "8x1024x32x128"
    assert p.rows[3]["Speedup vs Batch=1"].value == pytest.approx(8 * t1 / t8)
    assert p.rows[3]["Efficiency"].value == pytest.approx(100 * t1 / t8)
    assert texts(p)[0]["Speedup vs Batch=1"] == "1.00x" and texts(p)[0]["Efficiency"] == "100.0%"


def test_batch_scaling_needs_two_batches() -> None:
    with pytest.raises(NothingMatched, match="two or more batch sizes"):
        st.build("seed-002-batch", rows(H100_SWEEP))


# ------------------------------------------------------------------------------------------------ seed 003
def test_torch_triton_has_the_seed_columns_and_says_oom() -> None:
    data = rows(TORCH_TRITON)
    t = st.build("seed-003-torch-triton", data)
    (p,) = t.panels
    assert p.columns == ["seq_len", "d_model", "precision", "ft_torch", "bt_torch", "fbt_torch", "ft_triton",
                         "bt_triton", "fbt_triton", "speedup_fwd", "speedup_bwd", "speedup_tot"]
    assert len(p.rows) == 12
    oom = next(r for r in texts(p) if r["seq_len"] == "16384" and r["d_model"] == "64" and r["precision"] == "fp32")
    assert oom["bt_torch"] == "OOM" and oom["fbt_torch"] == "OOM" and oom["speedup_bwd"] == "N/A"
    assert oom["speedup_fwd"].endswith("x")
    first = p.rows[0]
    assert first["speedup_tot"].value == pytest.approx(first["fbt_torch"].value / first["fbt_triton"].value)


def test_torch_triton_takes_ft_and_bt_from_a_fwd_bwd_row() -> None:
    both = [dict(r, fwd_median_ms=1.0, bwd_median_ms=2.0) for r in rows(TORCH_TRITON) if r["pass"] == "fwd+bwd"]
    p = st.build("seed-003-torch-triton", both).panels[0]
    r = texts(p)[0]
    assert (r["ft_torch"], r["bt_triton"]) == ("1.000", "2.000") and r["fbt_torch"] != "-"


def test_torch_triton_without_triton_rows_says_so() -> None:
    with pytest.raises(NothingMatched, match="no triton rows"):
        st.build("seed-003-torch-triton", rows(H100_SWEEP))


def test_unknown_preset_names_the_presets() -> None:
    with pytest.raises(UsageError, match="seed-004-forward"):
        st.build("seed-999", rows(H100_SWEEP))


# ------------------------------------------------------------------------------------------------ formats
@pytest.mark.parametrize("name", list(st.PRESETS))
def test_every_preset_in_every_format(name: str) -> None:
    data = {"seed-002-batch": rows(BATCH), "seed-003-torch-triton": rows(TORCH_TRITON)}.get(name, rows(H200))
    t = st.build(name, data)
    md = seed_tables_view.to_markdown(t)
    assert md.count("## ") == len(t.panels) and "| " + " | ".join(t.panels[0].columns) + " |" in md
    assert all(f"- {n}" in md for n in t.notes)
    got = list(csv.DictReader(io.StringIO(seed_tables_view.to_csv(t))))
    assert len(got) == sum(len(p.rows) for p in t.panels)
    assert set(t.panels[0].columns) <= set(got[0]) and set(t.panels[0].context) <= set(got[0])
    doc = json.loads(seed_tables_view.to_json(t))
    assert doc["schema"] == "profctl.seed-table/1" and doc["panels"][0]["columns"] == t.panels[0].columns
    page = seed_tables_view.to_html(t)
    assert "<script" not in page and page.count("<table") == len(t.panels)
    assert ("No FlashAttention-3" in page) == name.startswith("seed-004")


def test_csv_numbers_are_unrounded() -> None:
    data = rows(H100_SWEEP)
    got = list(csv.DictReader(io.StringIO(seed_tables_view.to_csv(st.build("seed-004-forward", data)))))
    r = next(x for x in got if x["Seq Length"] == "4096" and x["causal"] == "False")
    assert float(r["FA4 (fa4)"]) == median(data, "fa4", 4096)
    assert float(r["Best Speedup"]) == pytest.approx(median(data, "eager", 4096) / median(data, "fa4", 4096))


def test_the_generator_makes_the_constructed_files(tmp_path: Path) -> None:
    """The constructed files are what tests/data/constructed_rows.py writes (nobody edited them by hand)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("constructed_rows", DATA / "constructed_rows.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert json.loads(json.dumps(mod.seed004())) == rows(H200)
    assert json.loads(json.dumps(mod.batch_scaling())) == rows(BATCH)
    assert json.loads(json.dumps(mod.torch_triton())) == rows(TORCH_TRITON)


def test_seed_004_forward_on_the_rows_recorded_on_the_h200() -> None:
    """The preset on real rows (tests/data/seed004_h200.json.gz, recorded with profctl bench on an H200)."""
    import gzip
    import json
    import subprocess
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "data" / "seed004_h200.json.gz"
    with gzip.open(path) as fh:
        rows = json.loads(fh.read())
    assert {r["backend"] for r in rows} == {"eager", "sdpa-flash", "sdpa-cudnn", "triton"}
    out = subprocess.run([sys.executable, "-m", "profctl", "report", str(path), "--table", "seed-004-forward",
                          "-f", "csv"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    import csv
    import io

    table = list(csv.DictReader(io.StringIO(out.stdout)))
    assert "Triton FP8 (triton)" in table[0] and table[0]["gpu"] == "NVIDIA H200"
    assert [r["Seq Length"] for r in table] == ["512", "1024", "2048", "4096", "8192"]
    eager = {r["seqlen_q"]: r["median_ms"] for r in rows if r["backend"] == "eager"}
    assert float(table[3]["Standard (eager)"]) == pytest.approx(eager[4096], rel=1e-6)
    assert table[3]["Best"] == "Triton FP8 (triton)"
