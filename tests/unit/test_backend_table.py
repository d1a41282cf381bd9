"""The table of backends: the rules themselves, then on real H100 bench rows and the shared fixtures."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from profctl import devices, readers
from profctl.analysis.backend_table import (
    arithmetic_intensity,
    baseline_breakdown,
    bound,
    bytes_per_s,
    kernel_flops,
    launch_overhead_share,
    peak_for,
    speedup,
    tflops,
    workload_flops,
)
from profctl.analysis.backend_table import build as compare
from profctl.analysis.crosstool import join as merge_view

DATA = Path(__file__).resolve().parent.parent / "data"
FIXTURE_SHAPE = "b4,sq2048,skv2048,h16,kv16,d128,bf16,causal,bhsd"


def bench4096() -> list[dict]:
    with gzip.open(DATA / "bench_h100_s4096.json.gz", "rt") as f:
        return json.load(f)


def test_scalar_rules():
    assert tflops(2e12, 1e9) == pytest.approx(2.0)          # 2 TFLOP in 1 s
    assert tflops(None, 1.0) is None and tflops(1.0, 0) is None
    assert bytes_per_s(3.35e12, 1e9) == pytest.approx(3.35e12)
    assert arithmetic_intensity(1e9, 1e6) == pytest.approx(1000.0)
    assert arithmetic_intensity(1e9, 0) is None
    assert speedup(10.0, 2.0) == pytest.approx(5.0)
    assert launch_overhead_share(80.0, 100.0) == pytest.approx(0.2)
    assert launch_overhead_share(120.0, 100.0) == 0.0      # kernels overlapping the span: no gap, never negative
    assert bound(75, 10, 80) == "tensor" and bound(5, 85, 20) == "DRAM" and bound(5, 10, 70) == "SM"
    assert bound(30, 20, 40) == "latency" and bound(None, None, None) == ""


def test_peaks_have_sources():
    for p in devices.PEAKS:
        assert p.source and p.dram_tbps > 0 and p.tflops["bf16"] > 0
        assert (p.measured_tflops_bf16 is None) == (p.measured_source is None)
    pk = peak_for("NVIDIA H100 80GB HBM3", "bf16")
    assert pk.model == "H100 SXM5" and pk.tflops == pytest.approx(989.4) and pk.dram_bps == pytest.approx(3.35e12)
    assert pk.measured_tflops == pytest.approx(800.0) and pk.measured_source
    assert peak_for("cpu", "fp32").tflops is None


def test_workload_flops_matches_profctl_flops():
    # b1 h32 d128 s4096 non-causal forward: 4 * 32 * 4096^2 * 128
    assert workload_flops("b1,sq4096,skv4096,h32,kv32,d128,bf16,full,bhsd", "fa4", "fwd") == 4 * 32 * 4096**2 * 128
    causal = workload_flops("b1,sq4096,skv4096,h32,kv32,d128,bf16,causal,bhsd", "sdpa-flash", "fwd")
    assert causal == 4 * 32 * (4096 * 4097 // 2) * 128
    assert workload_flops(None, "eager", "fwd") is None


def test_bench_rows_compare():
    """Real H100 rows: time, TFLOP/s and speedup come out as bench computed them; % of peak from the table."""
    rows = bench4096()
    c = compare(merge_view([], rows, device="NVIDIA H100 80GB HBM3"))
    by = {(r.backend, r.causal): r for r in c.rows}
    fa4 = by[("fa4", False)]
    src = next(r for r in rows if r["backend"] == "fa4" and not r["causal"])
    assert fa4.time_ms == pytest.approx(src["median_ms"])
    assert fa4.tflops == pytest.approx(src["tflops"])
    assert fa4.speedup == pytest.approx(src["speedup"])
    assert fa4.pct_peak == pytest.approx(100 * src["tflops"] / 989.4)
    assert fa4.pct_measured_peak == pytest.approx(100 * src["tflops"] / 800.0)
    assert fa4.peak_mem_bytes == src["peak_mem_bytes"]
    assert by[("eager", True)].speedup == pytest.approx(1.0)
    assert by[("flash-attn", True)].status == "unsupported" and by[("flash-attn", True)].time_ms is None
    # FA4 beats the eager baseline by more than 8x at s4096 on both masks
    assert by[("fa4", True)].speedup > 20 and fa4.speedup > 8
    assert c.baseline == "eager" and c.dtype == "bf16"


def test_bench_rows_without_device_use_rows_peak():
    c = compare(merge_view([], bench4096()))
    assert c.device is None and c.peak.tflops == pytest.approx(989.4)
    fa4 = next(r for r in c.rows if r.backend == "fa4" and not r.causal)
    assert fa4.pct_peak == pytest.approx(71.53, abs=0.01)


@pytest.fixture
def fixture_comparison(shared_fixture):
    ss = [readers.read(shared_fixture(n), by_range=True)
          for n in ("attn.sqlite", "attn_tc.ncu-rep", "torch_trace.json.gz")]
    view = merge_view(ss, shape=FIXTURE_SHAPE)
    return view, compare(view)


def test_fixture_comparison(fixture_comparison):
    _view, c = fixture_comparison
    assert c.device == "NVIDIA H100 80GB HBM3" and c.peak.model == "H100 SXM5"
    by = {(r.backend, r.pass_): r for r in c.rows}
    flash = by[("sdpa-flash", "fwd")]
    # time from the nsys range of one iteration (median of it0..it2)
    assert flash.time_source == "nsys range" and flash.time_ms == pytest.approx(0.273669)
    f = 4 * 4 * 16 * (2048 * 2049 // 2) * 128
    assert flash.flops == f and flash.tflops == pytest.approx(f / 0.273669e-3 / 1e12)
    assert flash.kernels_per_iter == pytest.approx(1.0)
    # the why: ncu's figures of its one kernel
    assert flash.main_kernel == "flash_fwd_kernel"
    # one figure for every view (profctl.analysis.figures): % of active cycles, as the diagnosis says (51.7)
    assert flash.tensor_pct == pytest.approx(51.71, abs=0.01)
    assert flash.dram_bytes == pytest.approx(120295168.0 + 34991360.0)
    assert flash.arithmetic_intensity == pytest.approx(f / (120295168.0 + 34991360.0))
    eager = by[("eager", "fwd")]
    assert eager.speedup == pytest.approx(1.0)
    assert flash.speedup == pytest.approx(eager.time_ms / flash.time_ms)
    assert eager.kernels_per_iter == pytest.approx(7.0)
    assert 0.0 < eager.launch_overhead < 0.5


def test_fixture_baseline_breakdown(fixture_comparison):
    _, c = fixture_comparison
    (fwd,) = [b for b in baseline_breakdown(c) if b["pass"] == "fwd"]
    assert set(k for k in fwd if k.endswith("_ms")) == {"total_ms", "gemm_ms", "softmax_ms", "elementwise_ms"}
    assert math.isclose(fwd["gemm_share"] + fwd["softmax_share"] + fwd["elementwise_share"], 1.0)
    # two nsys GEMMs of ~225 us each
    assert fwd["gemm_ms"] == pytest.approx(0.2245 + 0.2259, abs=0.002)


def test_fixture_roofline_points(fixture_comparison):
    _view, c = fixture_comparison
    pts = {(p.backend, p.kernel): p for p in c.roofline}
    flash = pts[("sdpa-flash", "flash_fwd_kernel")]
    assert flash.dram_bytes == pytest.approx(155286528.0) and flash.time_ns == pytest.approx(278144.0)
    assert flash.tflops == pytest.approx(flash.flops / 278144.0 / 1e3)
    gemms = [p for p in c.roofline if p.kernel_class == "gemm"]
    assert len(gemms) == 2
    assert all(p.flops == 2 * 4 * 16 * 2048 * 2048 * 128 for p in gemms)
    # every placed point lies under the datasheet roof
    for p in c.roofline:
        assert p.tflops <= min(c.peak.tflops, p.ai * c.peak.dram_bps / 1e12) * 1.05
    # softmax and elementwise kernels carry no FLOPs of their own: listed, not placed
    assert any("softmax_warp_forward" in u for u in c.unplaced)


def test_kernel_flops_only_main_fused_kernel(data_file):
    view = merge_view([readers.read(data_file("profctl_bwd_nvtx.sqlite"), by_range=True)])
    shape = "b1,sq1024,skv1024,h8,kv8,d128,bf16,full,bhsd"
    bwd = view.kernels_of("sdpa-flash", "bwd", shape)
    flops = {k.short_name: kernel_flops(k, bwd) for k in bwd if k.kernel_class == "flash_bwd"}
    assert flops["flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel"] == 2.5 * 4 * 8 * 1024 * 1024 * 128
    assert flops["flash_bwd_dot_do_o_kernel"] is None and flops["flash_bwd_convert_dq_kernel"] is None


def test_comparison_json_is_strict(fixture_comparison):
    _, c = fixture_comparison
    d = c.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["schema"] == "profctl.comparison/1" and d["peak"]["source"]
    assert {r["pass"] for r in d["rows"]} == {"fwd", "bwd"}
