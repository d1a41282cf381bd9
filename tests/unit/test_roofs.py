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
