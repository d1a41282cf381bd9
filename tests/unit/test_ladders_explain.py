"""explain on the ladders (issue 47, "Done means"): kernels with two faults each in four rungs, recorded with plain ncu
on the H200 and timed outside it (tests/data/ladders). The questions and the judging are
benchmarks/explain_accuracy/score_ladders.py's; the answers come from the function the command and the Python API
share (profctl.cli._explain_build.build), in this process."""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "ladders"
sys.path.insert(0, str(ROOT / "benchmarks" / "explain_accuracy"))

import score_ladders  # noqa: E402

pytest.importorskip("ncu_report")

QUESTIONS = score_ladders.questions(json.loads((DATA / "manifest.json").read_text()))


@cache
def _answer(i: int, store: str) -> dict[str, Any]:
    from profctl.cli._explain_build import build
    from profctl.render import explanation_view

    q = QUESTIONS[i]
    shape = None
    if q["shape"]:
        from profctl.cli._explain_build import shape_key

        shape = shape_key(q["shape"])
    e = build(str(DATA / q["report"]), f"^{q['kernel']}$", vs=f"^{q['vs']}$" if q["vs"] else None, shape=shape,
              reports=Path(store))
    return score_ladders.judge(q, explanation_view.to_dict(e))


def _rows(crit: str, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    store = str(tmp_path_factory.getbasetemp() / "ladder-store")
    return [_answer(i, store) for i, q in enumerate(QUESTIONS) if q["crit"] == crit]


def test_alone_both_faults_are_named_and_the_joint_saving_is_within_35_percent(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    rows = _rows("a", tmp_path_factory)
    assert len(rows) >= 3
    assert all(r["named"] and r["within"] for r in rows), [(r["ladder"], r["causes"], r.get("joint_us"),
                                                            r["truth_us"]) for r in rows if not r["ok"]]


def test_each_rung_names_its_remaining_fault_first(tmp_path_factory: pytest.TempPathFactory) -> None:
    rows = _rows("b", tmp_path_factory)
    assert all(r["named"] for r in rows), [(r["ladder"], r["a"], r["causes"]) for r in rows if not r["named"]]
    # its saving within 35 % of what its fix gained: 6 of 8 today (a grid fix that also shrank the tiles, and a
    # causal skip whose diagonal blocks and uneven rows keep a third of the masked time: benchmarks/RESULTS.md)
    assert sum(r["within"] for r in rows) >= 6, [(r["ladder"], r["a"], r["predicted_us"], r["truth_us"])
                                                 for r in rows if not r["within"]]


def test_each_pair_names_the_removed_fault_first_within_35_percent_of_the_gap(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    rows = _rows("c", tmp_path_factory)
    assert all(r["ok"] for r in rows), [(r["ladder"], r["a"], r["b"], r["causes"], r["truth_us"]) for r in rows
                                        if not r["ok"]]
    assert any(r.get("no_gap") for r in rows)  # gemm_order: the order fixed alone gained 1.7 %: no gap, said so
