"""The gate on identical runs (issue 39): runs are the unit, with a t interval on per-run log medians that widens as
runs get fewer; timings in two groups (per-run medians, or one run's iterations) make a comparison inconclusive
unless the change is far beyond the groups' ratio; two sides timed in different machine states are said, and on
a CPU held inconclusive. Constructed per-run medians, so every verdict here is deterministic."""

from __future__ import annotations

import math
import random
import time
from pathlib import Path
from typing import Any

import pytest

from profctl import inputs, machine_state
from profctl.analysis import compare as cm
from profctl.analysis.compare import stats
from tests.unit.test_regression import row, side

CPU = {"device": "cpu"}


def _cpu_run(median: float, seed: int, *, spread: float = 0.01, machine: dict[str, Any] | None = None
             ) -> inputs.Side:
    """One CPU bench run of one case whose iterations scatter by `spread` around `median` (ms)."""
    rng = random.Random(seed)
    ts = [median * math.exp(rng.gauss(0, spread)) for _ in range(40)]
    r = row(median=median, seed=seed, **CPU, times_ms=ts, median_ms=sorted(ts)[20])
    extra = {"machine": machine} if machine else {}
    return side([r], name=f"run{seed}", device={"name": "cpu", "torch": "2.13.0+cpu", "threads": 2}, **extra)


def _side(medians: list[float], seed: int, **kw: Any) -> inputs.Side:
    runs = [_cpu_run(m, seed + i, **kw) for i, m in enumerate(medians)]
    if len(runs) == 1:
        return runs[0]
    return inputs.Side(ref=",".join(r.name for r in runs), kind="bench", path=runs[0].path, name=runs[0].name,
                       manifest=runs[0].manifest, status="complete", rows=list(runs[0].rows), members=runs)


def _one(base: inputs.Side, new: inputs.Side, **kw: Any) -> tuple[cm.RowResult, cm.Comparison]:
    rep = cm.compare_runs(base, new, limit=0.10, **kw)
    (r,) = rep.rows
    return r, rep


# ------------------------------------------------------------------------------------------------ the t interval
@pytest.mark.parametrize(("dof", "t"), [(1, 12.7062), (2, 4.3027), (3, 3.1824), (4, 2.7764), (6, 2.4469),
                                        (10, 2.2281), (30, 2.0423)])
def test_t_quantiles_are_exact_for_few_degrees_of_freedom(dof: int, t: float) -> None:
    assert stats._t_quantile(0.975, dof) == pytest.approx(t, abs=2e-4)


def test_cpu_bench_rows_get_the_heavy_tailed_default() -> None:
    r, rep = _one(_side([2.35], 1), _side([2.40], 2))
    assert rep.noise == stats.CPU_BENCH_RUN_NOISE and r.run_noise == pytest.approx(stats.CPU_BENCH_RUN_NOISE.sigma)
    assert "worth 6 degrees of freedom" in rep.method and rep.noise.sigma == 0.75  # measured on busy slices


def test_one_run_a_side_on_a_cpu_cannot_fail_at_ten_percent_short_of_far_beyond() -> None:
    """The issue's pairs: one process at 2.35 ms, the next at 4.8 ms (2x, a switch between the two groups a CPU
    process lands in) is inconclusive and passes the gate; so is 5x; only a change far beyond what processes do
    between themselves (here 100x) is slower."""
    for factor in (1.3, 2.04, 5.0):
        r, rep = _one(_side([2.35], 1), _side([2.35 * factor], 2))
        assert r.verdict == "inconclusive", (factor, r.to_dict())
        assert cm.gate(rep, 0.10).passed
        assert "give several runs per side" in r.to_dict()["note"]
    r, rep = _one(_side([2.35], 1), _side([235.0], 2))
    assert r.verdict == "slower" and not cm.gate(rep, 0.10).passed


