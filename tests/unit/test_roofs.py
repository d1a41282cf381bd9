"""The speed-of-light roofs of an attention pass, from its shape: the arithmetic, checked by hand."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from profctl import devices
from profctl.roofs import AttentionWork, attention_roofs, row_roofs

H200 = "NVIDIA H200"


def work(**kw: object) -> AttentionWork:
    base = dict(batch=1, heads=32, kv_heads=32, seqlen_q=4096, seqlen_kv=4096, head_dim=128, dtype="bf16")
    base.update(kw)
    return AttentionWork.of(**base)  # type: ignore[arg-type]


def test_forward_work_by_hand() -> None:
    w = work()
    assert w.flops == 4 * 32 * 4096 * 4096 * 128
    assert w.exps == 32 * 4096 * 4096
    assert w.dram_bytes == 4 * 32 * 4096 * 128 * 2  # Q, K, V read, O written, 2 bytes each


def test_causal_alignment_counts_visible_pairs() -> None:
    tl = work(seqlen_q=1024, seqlen_kv=4096, causal=True, causal_align="top-left")
    br = work(seqlen_q=1024, seqlen_kv=4096, causal=True, causal_align="bottom-right")
    assert tl.exps == 32 * (1024 * 1025 // 2)
    assert br.exps == 32 * sum(min(i + 3072 + 1, 4096) for i in range(1024))
    assert br.flops > tl.flops


def test_gqa_reads_fewer_kv_bytes() -> None:
    assert work(kv_heads=8).dram_bytes < work().dram_bytes
    assert work(kv_heads=8).flops == work().flops


def test_backward_and_both_passes() -> None:
    f, b, fb = work(), work(pass_="bwd"), work(pass_="fwd+bwd")
    assert b.flops == pytest.approx(2.5 * f.flops)
    assert fb.flops == pytest.approx(3.5 * f.flops)
    assert fb.exps == 2 * f.exps
    assert b.dram_bytes > f.dram_bytes


def test_h200_roofs_and_the_binding_one() -> None:
    r = attention_roofs(work(), H200)
    assert r is not None and r.device == "H200"
    assert r.get("tensor").seconds == pytest.approx(work().flops / 989.4e12)  # type: ignore[union-attr]
    sfu = devices.lookup(H200).sfu_tops  # type: ignore[union-attr]
    assert sfu == pytest.approx(132 * 16 * 1.98e9 / 1e12)  # exps per second, in 1e12
    assert r.get("sfu").seconds == pytest.approx(work().exps / (sfu * 1e12))  # type: ignore[union-attr]
    assert r.get("dram").seconds == pytest.approx(work().dram_bytes / 4.8e12)  # type: ignore[union-attr]
    assert r.binding.name == "tensor"
    # at head dim 64 the exponentials weigh twice as much against the FLOPs: sfu is close behind
    r64 = attention_roofs(work(head_dim=64), H200)
    assert r64 is not None
    assert r64.get("sfu").seconds / r64.get("tensor").seconds == pytest.approx(  # type: ignore[union-attr]
        989.4 / (sfu * 256), rel=1e-9)


def test_headroom_sentence_and_a_time_under_the_roof() -> None:
    r = attention_roofs(work(), H200)
    assert r is not None
    h = r.against(0.4637e-3)
    assert 59 < h.pct < 61 and math.isclose(h.left_s, 0.4637e-3 - r.binding.seconds)
    assert h.sentence().startswith("60 % of the tensor roof; 0.186 ms left")
    fast = r.against(r.binding.seconds / 2)
    assert fast.above_roof and "wrong" in fast.sentence()


def test_no_roofs_without_a_known_gpu_or_dtype() -> None:
    assert attention_roofs(work(), "cpu") is None
    assert attention_roofs(work(), "Some Future GPU") is None
    assert attention_roofs(work(dtype="fp8"), "NVIDIA A100-SXM4-80GB") is None


def test_row_roofs_from_a_bench_row() -> None:
    row = {"batch": 1, "heads": 32, "kv_heads": 32, "seqlen_q": 4096, "seqlen_kv": 4096, "head_dim": 128,
           "dtype": "bf16", "causal": False, "pass": "fwd"}
    r = row_roofs(row, H200)
    assert r is not None and r.binding.name == "tensor"
    assert row_roofs({"batch": 1}, H200) is None


def test_roofs_import_no_torch() -> None:
    code = "import sys, profctl.roofs; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_a_bench_row_says_how_far_it_is_from_the_roof() -> None:
    from profctl.pipelines.bench_rows import make_row
    from profctl.spec import AttentionSpec

    spec = AttentionSpec("sdpa-cudnn", batch=1, seqlen_q=4096, seqlen_kv=4096, heads=32, kv_heads=32, head_dim=128)
    row = make_row(spec, {"status": "ok", "median_ms": 0.40}, {}, {"name": "NVIDIA H200"})
    assert row.roof == "tensor"
    assert row.roof_ms == pytest.approx(work().flops / 989.4e12 * 1e3)
    assert row.pct_of_roof == pytest.approx(100 * row.roof_ms / 0.40)
    assert not row.suspect
    fast = make_row(spec, {"status": "ok", "median_ms": 0.20}, {}, {"name": "NVIDIA H200"})
    assert fast.suspect and "datasheet peak" in str(fast.suspect_reason)
    cpu = make_row(AttentionSpec("eager", device="cpu"), {"status": "ok", "median_ms": 5.0}, {}, {})
    assert cpu.roof is None and "roof" not in cpu


# ------------------------------------------------------------------------------ the peak table, per GPU
@pytest.mark.parametrize(("name", "model", "sm", "why"), [
    ("NVIDIA GeForce RTX 4090", "RTX 4090", "sm_89", "4090 in the name"),
    ("GeForce RTX4090", "RTX 4090", "sm_89", "4090 in the name"),
    ("NVIDIA GeForce RTX 3090", "RTX 3090", "sm_86", "3090 in the name"),
    ("NVIDIA GeForce RTX 5090", "RTX 5090", "sm_120", "5090 in the name"),
    ("NVIDIA RTX A6000", "RTX A6000", "sm_86", "A6000 in the name"),
    ("NVIDIA A10", "A10", "sm_86", "A10 in the name"),
    ("NVIDIA L4", "L4", "sm_89", "L4 in the name"),
    ("NVIDIA L40", "L40", "sm_89", "L40 in the name"),
    ("NVIDIA L40S", "L40S", "sm_89", "L40S in the name"),
    ("NVIDIA B200", "B200", "sm_100", "B200 in the name"),
    ("NVIDIA GB200", "GB200", "sm_100", "GB200 in the name"),
    ("NVIDIA B300 SXM6 AC", "B300", "sm_103", "B300 in the name"),
    ("NVIDIA GB300", "GB300", "sm_103", "GB300 in the name"),
    ("NVIDIA GH200 480GB", "GH200 480GB", "sm_90", "'480gb'"),
    ("NVIDIA GH200 144G HBM3e", "GH200 144GB HBM3e", "sm_90", "'hbm3e', '144g'"),
    ("NVIDIA GH200", "GH200 480GB", "sm_90", "no variant said"),
    ("NVIDIA H20", "H20", "sm_90", "H20 in the name"),
    ("NVIDIA H200", "H200", "sm_90", "H200 in the name"),
    ("NVIDIA H200 141GB HBM3e", "H200", "sm_90", "H200 in the name"),
    ("NVIDIA H100 80GB HBM3", "H100 SXM5", "sm_90", "'hbm3'"),
    ("NVIDIA H100 PCIe", "H100 PCIe", "sm_90", "'pcie'"),
    ("NVIDIA H100 NVL", "H100 NVL", "sm_90", "'nvl'"),
    ("NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB", "sm_80", "'sxm4', '40gb'"),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB", "sm_80", "'sxm4', '80gb'"),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB", "sm_80", "'pcie', '80gb'"),
    ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB", "sm_80", "'pcie', '40gb'"),
    ("NVIDIA A100 80GB", "A100 SXM4 80GB", "sm_80", "fits A100 SXM4 80GB and A100 PCIe 80GB"),
])
def test_gpu_names_users_tools_print(name: str, model: str, sm: str, why: str) -> None:
    m = devices.match(name)
    assert m.peak is not None and m.peak.model == model and m.peak.sm == sm and why in m.why


@pytest.mark.parametrize(("name", "why"), [
    ("NVIDIA GeForce RTX 4090 D", "'d' in the name is a different part"),
    ("NVIDIA GeForce RTX 4090 Laptop GPU", "'laptop' in the name is a different part"),
    ("NVIDIA GeForce RTX 3090 Ti", "'ti' in the name is a different part"),
    ("NVIDIA H200 NVL", "'nvl' in the name is a different part"),
    ("NVIDIA A10G", "no peak figures"),   # AWS's A10 variant: a word of its own, not an A10; no figures sourced
    ("Tesla T4", "no peak figures"),
    ("Tesla V100-SXM2-16GB", "no peak figures"),
    ("NVIDIA A800-SXM4-80GB", "no peak figures"),
])
def test_other_parts_get_no_figures_and_say_why(name: str, why: str) -> None:
    m = devices.match(name)
    assert m.peak is None and why in m.why and devices.lookup(name) is None


def test_every_entry_is_complete_and_sourced() -> None:
    """Each figure a roof divides by has a source; the architecture's per-SM rates exist."""
    for p in devices.PEAKS:
        assert p.source and p.dram_tbps > 0 and p.cc in devices.ARCHS, p.model
        assert all(p.tflops[d] > 0 for d in ("bf16", "fp16", "fp32")), p.model
        for fig, val in (("sms", p.sms), ("boost_mhz", p.boost_mhz), ("l2", p.l2_bytes),
                         ("fp32_tflops", p.fp32_tflops), ("cc", p.cc)):
            assert fig in p.sources, f"{p.model}: no source for {fig}"
            assert val is not None or "not" in p.sources[fig], f"{p.model}: {fig} missing and the source not saying so"
        a = devices.ARCHS[str(p.cc)]
        assert (p.sfu_per_clk_sm, p.smem_bytes_per_clk_sm) == (a.sfu_per_clk_sm, a.smem_bytes_per_clk_sm)
        assert a.name in p.sfu_source


