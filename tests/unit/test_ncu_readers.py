"""The ncu readers on the shared H100 fixtures: the .ncu-rep (through ncu_report) and the CSV exports of the
same report must give the same launches and the same values (to the precision ncu printed)."""

from __future__ import annotations

import gzip
import math
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from profctl.errors import BadReport
from profctl.readers import _ncu, ncu_csv, ncu_rep, read

pytest.importorskip("ncu_report")

Get = Callable[[str], Path]


def _close(a: float, b: float, *, display: bool = False) -> bool:
    """Raw CSV prints two decimals; the details page prints display units (1.02 Kbyte for 1024 bytes)."""
    if display:
        return math.isclose(a, b, rel_tol=5e-3, abs_tol=0.006)
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0051)


def test_raw_csv_and_rep_give_the_same_launches(shared_fixture: Get) -> None:
    a, version, reader = ncu_rep.read_launches(shared_fixture("attn_tc.ncu-rep"))
    b = ncu_csv.read_launches(shared_fixture("attn_tc_raw.csv"))
    assert version == "2025.3.1.0" and reader.startswith("ncu_report")
    assert [x.id for x in a] == [x.id for x in b] == list(range(10))
    assert [x.base_name for x in a] == [x.base_name for x in b]
    assert [x.nvtx for x in a] == [x.nvtx for x in b]
    assert a[7].nvtx == ("sdpa_flash.fwd.it1",) and a[7].base_name == "flash_fwd_kernel"
    for x, y in zip(a, b, strict=True):
        assert (x.grid, x.block, x.registers, x.shared_mem_bytes) == (y.grid, y.block, y.registers, y.shared_mem_bytes)
        assert set(x.metrics) == set(y.metrics)
        assert x.units == y.units
        for k, v in x.metrics.items():
            assert _close(v, y.metrics[k]), (x.id, k, v, y.metrics[k])
    nvjet = a[0]
    assert nvjet.grid == (2, 66, 1) and nvjet.block == (384, 1, 1) and nvjet.registers == 168
    assert nvjet.metrics["gpu__time_duration.sum"] == 225056.0 and nvjet.units["gpu__time_duration.sum"] == "ns"
    assert nvjet.metrics["dram__bytes_read.sum"] == 67256064.0 and nvjet.units["dram__bytes_read.sum"] == "byte"


def test_details_csv_and_rep_give_the_same_values(shared_fixture: Get) -> None:
    a, _, _ = ncu_rep.read_launches(shared_fixture("flash_sol.ncu-rep"))
    b = ncu_csv.read_launches(shared_fixture("flash_sol_details.csv"))
    assert [x.base_name for x in a] == [x.base_name for x in b] == [
        "flash_fwd_kernel", "flash_bwd_dot_do_o_kernel", "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel",
        "flash_bwd_convert_dq_kernel"]
    compared = 0
    for x, y in zip(a, b, strict=True):
        assert not y.details, y.details  # every details label maps to a metric name
        assert (x.grid, x.block, x.registers) == (y.grid, y.block, y.registers)
        for k, v in y.metrics.items():
            assert k in x.metrics, k
            assert _close(x.metrics[k], v, display=True), (x.id, k, x.metrics[k], v)
            compared += 1
        # rule results: same rules, types and estimated speedups
        ra = sorted((r["rule"], r["type"], round(r["speedup"] or 0, 1)) for r in x.rules)
        rb = sorted((r["rule"], r["type"], round(r["speedup"] or 0, 1)) for r in y.rules)
        assert ra == rb
    assert compared >= 4 * 50
    # details units normalised: Duration us -> ns, SM Frequency Ghz -> hz, Memory Throughput Gbyte/s -> byte/s
    assert b[0].metrics["gpu__time_duration.sum"] == pytest.approx(271230.0)
    assert b[0].units["gpu__time_duration.sum"] == "ns"
    assert b[0].metrics["gpc__cycles_elapsed.avg.per_second"] == pytest.approx(1.79e9)
    assert b[0].metrics["dram__bytes.sum.per_second"] == pytest.approx(571.43e9)


