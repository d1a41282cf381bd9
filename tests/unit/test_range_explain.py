"""Issue 49: explain a range of a timeline. The planted programs of tests/data/ranges (planted.py), recorded on the
H200 with plain nsys and plain torch.profiler (record.sh), against their truth timed without a profiler
(truth.json): each planted range's first cause is its fault, its saving within 35 % of what removing the fault
gained (the saving's share of the profiled range applied to the unprofiled time: a profiler slows the host), the
healthy range GPU-bound with no cause, savings bounded by the kernels' time, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from profctl.analysis import range_explain
from profctl.errors import NothingMatched
from profctl.readers import range_timeline

DATA = Path(__file__).resolve().parents[1] / "data" / "ranges"
FILES = {"nsys": DATA / "ranges.sqlite.xz", "torch": DATA / "ranges_torch.json.xz"}
TRUTH = json.loads((DATA / "truth.json").read_text())
PLANTED = {"python_overhead": ("host", "host-bound"), "item_sync": ("sync", "sync-bound"),
           "transpose_copy": ("extra", "GPU-bound"), "tiny_kernels": ("launch", "launch-bound")}


def _explain(tool: str, name: str) -> range_explain.RangeExplanation:
    return range_explain.explain(range_timeline.read(FILES[tool], [name]), name)


@pytest.mark.parametrize("tool", sorted(FILES))
@pytest.mark.parametrize("fault", sorted(PLANTED))
def test_planted_fault_first_and_saving_near_truth(tool: str, fault: str) -> None:
    e = _explain(tool, f"planted/{fault}")
    cause, verdict = PLANTED[fault]
    assert e.verdict == verdict
    assert e.causes and e.causes[0].id == cause, [c.id for c in e.causes]
    pair = TRUTH["pairs"][fault]
    predicted = e.causes[0].saving_ns / e.time_ns * pair["faulty_us"]
    assert abs(predicted - pair["gain_us"]) <= 0.35 * pair["gain_us"], (predicted, pair["gain_us"])


@pytest.mark.parametrize("tool", sorted(FILES))
def test_healthy_is_gpu_bound_without_cause(tool: str) -> None:
    e = _explain(tool, "healthy/matmul")
    assert e.verdict == "GPU-bound" and e.causes == []
    assert e.busy_share >= range_explain.th("gpu_bound_share")


@pytest.mark.parametrize("tool", sorted(FILES))
@pytest.mark.parametrize("name", ["planted/python_overhead", "planted/item_sync", "planted/transpose_copy",
                                  "planted/tiny_kernels", "train/backward"])
def test_savings_bounded(tool: str, name: str) -> None:
    e = _explain(tool, name)
    for c in e.causes:
        assert 0 <= c.saving_ns <= e.time_ns - e.floor_ns + 1
    assert e.floor_ns <= e.all_fixed_ns <= e.time_ns


@pytest.mark.parametrize("tool", sorted(FILES))
def test_backward_counts_autograd_thread(tool: str) -> None:
    e = _explain(tool, "train/backward")
    assert e.launches > 0 and e.busy_ns > 0
    assert e.instances == (30 if tool == "nsys" else 10)


def test_pair_says_what_made_b_faster() -> None:
    a, b = _explain("nsys", "planted/tiny_kernels"), _explain("nsys", "fixed/tiny_kernels")
    p = range_explain.compare(a, b)
    assert p.gap_ns > 0 and p.parts[0][0].startswith("GPU idle: launch-bound")


def test_no_match_lists_ranges_and_no_ranges_says_so(tmp_path: Path) -> None:
    tl = range_timeline.read(FILES["nsys"], [])
    with pytest.raises(NothingMatched, match="the ranges are: fixed/item_sync"):
        range_explain.explain(tl, "nope")
    with pytest.raises(NothingMatched, match="ambiguous"):
        range_explain.explain(tl, "item_sync")
    with pytest.raises(NothingMatched, match="no NVTX or record_function ranges"):
        range_explain.match_name([], "x")
    assert range_explain.explain(tl, "healthy/matmul").name == "healthy/matmul"  # unique suffix or substring


def test_every_threshold_has_a_reason() -> None:
    assert all(len(t.reason) > 30 for t in range_explain.THRESHOLDS.values())


def test_cli_one_line_errors_and_json(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "profctl", "explain", str(FILES["nsys"])]
    r = subprocess.run([*run, "--range", "nope"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 7 and "no range matches 'nope'; the ranges are:" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = subprocess.run([*run, "--range", "planted/transpose_copy", "-f", "json"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["verdict"] == "GPU-bound" and d["causes"][0]["id"] == "extra"