def test_dense_figures_keep_the_hardware_ratios() -> None:
    """Dense, not sparse: TF32 is half of BF16 and FP8 twice BF16 on every part (within the datasheets' rounding).
    A sparse figure taken by mistake for one dtype breaks the ratio by 2x."""
    for p in devices.PEAKS:
        assert p.tflops["fp32"] == pytest.approx(p.tflops["bf16"] / 2, rel=0.03), p.model
        if "fp8" in p.tflops:
            assert p.tflops["fp8"] == pytest.approx(2 * p.tflops["bf16"], rel=0.03), p.model


def test_geforce_entries_carry_the_fp32_accumulate_rate() -> None:
    """GeForce tensor cores run FP16/BF16 with an FP32 accumulator at half the FP16-accumulate rate: 2x the FP32
    pipe (the FP16-accumulate figure would be 4x). Attention accumulates in FP32, so the 2x figure is the roof."""
    for name in ("NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 5090"):
        p = devices.lookup(name)
        assert p is not None and p.fp32_tflops
        assert p.tflops["bf16"] / p.fp32_tflops == pytest.approx(2.0, rel=0.01), name


def test_sfu_rate_per_architecture() -> None:
    assert {cc: a.sfu_per_clk_sm for cc, a in devices.ARCHS.items()} == {
        "8.0": 16, "8.6": 16, "8.9": 16, "9.0": 16, "10.0": 16, "10.3": 32, "12.0": 16}
    b200, b300 = devices.lookup("NVIDIA B200"), devices.lookup("NVIDIA B300 SXM6 AC")
    assert b200 is not None and b300 is not None
    assert b200.sfu_tops is not None and b200.sfu_tops == pytest.approx(148 * 16 * 1965e6 / 1e12)
    assert b300.sfu_tops == pytest.approx(2 * b200.sfu_tops)          # same SMs and clock, EX2 doubled
    gb200 = devices.lookup("NVIDIA GB200")
    assert gb200 is not None and gb200.sfu_tops == pytest.approx(5.0, rel=0.01)  # NVIDIA's "5 T exponentials/s"
    assert devices.lookup("NVIDIA H20").sfu_tops is None  # type: ignore[union-attr]  # no published clock


