"""profctl explain on FlexAttention's generated kernel against cuDNN, causal (issue 41): a report recorded on the H200
(tests/data/flex/README.md). The causes name the generated code's lines; the matrix work is the same on both sides."""

from __future__ import annotations

from pathlib import Path

import pytest

from profctl.analysis.explanation import explain
from profctl.analysis.figures import matrix_flops
from profctl.analysis.select import select

pytest.importorskip("ncu_report")

REPORT = Path(__file__).resolve().parents[1] / "data" / "flex" / "flex_cudnn_causal_explain.ncu-rep.xz"


def test_flex_against_cudnn_names_its_cause_and_the_generated_lines() -> None:
    from profctl.readers import ncu_profiles

    ps = list(ncu_profiles.read_profiles(REPORT))
    a, _ = select(ps, "triton_tem_fused_flex_attention", "flex")
    b, _ = select(ps, "cudnn", "cudnn")
    e = explain(a, b)
    ids = [c.id for c in e.causes]
    # the explain recipe counts no tensor operations: flex's m64n64k16 and m64n128k16 wgmmas weighed by their shapes
    # do cuDNN's work (1.42e11 FLOP each), so no "skip masked blocks" and no compute-bound of a pipe 42 % busy
    # (issue 47); what --recipe full says of the same pair leads (mma-not-overlapped)
    assert matrix_flops(a)[0] == pytest.approx(matrix_flops(b)[0], rel=0.02)
    assert "wasted-work" not in ids and "compute-bound" not in ids, ids
    assert ids[0] == "mma-not-overlapped", ids
    assert e.verdict and e.verdict.startswith("A is 150.7 us slower than B") and "mma-not-overlapped" in e.verdict
    gap = (a.duration_ns - b.duration_ns) / 1e3  # type: ignore[operator]
    assert all(c.saving_us <= gap + 1e-6 for c in e.causes)
    lined = [c for c in e.causes if c.lines]
    assert lined and all(f.endswith(".py") for c in lined for f, _ in c.lines)  # Inductor's generated file
    assert a.source_files  # the report carries the generated source: lines read after the cache is gone


def test_the_generated_lines_of_the_users_mask_mod_and_score_mod_are_named() -> None:
    """Inductor inlines the user's functions on generated temporaries; profctl names those lines (issue 41 item 4)."""
    from profctl.analysis import source
    from profctl.analysis.flex_source import mod_lines
    from profctl.readers import ncu_profiles

    text = (REPORT.parent / "flex_generated_kernel.py.txt").read_text().splitlines()
    roles = mod_lines({n + 1: t for n, t in enumerate(text)})
    assert roles == {362: "score_mod", 363: "score_mod", 371: "mask_mod", 372: "mask_mod", 373: "mask_mod",
                     374: "mask_mod"}
    assert mod_lines({1: "x = 1", 2: "tmp0 = (qk)", 3: "y = 2"}) == {}  # no end line: not a mod
    a, _ = select(list(ncu_profiles.read_profiles(REPORT)), "triton_tem_fused_flex_attention", "flex")
    named = [h for h in source.view(a, None).lines if h.notes and h.notes[0].startswith("flex: your mask_mod")]
    assert [h.line for h in named] == [373]  # the comparison m >= n of the causal mask_mod, sampled