def test_summaries_agree_between_rep_and_csv(shared_fixture: Get) -> None:
    s_rep = read(shared_fixture("attn_tc.ncu-rep"))
    s_csv = read(shared_fixture("attn_tc_raw.csv"))
    assert len(s_rep.kernels) == len(s_csv.kernels) == 10
    key = lambda k: min(k.extra["ids"])  # noqa: E731
    for x, y in zip(sorted(s_rep.kernels, key=key), sorted(s_csv.kernels, key=key), strict=True):
        assert (x.short_name, x.nvtx_range, x.count, x.kernel_class) == (y.short_name, y.nvtx_range, y.count,
                                                                        y.kernel_class)
        assert x.total_ns == y.total_ns and x.tool == "ncu"
        for k, v in x.metrics.items():
            assert _close(v, y.metrics[k])
    flash = next(k for k in s_rep.kernels if k.short_name == "flash_fwd_kernel")
    assert flash.kernel_class == "flash_fwd" and flash.nvtx_range == "sdpa_flash.fwd.it1"
    assert flash.metrics["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"] == pytest.approx(
        51.71, abs=0.01)
    assert s_rep.sources[0].tool_version == "2025.3.1.0"


def test_grouping_averages_metrics_and_counts_launches(shared_fixture: Get) -> None:
    # without ranges, the two vectorized_elementwise_kernel instantiations stay apart (different names) and the
    # two nvjet GEMMs are different kernels too: 10 launches, 10 rows, each count 1
    s = read(shared_fixture("attn_tc.ncu-rep"), by_range=False)
    assert sum(k.count for k in s.kernels) == 10
    assert all(k.nvtx_range is None for k in s.kernels)
    # grouping per kernel over launches: fake three launches of one kernel and check mean and count
    base = dict(name="k", base_name="k")
    ls = [_ncu.Launch(id=i, metrics={"gpu__time_duration.sum": d, "x__y.sum": v}, **base)  # type: ignore[arg-type]
          for i, (d, v) in enumerate([(100.0, 1.0), (300.0, 2.0), (200.0, 6.0)])]
    row = _ncu.summarize(ls, path=Path("x"), tool_version=None, reader="t").kernels[0]
    assert row.count == 3 and row.metrics["x__y.sum"] == 3.0
    assert (row.total_ns, row.avg_ns, row.med_ns, row.min_ns, row.max_ns) == (600.0, 200.0, 200.0, 100.0, 300.0)


def test_gzipped_rep_reads_like_the_plain_one(shared_fixture: Get, tmp_path: Path) -> None:
    plain = shared_fixture("attn_tc.ncu-rep")
    gz = tmp_path / "copy.ncu-rep.gz"
    with open(plain, "rb") as fi, gzip.open(gz, "wb", compresslevel=1) as fo:
        shutil.copyfileobj(fi, fo)
    before = gz.read_bytes()
    a, b = read(plain), read(gz)
    assert [k.metrics for k in a.kernels] == [k.metrics for k in b.kernels]
    assert gz.read_bytes() == before  # the user's file is untouched


