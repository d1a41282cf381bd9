"""Reports from elsewhere that used to read silently wrong (issue 17): one test per class, on data of our own
making (tests/data/README.md says how each recorded file was made)."""

from __future__ import annotations

import gzip
import json
import lzma
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from profctl import devices
from profctl.errors import BadReport
from profctl.kernels import kernel_id
from profctl.readers import ncu_csv, read, sniff

Get = Callable[[str], Path]

# ------------------------------------------------------------------------------ ncu --csv --metrics ... ./app
#: written by hand from ncu's documented format: the command-line metrics form, ncu's log lines around it, the
#: application's own output, scaled units in both styles (us/usecond, Mbyte, msecond) and thousands separators
CMDLINE_SAMPLE = """\
==PROF== Connected to process 4242 (/usr/bin/python3.12)
training step 0
==PROF== Profiling "flash_fwd_kernel" - 0: 0%....50%....100% - 1 pass
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC",\
"Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3.12","127.0.0.1","void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, 0, 0, \
bfloat16_t>, 0, 1>(Flash_fwd_params)","1","7","(128, 1, 1)","(16, 4, 16)","0","9.0",\
"Command line profiler metrics","dram__bytes.sum","Mbyte","1,234.56"
"0","4242","python3.12","127.0.0.1","void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, 0, 0, \
bfloat16_t>, 0, 1>(Flash_fwd_params)","1","7","(128, 1, 1)","(16, 4, 16)","0","9.0",\
"Command line profiler metrics","gpu__time_duration.sum","usecond","1,271.23"
"0","4242","python3.12","127.0.0.1","void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, 0, 0, \
bfloat16_t>, 0, 1>(Flash_fwd_params)","1","7","(128, 1, 1)","(16, 4, 16)","0","9.0",\
"Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","77.10"
"1","4242","python3.12","127.0.0.1","nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT","1","7","(384, 1, 1)",\
"(2, 66, 1)","0","9.0","Command line profiler metrics","dram__bytes.sum","Gbyte","2.50"
"1","4242","python3.12","127.0.0.1","nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT","1","7","(384, 1, 1)",\
"(2, 66, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ms","1.50"
"2","4242","python3.12","127.0.0.1","nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT","1","7","(384, 1, 1)",\
"(2, 66, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","12,345"
"2","4242","python3.12","127.0.0.1","nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT","1","7","(384, 1, 1)",\
"(2, 66, 1)","0","9.0","Command line profiler metrics","dram__bytes.sum","byte","1,048,576"
"""


