"""Matrix work in one unit, live (issue 47 item 3): flex, cuDNN and profctl's Triton forward, causal s8192 h16 d128,
recorded on the H200 under the explain recipe and under --recipe full (tests/data/masks/README.md). The kernels do
the same matrix work, so the two recipes lead with the same cause and nothing says "skip masked blocks"."""

from __future__ import annotations

from pathlib import Path

import pytest

from profctl.analysis.explanation import explain, explain_one, kernel_roofs
from profctl.analysis.figures import matrix_flops, mma_flops_per_exec
from profctl.analysis.select import select

pytest.importorskip("ncu_report")

DATA = Path(__file__).resolve().parents[1] / "data" / "masks"


def _profiles(recipe: str) -> list:
    from profctl.readers import ncu_profiles

    return list(ncu_profiles.read_profiles(DATA / f"masks_{recipe}.ncu-rep.xz"))


@pytest.mark.parametrize("kernel", ["triton_tem", "_fwd_kernel"])
def test_both_recipes_lead_with_the_same_cause_and_no_wasted_work(kernel: str) -> None:
    firsts = []
    for recipe in ("explain", "full"):
        ps = _profiles(recipe)
        a, _ = select(ps, kernel, recipe)
        b, _ = select(ps, "cudnn", recipe)
        assert matrix_flops(a)[1] == "counted"  # the explain recipe collects the tensor-operation counts now
        assert matrix_flops(a)[0] == pytest.approx(matrix_flops(b)[0], rel=0.02)
        e = explain(a, b, roofs={"a": kernel_roofs(a), "b": kernel_roofs(b)})
        ids = [c.id for c in e.causes]
        assert ids and not {"wasted-work", "compute-bound"} & set(ids), (recipe, ids)
        firsts.append(ids[0])
        assert e.verdict and e.verdict.startswith("A is ") and ids[0] in e.verdict
    assert firsts[0] == firsts[1], firsts


def test_alone_with_the_causal_shape_the_counted_work_is_the_useful_work() -> None:
    """The NVTX range names the causal shape: its useful FLOPs (2.75e11) against the counted (2.79e11) are no
    wasted work; a kernel alone is never 'compute-bound' with its tensor pipe under its roof."""
    for kernel in ("triton_tem", "_fwd_kernel", "cudnn"):
        a, _ = select(_profiles("explain"), kernel, "explain")
        r = kernel_roofs(a)
        assert r is not None and r.get("tensor") is not None
        assert matrix_flops(a)[0] < 1.05 * r.get("tensor").work  # type: ignore[union-attr]
        ids = [c.id for c in explain_one(a, r).causes]
        assert "wasted-work" not in ids and "compute-bound" not in ids, (kernel, ids)


def test_mma_shapes_weigh_to_the_counted_work() -> None:
    """Where ncu counts tensor operations, the SASS shapes weighed by executions give the same number."""
    assert mma_flops_per_exec("HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24") == 65536
    assert mma_flops_per_exec("@P0 HMMA.16816.F32.BF16 R4, R8, R12, R4") == 4096
    assert mma_flops_per_exec("FFMA R1, R2, R3, R4") is None
    for p in _profiles("full"):
        counted = p.metrics and matrix_flops(p)[0]
        weighed = sum(mma_flops_per_exec(x.sass) * x.executed for x in p.pcs
                      if x.executed and mma_flops_per_exec(x.sass))
        assert weighed == pytest.approx(counted, rel=0.01), p.base_name
