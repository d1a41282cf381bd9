"""A gate with power (issue 48, section 1): the run is the unit of every interval; one run a side on a quiet
machine catches a 2x slowdown from the iterations' own interval and a noise floor set by the machine's recorded
state; three runs a side that agree catch 1.3x; a run whose iterations fall in two modes widens its own interval
and vetoes nothing; `bench --ab` judges the round as the unit, so rounds that switched between a 1.6 ms and a 64 ms
mode are not a regression; captures of other shapes are refused like bench runs of other shapes; the README's run
noise default is the tool's. Constructed timings, seeded: every verdict here is deterministic."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path
from typing import Any

import pytest

from profctl import inputs
from profctl.analysis import compare as cm
from profctl.analysis.compare import stats
from profctl.errors import NotComparable
from profctl.pipelines import ab_pipeline
from tests.unit.test_regression import row, side

ROOT = Path(__file__).resolve().parents[2]
CPU = {"device": "cpu"}
#: a 2-core machine whose two torch threads had their cores (other work 0.1 cores) ...
QUIET = {"cpus": 2, "loadavg": [0.2, 0.2, 0.2], "busy_cores": 0.1, "torch_threads": 2}
#: ... and one where other work kept one core busy
BUSY = {"cpus": 2, "loadavg": [1.3, 1.2, 1.0], "busy_cores": 1.0, "torch_threads": 2}


def _run(median: float, seed: int, *, spread: float = 0.03, machine: dict[str, Any] | None = QUIET,
         times: list[float] | None = None) -> inputs.Side:
    """One CPU bench run of one case: 20 iterations scattering by `spread` around `median` (ms), or `times`."""
    rng = random.Random(seed)
    ts = times or [median * math.exp(rng.gauss(0, spread)) for _ in range(20)]
    r = row(median=median, seed=seed, **CPU, times_ms=ts, median_ms=sorted(ts)[len(ts) // 2])
    extra = {"machine": machine} if machine else {}
    return side([r], name=f"run{seed}", device={"name": "cpu", "torch": "2.13.0+cpu", "threads": 2}, **extra)


def _side(runs: list[inputs.Side]) -> inputs.Side:
    if len(runs) == 1:
        return runs[0]
    return inputs.Side(ref=",".join(r.name for r in runs), kind="bench", path=runs[0].path, name=runs[0].name,
                       manifest=runs[0].manifest, status="complete", rows=list(runs[0].rows), members=runs)


def _gate(base: inputs.Side, new: inputs.Side, limit: float = 0.05) -> tuple[cm.RowResult, cm.Comparison, bool]:
    rep = cm.compare_runs(base, new, limit=limit)
    (r,) = rep.rows
    return r, rep, not cm.gate(rep, limit).passed


# ------------------------------------------------------------------------------------------------ one run a side
#: two processes of identical code (benchmarks/gate_ab_functions.py:attn, s512 h4 fp32, 2 threads) on a quiet 2-CPU
#: slice of the 16-core H200 host, one after the other (benchmarks/gate_slices.sh, 2026-11-28): medians 1.58 and
#: 2.53 ms, busy cores of other work 0.02 in both. The quiet default before issue 48's measurement (10 % a run)
#: called this 60 % slower and failed --fail-if-slower 5%
SLICE_A = [1.617, 1.593, 1.649, 1.608, 1.563, 1.594, 1.553, 1.536, 1.541, 1.597, 1.618, 1.578, 1.67, 1.564, 1.558,
           1.559, 1.587, 1.544, 1.596, 1.551]
SLICE_B = [2.512, 2.479, 2.262, 2.598, 3.084, 1.708, 3.247, 1.844, 3.226, 1.868, 2.579, 2.769, 2.513, 1.805, 3.586,
           1.957, 3.124, 2.553, 2.843, 2.049]


def test_one_run_a_side_on_a_quiet_machine_catches_2x() -> None:
    """The issue: one run a side on a quiet CPU machine read 'CI -95.5%..+5873.1%: inconclusive' and passed
    --fail-if-slower 5%. Recorded quiet, the interval is the iterations' plus a quiet machine's noise between
    processes: a 2x slowdown is slower, and the gate fails."""
    r, rep, failed = _gate(_run(2.35, 1), _run(4.7, 2))
    assert rep.noise == stats.CPU_BENCH_QUIET_RUN_NOISE
    assert r.verdict == "slower" and failed, r.to_dict()
    assert r.ci_lo is not None and r.ci_hi is not None and r.ci_hi / r.ci_lo < 4.0  # not -95 %..+5873 %


def test_one_run_a_side_on_a_quiet_machine_holds_identical_processes_1_6x_apart() -> None:
    """Measured (benchmarks/RESULTS.md, issue 48): on a quiet machine two processes of identical code differed by
    1.60x, each steady over its iterations. One run a side cannot tell that from a change: the quiet default holds
    it (inconclusive, the gate passes), where 10 % a run failed the gate. A change as large as 1.64x is then
    inconclusive with one run a side too: several runs a side, or `bench --ab`, tell."""
    base, new = _run(1.58, 1, times=SLICE_A), _run(2.53, 2, times=SLICE_B)
    r, rep, failed = _gate(base, new)
    assert rep.noise == stats.CPU_BENCH_QUIET_RUN_NOISE and r.ratio == pytest.approx(1.60, abs=0.01)
    assert r.verdict == "inconclusive" and not failed, r.to_dict()
    old = stats.RunNoise(0.10, "the quiet default before the measurement", dof=6)
    est = stats.across_runs([SLICE_A], [SLICE_B], noise=old, modes=True, seed=1)
    assert stats.decide(est.ratio, est.lo, est.hi, 0.05)[0] == "slower"  # what the old default said
    r, _, failed = _gate(_run(2.35, 1), _run(2.35 * 1.64, 2))
    assert r.verdict == "inconclusive" and not failed and "several runs per side" in r.to_dict()["note"]


def test_one_run_a_side_twenty_pairs_quiet_two_x_caught_and_identical_never() -> None:
    """One run a side on 20 seeded pairs. Processes whose medians move by 5 %: 2x caught in at least 19 of 20 (the
    issue's goal was 20; a run a side worth the measured quiet noise lets a 2x that lands near 1.75x pass). Identical
    code at the quiet noise measured on the H200 host's 2-CPU slices (a process's median 1.25 or 1.7 ms, 5 %
    within): failing none."""
    rng = random.Random(11)
    caught = alarms = 0
    for i in range(20):
        base = _run(2.35 * math.exp(rng.gauss(0, 0.05)), 100 + i)
        caught += _gate(base, _run(4.7 * math.exp(rng.gauss(0, 0.05)), 200 + i))[2]
        a = _run(rng.choice((1.25, 1.7)) * math.exp(rng.gauss(0, 0.05)), 300 + i)
        alarms += _gate(a, _run(rng.choice((1.25, 1.7)) * math.exp(rng.gauss(0, 0.05)), 400 + i))[2]
    assert caught >= 19 and alarms == 0, (caught, alarms)


def test_one_run_a_side_on_a_busy_machine_still_holds_a_switch_between_process_modes() -> None:
    """What keeps the false alarms away: with other work on the threads' cores (or no machine state recorded) a
    process can land in a mode twice as slow with every iteration in it; one run a side then cannot tell 2x
    from that, and says so (the heavy-tailed default)."""
    for machine in (BUSY, None):
        r, rep, failed = _gate(_run(2.35, 1, machine=machine), _run(4.8, 2, machine=machine))
        assert rep.noise == stats.CPU_BENCH_RUN_NOISE and r.verdict == "inconclusive" and not failed


def test_quiet_machine() -> None:
    assert stats.quiet_machine([QUIET, QUIET])
    assert not stats.quiet_machine([QUIET, BUSY]) and not stats.quiet_machine([QUIET, None])
    assert not stats.quiet_machine([])
    assert stats.quiet_machine([{**BUSY, "torch_threads": 1}])  # one thread had the free core to itself


# ------------------------------------------------------------------------------------------------ three runs a side
def test_three_runs_a_side_quiet_catch_2x_always_and_never_alarm() -> None:
    """Three runs a side on a quiet machine, 20 seeded pairs, each process's median in one of the two states the
    H200 host's quiet slices showed (1.25 or 1.7 ms, 5 % within): 2x caught in all 20, identical code failing
    none. (1.3x is caught when the runs agree, below; between states 1.4x apart three runs a side often cannot tell
    it, and the issue's goal of 18 of 20 was not met on that machine: benchmarks/RESULTS.md.)"""
    rng = random.Random(5)

    def side_(factor: float, seed: int) -> inputs.Side:
        return _side([_run(rng.choice((1.25, 1.7)) * factor * math.exp(rng.gauss(0, 0.05)), seed + j)
                      for j in range(3)])

    caught = alarms = 0
    for i in range(20):
        base = side_(1.0, 1000 + 10 * i)
        caught += _gate(base, side_(2.0, 2000 + 10 * i))[2]
        alarms += _gate(base, side_(1.0, 3000 + 10 * i))[2]
    assert caught == 20 and alarms == 0, (caught, alarms)


def test_three_runs_a_side_that_agree_catch_1_3x() -> None:
    """Three runs a side whose medians agree within 2 % (one state): a planted 1.3x is slower and fails the gate;
    the quiet default weighs as six runs beside the four degrees of freedom the runs measure."""
    rng = random.Random(8)
    base = _side([_run(1.7 * math.exp(rng.gauss(0, 0.02)), 50 + j) for j in range(3)])
    slow = _side([_run(1.7 * 1.3 * math.exp(rng.gauss(0, 0.02)), 60 + j) for j in range(3)])
    r, _, failed = _gate(base, slow)
    assert r.verdict == "slower" and failed, r.to_dict()


def test_a_bimodal_run_widens_its_own_interval_and_vetoes_nothing() -> None:
    """The issue's eager against sdpa-math, three runs a side: +93.9 % with CI +6.5..+134.6 % was held
    inconclusive because one run's iterations fell in two groups. The modes widen the interval of the case whose
    run has them, and a change beyond that interval is slower; the same modes in a case with a change inside
    them leave it inconclusive."""
    rng = random.Random(3)
    bimodal = [2.4 * math.exp(rng.gauss(0, 0.02)) for _ in range(14)] + [4.5 * math.exp(rng.gauss(0, 0.02))
                                                                       for _ in range(6)]
    base = _side([_run(2.40, 1, times=bimodal), _run(2.43, 2), _run(2.38, 3)])
    new = _side([_run(4.62, 11), _run(4.70, 12), _run(4.58, 13)])
    r, _, failed = _gate(base, new)
    assert r.groups is not None and r.groups.what.startswith("base's iterations")
    assert r.verdict == "slower" and failed, r.to_dict()
    clean = _side([_run(2.40, 21), _run(2.43, 2), _run(2.38, 3)])
    c, _, _ = _gate(clean, new)
    assert c.groups is None and c.ci_lo is not None and r.ci_lo is not None and c.ci_hi is not None
    assert (r.ci_hi or 0) / r.ci_lo > c.ci_hi / c.ci_lo  # the bimodal run's interval is the wider one
    small = _side([_run(2.80, 31, machine=BUSY), _run(2.83, 32, machine=BUSY), _run(2.78, 33, machine=BUSY)])
    s, _, failed = _gate(_side([_run(2.40, 1, times=bimodal, machine=BUSY)]), _side([small.runs[0]]))
    assert s.verdict == "inconclusive" and not failed


# ------------------------------------------------------------------------------------------------ --ab
def _ab_case(a_modes: list[bool], b_modes: list[bool], *, iters: int = 5, fast: float = 1.6, slow: float = 64.0,
             b_factor: float = 1.0, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)

    def block(is_slow: bool, f: float) -> list[float]:
        return [(slow if is_slow else fast) * f * math.exp(rng.gauss(0, 0.03)) for _ in range(iters)]

    rounds = [{"round": i, "order": "ab" if i % 2 == 0 else "ba", "a_ms": block(sa, 1.0), "b_ms": block(sb, b_factor)}
              for i, (sa, sb) in enumerate(zip(a_modes, b_modes, strict=True))]
    spec = {"backend": "sdpa-math", "batch": 1, "seqlen_q": 256, "seqlen_kv": 256, "heads": 4, "kv_heads": 4,
            "head_dim": 64, "dtype": "fp32", "causal": False, "pass": "fwd", "layout": "bhsd", "device": "cpu"}
    return {"status": "ok", "spec": spec, "rounds": rounds}


def _ab(tmp_path: Path, case: dict[str, Any], limit: float = 0.05) -> tuple[cm.RowResult, bool]:
    from profctl import run_store

    d = run_store.new_run("ab", root=tmp_path, argv=["profctl", "bench", "--ab", "sdpa-math,sdpa-math"])
    rep = ab_pipeline.judge(d, [case], ("sdpa-math", "sdpa-math"), cpu=True, iters=5, limit=limit)
    (r,) = rep.rows
    return r, not cm.gate(rep, limit).passed


def test_ab_rounds_that_switch_between_two_modes_are_no_regression(tmp_path: Path) -> None:
    """The issue's sdpa-math against itself: the process sat in a 1.6 ms or a 64 ms mode for stretches of rounds,
    B's blocks in the slow mode in 13 rounds and A's in 7; the medians of all iterations landed in different modes
    and it read '+3264.8% (CI +6.5%..+3840.3%): slower', exit 1. Per round the blocks share the mode in 10 rounds
    and straddle a switch in 10 (8 one way, 2 the other): the median of the rounds' ratios is about 1, the
    straddling rounds widen the interval, the modes are said, the gate passes."""
    a = [i < 7 for i in range(20)]  # A's blocks slow in rounds 0-6
    b = [i < 5 or 7 <= i < 15 for i in range(20)]  # B's in 0-4 and 7-14: 13 of 20, A's 7
    r, failed = _ab(tmp_path, _ab_case(a, b, seed=3))  # the old rule: +3753 % (CI +1.0..+3886 %): slower
    assert not failed and r.verdict != "slower", r.to_dict()
    assert r.ratio is not None and abs(math.log(r.ratio)) < 0.1
    assert r.groups is not None and "two groups" in r.to_dict()["note"]


def test_ab_catches_real_slowdowns_round_by_round(tmp_path: Path) -> None:
    """Power of the paired rounds: 1.3x and 2x on steady rounds are slower and fail the gate, also when a few
    rounds switched modes; identical variants pass."""
    steady = [False] * 20
    for factor in (1.3, 2.0):
        r, failed = _ab(tmp_path, _ab_case(steady, steady, b_factor=factor, seed=2))
        assert r.verdict == "slower" and failed and r.ratio == pytest.approx(factor, rel=0.05)
    modes = [False] * 8 + [True] * 12
    r, failed = _ab(tmp_path, _ab_case(modes, [*modes[:9], False, *modes[10:]], b_factor=2.0, seed=3))
    assert r.verdict == "slower" and failed
    r, failed = _ab(tmp_path, _ab_case(steady, steady, seed=4))
    assert not failed and r.verdict in ("unchanged", "inconclusive")


def test_ab_rounds_in_different_machine_modes_are_left_out(tmp_path: Path) -> None:
    """Recorded (tests/data/gate/ab-busy-identical.json.gz): identical functions beside a spinner, B's blocks in
    the 5.5-ms mode in 9 of 20 rounds and A's in 4. With every round the median ratio was +5.7 % (CI +2.1..+168 %):
    slower under --fail-if-slower 5%. Both variants visit both modes, so they are the machine's: the 11 rounds with A
    and B in different modes are left out, and the 9 with both in one mode pass the gate."""
    import gzip
    import json

    doc = json.loads(gzip.decompress((ROOT / "tests" / "data" / "gate" / "ab-busy-identical.json.gz").read_bytes()))
    (case,) = doc["cases"]
    rs = case["rounds"]
    assert stats.same_mode_rounds([r["a_ms"] for r in rs], [r["b_ms"] for r in rs]) is not None
    every = stats.paired_rounds([r["a_ms"] for r in rs], [r["b_ms"] for r in rs])
    assert every[0] > 1.05 and every[1] > 1.0  # the old answer: slower
    r, failed = _ab(tmp_path, case)
    assert not failed and r.verdict != "slower" and r.ratio is not None and r.ratio < 1.05, r.to_dict()
    assert "11 of 20 rounds had A and B in different modes" in (r.to_dict()["note"] or "")


def test_machine_modes_leave_a_real_slowdown_standing(tmp_path: Path) -> None:
    """The same states with B 1.3x (or 2x) slower in each: the rounds with both in one mode say 1.3x (2x); a
    variant that never leaves one mode (B always slow: the change itself) keeps every round."""
    a = [i % 3 == 0 for i in range(20)]
    b = [i % 4 == 1 for i in range(20)]
    for factor in (1.3, 2.0):
        r, failed = _ab(tmp_path, _ab_case(a, b, fast=1.9, slow=5.5, b_factor=factor, seed=7))
        assert r.verdict == "slower" and failed and r.ratio == pytest.approx(factor, rel=0.05), r.to_dict()
        assert "different modes" in (r.to_dict()["note"] or "")
    steady = [False] * 20
    assert stats.same_mode_rounds([[1.9]] * 20, [[5.5 if i % 2 else 1.9] for i in range(20)]) is None  # B's own
    r, failed = _ab(tmp_path, _ab_case(steady, steady, b_factor=3.0, seed=8))
    assert r.verdict == "slower" and "different modes" not in (r.to_dict()["note"] or "")


def test_paired_rounds_interval_is_the_sign_test_interval() -> None:
    a = [[1.0]] * 20
    b = [[math.exp(0.01 * i)] for i in range(20)]  # round ratios exp(0.00 .. 0.19)
    ratio, lo, hi, conf = stats.paired_rounds(a, b)
    assert ratio == pytest.approx(math.exp(0.095)) and conf >= 0.95
    assert lo == pytest.approx(math.exp(0.05)) and hi == pytest.approx(math.exp(0.14))  # the 6th and 15th of 20
    _, lo5, hi5, conf5 = stats.paired_rounds(a[:5], b[:5])
    assert (lo5, hi5) == (1.0, pytest.approx(math.exp(0.04))) and conf5 == pytest.approx(0.9375)


# ------------------------------------------------------------------------------------------------ other shapes
def test_captures_of_other_shapes_are_not_comparable(data_file: Any, shared_fixture: Any) -> None:
    """The issue's two unrelated captures (attn.sqlite: b4 s2048 causal, five backends; nsys_profctl_fwdbwd: b1
    s1024 fwd+bwd) had three kernels called 'faster' (-97.7 %); their kernels in common ran other launch grids,
    so they are refused as bench runs of other shapes are, with the reason on one line."""
    a = inputs.load_sides(str(shared_fixture("attn.sqlite")))
    b = inputs.load_sides(str(data_file("nsys_profctl_fwdbwd.sqlite")))
    with pytest.raises(NotComparable) as e:
        cm.compare_runs(a, b)
    msg = str(e.value)
    assert "\n" not in msg and "other launch grids" in msg and "--force" in msg, msg
    assert cm.compare_runs(a, b, force=True).rows  # --force compares anyway
    assert cm.compare_runs(a, inputs.load_sides(str(shared_fixture("attn.sqlite")))).rows


# ------------------------------------------------------------------------------------------------ the README
def test_the_readme_states_the_run_noise_defaults_the_tool_uses() -> None:
    """README said 'CPU 6 %' where CPU bench rows use ±20 % a run (and ±10 % on a quiet machine): the sentence
    names every default, as the tool's constants have them."""
    text = " ".join((ROOT / "README.md").read_text().split())
    m = re.search(r"profctl's measured default \(([^)]*)\)", text)
    assert m is not None
    said = m.group(1)
    for noise in (stats.CPU_RUN_NOISE, stats.CPU_BENCH_RUN_NOISE, stats.CPU_BENCH_QUIET_RUN_NOISE,
                  stats.GPU_RUN_NOISE):
        assert f"{noise.sigma * 100:g} %" in said, (noise, said)
    docs = " ".join((ROOT / "docs" / "runs-and-compare.md").read_text().split())
    for noise in (stats.CPU_BENCH_RUN_NOISE, stats.CPU_BENCH_QUIET_RUN_NOISE):
        assert f"±{noise.sigma * 100:g} %" in docs


# ------------------------------------------------------------------------------------------------ the per-run value
def test_a_bench_run_is_judged_by_its_median_and_the_quantile_is_one_constant(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's value is its iterations' median (stats.BENCH_RUN_QUANTILE, measured against a low quantile in
    benchmarks/RESULTS.md): compare reads that one constant, so `run_noise.py --reanalyse --quantile` judges the
    same runs by another. Runs whose fast iterations agree but whose medians differ show the difference."""
    fast_then_slow = [1.0] * 6 + [2.0] * 14  # median 2.0, 25 % quantile 1.0
    base, new = _run(1.0, 1, times=[1.0] * 20), _run(2.0, 2, times=fast_then_slow)
    assert stats.BENCH_RUN_QUANTILE == 0.5
    r, _, _ = _gate(base, new)
    assert r.ratio == pytest.approx(2.0)
    monkeypatch.setattr(stats, "BENCH_RUN_QUANTILE", 0.25)
    r, _, _ = _gate(base, new)
    assert r.ratio == pytest.approx(1.0)


# ------------------------------------------------------------------------------------------------ run_noise.py
def _run_noise() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_noise", ROOT / "benchmarks" / "run_noise.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_run_noise_slices_and_an_interleaved_order_that_a_deadline_cuts_alike() -> None:
    """benchmarks/gate_slices.sh: 2-CPU slices side by side, the levels' pairs spread over the run so that the
    deadline leaves every level the same share (the H200 host's run: 10, 9 and 2 of 20, 20 and 5)."""
    rn = _run_noise()
    assert rn.parse_slices("0-1,2-3,8+12") == [[0, 1], [2, 3], [8, 12]]
    assert rn.job_order([0, 1], 2) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    order = rn.job_order([0, 1, 2], [20, 20, 5], interleave=True)
    assert sorted(order) == sorted(rn.job_order([0, 1, 2], [20, 20, 5]))
    first = order[:18]  # the share of the run a deadline might leave
    counts = [sum(1 for load, _ in first if load == lv) for lv in (0, 1, 2)]
    assert counts[0] == counts[1] and 1 <= counts[2] <= 3, counts
