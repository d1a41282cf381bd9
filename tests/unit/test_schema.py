import json
import statistics

import pytest

from profctl.schema import SCHEMA_ID, KernelRow, RangeRow, Source, Summary, concat, durations_stats


def k(name: str = "flash_fwd_kernel", **kw) -> KernelRow:
    d = dict(tool="nsys", name=name, short_name=name, kernel_class="flash_fwd", nvtx_range=None, count=2,
             total_ns=30.0, avg_ns=15.0, med_ns=15.0, min_ns=10.0, max_ns=20.0, std_ns=7.07)
    d.update(kw)
    return KernelRow(**d)


def test_json_round_trip_and_required_keys() -> None:
    s = Summary(sources=(Source("a.sqlite", "nsys", "2025.3.1"),), kernels=(k(metrics={"dram__bytes.sum": 1e6}),),
                ranges=(RangeRow("eager.fwd", "profctl", "push_pop", 3, 100.0, 50.0, 6),))
    d = json.loads(s.to_json())
    assert d["schema"] == SCHEMA_ID
    assert set(d["kernels"][0]) >= {"tool", "name", "short_name", "kernel_class", "nvtx_range", "count", "total_ns",
                                    "avg_ns", "med_ns", "min_ns", "max_ns", "std_ns", "metrics"}
    assert set(d["ranges"][0]) >= {"name", "domain", "style", "count", "range_total_ns", "gpu_proj_total_ns",
                                   "gpu_ops"}
    assert d["sources"][0] == {"path": "a.sqlite", "tool": "nsys", "tool_version": "2025.3.1"}
    assert Summary.from_dict(d) == s


def test_newer_fields_are_ignored_on_read() -> None:
    d = json.loads(Summary(sources=(), kernels=(k(),)).to_json())
    d["kernels"][0]["added_later"] = 1
    assert Summary.from_dict(d).kernels[0] == k()


def test_rejects_other_documents_and_bad_classes() -> None:
    with pytest.raises(ValueError):
        Summary.from_dict({"schema": "something/2"})
    with pytest.raises(ValueError):
        k(kernel_class="attention")


def test_durations_stats_match_statistics_module() -> None:
    xs = [5.0, 1.0, 9.0, 4.0]
    st = durations_stats(xs)
    assert st["count"] == 4 and st["total_ns"] == 19.0 and st["min_ns"] == 1.0 and st["max_ns"] == 9.0
    assert st["med_ns"] == statistics.median(xs) and st["std_ns"] == pytest.approx(statistics.stdev(xs))
    assert durations_stats([7.0])["std_ns"] == 0.0
    assert durations_stats([])["count"] == 0


def test_dataframes_and_concat() -> None:
    a = Summary(sources=(Source("a", "nsys"),), kernels=(k(metrics={"m": 1.0}),))
    b = Summary(sources=(Source("b", "ncu"),), kernels=(k("gemm", kernel_class="gemm", tool="ncu"),))
    m = concat([a, b])
    df = m.kernels_df()
    assert list(df["name"]) == ["flash_fwd_kernel", "gemm"] and "metric:m" in df.columns
    assert len(m.sources) == 2 and m.ranges_df().empty