def test_shared_memory_fp32_and_l2_helpers() -> None:
    assert devices.smem_tbps(H200) == pytest.approx(132 * 128 * 1980e6 / 1e12)
    assert devices.smem_tbps("NVIDIA GeForce RTX 4090") == pytest.approx(128 * 128 * 2520e6 / 1e12)
    assert devices.smem_tbps("NVIDIA H20") is None and devices.smem_tbps("Tesla T4") is None
    assert devices.fp32_tflops("NVIDIA H100 80GB HBM3") == 67.0 and devices.fp32_tflops("cpu") is None
    assert devices.l2_bytes(H200) == 50 * 2**20 and devices.l2_bytes("NVIDIA B200") == 132644864
    assert devices.lookup("NVIDIA GeForce RTX 4090").l2_mib == 72  # type: ignore[union-attr]


def test_device_peak_stays_backward_compatible() -> None:
    """Code that builds a DevicePeak the old way (five fields, keywords for the rest) still works."""
    p = devices.DevicePeak("X1", ("x1",), {"bf16": 100.0}, 1.0, "a datasheet", sms=10, boost_mhz=1000)
    assert p.sfu_tops == pytest.approx(10 * 16 * 1e9 / 1e12) and p.smem_tbps == pytest.approx(10 * 128 * 1e9 / 1e12)
    assert p.cc is None and p.sm is None and p.arch is None and p.l2_mib is None and p.exclude == ()


