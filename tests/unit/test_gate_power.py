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
@pytest.mark.parametrize("factor", [2.0, 1.64])
def test_one_run_a_side_on_a_quiet_machine_catches_a_real_slowdown(factor: float) -> None:
    """The issue: one run a side on a quiet CPU machine, a function made 1.64x slower, read 'CI -95.5%..+5873.1%:
    inconclusive' and passed --fail-if-slower 5%. Recorded quiet, the interval is the iterations' plus a noise
    floor of a quiet machine's processes: slower, and the gate fails."""
    r, rep, failed = _gate(_run(2.35, 1), _run(2.35 * factor, 2))
    assert rep.noise == stats.CPU_BENCH_QUIET_RUN_NOISE
    assert r.verdict == "slower" and failed, r.to_dict()
    assert r.ci_lo is not None and r.ci_hi is not None and r.ci_hi / r.ci_lo < 3.0  # not -95 %..+5873 %


def test_one_run_a_side_twenty_pairs_quiet_two_x_always_caught_and_identical_never() -> None:
    """The issue's goal for one run a side on a quiet machine, on 20 seeded pairs with a quiet machine's scatter
    between processes (a run's median moves by 5 %): 2x caught 20 of 20, identical code failing none."""
    rng = random.Random(11)
    caught = alarms = 0
    for i in range(20):
        base = _run(2.35 * math.exp(rng.gauss(0, 0.05)), 100 + i)
        caught += _gate(base, _run(4.7 * math.exp(rng.gauss(0, 0.05)), 200 + i))[2]
        alarms += _gate(base, _run(2.35 * math.exp(rng.gauss(0, 0.05)), 300 + i))[2]
    assert caught == 20 and alarms == 0


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
def test_three_runs_a_side_catch_1_3x_in_18_of_20_quiet_and_never_alarm() -> None:
    """Three runs a side on a quiet machine whose processes' medians scatter by 6 %: a planted 1.3x caught in at
    least 18 of 20 seeded pairs (the issue's goal), identical code failing the gate in none. (At 8 % it is 17 of
    20 here: a t interval on four degrees of freedom of runs has no more power than that.)"""
    rng = random.Random(5)
    caught = alarms = 0
    for i in range(20):
        base = _side([_run(2.35 * math.exp(rng.gauss(0, 0.06)), 1000 + 10 * i + j) for j in range(3)])
        slow = _side([_run(3.055 * math.exp(rng.gauss(0, 0.06)), 2000 + 10 * i + j) for j in range(3)])
        same = _side([_run(2.35 * math.exp(rng.gauss(0, 0.06)), 3000 + 10 * i + j) for j in range(3)])
        caught += _gate(base, slow)[2]
        alarms += _gate(base, same)[2]
    assert caught >= 18 and alarms == 0, (caught, alarms)


def test_a_bimodal_run_widens_its_own_interval_and_vetoes_nothing() -> None:
    """The issue's eager against sdpa-math, three runs a side: +93.9 % with CI +6.5..+134.6 % was held
    inconclusive because one run's iterations fell in two groups. The modes widen the interval of the case whose
    run has them, and a change beyond that interval is slower; the same modes in a case with a change inside
    them leave it inconclusive."""
    rng = random.Random(3)
    bimodal = [2.4 * math.exp(rng.gauss(0, 0.02)) for _ in range(14)] + [4.5 * math.exp(rng.gauss(0, 0.02))
                                                                       for _ in range(6)]
    base = _side([_run(2.40, 1, times=bimodal, machine=BUSY), _run(2.43, 2, machine=BUSY),
                  _run(2.38, 3, machine=BUSY)])
    new = _side([_run(4.62, 11, machine=BUSY), _run(4.70, 12, machine=BUSY), _run(4.58, 13, machine=BUSY)])
    r, _, failed = _gate(base, new)
    assert r.groups is not None and r.groups.what.startswith("base's iterations")
    assert r.verdict == "slower" and failed, r.to_dict()
    clean = _side([_run(2.40, 21, machine=BUSY), _run(2.43, 2, machine=BUSY), _run(2.38, 3, machine=BUSY)])
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
