"""An explain defect found by issue 50's ladder (tests/data/ladder50/README.md): a persistent grid whose programs got
unequal work leaves SMs idle; the explain recipe has ncu's SpeedOfLight "Elapsed Cycles" (gpc__cycles_elapsed.max),
not sm__cycles_elapsed, and explain saw no SM-idle share at all, so the regression read "latency-bound"."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app

pytest.importorskip("ncu_report")

DATA = Path(__file__).resolve().parents[1] / "data" / "ladder50"
SHAPE = "b1,s8192,h16,d128,bf16,causal"


def _explain(*args: str) -> dict:
    import json

    r = CliRunner().invoke(app, ["explain", *args, "--shape", SHAPE, "-f", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_an_unbalanced_persistent_grid_is_a_tail_with_its_idle_share() -> None:
    d = _explain(str(DATA / "ladder_head_order.ncu-rep.xz"), "-k", "s8192c/m64n64w4s3-p2$")
    tail = next(c for c in d["causes"] if c["id"] == "tail-effect")
    text = " ".join(tail["evidence"])
    assert "SMs busy 66%" in text and "persistent grid" in text, text
    assert "same work" in tail["fix"]
    assert 0.3 * 713 < tail["saving_us"] < 0.4 * 714  # the idle share (34 %) of the kernel's 713.7 us


def test_the_order_change_reads_as_the_tail_it_made() -> None:
    """A: the head-by-head order (713.7 us), B: the same config with the global order (565.8 us)."""
    d = _explain(str(DATA / "ladder_head_order.ncu-rep.xz"), str(DATA / "ladder_global_order.ncu-rep.xz"),
                 "-k", "s8192c/m64n64w4s3-p2$")
    assert d["causes"][0]["id"] == "tail-effect", [c["id"] for c in d["causes"]]
    assert "tail-effect" in d["verdict"]


def test_the_balanced_one_program_per_tile_grid_has_no_tail() -> None:
    d = _explain(str(DATA / "ladder_global_order.ncu-rep.xz"), "-k", "s8192c/m64n64w4s3$")
    assert "tail-effect" not in [c["id"] for c in d["causes"]]


def test_overlap_inside_one_warpgroup_is_not_the_advice_even_with_registers_to_spare() -> None:
    """Step 5b of the ladder: the Gluon forward (softmax under the previous P V, 138 registers) against the Triton
    kernel at the same tiles takes the same time; explain's advice for the Triton kernel against cuDNN names the
    ordered overlap of two warpgroups and says the in-warpgroup one was measured not to pay."""
    rep = str(DATA / "ladder_gluon.ncu-rep.xz")
    shape = ["--shape", "b1,s4096,h32,d128,bf16"]
    pair = _explain_shape(rep, "-k", "s4096/m64n64w4s3-gl$", "--vs", "s4096/m64n64w4s3$", *shape)
    assert pair["same_time"] and pair["verdict"].startswith("A and B take the same time")
    d = _explain_shape(rep, "-k", "s4096/m64n64w4s3$", "--vs", "s4096/cudnn", *shape)
    mma = next(c for c in d["causes"] if c["id"] == "mma-not-overlapped")
    assert "ordered" in mma["fix"] and "register headroom" not in mma["fix"]
    assert "not advised" in mma["note"] and "saved 1 %" in mma["note"]


def _explain_shape(*args: str) -> dict:
    import json

    r = CliRunner().invoke(app, ["explain", *args, "-f", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)