def test_the_interval_narrows_as_runs_agree_and_a_planted_1_3x_is_caught_with_three_runs_a_side() -> None:
    base = _side([2.35, 2.41, 2.30], 10, machine=QUIET)
    slow = _side([3.06, 3.00, 3.12], 20, machine=QUIET)
    r, rep = _one(base, slow)
    assert r.verdict == "slower" and r.ratio == pytest.approx(1.3, rel=0.02) and r.ci_lo is not None
    assert r.ci_lo > 1.0 and not cm.gate(rep, 0.10).passed
    same, rep = _one(base, _side([2.38, 2.33, 2.36], 30, machine=QUIET))
    assert same.verdict in ("unchanged", "inconclusive") and cm.gate(rep, 0.10).passed
    one, _ = _one(_side([2.35], 10, machine=QUIET), _side([3.06], 20, machine=QUIET))
    assert one.ci_lo is not None and same.ci_lo is not None
    assert (one.ci_hi or 0) / one.ci_lo > (r.ci_hi or 0) / r.ci_lo  # one run a side: a wider interval
    # on a busy machine three processes that agree may all be in one of its states (measured: 0.75 a process):
    # the same runs cannot tell 1.3x there, and say how many would
    busy, _ = _one(_side([2.35, 2.41, 2.30], 10), _side([3.06, 3.00, 3.12], 20))
    assert busy.verdict == "inconclusive" and "runs per side would tell" in (busy.to_dict()["note"] or "")


# ------------------------------------------------------------------------------------------------ two groups
def test_per_run_medians_in_two_groups_are_inconclusive_and_said() -> None:
    """The issue's three against three: base 2.35 ms in every process, new twice at 4.8 ms and once at 2.35:
    +60 % was called slower (CI +12.7..+126.3 %). The new side's medians fall in two groups, 2.04x apart, and
    the change is no larger than that: inconclusive, exit 0, and the method line and the note say why."""
    r, rep = _one(_side([2.35, 2.36, 2.34], 1), _side([4.8, 4.82, 2.35], 10))
    assert r.verdict == "inconclusive" and r.ratio == pytest.approx(1.6, rel=0.02)
    assert r.groups is not None and r.groups.ratio == pytest.approx(2.04, rel=0.02)
    d = r.to_dict()
    assert "new's per-run medians in two groups" in d["note"] and d["groups"]["ratio"] == pytest.approx(2.04, rel=0.02)
    assert "timings in two groups in 1 case(s)" in rep.method
    assert cm.gate(rep, 0.10).passed


def test_a_change_far_beyond_the_groups_is_still_slower() -> None:
    r, rep = _one(_side([2.35, 2.36, 4.8], 1), _side([47.0, 47.5, 46.8], 10))
    assert r.groups is not None and r.verdict == "slower" and not cm.gate(rep, 0.10).passed


def test_run_groups() -> None:
    assert stats.run_groups([2.53, 4.94, 2.95, 2.97, 2.80, 5.26]) is not None  # recorded: two groups
    assert stats.run_groups([0.58, 0.50, 0.58, 0.57, 0.47, 7.96]) is not None  # one process 15x slower
    assert stats.run_groups([1.93, 2.03, 2.13, 2.28, 2.33, 2.28]) is None  # a spread, not groups
    assert stats.run_groups([2.35]) is None and stats.run_groups([2.35, 2.5]) is None


def test_iteration_modes() -> None:
    """One run's iterations: recorded on the 2-core machine, 16 near 2.5 ms and 4 near 4.7 ms (two modes); a
    normal or a uniform spread, and a few slow outliers, are not."""
    rec = [2.24, 2.27, 2.31, 2.33, 2.36, 2.36, 2.42, 2.45, 2.51, 2.52, 2.54, 2.6, 2.61, 2.67, 2.87, 2.99, 4.08, 4.3,
           4.96, 5.47]
    g = stats.iteration_modes(rec)
    assert g is not None and 1.6 < g.ratio < 2.1
    rng = random.Random(3)
    assert stats.iteration_modes([2.0 * math.exp(rng.gauss(0, 0.1)) for _ in range(100)]) is None
    assert stats.iteration_modes([2.0 + 2.0 * i / 99 for i in range(100)]) is None
    assert stats.iteration_modes([2.0 * math.exp(rng.gauss(0, 0.01)) for _ in range(57)] + [9.0, 9.5, 9.9]) is None
    assert stats.iteration_modes(rec[:9]) is None  # too few to say


def test_a_run_whose_iterations_have_two_modes_holds_a_change_smaller_than_the_modes() -> None:
    rng = random.Random(5)
    ts = [2.5 * math.exp(rng.gauss(0, 0.02)) for _ in range(30)] + [4.7 * math.exp(rng.gauss(0, 0.02))
                                                                    for _ in range(10)]
    bimodal = side([row(median=2.5, **CPU, times_ms=ts, median_ms=sorted(ts)[20])], name="bimodal",
                   device={"name": "cpu", "torch": "2.13.0+cpu", "threads": 2})
    many = [_cpu_run(3.3, 40 + i) for i in range(3)]
    r, _ = _one(bimodal, inputs.Side(ref="m", kind="bench", path=many[0].path, name=many[0].name,
                                     manifest=many[0].manifest, status="complete", rows=list(many[0].rows),
                                     members=many), noise=stats.RunNoise(0.01, "test"))
    assert r.groups is not None and r.groups.what == "base's iterations"
    assert r.verdict == "inconclusive" and "the interval holds a switch between them" in r.to_dict()["note"]
    assert "more runs per side" in r.to_dict()["note"]


