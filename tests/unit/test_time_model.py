"""The one model of a kernel's time (issue 47 item 1): units, holds and exposed latency; any set of fixes; masking
said; and what explain prints from it on recorded reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from profctl.analysis.floor import Floor, UnitFloor
from profctl.analysis.time_model import HIDE, WAIT, WORK, Effect, TimeModel, hold_key, joint

DATA = Path(__file__).resolve().parents[1] / "data"


def _floor(t: float, **pcts: float) -> Floor:
    ceil = {"dram": 0.9, "l2": 0.9, "tensor": 0.85}
    dom = {"dram": "dram", "l2": "l2"}
    return Floor(t, tuple(UnitFloor(k, k, p, t * p / 100, ceil.get(k, 0.95), "", dom.get(k, "sm"))
                          for k, p in pcts.items()))


def test_two_faults_that_claim_the_same_time_mask_each_other() -> None:
    """An uncoalesced read in a loop whose loads are not pipelined: each fault accounts for most of the time, so
    fixing either alone leaves the other's hold; together they give the time back down to the units."""
    fl = _floor(1000.0, l1=40.0, dram=20.0)
    m = TimeModel(1000.0, fl, [Effect("uncoalesced-global", WORK, 0.7, {"l1": 0.25, "dram": 0.25}),
                               Effect("loads-not-pipelined", WAIT, 0.8)])
    alone_x, alone_y = m.saving(["uncoalesced-global"]), m.saving(["loads-not-pipelined"])
    both = joint(m, ["uncoalesced-global", "loads-not-pipelined"])
    assert alone_x == pytest.approx(200.0)  # loads-not-pipelined still holds 80 %
    assert alone_y == pytest.approx(300.0)  # the uncoalesced read holds 70 %
    assert m.predict(["uncoalesced-global"]).binds == "hold:loads-not-pipelined"
    # then the L1's work left binds (a quarter of 40 % at 95 %), not the exposed latency (0.3 x 0.2 of the time)
    assert both.saving_us == pytest.approx(1000.0 - 1000.0 * 0.40 / 0.95 * 0.25)
    assert both.binds == "the l1"
    assert both.saving_us > alone_x + alone_y
    assert both.marginal["uncoalesced-global"] > alone_x  # its part with the other fixed is more than alone


def test_a_fix_that_takes_another_fault_s_mechanism_takes_its_hold() -> None:
    """A thrashing pair whose loads are issued alike: A's extra wait for its loads is the misses' latency, so
    reordering for reuse removes that hold too; fixing the late loads alone still leaves the thrashing's."""
    fl = _floor(850.0, dram=60.0, l2=65.0)
    thrash = Effect("l2-thrashing", WORK, 0.82, {"dram": 0.1, "l2": 0.1, hold_key("loads-not-pipelined"): 0.0})
    m = TimeModel(850.0, fl, [thrash, Effect("loads-not-pipelined", WAIT, 0.74)])
    assert m.predict(["l2-thrashing"]).binds != "hold:loads-not-pipelined"
    assert m.saving(["l2-thrashing"]) > 500.0
    assert m.predict(["loads-not-pipelined"]).binds == "hold:l2-thrashing"
    kept = TimeModel(850.0, fl, [Effect("l2-thrashing", WORK, 0.82, {"dram": 0.1, "l2": 0.1}),
                                 Effect("loads-not-pipelined", WAIT, 0.74)])
    assert kept.predict(["l2-thrashing"]).time_us == pytest.approx(850.0 * 0.74)  # the two faults mask each other


def test_disjoint_waits_do_not_mask_and_units_bound_every_fix() -> None:
    fl = _floor(100.0, tensor=51.0)  # tensor's practical best: 60 us
    m = TimeModel(100.0, fl, [Effect("barrier-sync", WAIT, 0.3), Effect("mma-not-overlapped", WAIT, 0.2)])
    assert m.saving(["barrier-sync"]) == pytest.approx(30.0)
    assert m.saving(["mma-not-overlapped"]) == pytest.approx(20.0)
    p = m.predict(["barrier-sync", "mma-not-overlapped"])
    assert p.time_us == pytest.approx(60.0) and p.binds == "unit:tensor"  # 100 x 0.7 x 0.8 = 56 < 60


def test_the_grid_concentrates_sm_work_until_fixed_and_shortens_the_holds() -> None:
    """16 blocks on 132 SMs: the busy SMs do all the tensor work (its elapsed share over the fill), and more blocks
    spread it; each block's loop of waits stays as long (its hold), where more warps would shorten it."""
    fl = _floor(500.0, tensor=6.0, l2=10.0)
    grid = Effect("too-few-blocks", HIDE, 1 - 16 / 132, spreads=True)
    m = TimeModel(500.0, fl, [grid, Effect("barrier-sync", WAIT, 0.3)])
    assert m.predict([]).time_us == pytest.approx(500.0)
    after = m.predict(["too-few-blocks"])
    # the barrier's hold stays; the L2 (device-wide: never concentrated) keeps its practical best
    assert after.time_us == pytest.approx(500.0 * 0.3) and after.binds == "hold:barrier-sync"
    occ = TimeModel(500.0, fl, [Effect("occupancy-registers", HIDE, 0.5), Effect("barrier-sync", WAIT, 0.3)])
    assert occ.predict(["occupancy-registers"]).time_us == pytest.approx(250.0)  # more warps: the hold halves too


def test_in_a_pair_a_relieved_unit_keeps_b_s_work() -> None:
    fl, other = _floor(200.0, dram=80.0), _floor(120.0, dram=60.0)  # B moves 72 / 160 of A's bytes
    m = TimeModel(200.0, fl, [Effect("dram-bound", WORK, 0.9, {"dram": 0.0})], other)
    p = m.predict(["dram-bound"])
    assert p.time_us == pytest.approx(200.0 * 0.80 / 0.9 * 72 / 160) and p.binds == "unit:dram"


def _profiles(rel: str) -> list:
    from profctl.readers import ncu_profiles

    return list(ncu_profiles.read_profiles(DATA / rel))


def test_recorded_kernels_savings_together_stay_above_the_floor_and_occupancy_is_not_advised_on_a_small_grid(
) -> None:
    pytest.importorskip("ncu_report")
    from profctl.analysis.causes import diagnose_one
    from profctl.analysis.select import select

    a, _ = select(_profiles("fixes/fixes_mm2.ncu-rep.xz"), "^skinny_mm_tile_per_block$", "r")
    d = diagnose_one(a)
    ids = [c.id for c in d.causes]
    assert ids[0] == "too-few-blocks" and not [i for i in ids if i.startswith("occupancy-")], ids
    assert d.together is not None and d.floor is not None
    t = a.duration_ns / 1e3
    # alone savings overlap (88 + 31 + 28 % of the time); together they leave at least the practical best
    assert sum(c.saving_us for c in d.causes) > t
    assert d.together.time_us >= d.floor.attainable_us - 1e-6
    k, _ = select(_profiles("planted/attn_pair.ncu-rep.xz"), "_fwd_kernel", "r")
    dk = diagnose_one(k)
    assert dk.together is not None and dk.floor is not None
    assert dk.together.saving_us <= k.duration_ns / 1e3 - dk.floor.attainable_us + 1e-6
