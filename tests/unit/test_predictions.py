"""Explain's predictions kept and measured against the change that followed (issue 43, item 6): on real kernels of
the planted pairs (tests/data/pairs: A is the kernel before the fix, B after; the times are the pairs' own timings
outside ncu), and through the CLI on the same FlashAttention-2 kernel recorded twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl import predictions
from profctl.analysis.causes import diagnose_one
from profctl.analysis.select import select
from profctl.cli import app

pytest.importorskip("ncu_report")

PAIRS = Path(__file__).resolve().parents[1] / "data" / "pairs"
MANIFEST = {p["id"]: p for p in json.loads((PAIRS / "manifest.json").read_text())["pairs"]}


def _pair(pid: str) -> tuple[object, object, dict[str, float]]:
    from profctl.readers import ncu_profiles

    p = MANIFEST[pid]
    ps = list(ncu_profiles.read_profiles(PAIRS / p["report"]))
    return select(ps, f"^{p['a']}$", "r")[0], select(ps, f"^{p['b']}$", "r")[0], p


@pytest.mark.parametrize("pid", ["gemv_rows", "spill_accumulators", "sum_one_address"])
def test_a_fix_that_removes_one_cause_is_set_against_what_it_realized(pid: str, tmp_path: Path) -> None:
    a, b, p = _pair(pid)
    pred = predictions.prediction(a, diagnose_one(a))
    outs, lines = predictions.close_loop(pred, p["time_a_us"], p["time_b_us"], diagnose_one(b))
    assert [o.cause for o in outs if o.realized_us is not None] == [p["cause"]], lines
    o = outs[0]
    assert o.realized_us == pytest.approx(p["time_a_us"] - p["time_b_us"])
    assert f"{p['cause']} went away" in lines[0] or f"{p['cause']} shrank" in lines[0]
    assert predictions.add(tmp_path, a.device, outs, key="k1") is None  # type: ignore[attr-defined]
    assert predictions.add(tmp_path, a.device, outs, key="k1") is None  # type: ignore[attr-defined]
    rec = predictions.track_record(tmp_path, a.device, p["cause"])  # type: ignore[attr-defined]
    assert rec is not None and "of 1 prediction within 35 %" in rec  # the same pair counts once
    assert rec.startswith(f"{p['cause']} on NVIDIA H200: {int(bool(o.within))} of 1")


def test_several_causes_going_away_together_are_said_and_not_tallied(tmp_path: Path) -> None:
    _, b, _ = _pair("gemv_rows")
    pred = {"causes": [{"id": "uncoalesced-global", "saving_us": 200.0}, {"id": "tail-effect", "saving_us": 80.0}]}
    outs, lines = predictions.close_loop(pred, 284.1, 65.4, diagnose_one(b))
    assert len(outs) == 2 and all(o.realized_us is None for o in outs)
    assert "several causes changed together" in lines[0]
    assert predictions.add(tmp_path, "NVIDIA H200", outs, key="k") is None
    assert not predictions.tally_path(tmp_path).exists()


def test_explain_keeps_its_prediction_and_closes_the_loop_on_the_same_kernel(tmp_path: Path) -> None:
    before, after = PAIRS / "pairs_sdpa.ncu-rep.xz", PAIRS / "profctl_sdpa_explain_recipe.ncu-rep.xz"
    store = tmp_path / "store"
    r = CliRunner().invoke(app, ["explain", str(before), "--kernel", "flash_fwd", "--reports", str(store)])
    assert r.exit_code == 0, r.output
    kept = list((store / "predictions").glob("flash_fwd_kernel-*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["causes"][0]["id"] == "legacy-mma"
    r = CliRunner().invoke(app, ["explain", str(before), str(after), "--kernel", "flash_fwd", "--reports", str(store),
                                 "-f", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["before_and_after"] and "none of the" in doc["before_and_after"][0]
    assert len(list((store / "predictions").glob("flash_fwd_kernel-*.json"))) == 2
    # a tally from earlier changes is quoted beside the cause
    predictions.tally_path(store).write_text(json.dumps(
        {"NVIDIA H200": {"legacy-mma": {"n": 4, "within": 3, "seen": ["a", "b", "c", "d"]}}}))
    r = CliRunner().invoke(app, ["explain", str(before), "--kernel", "flash_fwd", "--reports", str(store)])
    assert "track record: legacy-mma on NVIDIA H200: 3 of 4 predictions within 35 %" in " ".join(r.output.split())


def test_a_report_file_is_never_written_beside(tmp_path: Path) -> None:
    """A report next to a file called manifest.json (tests/data/pairs has one) is the user's: the prediction goes to
    the store, nothing is written beside the report."""
    before = set(PAIRS.iterdir())
    r = CliRunner().invoke(app, ["explain", str(PAIRS / "pairs_cuda_exec.ncu-rep.xz"), "--kernel",
                                 "smooth_tree_barriers", "--reports", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert set(PAIRS.iterdir()) == before
    assert list((tmp_path / "predictions").glob("smooth_tree_barriers-*.json"))


def test_compare_of_two_ncu_reports_quotes_what_explain_predicted(tmp_path: Path) -> None:
    before, after = PAIRS / "pairs_sdpa.ncu-rep.xz", PAIRS / "profctl_sdpa_explain_recipe.ncu-rep.xz"
    r = CliRunner().invoke(app, ["compare", str(before), str(after), "--reports", str(tmp_path), "-f", "json"])
    assert r.exit_code == 0, r.output
    assert not [w for w in json.loads(r.output)["warnings"] if w.startswith("explain predicted")]
    CliRunner().invoke(app, ["explain", str(before), "--kernel", "flash_fwd", "--reports", str(tmp_path)])
    r = CliRunner().invoke(app, ["compare", str(before), str(after), "--reports", str(tmp_path), "-f", "json"])
    said = [w for w in json.loads(r.output)["warnings"] if w.startswith("explain predicted for flash_fwd_kernel")]
    assert len(said) == 1 and "legacy-mma saves" in said[0] and "this change realized" in said[0]
