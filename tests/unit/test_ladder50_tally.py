"""Explain's tally gets issue 50's ladder steps (tests/data/ladder50, real ncu reports from an H200).

A kernel engineer's sequence is `profctl explain MINE --vs cuDNN` (the causes come from the pair), the change, then
`profctl explain BEFORE AFTER`. The pair's causes are what the user was told to fix, so the pair prediction is kept
beside the kernel-alone one and is what the before/after explain scores (profctl.predictions: "vs"). Step 7 of the
ladder (the warp-specialized Gluon forward from a ring of 2 K/V slots to 3): explain named loads-not-pipelined against
cuDNN (114.0 us at s4096, 93.8 us at s8192 causal, under ncu) and the change realized 123.9 and 125.7 us under ncu."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl import predictions
from profctl.cli import app

pytest.importorskip("ncu_report")

DATA = Path(__file__).resolve().parents[1] / "data" / "ladder50"
S2, S3 = str(DATA / "ladder_ws_s2.ncu-rep.xz"), str(DATA / "ladder_ws.ncu-rep.xz")
GLOBAL = str(DATA / "ladder_global_order.ncu-rep.xz")
SHAPES = {"s4096": "b1,s4096,h32,d128,bf16", "s8192c": "b1,s8192,h16,d128,bf16,causal"}


def _explain(store: Path, shape: str, *args: str) -> dict:
    r = CliRunner().invoke(app, ["explain", *args, "--shape", SHAPES[shape], "--reports", str(store), "-f", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def _kept(store: Path) -> list[dict]:
    return [json.loads(f.read_text()) for f in sorted((store / "predictions").glob("_gl_ws_fwd_kernel-*.json"))]


def _tally(store: Path) -> dict:
    t = predictions.tally_path(store)
    return json.loads(t.read_text()) if t.exists() else {}


def test_a_pair_explain_keeps_the_pair_prediction_beside_the_kernel_alone_one(tmp_path: Path) -> None:
    _explain(tmp_path, "s4096", S2, "-k", "s4096/m128n128w4s2-ws-gl$", "--vs", "s4096/cudnn")
    (d,) = _kept(tmp_path)
    assert d["schema"] == "profctl.prediction/2" and d["nvtx"] == "ladder@measure/s4096/m128n128w4s2-ws-gl"
    (vs,) = d["vs"]
    assert vs["reference"]["nvtx"] == "ladder@measure/s4096/cudnn"
    assert vs["reference"]["kernel"].startswith("cudnn_generated") and vs["reference"]["report"] == S2
    assert vs["causes"][0]["id"] == "loads-not-pipelined"
    assert vs["causes"][0]["saving_us"] == pytest.approx(114.0, abs=1.0)
    assert vs["gap_us"] == pytest.approx(114.0, abs=1.0)
    # the kernel alone has its own prediction (150 us: to its floor, not to cuDNN), kept in the same file
    assert d["causes"][0]["id"] == "loads-not-pipelined" and d["causes"][0]["saving_us"] > 140
    # a later kernel-alone explain rewrites the file and keeps the pair prediction
    _explain(tmp_path, "s4096", S2, "-k", "s4096/m128n128w4s2-ws-gl$")
    (d2,) = _kept(tmp_path)
    assert d2["vs"] == d["vs"]


def test_before_after_scores_the_pairs_cause_and_tallies_it(tmp_path: Path) -> None:
    """Step 7 at both shapes into one store: at s4096 AFTER's pair against cuDNN is computed from the reference's
    report; at s8192 causal the user explained AFTER against cuDNN first, and that kept pair is used."""
    _explain(tmp_path, "s4096", S2, "-k", "s4096/m128n128w4s2-ws-gl$", "--vs", "s4096/cudnn")
    d = _explain(tmp_path, "s4096", S2, S3, "-k", "s4096/m128n128w4s2-ws-gl$", "--vs", "s4096/m128n128w4s3-ws-gl$")
    (line,) = d["before_and_after"]
    assert line.startswith("scored: the pair's prediction against cudnn_generated"), line
    assert "(ladder@measure/s4096/cudnn)" in line
    assert "loads-not-pipelined went away: predicted to save 114.0 us, realized 123.9 us (within 35 %)" in line
    assert _tally(tmp_path)["NVIDIA H200"]["loads-not-pipelined"]["n"] == 1
    after = next(k for k in _kept(tmp_path) if k["nvtx"].endswith("s4096/m128n128w4s3-ws-gl"))
    assert after["vs"][0]["reference"]["nvtx"] == "ladder@measure/s4096/cudnn"  # AFTER's pair, computed, is kept

    _explain(tmp_path, "s8192c", S2, "-k", "s8192c/m128n128w4s2-ws-gl$", "--vs", "s8192c/cudnn")
    _explain(tmp_path, "s8192c", S3, "-k", "s8192c/m128n128w4s3-ws-gl$", "--vs", "s8192c/cudnn")
    d = _explain(tmp_path, "s8192c", S2, S3, "-k", "s8192c/m128n128w4s2-ws-gl$", "--vs",
                 "s8192c/m128n128w4s3-ws-gl$")
    assert "predicted to save 93.8 us, realized 125.7 us (within 35 %)" in d["before_and_after"][0]
    # two changes (two shapes of one report pair, told apart by their NVTX ranges): both count
    entry = _tally(tmp_path)["NVIDIA H200"]["loads-not-pipelined"]
    assert (entry["n"], entry["within"]) == (2, 2)
    # explained again, the same change counts once
    _explain(tmp_path, "s8192c", S2, S3, "-k", "s8192c/m128n128w4s2-ws-gl$", "--vs", "s8192c/m128n128w4s3-ws-gl$")
    assert _tally(tmp_path)["NVIDIA H200"]["loads-not-pipelined"]["n"] == 2
    rec = predictions.track_record(tmp_path, "NVIDIA H200", "loads-not-pipelined")
    assert rec is not None and "2 of 2 predictions within 35 %" in rec


def test_without_a_pair_prediction_the_kernel_alone_one_is_scored(tmp_path: Path) -> None:
    """The old behaviour: explain BEFORE alone, then BEFORE AFTER scores the kernel-alone prediction (150.4 us to
    the kernel's own floor for the same cause)."""
    _explain(tmp_path, "s4096", S2, "-k", "s4096/m128n128w4s2-ws-gl$")
    assert "vs" not in _kept(tmp_path)[0]
    d = _explain(tmp_path, "s4096", S2, S3, "-k", "s4096/m128n128w4s2-ws-gl$", "--vs", "s4096/m128n128w4s3-ws-gl$")
    (line,) = d["before_and_after"]
    assert line.startswith("scored: the kernel-alone prediction; the change took the kernel from 529.4 us to "
                           "405.5 us"), line
    assert "loads-not-pipelined went away: predicted to save 150.4 us, realized 123.9 us (within 35 %)" in line


def test_step_1_kernel_alone_names_no_cause_the_pair_names_two(tmp_path: Path) -> None:
    """Step 1 (64x64 tiles -> 128x128, two warpgroups, s8192 causal): the kernel alone names no cause, so the old
    loop read "none of the 0 cause(s)"; the pair's two are scored now, and neither went away (under ncu the change
    lost 6.9 us): nothing is tallied."""
    store_alone, store_pair = tmp_path / "alone", tmp_path / "pair"
    alone = _explain(store_alone, "s8192c", GLOBAL, "-k", "s8192c/m64n64w4s3$")
    assert alone["causes"] == []
    pair = _explain(store_pair, "s8192c", GLOBAL, "-k", "s8192c/m64n64w4s3$", "--vs", "s8192c/cudnn")
    ids = [c["id"] for c in pair["causes"]]
    assert ids[0] == "mma-not-overlapped" and len(ids) >= 2, ids
    d = _explain(store_pair, "s8192c", GLOBAL, GLOBAL, "-k", "s8192c/m64n64w4s3$", "--vs", "s8192c/m128n128w8s3$")
    (line,) = d["before_and_after"]
    assert line.startswith("scored: the pair's prediction against cudnn_generated"), line
    assert f"(lost 6.9 us); none of the {len(ids)} cause(s) predicted before went away or shrank" in line
    assert _tally(store_pair) == {}


def test_the_python_api_closes_the_loop_as_the_command_does(tmp_path: Path) -> None:
    """profctl.explain shares the command's close_the_loop: the same pair prediction scored, the same tally."""
    import profctl

    shape = "b1,s8192,h16,d128,bf16,causal"
    profctl.explain(S2, kernel="s8192c/m128n128w4s2-ws-gl$", vs="s8192c/cudnn", shape=shape, reports=tmp_path)
    r = profctl.explain(S2, S3, kernel="s8192c/m128n128w4s2-ws-gl$", vs="s8192c/m128n128w4s3-ws-gl$", shape=shape,
                        reports=tmp_path)
    (line,) = r.to_dict()["before_and_after"]
    assert line.startswith("scored: the pair's prediction against cudnn_generated"), line
    assert "predicted to save 93.8 us, realized 125.7 us (within 35 %)" in line
    assert _tally(tmp_path)["NVIDIA H200"]["loads-not-pipelined"] == {
        "n": 1, "within": 1, "seen": _tally(tmp_path)["NVIDIA H200"]["loads-not-pipelined"]["seen"]}


def test_a_change_that_renames_the_kernel_closes_the_loop_with_changed(tmp_path: Path) -> None:
    """Step 6: the Triton forward (`_fwd_kernel`) rewritten as the warp-specialized Gluon one (`_gl_ws_fwd_kernel`,
    another launch of the same report). Without --changed the two read as a pair and nothing is scored; with it the
    pair prediction kept against cuDNN is set against the change, which lost 36.7 us under ncu while both causes
    explain had named (mma-not-overlapped, barrier-sync: 77.3 us each, overlapping) went away: not tallied."""
    before, after = "s4096/m128n128w8s3$", "s4096/m128n128w4s2-ws-gl$"
    _explain(tmp_path, "s4096", S2, "-k", before, "--vs", "s4096/cudnn")
    pair = _explain(tmp_path, "s4096", S2, "-k", before, "--vs", after)
    assert not pair["before_and_after"], pair["before_and_after"]
    d = _explain(tmp_path, "s4096", S2, "-k", before, "--vs", after, "--changed")
    loop = " ".join(d["before_and_after"])
    assert "scored: the pair's prediction against cudnn" in loop and "lost 36.7 us" in loop, loop
    assert "mma-not-overlapped (went away, predicted 77.3 us)" in loop and "none is tallied" in loop, loop
    assert _tally(tmp_path) == {} or not any(_tally(tmp_path).values())


def test_changed_needs_a_b(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["explain", S2, "-k", "s4096/m128n128w8s3$", "--changed", "--shape", SHAPES["s4096"],
                                 "--reports", str(tmp_path)])
    assert r.exit_code == 2 and "--changed sets A against B" in r.output, r.output
