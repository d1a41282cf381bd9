"""How often explain names the planted cause (issue 33, part 4), held by the tests: the planted pairs of
tests/data/pairs (recorded with plain ncu on an H200; one fault each, the same work in both kernels) scored as
benchmarks/explain_accuracy/score.py scores them through the CLI, here through the same functions in one process.

The bar is the issue's: the first cause is the planted one in at least 13 of 14 pairs (here: the same share of
every pair in the accuracy set), at the planted line where it has one; the predicted saving within 35 % of the
measured gap in at least 10 of 14; one kernel alone names the planted cause among its first two in 11 of 14."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from profctl.analysis import causes
from profctl.analysis.select import select
from profctl.schema.profile import KernelProfile

pytest.importorskip("ncu_report")

PAIRS = Path(__file__).resolve().parents[1] / "data" / "pairs"
MANIFEST = json.loads((PAIRS / "manifest.json").read_text())["pairs"]
SCORED = [p for p in MANIFEST if not p.get("costs_nothing") and p.get("in_accuracy_set", True)]


@cache
def _profiles(report: str) -> tuple[KernelProfile, ...]:
    from profctl.readers import ncu_profiles

    return tuple(ncu_profiles.read_profiles(PAIRS / report))


def _pair(p: dict[str, Any]) -> tuple[KernelProfile, KernelProfile]:
    ps = list(_profiles(p["report"]))
    a, _ = select(ps, f"^{p['a']}$", p["report"])
    b, _ = select(ps, f"^{p['b']}$", p["report"])
    return a, b


@cache
def _score(pid: str) -> dict[str, Any]:
    p = next(x for x in SCORED if x["id"] == pid)
    a, b = _pair(p)
    found = causes.gap_causes(a, b).causes
    d = causes.diagnose_one(a)
    # alone: the first two causes, or the roof the verdict names first (a three-pass softmax at the DRAM roof:
    # "nothing to fix but moving fewer bytes")
    roof = d.roof_cause()
    alone = [c.id for c in d.causes[:2]] + ([roof] if roof else [])
    first = found[0] if found else None
    gap = p["time_a_us"] - p["time_b_us"]
    planted = next((c for c in found if c.id == p["cause"]), None)
    line_ok = None
    if p["line"] is not None and first is not None:
        line_ok = any(Path(f).name == p["file"] and n == p["line"] for f, n in first.lines)
    return {"first": first.id if first else None, "first_ok": bool(first and first.id == p["cause"]),
            "line_ok": line_ok, "saving_ok": planted is not None and abs(planted.saving_us - gap) <= 0.35 * gap,
            "alone_ok": p["cause"] in alone}


def test_the_accuracy_set_is_what_the_issue_asks_for() -> None:
    assert len(SCORED) >= 14
    assert sum(bool(p.get("attention")) for p in SCORED) >= 4
    assert len({p["cause"] for p in SCORED}) >= 14


@pytest.mark.parametrize("pid", [p["id"] for p in SCORED])
def test_each_pair_is_scored(pid: str) -> None:
    """Every pair gets a first cause (none is left without one); what it scores is held by the test below."""
    assert _score(pid)["first"] is not None


def test_the_first_cause_is_the_planted_one_at_its_line() -> None:
    rows = {p["id"]: _score(p["id"]) for p in SCORED}
    right = [k for k, r in rows.items() if r["first_ok"]]
    assert len(right) >= round(13 / 14 * len(rows)), {k: r["first"] for k, r in rows.items() if not r["first_ok"]}
    with_line = [r for r in rows.values() if r["line_ok"] is not None and r["first_ok"]]
    assert all(r["line_ok"] for r in with_line), [k for k, r in rows.items() if r["line_ok"] is False]


def test_the_predicted_saving_is_near_the_measured_gap() -> None:
    rows = {p["id"]: _score(p["id"]) for p in SCORED}
    assert sum(r["saving_ok"] for r in rows.values()) >= round(10 / 14 * len(rows))


def test_one_kernel_alone_names_the_planted_cause_among_its_first_two() -> None:
    rows = {p["id"]: _score(p["id"]) for p in SCORED}
    assert sum(r["alone_ok"] for r in rows.values()) >= round(11 / 14 * len(rows))


def test_a_thrashing_pair_s_wait_for_its_misses_goes_with_the_thrashing() -> None:
    """projections_reuse: B is A's loop in another order (the same loads, tests/data/pairs/pairs.cu), so fixing the
    thrashing is B: 518.5 us outside ncu. A's extra wait for loads (93 % of its warp time against B's 50 %) is the
    misses' latency, not loads issued late; left standing as a hold of its own it bounded l2-thrashing alone at
    220 us (42 % of the gap) from 505cb15 until this fix."""
    p = next(x for x in SCORED if x["id"] == "projections_reuse")
    a, b = _pair(p)
    found = causes.gap_causes(a, b).causes
    thrash = next(c for c in found if c.id == "l2-thrashing")
    gap = p["time_a_us"] - p["time_b_us"]
    assert found[0] is thrash
    assert abs(thrash.saving_us - gap) <= 0.35 * gap, thrash.saving_us
    assert any("issue their loads alike" in str(e) for e in thrash.evidence)
