"""Issue 49: a range's kernels against their own floors from an ncu report of the same program
(tests/data/ranges/ranges_ncu.ncu-rep.xz: plain ncu --set full over planted.py, the first launch of each launch
configuration, record.sh), and report --by-range's GPU-busy share per range (nsys and torch)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import profctl
from profctl.analysis import range_explain, range_kernels
from profctl.cli._ranges import kernel_profiles
from profctl.readers import range_timeline

DATA = Path(__file__).resolve().parents[1] / "data" / "ranges"
FILES = {"nsys": DATA / "ranges.sqlite.xz", "torch": DATA / "ranges_torch.json.xz"}
NCU = DATA / "ranges_ncu.ncu-rep.xz"


@pytest.fixture(scope="module")
def profiles() -> list:
    names = [n for f in FILES.values() for r in ("planted/item_sync", "healthy/matmul", "train/backward",
                                                  "planted/transpose_copy")
             for n, *_ in range_explain.explain(range_timeline.read(f, [r]), r).configs]
    return kernel_profiles(str(NCU), names, None)


def _with_ncu(tool: str, name: str, profiles: list) -> range_explain.RangeExplanation:
    e = range_explain.explain(range_timeline.read(FILES[tool], [name]), name)
    range_kernels.attach(e, profiles, str(NCU))
    return e


def _row(e: range_explain.RangeExplanation, start: str) -> dict:
    return next(r for r in e.kernel_floors if r["name"].startswith(start) or r["name"].startswith("void " + start))


@pytest.mark.parametrize("tool", sorted(FILES))
def test_each_kernel_gets_its_own_verdict_and_floor(tool: str, profiles: list) -> None:
    e = _with_ncu(tool, "planted/item_sync", profiles)
    gemm = _row(e, "nvjet_sm90")
    assert gemm["matched"] and gemm["binding"] == "tensor" and gemm["at_roof"]
    assert gemm["floor_share"] > 0.9 and "tensor pipe roof" in gemm["verdict"]
    red = _row(e, "at::native::reduce_kernel")
    assert red["matched"] and not red["at_roof"] and red["floor_share"] < 0.8
    assert red["top_cause"]  # explain's own first cause for the kernel
    # a kernel the report has no launch of says so
    assert any(not r["matched"] and "no launch" in r["why"] for r in e.kernel_floors)


@pytest.mark.parametrize("tool", sorted(FILES))
def test_another_problem_size_is_not_matched(tool: str, profiles: list) -> None:
    # healthy/matmul's GEMM (336 us) is the nvjet kernel at the same persistent grid as item_sync's (88 us):
    # ncu profiled only the 88-us size, and its floor must not stand for the 336-us launches
    e = _with_ncu(tool, "healthy/matmul", profiles)
    gemm = _row(e, "nvjet_sm90")
    assert not gemm["matched"] and "another problem size" in gemm["why"]


@pytest.mark.parametrize("tool", sorted(FILES))
@pytest.mark.parametrize("name", ["planted/item_sync", "train/backward", "planted/transpose_copy"])
def test_range_floor_is_kernel_floors_plus_serial_and_bounds_savings(tool: str, name: str, profiles: list) -> None:
    before = range_explain.explain(range_timeline.read(FILES[tool], [name]), name)
    e = _with_ncu(tool, name, profiles)
    serial = e.instances * e.launch_cost_ns
    assert serial > 0
    assert serial <= e.floor_ns <= before.floor_ns
    others = sum(t for n, _, t in e.kernels if n.startswith("[") and "Device-to-Device" not in n)
    assert e.floor_ns == pytest.approx(min(before.floor_ns, sum(r["floor_ns"] for r in e.kernel_floors)
                                           + others + serial))
    if name == "planted/item_sync":  # its reduce and elementwise kernels are below their own time
        assert e.floor_ns < before.floor_ns
    for c in e.causes:
        assert 0 <= c.saving_ns <= e.time_ns - e.floor_ns + 1
    assert e.floor_ns <= e.all_fixed_ns <= e.time_ns
    assert [c.id for c in e.causes][:1] == [c.id for c in before.causes][:1]  # the planted fault stays first


def test_cli_ncu_option(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "profctl", "explain"]
    r = subprocess.run([*run, str(FILES["nsys"]), "--range", "planted/item_sync", "--ncu", str(NCU), "-f", "json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["ncu_report"] == str(NCU) and any(k["matched"] for k in d["kernel_floors"])
    r = subprocess.run([*run, str(NCU), "--kernel", "nvjet", "--ncu", str(NCU)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode != 0 and "--ncu goes with --range" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_store_finds_the_ncu_run_of_the_same_program(tmp_path: Path) -> None:
    prog = {"argv": ["python3", "planted.py", "--iters", "60"], "cwd": "/w"}
    for run_id, kind, src, dst in (("20261128T200000Z-nsys-aaaaaa", "nsys", FILES["nsys"], "profile.sqlite"),
                                   ("20261128T200100Z-ncu-bbbbbb", "ncu", NCU, "profile.ncu-rep"),
                                   ("20261128T200200Z-ncu-cccccc", "ncu", NCU, "profile.ncu-rep")):
        d = tmp_path / run_id
        d.mkdir()
        other = {"argv": ["python3", "other.py"], "cwd": "/w"} if run_id.endswith("cccccc") else prog
        (d / "manifest.json").write_text(json.dumps({"run_id": run_id, "kind": kind, "status": "complete",
                                                     "started": run_id[:16], "program": other}))
        subprocess.run(["xz", "-dc", str(src)], stdout=(d / dst).open("wb"), check=True)
    nsys_run = str(tmp_path / "20261128T200000Z-nsys-aaaaaa")
    e = profctl.explain_range(nsys_run, "planted/item_sync")
    assert e.ncu_report is not None and "bbbbbb" in e.ncu_report
    assert any("store's run of the same program" in n for n in e.notes)


@pytest.mark.parametrize("tool", sorted(FILES))
def test_report_by_range_gpu_busy_share(tool: str) -> None:
    s = profctl.read(FILES[tool], by_range=True)
    by = {r.name: r for r in s.ranges}
    for name in ("planted/python_overhead", "planted/tiny_kernels", "planted/transpose_copy", "healthy/matmul"):
        e = range_explain.explain(range_timeline.read(FILES[tool], [name]), name)
        x = by[name].extra
        assert x["gpu_busy_share"] == pytest.approx(x["gpu_busy_ns"] / x["gpu_span_ns"])
        assert x["gpu_busy_share"] == pytest.approx(e.busy_share, abs=0.02), name  # the same idea as explain's
    assert by["planted/python_overhead"].extra["gpu_busy_share"] < 0.15
    assert by["healthy/matmul"].extra["gpu_busy_share"] > 0.9
    d = json.loads(s.to_json())
    assert all("gpu_busy_share" in r["extra"] for r in d["ranges"])


def test_report_table_has_gpu_busy_column() -> None:
    r = subprocess.run([sys.executable, "-m", "profctl", "report", str(FILES["nsys"]), "--by-range", "-f",
                        "markdown"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("| planted/python_overhead"))
    head = next(x for x in r.stdout.splitlines() if "GPU busy" in x)
    cells = [c.strip() for c in line.strip("|").split("|")]
    share = cells[[c.strip() for c in head.strip("|").split("|")].index("GPU busy")]
    assert share.endswith("%") and int(share.rstrip(" %")) < 15