def test_cmdline_metrics_form_by_hand(tmp_path: Path) -> None:
    p = tmp_path / "ncu_stdout.txt"
    p.write_text(CMDLINE_SAMPLE)
    assert sniff(p) == "ncu-csv"
    ls = ncu_csv.read_launches(p)
    assert [x.id for x in ls] == [0, 1, 2]
    assert ls[0].metrics["gpu__time_duration.sum"] == pytest.approx(1_271_230.0)
    assert ls[0].metrics["dram__bytes.sum"] == pytest.approx(1.23456e9)
    assert ls[0].metrics["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(77.10)
    assert ls[1].metrics["gpu__time_duration.sum"] == pytest.approx(1.5e6)
    assert ls[1].metrics["dram__bytes.sum"] == pytest.approx(2.5e9)
    assert ls[2].metrics["gpu__time_duration.sum"] == 12345.0 and ls[2].metrics["dram__bytes.sum"] == 1048576.0
    assert {ls[0].units["gpu__time_duration.sum"], ls[0].units["dram__bytes.sum"]} == {"ns", "byte"}
    s = read(p)
    nvjet = next(k for k in s.kernels if k.short_name.startswith("nvjet"))
    assert nvjet.count == 2 and nvjet.total_ns == pytest.approx(1.5e6 + 12345.0)
    assert not any("gpu__time_duration" in w for w in s.warnings)


def test_cmdline_metrics_form_recorded(data_file: Get) -> None:
    """The real form (`ncu --csv --metrics ... --log-file`, base units with thousands separators) of the same
    script as nvtx_mixed_full_raw.csv, from a second run: the same launches, durations read (not 0)."""
    cmd = ncu_csv.read_launches(data_file("nvtx_mixed_full_cmdline.csv"))
    raw = ncu_csv.read_launches(data_file("nvtx_mixed_full_raw.csv"))
    assert len(cmd) == len(raw) == 88
    assert [kernel_id(x.name) for x in cmd] == [kernel_id(x.name) for x in raw]
    for a, b in zip(cmd, raw, strict=True):
        da, db = a.metrics["gpu__time_duration.sum"], b.metrics["gpu__time_duration.sum"]
        assert a.units["gpu__time_duration.sum"] == "ns" and da > 1000
        assert 1 / 3 < da / db < 3, (a.id, da, db)  # two runs of the same launch
        assert a.metrics["dram__bytes.sum"] >= 0 and "sm__throughput.avg.pct_of_peak_sustained_elapsed" in a.metrics
    s = read(data_file("nvtx_mixed_full_cmdline.csv"))
    assert sum(k.total_ns for k in s.kernels) > 100_000 and not s.warnings[1:]


def test_zero_time_is_a_warning(tmp_path: Path) -> None:
    no_duration = tmp_path / "nodur.csv"
    no_duration.write_text(
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC","sm__throughput.avg.pct_of_peak_sustained_elapsed"\n'
        '"0","1","p","h","k1","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","12.5"\n')
    s = read(no_duration)
    assert s.kernels[0].total_ns == 0 and any("no launch has gpu__time_duration.sum" in w for w in s.warnings)
    zeros = tmp_path / "zeros.csv"
    zeros.write_text(CMDLINE_SAMPLE.replace('"1,271.23"', '"0"').replace('"1.50"', '"0"').replace('"12,345"', '"0"'))
    s = read(zeros)
    assert any("every launch's gpu__time_duration.sum is 0" in w for w in s.warnings)


# ------------------------------------------------------------------------------ compressed reports
def _pack(src: Path, dst: Path, kind: str) -> Path:
    opener = gzip.open if kind == "gz" else lzma.open
    with open(src, "rb") as fi, opener(dst, "wb") as fo:  # type: ignore[operator]
        shutil.copyfileobj(fi, fo)
    return dst


def _same(a: object, b: object) -> bool:
    key = lambda s: sorted((k.kernel_id, k.nvtx_range or "", k.count, k.total_ns) for k in s.kernels)  # type: ignore[attr-defined]  # noqa: E731
    return key(a) == key(b)


@pytest.mark.parametrize(("name", "kind", "packed"), [
    ("torch_profctl_gpu_nvtx.json", "torch-trace", "trace.json.gz"),
    ("torch_profctl_gpu_nvtx.json", "torch-trace", "trace.json.xz"),
    ("nvtx_mixed_raw.csv", "ncu-csv", "raw.csv.gz"),
    ("nvtx_mixed_full_cmdline.csv", "ncu-csv", "cmdline.csv.xz"),
    ("nvtx_mixed.ncu-rep", "ncu-rep", "report.ncu-rep.gz"),
    ("nvtx_mixed.ncu-rep", "ncu-rep", "report.gz"),  # found by content, not by name
    ("nvtx_mixed.ncu-rep", "ncu-rep", "report.ncu-rep.xz"),
    ("nvtx_mixed_nsys.sqlite", "nsys-sqlite", "export.sqlite.gz"),
    ("nvtx_mixed_nsys.sqlite", "nsys-sqlite", "export.sqlite.xz"),
])
def test_compressed_reports_read_like_plain_ones(name: str, kind: str, packed: str, data_file: Get,
                                                 tmp_path: Path) -> None:
    if kind == "ncu-rep":
        pytest.importorskip("ncu_report")
    plain = data_file(name)
    p = _pack(plain, tmp_path / packed, packed.rsplit(".", 1)[-1])
    before = p.read_bytes()
    assert sniff(p) == kind
    a, b = read(plain, by_range=True), read(p, by_range=True)
    assert _same(a, b) and b.kernels
    assert b.sources[0].path == str(p)
    assert p.read_bytes() == before  # the user's file untouched


def test_compressed_summary_and_bench_json(data_file: Get, tmp_path: Path) -> None:
    s = read(data_file("nvtx_mixed_torch.json"))
    for packer in ("gz", "xz"):
        src = tmp_path / "summary.json"
        src.write_text(s.to_json())
        p = _pack(src, tmp_path / f"summary.json.{packer}", packer)
        assert sniff(p) == "summary-json" and read(p) == s
    from profctl.readers import bench_json

    rows = bench_json.read(data_file("bench_h100_s4096.json"))
    p = _pack(data_file("bench_h100_s4096.json"), tmp_path / "bench.json.xz", "xz")
    assert sniff(p) == "bench-json" and bench_json.read(p) == rows


def test_compressed_nsys_rep_is_recognised(tmp_path: Path) -> None:
    """An .nsys-rep.gz is an .nsys-rep (nsys exports it, decompressed, where nsys is installed)."""
    p = tmp_path / "run.nsys-rep.gz"
    with gzip.open(p, "wb") as f:
        f.write(b"\x00not really a report")
    assert sniff(p) == "nsys-rep"


def test_truncated_compression_is_one_line(data_file: Get, tmp_path: Path) -> None:
    p = _pack(data_file("nvtx_mixed_raw.csv"), tmp_path / "raw.csv.gz", "gz")
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    with pytest.raises(BadReport, match=r"compressed|gzip"):
        read(cut)


# ------------------------------------------------------------------------------ old nsys exports
def test_export_meta_data_of_older_nsys(data_file: Get, tmp_path: Path) -> None:
    """nsys 2023.x keeps its version in EXPORT_META_DATA: a stand-in made from a recorded export by renaming
    META_DATA_EXPORT in a copy reads its version, not None."""
    db = tmp_path / "old.sqlite"
    db.write_bytes(data_file("nvtx_mixed_nsys.sqlite").read_bytes())
    c = sqlite3.connect(db)
    c.execute("ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA")
    c.commit()
    c.close()
    s = read(db)
    assert s.sources[0].tool_version == "2025.3.2.0" and s.meta["export_schema"]  # as the export says
    assert not any("names no nsys version" in w for w in s.warnings)
    c = sqlite3.connect(db)
    c.execute("DROP TABLE EXPORT_META_DATA")
    c.commit()
    c.close()
    s = read(db)
    assert s.sources[0].tool_version is None and any("names no nsys version" in w for w in s.warnings)


# ------------------------------------------------------------------------------ devices
@pytest.mark.parametrize(("name", "model", "why"), [
    ("H100", "H100 SXM5", "no variant said"),
    ("h100-sxm", "H100 SXM5", "'sxm'"),
    ("NVIDIA H100 80GB HBM3", "H100 SXM5", "'hbm3'"),
    ("H100 PCIe", "H100 PCIe", "'pcie'"),
    ("NVIDIA H100 NVL", "H100 NVL", "'nvl'"),
    ("NVIDIA H200", "H200", "H200 in the name"),
    ("A100-SXM4-80GB", "A100 SXM4 80GB", "'sxm4', '80gb'"),
    ("NVIDIA GH200 480GB", "GH200 480GB", "'480gb'"),
    ("cpu", None, "a CPU"),
    (None, None, "no device named"),
])
def test_device_names_as_people_write_them(name: str | None, model: str | None, why: str) -> None:
    m = devices.match(name)
    assert (m.peak.model if m.peak else None) == model and why in m.why
    assert devices.lookup(name) is m.peak


def test_ncu_only_report_names_its_device(data_file: Get) -> None:
    """An ncu CSV alone: the device comes from device__attribute_display_name (the Device column is an index),
    so the join has a device and the roofline its roofs."""
    from profctl.analysis.crosstool import join

    s = read(data_file("ncu_profctl_fwdbwd_raw.csv"))
    assert s.meta["devices"] == ["NVIDIA H100 80GB HBM3"]
    view = join([s])
    assert view.device == "NVIDIA H100 80GB HBM3" and devices.lookup(view.device) is not None
    for f in ("nvtx_mixed_nsys.sqlite", "nvtx_mixed_torch.json"):
        assert read(data_file(f)).meta["devices"] == ["NVIDIA H100 80GB HBM3"]


def test_old_summary_json_still_reads(tmp_path: Path) -> None:
    """Summaries written before kernel_id and cpu_ops existed read, the identity filled in."""
    d = {"schema": "profctl.summary/1", "sources": [{"path": "a.sqlite", "tool": "nsys"}], "kernels": [{
        "tool": "nsys", "name": "void ns::k<(int)1>(T1)", "short_name": "k", "kernel_class": "other",
        "nvtx_range": None, "count": 1, "total_ns": 1.0, "avg_ns": 1.0, "med_ns": 1.0, "min_ns": 1.0, "max_ns": 1.0,
        "std_ns": 0.0, "metrics": {}, "extra": {}}], "ranges": []}
    p = tmp_path / "old.json"
    p.write_text(json.dumps(d))
    s = read(p)
    assert s.kernels[0].kernel_id == "k<1>" and s.cpu_ops == ()


def test_zero_kernel_times_are_said_for_every_format(data_file: Get, tmp_path: Path) -> None:
    """A trace whose kernels all took 0 ns reads, with a warning (the check every reader shares)."""
    d = json.loads(data_file("nvtx_mixed_torch.json").read_text())
    for e in d["traceEvents"]:
        if e.get("cat") == "kernel":
            e["dur"] = 0
    p = tmp_path / "zero.json"
    p.write_text(json.dumps(d))
    s = read(p)
    assert s.kernels and any("kernel times are 0" in w for w in s.warnings)
    assert not any("kernel times are 0" in w for w in read(data_file("nvtx_mixed_torch.json")).warnings)
