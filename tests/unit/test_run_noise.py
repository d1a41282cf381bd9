"""Noise between runs (issue 29, item 1): the interval of a comparison holds what moves between processes of an
unchanged program, measured from several runs per side or assumed from profctl's measured default with one, and
the verdict says plainly when one run per side cannot tell."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from profctl import errors, inputs
from profctl.analysis import compare as cm
from profctl.analysis.compare import stats
from profctl.schema import CpuOpRow, Source, Summary
from profctl.schema.samples import sample_fields
from tests.unit.test_regression import row, side


def _run(offset: float, n: int = 60, seed: int = 0, noise: float = 0.004) -> list[float]:
    rng = random.Random(seed)
    return [offset * (1 + rng.gauss(0, noise)) for _ in range(n)]


# ------------------------------------------------------------------------------------------------ the estimate
def test_without_run_noise_one_run_a_side_is_the_instance_bootstrap() -> None:
    a, b = _run(1.0, seed=1), _run(1.1, seed=2)
    e = stats.across_runs([a], [b], noise=stats.NO_RUN_NOISE, seed=3)
    r, lo, hi = stats.bootstrap_ratio(a, b, seed=3)
    assert e.ratio == pytest.approx(r) and e.between == 0 and e.measured_sigma is None
    assert e.lo == pytest.approx(lo, rel=0.003) and e.hi == pytest.approx(hi, rel=0.003)
    assert not e.run_limited


def test_one_run_a_side_adds_the_default_noise_in_quadrature() -> None:
    a, b = _run(1.0, seed=1), _run(1.0, seed=2)
    noise = stats.RunNoise(0.06, "test")
    e = stats.across_runs([a], [b], noise=noise, seed=3)
    want = stats._t_quantile(0.975, stats.PRIOR_RUNS) * 0.06 * math.sqrt(2)
    assert e.between == pytest.approx(want) and e.sigma == pytest.approx(0.06) and e.run_limited
    assert math.log(e.hi / e.ratio) == pytest.approx(math.hypot(e.within, want), rel=0.2)


def test_several_runs_measure_the_noise_between_them() -> None:
    """Runs whose medians scatter by 5 % on each side: the measured sigma says so and widens the interval past
    what the default (0.6 %) would allow; runs that agree narrow it below the one-run interval."""
    rng = random.Random(7)
    scattered = [[_run(math.exp(rng.gauss(0, 0.05)), seed=10 * s + i) for i in range(5)] for s in range(2)]
    e = stats.across_runs(scattered[0], scattered[1], noise=stats.GPU_RUN_NOISE, seed=1)
    assert e.measured_sigma is not None and 0.025 < e.measured_sigma < 0.09
    assert e.sigma > stats.GPU_RUN_NOISE.sigma and e.run_limited
    agree = [[_run(1.0, seed=20 + i) for i in range(4)], [_run(1.0, seed=30 + i) for i in range(4)]]
    one = stats.across_runs(agree[0][:1], agree[1][:1], noise=stats.GPU_RUN_NOISE, seed=1)
    four = stats.across_runs(agree[0], agree[1], noise=stats.GPU_RUN_NOISE, seed=1)
    assert four.measured_sigma is not None and four.measured_sigma < 0.002
    assert four.hi / four.lo < one.hi / one.lo


def test_the_same_inputs_give_the_same_interval() -> None:
    a, b = [_run(1.0, seed=1), _run(1.01, seed=2)], [_run(1.02, seed=3)]
    x = stats.across_runs(a, b, noise=stats.CPU_RUN_NOISE, seed=5)
    assert x == stats.across_runs(a, b, noise=stats.CPU_RUN_NOISE, seed=5)


# ------------------------------------------------------------------------------------------------ bench runs
def _bench(scale: float, seeds: list[int], offsets: list[float] | None = None) -> inputs.Side:
    runs = []
    for i, s in enumerate(seeds):
        r = row(seed=s, scale=scale * (offsets[i] if offsets else 1.0))
        runs.append(side([r], name=f"run{s}"))
    if len(runs) == 1:
        return runs[0]
    return inputs.Side(ref=",".join(r.name for r in runs), kind="bench", path=runs[0].path, name=runs[0].name,
                   manifest=runs[0].manifest, status="complete", rows=list(runs[0].rows), members=runs)


def test_one_run_a_side_cannot_certify_a_two_percent_band_and_says_so() -> None:
    rep = cm.compare_runs(_bench(1.0, [1]), _bench(1.0, [2]))
    (r,) = rep.rows
    assert r.verdict == "inconclusive" and r.run_limited and r.runs == (1, 1)
    assert "one run per side" in r.to_dict()["note"] and "BASE1,BASE2,BASE3" in r.to_dict()["note"]
    assert "one run per side: intervals include run-to-run noise of ±0.6%" in rep.method
    assert rep.to_dict()["run_noise"]["sigma"] == stats.GPU_RUN_NOISE.sigma
    assert cm.gate(rep, 0.05).passed  # no false alarm: inconclusive does not fail without --strict
    # a change well past the noise is still found with one run a side
    (big,) = cm.compare_runs(_bench(1.0, [1]), _bench(1.10, [2])).rows
    assert big.verdict == "slower" and big.ci_lo is not None and big.ci_lo > 1.0


def test_several_runs_that_agree_give_a_verdict_one_run_cannot() -> None:
    """Three runs a side whose medians agree (as on a quiet GPU): identical code is unchanged and a 1.5 % change
    is slower (asked for a 1 % band), where one run a side leaves both inconclusive."""
    same = cm.compare_runs(_bench(1.0, [1, 2, 3]), _bench(1.0, [4, 5, 6]))
    (r,) = same.rows
    assert r.verdict == "unchanged" and r.runs == (3, 3) and r.run_noise_measured is not None
    assert "3 run(s) against 3" in same.method
    (s,) = cm.compare_runs(_bench(1.0, [1, 2, 3]), _bench(1.015, [4, 5, 6]), threshold=0.01).rows
    assert s.verdict == "slower"
    (one,) = cm.compare_runs(_bench(1.0, [1]), _bench(1.015, [4]), threshold=0.01).rows
    assert one.verdict == "inconclusive"


def test_runs_that_scatter_are_measured_and_more_runs_are_suggested() -> None:
    base = _bench(1.0, [1, 2, 3], offsets=[1.0, 1.08, 0.93])
    new = _bench(1.05, [4, 5, 6], offsets=[0.95, 1.07, 1.0])
    (r,) = cm.compare_runs(base, new).rows
    assert r.verdict == "inconclusive" and r.run_limited
    assert r.run_noise_measured is not None and r.run_noise_measured > 0.04
    assert "runs per side would tell" in r.to_dict()["note"]


def test_a_failed_run_on_one_side_is_left_out_and_said() -> None:
    rows = [row(seed=s) for s in (1, 2, 3)]
    rows[1] = {**rows[1], "status": "error", "reason": "boom", "times_ms": None, "median_ms": None}
    members = [side([r], name=f"r{i}") for i, r in enumerate(rows)]
    base = inputs.Side(ref="r0,r1,r2", kind="bench", path=Path("r0"), name="r0", manifest=members[0].manifest,
                   status="complete", rows=list(members[0].rows), members=members)
    (r,) = cm.compare_runs(base, _bench(1.0, [7, 8])).rows
    assert r.runs == (2, 2) and "base: 1 of 3 runs error: left out" in r.notes


# ------------------------------------------------------------------------------------------------ CPU summaries
def _cpu_summary(tmp_path: Path, name: str, mm_us: float, seed: int) -> Path:
    rng = random.Random(seed)
    xs = [mm_us * 1e3 * (1 + rng.gauss(0, 0.01)) for _ in range(40)]
    s = sorted(xs)
    op = CpuOpRow(tool="torch", name="aten::mm", op_class="other", nvtx_range=None, count=len(xs), total_ns=sum(xs),
                  avg_ns=sum(xs) / len(xs), med_ns=s[len(s) // 2], min_ns=s[0], max_ns=s[-1], std_ns=0.0,
                  extra={"device": "cpu", **sample_fields(xs, first_call=True)})
    p = tmp_path / f"{name}.json"
    p.write_text(Summary(sources=(Source("t.json", "torch", "2.13.0"),), kernels=(), cpu_ops=(op,)).to_json())
    return p


def test_the_issue_case_seventeen_percent_between_two_cpu_processes_is_not_a_regression(tmp_path: Path) -> None:
    """Issue 29: two runs of one program on the CPU, aten::mm +17.4 % with a tight interval over its calls, was
    called slower and failed --fail-if-slower 10 %. One run a side on a CPU now allows for the CPU's run-to-run
    noise: inconclusive, the gate passes, and --strict (which fails inconclusive cases beyond the limit) fails."""
    a = inputs.load_sides(str(_cpu_summary(tmp_path, "a", 289.0, 1)))
    b = inputs.load_sides(str(_cpu_summary(tmp_path, "b", 289.0 * 1.174, 2)))
    rep = cm.compare_runs(a, b, limit=0.10)
    (r,) = rep.rows
    assert r.ratio == pytest.approx(1.174, rel=0.01) and r.verdict == "inconclusive"
    assert r.run_noise == pytest.approx(stats.CPU_RUN_NOISE.sigma)
    assert cm.gate(rep, 0.10).passed and not cm.gate(rep, 0.10, strict=True).passed
    # the same data with the noise between runs left out is what the issue saw
    (old,) = cm.compare_runs(a, b, limit=0.10, noise=cm.NO_RUN_NOISE).rows
    assert old.verdict == "slower"


def test_load_sides_reads_comma_lists_and_refuses_repeats_and_mixed_kinds(tmp_path: Path) -> None:
    p1, p2 = _cpu_summary(tmp_path, "a", 100.0, 1), _cpu_summary(tmp_path, "b", 100.0, 2)
    s = inputs.load_sides(f"{p1},{p2}")
    assert len(s.runs) == 2 and s.describe()["runs"][1]["name"] == "b.json"
    with pytest.raises(errors.UsageError, match="given twice"):
        inputs.load_sides(f"{p1},{p1}")
    with pytest.raises(errors.UsageError, match="empty run"):
        inputs.load_sides(f"{p1},")
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps([row(seed=1)]))
    with pytest.raises(errors.NotComparable, match="one kind"):
        inputs.load_sides(f"{p1},{bench}")


def _doc(rep: Any) -> dict[str, Any]:
    return rep.to_dict()  # type: ignore[no-any-return]


def test_rows_say_their_runs_and_noise_in_json(tmp_path: Path) -> None:
    a = inputs.load_sides(",".join(str(_cpu_summary(tmp_path, f"a{i}", 100.0, i)) for i in range(3)))
    b = inputs.load_sides(",".join(str(_cpu_summary(tmp_path, f"b{i}", 100.0, 10 + i)) for i in range(2)))
    doc = _doc(cm.compare_runs(a, b))
    (r,) = doc["rows"]
    assert (r["runs_base"], r["runs_new"]) == (3, 2) and r["run_noise"] > 0 and r["run_noise_measured"] is not None
    assert doc["runs"] == {"base": 3, "new": 2}
    assert len(doc["base"]["runs"]) == 3
