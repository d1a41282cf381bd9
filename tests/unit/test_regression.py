"""profctl.analysis.compare: the interval, the verdict rules, comparability checks and the summary-file path.

These tests are about one process's samples, so their comparisons leave the noise between runs out
(``noise=ONE``, the CLI's ``--run-noise 0``); tests/unit/test_run_noise.py covers that part."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from profctl import errors, inputs, run_store
from profctl.analysis import compare as cm
from profctl.analysis.compare import stats
from profctl.kernels import short_name
from profctl.schema import KernelRow, Source, Summary

#: one process's samples: the noise between runs left out (tests/unit/test_run_noise.py tests that part)
ONE = cm.NO_RUN_NOISE

CASE = {"batch": 1, "seqlen_q": 4096, "seqlen_kv": 4096, "heads": 32, "kv_heads": 32, "head_dim": 128,
        "dtype": "bf16", "causal": False, "pass": "fwd", "layout": "bhsd", "device": "cuda"}
FLOPS = 4 * 32 * 4096 * 4096 * 128


def times(median: float, n: int = 60, noise: float = 0.004, seed: int = 0) -> list[float]:
    """GPU-like iteration times: tight around `median`, a few slow outliers."""
    rng = random.Random(seed)
    xs = [median * (1 + rng.gauss(0, noise)) for _ in range(n)]
    for i in range(0, n, 20):
        xs[i] *= 1.08
    return xs


def row(backend: str = "sdpa-flash", median: float = 0.40, *, label: str | None = "attn", seed: int = 0,
        scale: float = 1.0, n: int = 60, **over: Any) -> dict[str, Any]:
    ts = [t * scale for t in times(median, n=n, seed=seed)]
    med = sorted(ts)[n // 2]
    r = {"backend": backend, **CASE, "status": "ok", "reason": None, "flops": FLOPS, "median_ms": med,
         "tflops": FLOPS / (med * 1e-3) / 1e12, "times_ms": ts, "iters": n,
         "clocks": {"sm_clock_mhz_median": 1980, "sm_clock_mhz_min": 1965, "sm_clock_mhz_max": 1980,
                    "throttle_reasons": [], "clock_samples": 20}}
    if label:
        r["label"] = label
    r.update(over)
    return r


def side(rows: list[dict[str, Any]], *, gpu: str = "NVIDIA H100 80GB HBM3", torch: str = "2.11.0+cu130",
         name: str = "run", **manifest: Any) -> inputs.Side:
    m = {"run_id": name, "device": {"name": gpu, "torch": torch, "cuda": "13.0", "sm_count": 132},
         "environment": {"driver": "580.1"}, "workload": {"flush_l2": False, "nvtx": True, "warmup": 10}}
    m.update(manifest)
    return inputs.Side(ref=name, kind="bench", path=Path(name), name=name, manifest=m, status="complete", rows=rows)


# ------------------------------------------------------------------------------------------------ statistics
def test_bootstrap_is_deterministic_and_covers_the_truth() -> None:
    a, b = times(1.0, seed=1), times(1.1, seed=2)
    r1 = stats.bootstrap_ratio(a, b, seed=7)
    assert r1 == stats.bootstrap_ratio(a, b, seed=7)
    ratio, lo, hi = r1
    assert lo < ratio < hi and ratio == pytest.approx(1.1, abs=0.005) and hi - lo < 0.01


def test_identical_samples_interval_is_tight_around_one() -> None:
    a = times(0.5, seed=3)
    ratio, lo, hi = stats.bootstrap_ratio(a, list(a))
    assert ratio == 1.0 and lo <= 1.0 <= hi and hi / lo < 1.01


@pytest.mark.parametrize(("ratio", "lo", "hi", "verdict"), [
    (1.10, 1.08, 1.12, "slower"),
    (0.90, 0.88, 0.92, "faster"),
    (1.005, 0.995, 1.015, "unchanged"),
    (1.015, 1.010, 1.019, "unchanged"),      # significant but inside the band: no change worth reporting
    (1.015, 1.010, 1.030, "inconclusive"),   # could be 3 %
    (1.04, 0.97, 1.11, "inconclusive"),      # too noisy to tell
    (1.03, 1.01, 1.05, "slower"),            # a 3 % change that the data resolves
])
def test_decide(ratio: float, lo: float, hi: float, verdict: str) -> None:
    assert stats.decide(ratio, lo, hi, 0.02)[0] == verdict


def test_decide_without_interval_is_a_plain_threshold() -> None:
    assert stats.decide(1.03, None, None, 0.02)[0] == "slower"
    assert stats.decide(1.01, None, None, 0.02)[0] == "unchanged"
    assert stats.decide(0.97, None, None, 0.02)[0] == "faster"


def test_iterations_needed_shrinks_the_interval() -> None:
    assert stats.samples_needed(50, 0.97, 1.03, 0.02) > 50
    assert stats.samples_needed(50, 0.999, 1.001, 0.02) < 50


# ------------------------------------------------------------------------------------------------ bench pairs
def test_same_workload_is_unchanged() -> None:
    c = cm.compare_runs(side([row(seed=1)]), side([row(seed=2)]), noise=ONE)
    (r,) = c.rows
    assert r.verdict == "unchanged" and r.ci_lo is not None and r.ci_lo <= r.ratio <= r.ci_hi  # type: ignore[operator]
    assert cm.regressions(c, 0.05) == []


def test_ten_percent_slower_is_slower_and_fails_the_gate() -> None:
    c = cm.compare_runs(side([row(seed=1)]), side([row(seed=2, scale=1.10)]), noise=ONE)
    (r,) = c.rows
    assert r.verdict == "slower" and r.ratio == pytest.approx(1.10, rel=0.01)
    assert r.to_dict()["tflops_ratio"] == pytest.approx(1 / 1.10, rel=0.01)
    assert cm.regressions(c, 0.05) == [r]
    assert cm.regressions(c, 0.15) == []


def test_three_percent_is_resolved_with_enough_iterations() -> None:
    c = cm.compare_runs(side([row(seed=1, n=100)]), side([row(seed=2, n=100, scale=1.03)]), noise=ONE)
    assert c.rows[0].verdict == "slower"
    c = cm.compare_runs(side([row(seed=1, n=100)]), side([row(seed=2, n=100, scale=1 / 1.03)]), noise=ONE)
    assert c.rows[0].verdict == "faster"


def test_noisy_data_is_inconclusive_and_says_how_many_iterations() -> None:
    def noisy(seed: int, scale: float = 1.0) -> dict[str, Any]:
        rng = random.Random(seed)
        r = row(seed=seed)
        r["times_ms"] = [0.4 * scale * (1 + rng.gauss(0, 0.08)) for _ in range(20)]
        return r

    c = cm.compare_runs(side([noisy(1)]), side([noisy(2, 1.03)]), noise=ONE)
    (r,) = c.rows
    assert r.verdict == "inconclusive" and "--iters" in r.to_dict()["note"]


def test_too_few_iterations_is_inconclusive() -> None:
    c = cm.compare_runs(side([row(seed=1, n=3)]), side([row(seed=2, n=3, scale=1.5)]), noise=ONE)
    assert c.rows[0].verdict == "inconclusive" and c.rows[0].method == "too few samples"


def test_rows_without_samples_use_a_labelled_threshold() -> None:
    a, b = row(seed=1), row(seed=2, scale=1.10)
    del a["times_ms"], b["times_ms"]
    (r,) = cm.compare_runs(side([a]), side([b]), noise=ONE).rows
    assert r.verdict == "slower" and r.method == "threshold" and r.ci_lo is None
    assert "no per-iteration samples" in r.to_dict()["note"]


def test_label_pairs_different_backends() -> None:
    c = cm.compare_runs(side([row("sdpa-flash", 0.4)]), side([row("sdpa-math", 2.0)]), noise=ONE)
    (r,) = c.rows
    assert r.verdict == "slower" and r.ratio == pytest.approx(5.0, rel=0.02)
    assert "sdpa-flash->sdpa-math" in cm.case_label(r)


def test_without_labels_different_backends_are_refused_with_a_hint() -> None:
    with pytest.raises(errors.NotComparable, match=r"label sdpa-flash vs sdpa-math.*--label"):
        cm.compare_runs(side([row("sdpa-flash", label=None)]), side([row("sdpa-math", label=None)]), noise=ONE)
    with pytest.raises(errors.NotComparable, match="backend"):
        cm.compare_runs(side([row("sdpa-flash")]), side([row("sdpa-math")]), by="backend", noise=ONE)


@pytest.mark.parametrize(("base_kw", "new_kw", "needle"), [
    ({}, {"gpu": "NVIDIA H200"}, "different GPU: NVIDIA H100 80GB HBM3 vs NVIDIA H200"),
    ({}, {"torch": "2.12.0+cu130"}, "PyTorch 2.11.0+cu130 vs 2.12.0+cu130"),
    ({}, {"workload": {"flush_l2": True, "nvtx": True, "warmup": 10}}, "L2 flushed"),
])
def test_incomparable_environments_are_refused(base_kw: dict[str, Any], new_kw: dict[str, Any],
                                               needle: str) -> None:
    with pytest.raises(errors.NotComparable, match=re.escape(needle)) as e:
        cm.compare_runs(side([row(seed=1)], **base_kw), side([row(seed=2)], **new_kw), noise=ONE)
    assert "--force" in e.value.one_line()
    c = cm.compare_runs(side([row(seed=1)], **base_kw), side([row(seed=2)], **new_kw), force=True, noise=ONE)
    assert c.rows[0].verdict == "unchanged" and any(needle in f for f in c.forced)


def test_different_dtype_or_shape_is_refused_and_says_which() -> None:
    with pytest.raises(errors.NotComparable, match="dtype bf16 vs fp16"):
        cm.compare_runs(side([row(seed=1)]), side([row(seed=2, dtype="fp16")]), noise=ONE)
    with pytest.raises(errors.NotComparable, match="seqlen_q 4096 vs 2048"):
        cm.compare_runs(side([row(seed=1)]), side([row(seed=2, seqlen_q=2048, seqlen_kv=2048)]), noise=ONE)
    forced = cm.compare_runs(side([row(seed=1)]), side([row(seed=2, dtype="fp16")]), force=True, noise=ONE)
    assert len(forced.rows) == 1 and "dtype bf16 vs fp16" in forced.forced


def test_partial_overlap_compares_the_common_cases_and_warns() -> None:
    c = cm.compare_runs(side([row(seed=1), row(seed=3, causal=True)]), side([row(seed=2)]), noise=ONE)
    assert len(c.rows) == 1 and any("1 case(s) only in base" in w for w in c.warnings)


def test_flash_attn_version_matters_only_for_its_backend() -> None:
    a = side([row(seed=1)], environment={"flash_attn": "2.7.0"})
    b = side([row(seed=2)], environment={"flash_attn": "2.8.0"})
    assert cm.compare_runs(a, b, noise=ONE).rows[0].verdict == "unchanged"
    a = side([row("flash-attn", seed=1)], environment={"flash_attn": "2.7.0"})
    b = side([row("flash-attn", seed=2)], environment={"flash_attn": "2.8.0"})
    with pytest.raises(errors.NotComparable, match=re.escape("flash-attn 2.7.0 vs 2.8.0")):
        cm.compare_runs(a, b, noise=ONE)


def test_throttled_clocks_make_a_small_change_inconclusive() -> None:
    slow = row(seed=2, scale=1.04, clock_warning="throttled: sw_power_cap")
    slow["clocks"] = {**slow["clocks"], "sm_clock_mhz_min": 1755, "sm_clock_mhz_median": 1850,
                      "throttle_reasons": ["sw_power_cap"]}
    (r,) = cm.compare_runs(side([row(seed=1)]), side([slow]), noise=ONE).rows
    assert r.verdict == "inconclusive" and "throttled" in r.to_dict()["note"]
    big = row(seed=2, scale=3.0, clock_warning="throttled: sw_power_cap")
    big["clocks"] = dict(slow["clocks"])
    assert cm.compare_runs(side([row(seed=1)]), side([big]), noise=ONE).rows[0].verdict == "slower"  # not the clocks


def test_a_point_that_stopped_working_fails_the_gate() -> None:
    broken = row(seed=2, status="oom", reason="CUDA out of memory", median_ms=None, times_ms=None)
    c = cm.compare_runs(side([row(seed=1)]), side([broken]), noise=ONE)
    assert c.rows[0].verdict == "failed" and cm.regressions(c, 0.05) == c.rows


def test_kinds_must_match() -> None:
    s = Summary(sources=(Source("a.sqlite", "nsys", "2025.3.1"),), kernels=())
    other = inputs.Side(ref="s", kind="summary", path=Path("s.json"), name="s.json", summary=s)
    with pytest.raises(errors.NotComparable, match="bench run"):
        cm.compare_runs(side([row()]), other, noise=ONE)


# ------------------------------------------------------------------------------------------------ summaries
def kernel(name: str, med_ns: float, rng: str = "sdpa-flash[b1]/measure/sdpa-flash.fwd", tool: str = "nsys",
           count: int = 10) -> KernelRow:
    return KernelRow(tool=tool, name=name, short_name=short_name(name), kernel_class="flash_fwd",
                     nvtx_range=rng, count=count, total_ns=med_ns * count, avg_ns=med_ns, med_ns=med_ns,
                     min_ns=med_ns, max_ns=med_ns, std_ns=0.0)


def summary_file(tmp_path: Path, name: str, kernels: list[KernelRow], tool: str = "nsys",
                 version: str = "2025.3.1") -> Path:
    s = Summary(sources=(Source(f"{name}.sqlite", tool, version),), kernels=tuple(kernels),
                meta={"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]})
    p = tmp_path / f"{name}.json"
    p.write_text(s.to_json())
    return p


def test_summaries_pair_by_match_key_and_range(tmp_path: Path) -> None:
    # nsys writes (int)128 template arguments, torch.profiler plain 128: one match key
    a = summary_file(tmp_path, "a", [kernel("void flash_fwd_kernel<(int)128, (bool)0>(Params)", 400_000),
                                     kernel("void softmax_warp_forward<float>(float*)", 10_000)])
    b = summary_file(tmp_path, "b", [kernel("void flash_fwd_kernel<128, 0>(Params)", 440_000),
                                     kernel("void softmax_warp_forward<float>(float*)", 10_050)])
    c = cm.compare_runs(inputs.load_side(str(a)), inputs.load_side(str(b)), noise=ONE)
    by = {r.case["kernel"]: r for r in c.rows}
    assert by["flash_fwd_kernel"].verdict == "slower" and by["flash_fwd_kernel"].ci_lo is None
    assert by["softmax_warp_forward"].verdict == "unchanged"
    assert "no confidence interval" in c.method
    assert cm.regressions(c, 0.05) == [by["flash_fwd_kernel"]]


def test_summaries_from_different_tools_or_ncu_versions_are_refused(tmp_path: Path) -> None:
    a = summary_file(tmp_path, "a", [kernel("flash_fwd_kernel", 1e5)])
    b = summary_file(tmp_path, "b", [kernel("flash_fwd_kernel", 1e5, tool="ncu")], tool="ncu", version="2025.3.1")
    with pytest.raises(errors.NotComparable, match="different tools: nsys vs ncu"):
        cm.compare_runs(inputs.load_side(str(a)), inputs.load_side(str(b)), noise=ONE)
    c = summary_file(tmp_path, "c", [kernel("flash_fwd_kernel", 1e5, tool="ncu")], tool="ncu", version="2026.1.0")
    with pytest.raises(errors.NotComparable, match=re.escape("ncu 2025.3.1 vs 2026.1.0")):
        cm.compare_runs(inputs.load_side(str(b)), inputs.load_side(str(c)), noise=ONE)
    d = summary_file(tmp_path, "d", [kernel("other_kernel", 1e5)])
    with pytest.raises(errors.NotComparable, match="no kernel in common"):
        cm.compare_runs(inputs.load_side(str(a)), inputs.load_side(str(d)), noise=ONE)


def test_a_run_directory_with_a_summary_json_is_a_summary_side(tmp_path: Path) -> None:
    d = run_store.new_run("nsys", root=tmp_path, env=False)
    s = summary_file(tmp_path, "x", [kernel("flash_fwd_kernel", 1e5)])
    (d / "summary.json").write_text(s.read_text())
    sd = inputs.load_side(d.name, tmp_path)
    assert sd.kind == "summary" and sd.name == d.name and sd.status == "running"


def test_load_side_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"x": 1}')
    with pytest.raises(errors.BadReport, match=r"not a torch\.profiler/Chrome trace"):
        inputs.load_side(str(bad))
    d = run_store.new_run("ncu", root=tmp_path, env=False)
    with pytest.raises(errors.BadReport, match="holds nothing to compare"):
        inputs.load_side(str(d))
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps([row()]))
    assert inputs.load_side(str(rows)).kind == "bench"


def test_power_cap_flag_with_equal_median_clocks_keeps_the_verdict() -> None:
    """As on the H100: sw_power_cap reported at 1965 of 1980 MHz on both sides, same median clock."""
    def capped(seed: int, scale: float) -> dict[str, Any]:
        r = row(seed=seed, scale=scale, clock_warning="throttled: sw_power_cap")
        r["clocks"] = {**r["clocks"], "sm_clock_mhz_median": 1965, "sm_clock_mhz_min": 1890,
                       "throttle_reasons": ["sw_power_cap"]}
        return r

    (r,) = cm.compare_runs(side([capped(1, 1.0)]), side([capped(2, 1.04)]), noise=ONE).rows
    assert r.verdict == "slower" and "throttled: sw_power_cap" in r.to_dict()["note"]


def test_short_gpu_times_get_a_launch_bound_note() -> None:
    (r,) = cm.compare_runs(side([row(median=0.06, seed=1)]), side([row(median=0.06, seed=2)]), noise=ONE).rows
    assert "launch-bound" in r.to_dict()["note"]
    (r,) = cm.compare_runs(side([row(median=0.5, seed=1)]), side([row(median=0.5, seed=2)]), noise=ONE).rows
    assert r.to_dict()["note"] is None
