"""Issue 50, ladder step 14: explain's first cause for the warp-specialized kernel against cuDNN at b16 h32 s1024 causal
(loads-not-pipelined: the consumers wait for Q at the start of each of the grid's 31 waves of tiles) followed with a
persistent kernel whose next Q loads while the consumers finish a tile (O stored from the registers). The kernel got
slower and its O store uncoalesced; the consumers' data waits did not go (8 % of the working warps' samples, 6 %
before), the new fault's memory traffic re-labelled them. Recorded with `profctl ncu --recipe explain` on the H200
(tests/data/ladder50/README.md, b16c_*). explain must not score that as "loads-not-pipelined went away, realized
-40.6 us": the change brought a fault of its own, so the pair is said and not tallied."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl import predictions
from profctl.cli import app

DATA = Path(__file__).resolve().parents[1] / "data" / "ladder50"
WS, WSP = str(DATA / "b16c_ws.ncu-rep.xz"), str(DATA / "b16c_wsp.ncu-rep.xz")


def _explain(store: Path, *args: str) -> dict:
    r = CliRunner().invoke(app, ["explain", *args, "--reports", str(store), "-f", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_the_ws_kernel_against_cudnn_reads_loads_not_pipelined_at_its_q_wait(tmp_path: Path) -> None:
    pytest.importorskip("ncu_report")
    d = _explain(tmp_path, WS, "-k", "_gl_ws_fwd_kernel", "--vs", "cudnn")
    first = d["causes"][0]
    assert first["id"] == "loads-not-pipelined"
    assert first["saving_us"] == pytest.approx(42.2, abs=1.0)
    assert "q_bar" in json.dumps(first)  # the consumers' wait for Q, a cost every tile pays


def test_a_change_that_brings_its_own_fault_is_said_and_not_tallied(tmp_path: Path) -> None:
    pytest.importorskip("ncu_report")
    _explain(tmp_path, WS, "-k", "_gl_ws_fwd_kernel", "--vs", "cudnn")  # keeps the pair's prediction
    pair = _explain(tmp_path, WS, WSP, "-k", "_gl_ws_fwd_kernel", "--vs", "_gl_wsp_fwd_kernel", "--changed")
    scored = " ".join(pair["before_and_after"])
    assert "lost 40.6 us" in scored
    assert "loads-not-pipelined went away" in scored and "also brought uncoalesced-global" in scored
    assert "not tallied" in scored
    tally = tmp_path / "predictions" / "tally.json"
    assert not tally.exists() or "loads-not-pipelined" not in tally.read_text()


def test_close_loop_tells_a_fault_the_change_brought_from_the_limit_it_uncovered() -> None:
    pred = {"causes": [{"id": "register-shuffle", "saving_us": 60.0}]}
    # the fault went and the limit it hid shows: scored (the register-shuffle fixes of steps 10-12)
    outs, lines = predictions.close_loop(pred, 400.0, 345.0, {"latency-bound": 190.0})
    assert outs[0].realized_us == pytest.approx(55.0) and outs[0].within
    # a new fault, a quarter of the gone cause's saving or more: not set against the prediction
    outs, lines = predictions.close_loop(pred, 400.0, 380.0, {"uncoalesced-global": 15.0})
    assert outs[0].realized_us is None and "also brought uncoalesced-global" in lines[0]
    # a new fault too small to matter: scored
    outs, _ = predictions.close_loop(pred, 400.0, 345.0, {"uncoalesced-global": 14.0})
    assert outs[0].realized_us == pytest.approx(55.0)


def test_the_limits_are_the_catalogs_roof_causes_and_the_catch_all() -> None:
    from profctl.analysis import causes
    from profctl.analysis.cause_catalog import CATALOG

    assert set(causes._ROOF_CAUSE.values()) | {"latency-bound"} == predictions.LIMITS
    assert set(CATALOG) >= predictions.LIMITS
