"""profctl explain on FlexAttention's generated kernel against cuDNN, causal (issue 41): a report recorded on the H200
(tests/data/flex/README.md). The causes name the generated code's lines; the first is the extra matrix work."""

from __future__ import annotations

from pathlib import Path

import pytest

from profctl.analysis.explanation import explain, select

pytest.importorskip("ncu_report")

REPORT = Path(__file__).resolve().parents[1] / "data" / "flex" / "flex_cudnn_causal_explain.ncu-rep.xz"


def test_flex_against_cudnn_names_its_cause_and_the_generated_lines() -> None:
    from profctl.readers import ncu_profiles

    ps = list(ncu_profiles.read_profiles(REPORT))
    a, _ = select(ps, "triton_tem_fused_flex_attention", "flex")
    b, _ = select(ps, "cudnn", "cudnn")
    e = explain(a, b)
    ids = [c.id for c in e.causes]
    assert ids[0] == "compute-bound", ids
    gap = (a.duration_ns - b.duration_ns) / 1e3  # type: ignore[operator]
    assert all(c.saving_us <= gap + 1e-6 for c in e.causes)
    lined = [c for c in e.causes if c.lines]
    assert lined and all(f.endswith(".py") for c in lined for f, _ in c.lines)  # Inductor's generated file
    assert a.source_files  # the report carries the generated source: lines read after the cache is gone
