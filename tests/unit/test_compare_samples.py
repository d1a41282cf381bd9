"""Summaries compared with intervals (issue 22): per-instance samples kept by the readers, first calls left out,
warm-up ranges and rows below the floors not judged, the noise floor, old summaries by the threshold, and the
one gate for every kind of comparison.

Comparisons here leave the noise between runs out (``noise=ONE``): they test the instance-level
statistics; tests/unit/test_run_noise.py tests the run level."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from profctl import inputs
from profctl.analysis import compare as cm
from profctl.analysis.compare import stats
from profctl.readers import torch_trace
from profctl.schema import CpuOpRow, KernelRow, Source, Summary
from profctl.schema.samples import SAMPLE_CAP, merged, sample_fields, samples_of, subsample
from tests.conftest import DATA

#: one process's samples: the noise between runs left out (tests/unit/test_run_noise.py tests that part)
ONE = cm.NO_RUN_NOISE


# ------------------------------------------------------------------------------------------------ the samples
def test_subsample_is_deterministic_keeps_the_ends_and_caps() -> None:
    xs = list(range(10_000))
    a, b = subsample(xs, 2000), subsample(xs, 2000)
    assert a == b and len(a) == 2000 and a[0] == 0 and a[-1] == 9999 and a == sorted(a)
    assert subsample(xs[:50], 2000) == xs[:50]
    f = sample_fields([float(x) for x in xs], first_call=True)
    assert len(f["samples_ns"]) == SAMPLE_CAP and f["samples_of"] == 10_000 and f["first_call"] is True
    assert all(isinstance(x, int) for x in f["samples_ns"])
    assert "samples_of" not in sample_fields([1.0, 2.0]) and "first_call" not in sample_fields([1.0, 2.0])


@pytest.mark.parametrize("bad", [None, [], "x", [1, "2"], [1, float("nan")], [-1.0], [True, 2]])
def test_unusable_samples_read_as_none(bad: Any) -> None:
    assert samples_of({"samples_ns": bad}) is None


def test_merged_samples_keep_only_the_first_parts_first_call() -> None:
    a = samples_of({"samples_ns": [9, 1, 1], "first_call": True})
    b = samples_of({"samples_ns": [8, 2, 2], "first_call": True})
    assert a is not None and b is not None
    m = merged([a, b])
    assert m is not None and m.values == (9, 1, 1, 2, 2) and m.first_call


def test_readers_keep_samples_and_mark_first_calls_only_for_whole_programs() -> None:
    prog = torch_trace.read(DATA / "nvtx_mixed_torch.json.gz", by_range=True)  # a program's whole trace
    rows = [*prog.kernels, *prog.cpu_ops]
    assert all(len(r.extra["samples_ns"]) == min(r.count, SAMPLE_CAP) for r in rows)
    assert any(r.extra.get("first_call") for r in rows)
    by_name: dict[str, int] = {}
    for r in prog.kernels:  # at most one row per kernel holds its first call, whatever the range split
        by_name[r.name] = by_name.get(r.name, 0) + bool(r.extra.get("first_call"))
    assert set(by_name.values()) <= {0, 1} and 1 in by_name.values()
    own = torch_trace.read(DATA / "torch_profctl_gpu_nvtx.json.gz", by_range=True)  # profctl: measured only
    assert not any(r.extra.get("first_call") for r in [*own.kernels, *own.cpu_ops])
    assert own.meta["samples"] == "measured iterations only"


# ------------------------------------------------------------------------------------------------ statistics
def test_noise_floor_is_half_the_interval() -> None:
    assert stats.noise_floor(None, 1.0) is None
    assert stats.noise_floor(0.98, 1.02) == pytest.approx(0.02, abs=1e-3)


def test_paired_rounds_find_a_change_through_round_to_round_drift() -> None:
    rng = random.Random(3)
    drift = [1.0 + 0.2 * (r % 5) for r in range(20)]  # the machine changes speed from round to round
    a = [[d * rng.gauss(1.0, 0.01) for _ in range(10)] for d in drift]
    same = [[d * rng.gauss(1.0, 0.01) for _ in range(10)] for d in drift]
    slow = [[1.03 * d * rng.gauss(1.0, 0.01) for _ in range(10)] for d in drift]
    r, lo, hi, conf = stats.paired_rounds(a, same)
    assert lo <= 1.0 <= hi and conf >= 0.95
    r, lo, hi, _ = stats.paired_rounds(a, slow)
    assert 1.0 < lo < r < hi and r == pytest.approx(1.03, abs=0.02)
    assert stats.paired_rounds(a, slow)[:3] == (r, lo, hi)


# ------------------------------------------------------------------------------------------------ summaries
def _samples(median_ns: float, n: int, *, noise: float = 0.01, seed: int = 0, first: float | None = None
             ) -> list[float]:
    rng = random.Random(seed)
    xs = [median_ns * (1 + rng.gauss(0, noise)) for _ in range(n)]
    if first is not None:
        xs[0] = first
    return xs


def _kernel(name: str, xs: list[float], *, rng: str | None = None, first_call: bool = True,
            samples: bool = True) -> KernelRow:
    s = sorted(xs)
    return KernelRow(tool="nsys", name=name, short_name=name, kernel_class="other", nvtx_range=rng, count=len(xs),
                     total_ns=sum(xs), avg_ns=sum(xs) / len(xs), med_ns=s[len(s) // 2], min_ns=s[0], max_ns=s[-1],
                     std_ns=0.0, extra={"kind": "kernel", **(sample_fields(xs, first_call=first_call)
                                                               if samples else {})})


def _side(tmp_path: Path, name: str, kernels: list[KernelRow]) -> inputs.Side:
    s = Summary(sources=(Source(f"{name}.sqlite", "nsys", "2025.3.1"),), kernels=tuple(kernels),
                meta={"gpus": [{"name": "NVIDIA H200"}]})
    p = tmp_path / f"{name}.json"
    p.write_text(s.to_json())
    return inputs.load_side(str(p))


def test_a_first_call_effect_is_not_a_change(tmp_path: Path) -> None:
    """The first call of a kernel is 16x slower in one run (lazy loading): left out, the kernel is unchanged."""
    a = _side(tmp_path, "a", [_kernel("normal_kernel", _samples(10_000, 40, seed=1, first=160_000))])
    b = _side(tmp_path, "b", [_kernel("normal_kernel", _samples(10_000, 40, seed=2, first=10_000))])
    (row,) = cm.compare_runs(a, b, noise=ONE).rows
    assert row.verdict == "unchanged" and row.method == "bootstrap" and "first call left out" in row.notes
    assert row.ci_lo is not None and row.ci_hi is not None and 0.98 < row.ci_lo < row.ci_hi < 1.02
    assert row.noise_floor is not None and row.noise_floor < 0.02


def test_only_the_slowed_kernel_is_flagged_and_small_rare_or_warmup_ones_are_not_judged(tmp_path: Path) -> None:
    warm = "profctl@sdpa-flash[b1,sq1024,skv1024,h8,kv8,d64,bf16,full,bhsd]/warmup/sdpa-flash.fwd"
    base = [_kernel("gemm", _samples(100_000, 50, seed=1)), _kernel("softmax", _samples(20_000, 50, seed=2)),
            _kernel("tiny", _samples(600, 500, seed=3)), _kernel("rare", _samples(90_000, 3, seed=4)),
            _kernel("small_total", _samples(4_000, 6, seed=5)),
            _kernel("in_warmup", _samples(50_000, 20, seed=6), rng=warm)]
    new = [_kernel("gemm", _samples(100_000, 50, seed=11)), _kernel("softmax", _samples(40_000, 50, seed=12)),
           _kernel("tiny", _samples(900, 500, seed=13)), _kernel("rare", _samples(180_000, 3, seed=14)),
           _kernel("small_total", _samples(8_000, 6, seed=15)),
           _kernel("in_warmup", _samples(100_000, 20, seed=16), rng=warm)]
    rep = cm.compare_runs(_side(tmp_path, "a", base), _side(tmp_path, "b", new), noise=ONE)
    by = {r.case["kernel"]: r for r in rep.rows}
    assert by["softmax"].verdict == "slower" and by["softmax"].ratio == pytest.approx(2.0, rel=0.05)
    assert by["gemm"].verdict == "unchanged"
    for name, why in (("tiny", "per instance"), ("rare", "instance(s) on a side"), ("small_total", "in total"),
                      ("in_warmup", "warmup range")):
        assert by[name].verdict == "not judged" and why in by[name].notes[0], (name, by[name].notes)
    assert [r.case["kernel"] for r in cm.regressions(rep, 0.05)] == ["softmax"]
    doc = json.loads(json.dumps(rep.to_dict()))
    assert doc["floors"] == {"total_ms": 0.05, "instance_us": 1.0, "samples": 5}
    assert {r["method"] for r in doc["rows"]} == {"bootstrap"} and all("noise_floor" in r for r in doc["rows"])


def test_cpu_ops_get_the_cpu_threshold_and_floor(tmp_path: Path) -> None:
    def cpu(name: str, xs: list[float]) -> CpuOpRow:
        s = sorted(xs)
        return CpuOpRow(tool="torch", name=name, op_class="other", nvtx_range=None, count=len(xs), total_ns=sum(xs),
                        avg_ns=sum(xs) / len(xs), med_ns=s[len(s) // 2], min_ns=s[0], max_ns=s[-1], std_ns=0.0,
                        extra={"device": "cpu", **sample_fields(xs, first_call=True)})

    def side(name: str, ops: list[CpuOpRow]) -> inputs.Side:
        p = tmp_path / f"{name}.json"
        p.write_text(Summary(sources=(Source("t.json", "torch", "2.13.0"),), kernels=(), cpu_ops=tuple(ops)).to_json())
        return inputs.load_side(str(p))

    a = side("a", [cpu("aten::mm", _samples(300_000, 40, seed=1)), cpu("aten::add", _samples(5_000, 40, seed=2))])
    b = side("b", [cpu("aten::mm", _samples(318_000, 40, seed=3)), cpu("aten::add", _samples(5_600, 40, seed=4))])
    rep = cm.compare_runs(a, b, noise=ONE)
    assert rep.threshold == cm.CPU_THRESHOLD and rep.threshold_why == "the default for CPU timings"
    by = {r.case["kernel"]: r for r in rep.rows}
    assert by["aten::mm"].verdict in ("unchanged", "inconclusive")  # +6 %: inside the CPU band
    assert by["aten::add"].verdict == "not judged" and "dispatch" in by["aten::add"].notes[0]
    assert cm.compare_runs(a, b, threshold=0.02, noise=ONE).rows[0].verdict == "slower"  # asked for 2 %: it is found


def test_old_summaries_without_samples_compare_by_the_threshold(tmp_path: Path) -> None:
    base = _side(tmp_path, "a", [_kernel("flash_fwd_kernel", [400_000.0] * 10, samples=False)])
    new = _side(tmp_path, "b", [_kernel("flash_fwd_kernel", _samples(440_000, 10), samples=True)])
    rep = cm.compare_runs(base, new, noise=ONE)
    (row,) = rep.rows
    assert row.method == "threshold" and row.verdict == "slower" and row.ci_lo is None and row.noise_floor is None
    assert "no confidence interval" in rep.method and "no per-instance samples" in row.notes[-1]
    g = cm.gate(rep, 0.05)
    assert not g.passed and g.exit_code == 1 and "threshold only" in str(g.error())


# ------------------------------------------------------------------------------------------------ the gate
def _report(rows: list[tuple[str, float, float | None, float | None]]) -> cm.Comparison:
    s = inputs.Side(ref="a", kind="summary", path=Path("a"), name="a")
    rr = [cm.RowResult(case={"kernel": f"k{i}", "range": ""}, base_ms=1.0, new_ms=r, ratio=r, ci_lo=lo, ci_hi=hi,
                       verdict=v) for i, (v, r, lo, hi) in enumerate(rows)]
    return cm.Comparison(base=s, new=s, rows=rr, threshold=0.02, confidence=0.95, method="m", by="kernel")


@pytest.mark.parametrize(("rows", "strict", "code", "warned"), [
    ([("unchanged", 1.01, 0.99, 1.02)], False, 0, False),
    ([("faster", 0.5, 0.45, 0.55)], False, 0, False),
    ([("slower", 1.04, 1.02, 1.06)], False, 0, False),          # significant, but within the 5 % limit
    ([("slower", 1.10, 1.08, 1.12)], False, 1, False),          # significant and beyond the limit
    ([("inconclusive", 1.10, 0.95, 1.3)], False, 0, True),      # beyond, not significant: a warning
    ([("inconclusive", 1.10, 0.95, 1.3)], True, 1, True),       # ... and a failure with --strict
    ([("not judged", 3.0, None, None)], True, 0, False),        # never judged, never failing
    ([("failed", 1.0, None, None)], False, 1, False),           # stopped working
])
def test_the_gate(rows: list[tuple[str, float, float | None, float | None]], strict: bool, code: int,
                  warned: bool) -> None:
    g = cm.gate(_report(rows), 0.05, strict=strict)
    assert g.exit_code == code and (g.error() is None) == (code == 0)
    assert bool(g.beyond) == warned