def test_truncated_rep_is_a_one_line_error(shared_fixture: Get, tmp_path: Path) -> None:
    data = shared_fixture("flash_sol.ncu-rep").read_bytes()
    for n in (10, 1000, len(data) // 2, len(data) - 10):
        p = tmp_path / f"cut{n}.ncu-rep"
        p.write_bytes(data[:n])
        with pytest.raises(BadReport, match="truncated") as e:
            read(p)
        assert "\n" not in e.value.one_line()


def test_foreign_file_named_ncu_rep_is_rejected(tmp_path: Path) -> None:
    p = tmp_path / "x.ncu-rep"
    p.write_bytes(b"definitely not a report" * 10)
    with pytest.raises(BadReport, match="not an Nsight Compute report"):
        read(p)


def test_report_from_a_newer_ncu_is_refused(shared_fixture: Get, tmp_path: Path) -> None:
    data = shared_fixture("flash_sol.ncu-rep").read_bytes()
    assert data.count(b"2025.3.1.0") >= 1
    p = tmp_path / "future.ncu-rep"
    p.write_bytes(data.replace(b"2025.3.1.0", b"2099.1.0.0"))  # same length: the container stays valid
    assert _ncu.check_rep(p).tool_version == "2099.1.0.0"
    with pytest.raises(BadReport, match=r"written by Nsight Compute 2099\.1\.0\.0, newer than this reader"):
        read(p)


def test_truncated_and_malformed_csv(shared_fixture: Get, tmp_path: Path) -> None:
    text = shared_fixture("attn_tc_raw.csv").read_text()
    cut = tmp_path / "cut.csv"
    cut.write_text(text[: len(text) - 5000])
    with pytest.raises(BadReport, match="truncated ncu CSV"):
        read(cut)
    empty = tmp_path / "hdr.csv"
    empty.write_text('"Kernel Name","x"\n')
    with pytest.raises(BadReport):
        ncu_csv.read_launches(empty)


@pytest.mark.parametrize(("value", "unit", "expected"), [
    (271.23, "us", (271230.0, "ns")), (1.5, "msecond", (1.5e6, "ns")), (2.62, "Ghz", (2.62e9, "hz")),
    (9.83, "Mbyte", (9.83e6, "byte")), (1.02, "Kbyte/block", (1020.0, "byte/block")),
    (571.43, "Gbyte/s", (571.43e9, "byte/s")), (3.0, "Tbyte/second", (3e12, "byte/s")), (41.7, "%", (41.7, "%")),
    (1.75, "inst/cycle", (1.75, "inst/cycle")), (255.0, "register/thread", (255.0, "register/thread")),
    (7.0, "", (7.0, "")),
])
def test_units_to_base(value: float, unit: str, expected: tuple[float, str]) -> None:
    v, u = _ncu.to_base(value, unit)
    assert u == expected[1] and v == pytest.approx(expected[0])


def test_numbers_and_nvtx_cells() -> None:
    assert _ncu.parse_number("1,980,000") == 1980000.0
    assert _ncu.parse_number("7,943.76") == pytest.approx(7943.76)
    assert _ncu.parse_number("n/a") is None and _ncu.parse_number("PolicySpread") is None
    cell = ('570  "profctl:sdpa-flash[b1,sq2048,skv2048,h32,kv32,d128,bf16,full,bhsd]:none:none:none:none:none:none" '
            '"profctl:measure:none:none:none:none:none:none" "profctl:sdpa-flash.fwd:none:none:none:none:none:none" ')
    assert ncu_csv.parse_nvtx_cell(cell) == (
        "profctl@sdpa-flash[b1,sq2048,skv2048,h32,kv32,d128,bf16,full,bhsd]/measure/sdpa-flash.fwd",)
    assert ncu_csv.parse_nvtx_cell('1 "<default domain>:a.fwd.it1:none:none:none:none:none:none"') == ("a.fwd.it1",)


# ---- profctl's own report (tests/data, see its README): nested profctl NVTX ranges, backward on autograd's thread
def test_profctl_made_report_rep_and_csv(data_file: Get) -> None:
    a, version, _ = ncu_rep.read_launches(data_file("ncu_profctl_fwdbwd.ncu-rep"))
    b = ncu_csv.read_launches(data_file("ncu_profctl_fwdbwd_raw.csv"))
    assert version == "2025.3.1.0"
    case = "profctl@sdpa-flash[b1,sq256,skv256,h2,kv2,d128,bf16,full,bhsd]/measure/"
    assert [x.nvtx for x in a] == [x.nvtx for x in b]
    assert [x.nvtx[0] for x in a] == [case + "sdpa-flash.fwd"] * 2 + [case + "sdpa-flash.bwd"] * 5
    assert [x.base_name for x in a] == [
        "flash_fwd_splitkv_kernel", "flash_fwd_splitkv_combine_kernel", "elementwise_kernel", "elementwise_kernel",
        "flash_bwd_dot_do_o_kernel", "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel", "flash_bwd_convert_dq_kernel"]
    for x, y in zip(a, b, strict=True):
        assert (x.grid, x.block, x.registers, x.shared_mem_bytes) == (y.grid, y.block, y.registers, y.shared_mem_bytes)
        assert set(x.metrics) == set(y.metrics)
        for k, v in x.metrics.items():
            assert _close(v, y.metrics[k]), (x.id, k, v, y.metrics[k])


def test_profctl_made_report_summary(data_file: Get) -> None:
    from profctl import recipes
    from profctl.analysis.diagnose import diagnose

    s = read(data_file("ncu_profctl_fwdbwd.ncu-rep.gz"))
    assert sum(k.count for k in s.kernels) == 7
    ew = [k for k in s.kernels if k.short_name == "elementwise_kernel"]
    assert len(ew) == 1 and ew[0].count == 2  # the same kernel launched twice in the measured backward
    ds = diagnose(s, recipes.get("occupancy"), (9, 0), backend_order=["sdpa-flash"])
    assert [d.pass_ for d in ds] == ["bwd"] * 4 + ["fwd"] * 2
    dq = next(d for d in ds if d.kernel == "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel")
    assert dq.theoretical_occupancy == pytest.approx(12.5)
    assert any("Registers allow one block per SM" in n for n in dq.notes)
