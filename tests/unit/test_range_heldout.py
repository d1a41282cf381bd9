"""Issue 49 item 4: explain --range over every range of the nsys exports and torch traces recorded in tests/data
that were not made for it (profctl's own runs, the NVTX mix, the H100 fixtures): no traceback, a verdict from the
known set, a one-line error for a range that is not there or a trace without ranges."""

from __future__ import annotations

from pathlib import Path

import pytest

from profctl.analysis import range_explain
from profctl.errors import NothingMatched
from profctl.readers import range_timeline

DATA = Path(__file__).resolve().parents[1] / "data"
HELD_OUT = ["nsys_profctl_fwdbwd.sqlite.gz", "nvtx_mixed_nsys.sqlite.gz", "profctl_bwd_nvtx.sqlite.gz",
            "torch_profctl_gpu_nonvtx.json.gz", "torch_profctl_gpu_nvtx.json.gz", "h100-sm90/attn.sqlite.gz"]
VERDICTS = {"GPU-bound", "host-bound", "sync-bound", "launch-bound", "no GPU work"}


@pytest.mark.parametrize("name", HELD_OUT)
def test_every_range_explains(name: str) -> None:
    f = DATA / name
    names = range_timeline.read(f, names=[]).range_names()
    assert names
    for n in names:
        e = range_explain.explain(range_timeline.read(f, names=[n]), n)
        assert e.verdict in VERDICTS, (n, e.verdict)
        assert 0 <= e.busy_ns <= e.time_ns and e.floor_ns <= e.all_fixed_ns <= e.time_ns + 1
        assert all(0 <= c.saving_ns <= e.time_ns - e.floor_ns + 1 for c in e.causes)
    with pytest.raises(NothingMatched, match="no range matches 'no-such-range'"):
        range_explain.explain(range_timeline.read(f, names=[]), "no-such-range")


def test_backward_range_with_a_cublas_range_on_autograds_thread() -> None:
    # autograd's thread pushes cuBLAS's cublasCreate range on its first GEMM; its kernels inside a backward range
    # pushed by the main thread are still the backward's (they were 'no GPU work' when a thread that ever pushed a
    # range was never counted)
    f = DATA / "h100-sm90" / "attn.sqlite.gz"
    for n in ("naive.bwd.it1", "sdpa_flash.bwd.it1"):
        e = range_explain.explain(range_timeline.read(f, names=[n]), n)
        assert e.verdict != "no GPU work" and e.launches > 0


def test_trace_without_ranges_is_one_line() -> None:
    tl = range_timeline.read(DATA / "nvtx_mixed_torch.json.gz", names=[])
    with pytest.raises(NothingMatched, match="no NVTX or record_function ranges"):
        range_explain.explain(tl, "train")


def test_nsys_python_sampling_export_says_it_holds_no_frames() -> None:
    # planted.py recorded again with nsys --python-sampling=true --sample=process-tree (record.sh, step pysample):
    # the export holds the Python functions' names but no sample refers to them; explain says so, and still finds
    # the planted host overhead (only the frame is missing), while an export without sampling has no such note
    ranges = DATA / "ranges"
    e = range_explain.explain(range_timeline.read(ranges / "ranges_pysample.sqlite.xz", ["planted/python_overhead"]),
                              "planted/python_overhead")
    assert e.verdict == "host-bound" and e.causes[0].id == "host"
    assert any("holds no Python sample" in n for n in e.notes)
    plain = range_explain.explain(range_timeline.read(ranges / "ranges.sqlite.xz", ["planted/python_overhead"]),
                                  "planted/python_overhead")
    assert not any("Python sample" in n for n in plain.notes)


def test_unmeasured_launch_cost_is_said_not_printed_as_zero() -> None:
    # nvtx_mixed's forward range has three launches, none within a launch's cost of another: nothing to measure
    f = DATA / "nvtx_mixed_nsys.sqlite.gz"
    e = range_explain.explain(range_timeline.read(f, names=["attnbench:forward"]), "attnbench:forward")
    assert e.launch_cost_ns == 0 and e.causes
    ev = " ".join(x for c in e.causes for x in c.evidence)
    assert "0.0 us measured" not in ev and "not measured here" in ev
    gap = range_explain.th("launch_gap_ns")
    lead = next(c for c in e.causes if c.id == "lead")
    assert lead.saving_ns == pytest.approx(lead.time_ns - gap)


def test_nsys_cpu_samples_say_where_the_host_time_went() -> None:
    # the pysample recording has CPU sampling on (--sample=process-tree): the planted Python overhead's gaps are
    # sampled mostly in the Python interpreter; an export without CPU samples says nothing of the kind
    ranges = DATA / "ranges"
    e = range_explain.explain(range_timeline.read(ranges / "ranges_pysample.sqlite.xz", ["planted/python_overhead"]),
                              "planted/python_overhead")
    line = next(x for x in e.causes[0].evidence if "CPU samples (nsys)" in x)
    n = int(line.split()[0])
    assert n >= range_explain.th("min_samples")
    share = int(line.split(": ", 1)[1].split("%")[0])
    assert share >= 60 and "the Python interpreter" in line.split(",")[0]
    plain = range_explain.explain(range_timeline.read(ranges / "ranges.sqlite.xz", ["planted/python_overhead"]),
                                  "planted/python_overhead")
    assert not any("CPU samples" in x for c in plain.causes for x in c.evidence)
