"""The nsys SQLite reader on real exports, checked against numbers computed here independently of it.

attn.sqlite (shared fixture) was written by a plain script, not profctl: NVTX push/pop ranges in the default
domain, backward kernels launched by autograd's worker thread. profctl_bwd_nvtx.sqlite (tests/data) is a
profctl-made capture, where the workload pushes `<backend>.bwd` on autograd's thread as well.
"""

from __future__ import annotations

import sqlite3
import statistics
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from profctl.readers import nsys_sqlite
from profctl.readers.nsys_sqlite import NsysExport


def _ro(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True)


def _independent_kernel_sum(db: Path) -> dict[str, dict[str, float]]:
    """cuda_gpu_kern_sum by its definition: per demangled name, durations end-start; median, sample stdev."""
    c = _ro(db)
    d: dict[str, list[int]] = defaultdict(list)
    for name, s, e in c.execute("SELECT s.value, k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                "JOIN StringIds s ON s.id = k.demangledName"):
        d[name].append(e - s)
    c.close()
    return {n: {"count": len(v), "total": sum(v), "avg": statistics.fmean(v), "med": statistics.median(v),
                "min": min(v), "max": max(v), "std": statistics.stdev(v) if len(v) > 1 else 0.0}
            for n, v in d.items()}


def _independent_projection(db: Path) -> dict[str, tuple[int, int, int]]:
    """nvtx_gpu_proj_sum by its definition, brute force: range text -> (projected instances, total projected
    ns, GPU ops). A GPU op belongs to a same-thread push/pop range when its launching API call is inside it."""
    c = _ro(db)
    strings = dict(c.execute("SELECT id, value FROM StringIds"))
    ranges = [(s, e, txt if txt is not None else strings.get(tid_text), g) for s, e, txt, tid_text, g in c.execute(
        "SELECT start, end, text, textId, globalTid FROM NVTX_EVENTS WHERE eventType IN (59, 60) "
        "AND end IS NOT NULL AND (endGlobalTid IS NULL OR endGlobalTid = globalTid)")]
    ops = []
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        ops += c.execute(f"SELECT r.globalTid, r.start, r.end, o.start, o.end FROM {table} o "
                         "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = o.correlationId").fetchall()
    c.close()
    out: dict[Any, list[int]] = defaultdict(lambda: [0, 0, 0])
    for s, e, text, tid in ranges:
        inside = [(gs, ge) for t, rs, re_, gs, ge in ops if t == tid and s <= rs and re_ <= e]
        if inside:
            acc = out[text]
            acc[0] += 1
            acc[1] += max(ge for _, ge in inside) - min(gs for gs, _ in inside)
            acc[2] += len(inside)
    return {k: (v[0], v[1], v[2]) for k, v in out.items()}


@pytest.fixture
def attn(shared_fixture: Callable[[str], Path]) -> Path:
    return shared_fixture("attn.sqlite")


@pytest.fixture
def profctl_capture(data_file: Callable[[str], Path]) -> Path:
    return data_file("profctl_bwd_nvtx.sqlite")


def test_kernel_grouping_equals_cuda_gpu_kern_sum_definition(attn: Path) -> None:
    want = _independent_kernel_sum(attn)
    s = nsys_sqlite.read(attn)
    got = {k.name: k for k in s.kernels if k.extra["kind"] == "kernel"}
    assert set(got) == set(want)
    assert sum(k.count for k in got.values()) == 161  # the fixture's README: 161 kernels
    for name, w in want.items():
        k = got[name]
        assert k.count == w["count"]
        assert k.total_ns == w["total"]
        assert k.avg_ns == pytest.approx(w["avg"], rel=1e-12)
        assert k.med_ns == w["med"]
        assert (k.min_ns, k.max_ns) == (w["min"], w["max"])
        assert k.std_ns == pytest.approx(w["std"], rel=1e-9, abs=1e-9)


def test_median_of_even_count_is_mean_of_middle_two(attn: Path) -> None:
    want = _independent_kernel_sum(attn)
    even = {n: w for n, w in want.items() if w["count"] % 2 == 0 and w["count"] > 0}
    assert even, "the fixture has kernels with an even number of instances"
    got = {k.name: k for k in nsys_sqlite.read(attn).kernels}
    for n, w in even.items():
        assert got[n].med_ns == w["med"]


def test_launch_configuration_per_kernel(attn: Path) -> None:
    c = _ro(attn)
    row = c.execute("SELECT s.value, gridX, gridY, gridZ, blockX, blockY, blockZ, registersPerThread, "
                    "staticSharedMemory, dynamicSharedMemory FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                    "JOIN StringIds s ON s.id = k.shortName WHERE s.value = 'flash_fwd_kernel'").fetchone()
    c.close()
    k = next(k for k in nsys_sqlite.read(attn).kernels if k.short_name == "flash_fwd_kernel")
    cfg = k.extra["launch_configs"][0]
    assert cfg["grid"] == list(row[1:4]) and cfg["block"] == list(row[4:7])
    assert (cfg["registers_per_thread"], cfg["static_smem_bytes"], cfg["dynamic_smem_bytes"]) == row[7:10]
    assert cfg["count"] == 3


def test_memcpy_and_memset_rows(attn: Path) -> None:
    s = nsys_sqlite.read(attn)
    mem = {k.name: k for k in s.kernels if k.kernel_class in ("memcpy", "memset")}
    assert mem["[CUDA memset]"].count == 33
    assert mem["[CUDA memcpy Device-to-Host]"].count + mem["[CUDA memcpy Device-to-Device]"].count == 11


def test_nvtx_projection_equals_nvtx_gpu_proj_sum_definition(attn: Path) -> None:
    want = _independent_projection(attn)
    s = nsys_sqlite.read(attn)
    got = {r.name: r for r in s.ranges}
    for text, (inst, total, ops) in want.items():
        r = got[text]
        assert r.extra["proj_instances"] == inst
        assert r.gpu_proj_total_ns == total
        assert r.gpu_ops == ops
    assert {r.name for r in s.ranges if r.extra["proj_instances"]} == set(want)
    # every push/pop range is listed, with the default domain (None) or its own (cuBLAS's internal ranges)
    assert len([r for r in s.ranges if r.domain is None]) == 21  # 3 iterations x (5 fwd + 2 bwd)
    assert got["cublasCreate_v2"].domain == "cuBLAS"


def test_backward_kernels_of_a_plain_script_take_the_callers_bwd_range(attn: Path) -> None:
    """The fixture's script pushes `<name>.bwd.itN` on the main thread; autograd launches the backward kernels
    from its worker thread (`pt_autograd_0`). nsys' own projection puts none of them in those ranges, and the
    range rows keep nsys' definition; the per-range kernel rows place them in the range open on the thread that
    called backward() at the launch (profctl.readers._nsys_paths), and say so."""
    c = _ro(attn)
    bwd_threads = {t for (t,) in c.execute(
        "SELECT DISTINCT r.globalTid FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = k.correlationId JOIN StringIds s ON s.id = k.shortName "
        "WHERE s.value LIKE 'flash_bwd%'")}
    push_threads = {t for (t,) in c.execute("SELECT DISTINCT globalTid FROM NVTX_EVENTS WHERE text LIKE '%.bwd.%'")}
    # every kernel launched on autograd's thread, with the main thread's .bwd. range open at its launch
    expected: dict[str, int] = defaultdict(int)
    for text, _name in c.execute(
            "SELECT n.text, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
            "ON r.correlationId = k.correlationId JOIN StringIds s ON s.id = k.demangledName "
            "JOIN ThreadNames tn ON tn.globalTid = r.globalTid JOIN StringIds ts ON ts.id = tn.nameId "
            "JOIN NVTX_EVENTS n ON n.eventType = 59 AND n.start <= r.start AND r.start <= n.end "
            "AND (n.globalTid & -16777216) = (r.globalTid & -16777216) "
            "WHERE ts.value LIKE 'pt_autograd%' AND n.text LIKE '%.bwd.%'"):
        expected[text] += 1
    c.close()
    assert bwd_threads and push_threads and not (bwd_threads & push_threads)
    assert sum(expected.values()) == 42  # naive: 9 per iteration, flash: 5 (2 copies + 3 flash kernels), x 3

    s = nsys_sqlite.read(attn, by_range=True)
    table = {k.short_name: k.count for k in s.kernels if k.nvtx_range is None}
    assert table["flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel"] == 3
    for r in s.ranges:  # nsys' projection: launches on the pushing thread only
        if ".bwd." in r.name:
            assert r.gpu_ops == 0 and r.extra["proj_instances"] == 0, r
    got: dict[str, int] = defaultdict(int)
    for k in s.kernels:
        if k.nvtx_range and ".bwd." in k.nvtx_range:
            got[k.nvtx_range] += k.count
            assert k.extra["borrowed_launches"] == k.count
    assert dict(got) == dict(expected)
    dq = [k for k in s.kernels if k.nvtx_range == "sdpa_flash.bwd.it1" and "dq_dk_dv" in k.name]
    assert len(dq) == 1 and dq[0].count == 1
    assert s.meta["nvtx_borrowed"] == [{"launches": 42, "thread": "pt_autograd_0", "from_thread": "python3"}]
    # the forward kernels, launched on the pushing thread, borrow nothing
    fwd = next(k for k in s.kernels if k.nvtx_range == "sdpa_flash.fwd.it1")
    assert fwd.short_name == "flash_fwd_kernel" and "borrowed_launches" not in fwd.extra
    r = next(r for r in s.ranges if r.name == "sdpa_flash.fwd.it1")
    assert r.gpu_ops == 1 and r.gpu_proj_total_ns and r.gpu_proj_total_ns > 0


def test_profctl_capture_projects_backward_kernels_into_bwd_range(profctl_capture: Path) -> None:
    """profctl's workload pushes `<backend>.bwd` on autograd's thread too: the backward kernels project there,
    on their own thread, with nothing borrowed."""
    from profctl.nvtx import parse_range

    s = nsys_sqlite.read(profctl_capture, by_range=True)
    bwd: dict[str, int] = defaultdict(int)
    for k in s.kernels:
        key = parse_range(k.nvtx_range)
        if key is not None and (key.backend, key.pass_) == ("sdpa-flash", "bwd"):
            assert k.nvtx_range.startswith("profctl@sdpa-flash[") and "borrowed_launches" not in k.extra
            bwd[k.short_name] += k.count
    assert bwd["flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel"] == 4  # 1 warm-up + 3 measured
    r = next(r for r in s.ranges if r.name == "sdpa-flash.bwd" and r.domain == "profctl")
    assert r.extra["proj_instances"] == 4 and r.gpu_ops is not None and r.gpu_ops >= 12


def test_profiler_window_keeps_measured_iterations_only(profctl_capture: Path) -> None:
    full = nsys_sqlite.read(profctl_capture)
    win = nsys_sqlite.read(profctl_capture, window="profiler-api")
    count = {k.short_name: k.count for k in win.kernels}
    assert count["flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel"] == 3  # --iters 3
    assert count["flash_fwd_splitkv_kernel"] == 3
    assert sum(k.count for k in win.kernels) < sum(k.count for k in full.kernels)
    assert win.meta["windows"] == 2  # one cudaProfilerStart/Stop pair per case
    names = {r.name for r in win.ranges}
    assert "warmup" not in names and "measure" in names


def test_hierarchy_levels_of_profctl_ranges(profctl_capture: Path) -> None:
    with NsysExport(profctl_capture) as ex:
        insts = [i for i in ex.range_instances() if i.domain == "profctl" and i.proj_start is not None]
    by = {i.text: i.level for i in insts}
    assert by["measure"] < by["sdpa-flash.fwd"]
    rows = {r.name: r for r in nsys_sqlite.read(profctl_capture).ranges}
    assert rows["measure"].extra["avg_children"] > 0


def test_user_file_is_not_modified(attn: Path) -> None:
    before = (attn.read_bytes(), attn.stat().st_mtime_ns)
    nsys_sqlite.read(attn, by_range=True)
    nsys_sqlite.read(attn, window="profiler-api")
    assert (attn.read_bytes(), attn.stat().st_mtime_ns) == before
    assert not list(attn.parent.glob("attn.sqlite-*"))  # no journal or WAL beside it


def test_read_only_file_can_be_read(attn: Path) -> None:
    attn.chmod(0o444)
    assert nsys_sqlite.read(attn).kernels


def test_summary_json_round_trip(attn: Path) -> None:
    from profctl.schema import Summary

    s = nsys_sqlite.read(attn, by_range=True)
    back = Summary.from_dict(__import__("json").loads(s.to_json()))
    assert len(back.kernels) == len(s.kernels) and len(back.ranges) == len(s.ranges)
    assert back.sources[0].tool == "nsys" and back.sources[0].tool_version == "2025.3.2.0"