def test_roofs_on_other_gpus() -> None:
    """The roofs follow the table: the GeForce FP32-accumulate tensor rate, Blackwell Ultra's doubled EX2, no SFU
    roof where the clock is unknown."""
    r = attention_roofs(work(), "NVIDIA GeForce RTX 4090")
    assert r is not None and r.get("tensor").rate == 165.2  # type: ignore[union-attr]
    b300 = attention_roofs(work(head_dim=64), "NVIDIA B300 SXM6 AC")
    b200 = attention_roofs(work(head_dim=64), "NVIDIA B200")
    assert b300 is not None and b200 is not None
    assert b300.get("sfu").seconds == pytest.approx(b200.get("sfu").seconds / 2)  # type: ignore[union-attr]
    assert "32/clk" in b300.get("sfu").source  # type: ignore[union-attr]
    h20 = attention_roofs(work(), "NVIDIA H20")
    assert h20 is not None and h20.get("sfu") is None and h20.get("tensor") is not None
    assert attention_roofs(work(dtype="fp8"), "NVIDIA GeForce RTX 3090") is None  # no FP8 on Ampere


def test_shared_memory_and_fp32_roofs() -> None:
    from profctl.roofs import fp32_roof, smem_roof

    s = smem_roof(1e9, H200)
    assert s is not None and s.name == "smem" and s.seconds == pytest.approx(1e9 / (132 * 128 * 1980e6))
    assert "128 B/clk" in s.source and "MB at" in s.what
    f = fp32_roof(1e12, "NVIDIA A100-SXM4-40GB")
    assert f is not None and f.seconds == pytest.approx(1e12 / 19.5e12) and "TFLOP at" in f.what
    assert smem_roof(1e9, "NVIDIA H20") is None and fp32_roof(1e9, "cpu") is None


def test_the_docs_table_matches_the_code() -> None:
    """docs/diagnosis.md's "Peaks and roofs per GPU" table has a row per entry with the same figures."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "diagnosis.md").read_text()
    section = text.split("## Peaks and roofs per GPU", 1)[1].split("\n## ", 1)[0]
    rows = {cells[0]: cells for cells in ([c.strip() for c in line.strip("|").split("|")]
                                          for line in section.splitlines() if line.startswith("| "))}
    for p in devices.PEAKS:
        assert p.model in rows, p.model
        cells = rows[p.model]
        assert cells[1] == p.sm and f"{p.tflops['bf16']:g}" == cells[3] and f"{p.dram_tbps:g}" == cells[7], p.model
