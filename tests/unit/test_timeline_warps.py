"""Two timelines whose CTAs have different warp counts (issue 39, item 7): the builtin forward's non-causal trace runs
8 warps a CTA, its causal one 4; compared per CTA, every scope of the 4-warp kernel looked halved ("softmax -54.6 %").
Compared per CTA and warp, said first. Real traces recorded with plain Proton on the H200 (tests/data/proton)."""

from __future__ import annotations

from pathlib import Path

from profctl.analysis import timeline, timeline_diff
from profctl.readers import proton_trace

PROTON = Path(__file__).resolve().parents[1] / "data" / "proton"


def _kernel(name: str):  # type: ignore[no-untyped-def]
    return timeline.analyze(proton_trace.read(PROTON / f"{name}.chrome_trace.gz")).kernels[0]


def test_different_warp_counts_compare_per_warp_and_say_so_first() -> None:
    a, b = _kernel("builtin_noncausal_16cta"), _kernel("builtin_causal_16cta")
    assert a.warps == 8 and b.warps == 4
    d = timeline_diff.compare(a, b)
    assert d.per_warp and d.summary()[0].startswith("A's CTAs have 8 warps and B's 4")
    softmax = next(s for s in d.scopes if s.name == "softmax")
    per_cta = timeline_diff._per_cta(b, "softmax") / timeline_diff._per_cta(a, "softmax")  # type: ignore[operator]
    assert softmax.ratio is not None and abs(softmax.ratio - 2 * per_cta) < 1e-9  # the halving is taken out
    same = timeline_diff.compare(a, a)
    assert not same.per_warp and not same.summary()[0].startswith("A's CTAs")
