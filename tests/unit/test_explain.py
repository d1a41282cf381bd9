"""`profctl explain` on a recorded pair of real attention kernels: profctl's Triton FlashAttention-2 forward and
cuDNN's, b1 h32 s4096 d128 bf16, recorded on an H200 with plain ncu (tests/data/planted/attn_pair.py)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from profctl.analysis import explanation
from profctl.analysis import select as kernel_select
from profctl.errors import NothingMatched
from profctl.readers.ncu_profiles import read_profiles
from profctl.schema.profile import KernelProfile

pytest.importorskip("ncu_report")

PAIR = Path(__file__).resolve().parents[1] / "data" / "planted" / "attn_pair.ncu-rep.xz"


@cache
def pair() -> tuple[KernelProfile, KernelProfile]:
    ps = read_profiles(PAIR)
    a, _ = kernel_select.select(ps, "_fwd_kernel", "pair")
    b, _ = kernel_select.select(ps, "cudnn", "pair")
    return a, b


def test_the_parts_add_up_to_the_measured_gap() -> None:
    a, b = pair()
    e = explanation.explain(a, b)
    gap_us = (a.duration_ns - b.duration_ns) / 1e3  # type: ignore[operator]
    assert gap_us > 40  # Triton is behind cuDNN in this recording
    total = sum(f.us for f in explanation.factors(a, b)[0]) + e.remainder_us
    assert total == pytest.approx(gap_us, abs=0.3)
    assert abs(e.remainder_us) < 0.05 * gap_us
    assert "A is 12.4% slower" in e.headline


def test_the_ranking_names_barrier_stalls_and_resident_warps() -> None:
    a, b = pair()
    fs, _, _ = explanation.factors(a, b)
    slower = [f for f in fs if f.us > 0]
    assert slower[0].name == "stall: barrier"
    assert {"resident warps", "stall: MIO throttle"} <= {f.name for f in slower[:4]}
    faster = [f for f in fs if f.us < 0]
    assert faster[0].name == "instructions"  # Triton issues fewer instructions: that part makes it faster
    assert any(f.name == "SM clock" for f in faster)  # it also ran at a higher clock: said, not hidden


def test_side_by_side_rows() -> None:
    a, b = pair()
    rows = {r.quantity: r for r in explanation.side_by_side(a, b)}
    assert rows["tensor pipe"].va == pytest.approx(64.08, abs=0.01)
    assert rows["tensor pipe"].vb == pytest.approx(75.64, abs=0.01)
    assert rows["registers per thread"].a == "190" and rows["registers per thread"].b == "168"
    assert rows["grid"].b.startswith("persistent: 132 blocks")
    assert "registers" in rows["occupancy limited by"].a
    assert rows["stall: barrier"].va > rows["stall: barrier"].vb  # type: ignore[operator]
    e = explanation.explain(a, b)
    assert any("tensor pipe 76% busy against A's 64%" in n for n in e.notes)


def test_roofs_from_the_shape() -> None:
    a, _ = pair()
    assert explanation.kernel_roofs(a) is None  # the plain script's NVTX names no shape
    r = explanation.kernel_roofs(a, "b1,sq4096,skv4096,h32,d128,bf16")
    assert r is not None and r.binding.name == "tensor"
    assert 55 < r.against(a.duration_ns * 1e-9).pct < 65  # type: ignore[operator]


def test_a_regex_that_matches_nothing_names_the_kernels() -> None:
    ps = read_profiles(PAIR)
    with pytest.raises(NothingMatched, match=r"'flash_fwd' matches no kernel in pair; its kernels: _fwd_kernel"):
        kernel_select.select(ps, "flash_fwd", "pair")