# ------------------------------------------------------------------------------------------------ machine state
QUIET = {"cpus": 2, "loadavg": [0.1, 0.1, 0.1], "busy_cores": 0.05, "torch_threads": 2}
BUSY = {"cpus": 2, "loadavg": [2.3, 1.9, 1.0], "busy_cores": 1.9, "torch_threads": 2}


def test_sides_in_different_machine_states_are_said_and_held_inconclusive() -> None:
    base = _side([2.35, 2.36, 2.34], 1, machine=QUIET)
    new = _side([23.4, 23.6, 23.5], 10, machine=BUSY)  # 10x: past what a busy machine's states allow
    r, rep = _one(base, new)
    assert r.verdict == "inconclusive" and "different machine states" in r.to_dict()["note"]
    (w,) = [w for w in rep.warnings if "machine states" in w]
    assert "busy cores of other work 0.1 vs 1.9 of 2" in w and "load average 0.1 vs 2.3" in w
    assert cm.gate(rep, 0.10).passed
    same, rep = _one(base, _side([3.4, 3.42, 3.38], 10, machine=QUIET))  # same state: the change stands
    assert same.verdict == "slower" and not [w for w in rep.warnings if "machine states" in w]


def test_machine_state_differences_in_words() -> None:
    other = {**QUIET, "torch_threads": 1, "governor": "powersave", "gpu_processes": [{"pid": 9, "gpu": 0, "mib": 5}]}
    words, apart = machine_state.differences([{**QUIET, "gpu_processes": []}], [other])
    assert not apart and words == ["torch threads 2 vs 1", "other processes on the GPU: new only"]
    assert machine_state.differences([None], [BUSY]) == ([], False)  # a run that recorded nothing says nothing
    assert machine_state.describe(BUSY) == "busy cores of other work 1.9 of 2, load 2.3, torch threads 2"


def test_the_machine_state_is_read_from_proc_and_measured_over_a_run(tmp_path: Path) -> None:
    (tmp_path / "loadavg").write_text("0.52 0.31 0.20 2/88 3227\n")
    (tmp_path / "stat").write_text("cpu  9148 0 2976 50422 218 0 38 77 0 0\ncpu0 1 2 3 4\nprocs_running 3\n")
    assert machine_state.loadavg(tmp_path) == [0.52, 0.31, 0.20]
    assert machine_state.cpu_jiffies(tmp_path) == (9148 + 2976 + 38 + 77, 9148 + 2976 + 50422 + 218 + 38 + 77)
    assert machine_state.procs_running(tmp_path) == 3
    # pinned to some CPUs (taskset, a cpuset): their own lines, not the whole machine's
    (tmp_path / "stat").write_text("cpu  900 0 100 1000 0 0 0 0 0 0\ncpu0 800 0 0 200 0 0 0 0\n"
                                   "cpu1 100 0 100 800 0 0 0 0\nprocs_running 3\n")
    assert machine_state.cpu_jiffies(tmp_path, cpus=[1]) == (200, 1000)
    assert machine_state.cpu_jiffies(tmp_path, cpus=[0, 1]) == machine_state.cpu_jiffies(tmp_path) == (1000, 2000)
    assert machine_state.cpu_jiffies(tmp_path, cpus=[7]) == (1000, 2000)  # no line for it: the whole machine
    assert machine_state.loadavg(tmp_path / "nope") is None and machine_state.cpu_jiffies(tmp_path / "nope") is None
    start = machine_state.at_start(gpu=False)
    assert start["cpus"] >= 1
    if "_counters" not in start:  # pragma: no cover - a machine without /proc/stat
        pytest.skip("no /proc/stat here")
    time.sleep(0.3)  # a run long enough to say (a clock tick is 10 ms a CPU)
    end = machine_state.finished(start, {"threads": 3})
    assert end is not None and "_counters" not in end and end["torch_threads"] == 3
    assert 0.0 <= end["busy_cores"] <= start["cpus"]
