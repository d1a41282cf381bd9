"""Explain alone on kernels none of its rules were written from (tests/data/unseen/README.md): cuBLAS GEMMs and torch's
elementwise and softmax kernels of the eager baseline, and SDPA's memory-efficient kernel, recorded on the H200."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from profctl.analysis.causes import diagnose_one
from profctl.analysis.explanation import kernel_roofs
from profctl.analysis.select import select
from profctl.schema.profile import KernelProfile

pytest.importorskip("ncu_report")

REPORT = Path(__file__).resolve().parents[1] / "data" / "unseen" / "eager_efficient_explain.ncu-rep.xz"


@cache
def _profiles() -> tuple[KernelProfile, ...]:
    from profctl.readers import ncu_profiles

    return tuple(ncu_profiles.read_profiles(REPORT))


def _diag(pattern: str):  # type: ignore[no-untyped-def]
    p, _ = select(list(_profiles()), pattern, "unseen")
    return p, diagnose_one(p, kernel_roofs(p))


@pytest.mark.parametrize("pattern", ["^vectorized_elementwise_kernel$", "^cunn_SoftMaxForwardReg$",
                                     "nvjet_sm90_tst_128x256"])
def test_streaming_library_kernels_get_no_invented_fault(pattern: str) -> None:
    p, d = _diag(pattern)
    assert "l2-thrashing" not in [c.id for c in [*d.causes, *d.slack]], (p.base_name, d.causes)
    assert all(c.saving_us <= 0.1 * (p.duration_ns or 0) / 1e3 for c in d.causes), [(c.id, c.saving_us)
                                                                                      for c in d.causes]


def test_the_eager_baseline_gets_no_attention_roofs_per_kernel() -> None:
    p, _ = _diag("^vectorized_elementwise_kernel$")
    assert p.nvtx_path and "eager" in p.nvtx_path and kernel_roofs(p) is None


def test_a_gemm_waiting_on_memory_is_not_told_to_overlap_its_mma() -> None:
    _, d = _diag("nvjet_sm90_tst_256x128")
    assert "mma-not-overlapped" not in [c.id for c in d.causes]


def test_the_cutlass_sm80_kernel_on_hopper_is_legacy_mma_first() -> None:
    _, d = _diag("fmha_cutlassF")
    assert d.causes and d.causes[0].id == "legacy-mma"
