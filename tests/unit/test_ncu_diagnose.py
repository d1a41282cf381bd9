"""The diagnosis on the shared fixtures: bound, limiter, tensor utilisation, occupancy and recipe hints."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from profctl import recipes
from profctl.analysis.diagnose import backend_of, by_backend, diagnose, diagnose_row
from profctl.readers import read
from profctl.render import ncu_view
from profctl.schema import KernelRow

pytest.importorskip("ncu_report")
HOPPER = (9, 0)


def _row(metrics: dict[str, float], cls: str = "flash_fwd", rng: str | None = None) -> KernelRow:
    return KernelRow(tool="ncu", name="k", short_name="k", kernel_class=cls, nvtx_range=rng, count=1, total_ns=1.0,
                     avg_ns=1.0, med_ns=1.0, min_ns=1.0, max_ns=1.0, std_ns=0.0, metrics=metrics, extra={"ids": [0]})


SM, MEM = "sm__throughput.avg.pct_of_peak_sustained_elapsed", \
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"


@pytest.mark.parametrize(("sm", "mem", "bound"), [
    (80.0, 30.0, "compute-bound"), (20.0, 85.0, "memory-bound"), (40.0, 30.0, "latency-bound"),
    (60.0, 59.9, "compute-bound"),
])
def test_bound_from_speed_of_light(sm: float, mem: float, bound: str) -> None:
    assert diagnose_row(_row({SM: sm, MEM: mem})).bound == bound


def test_unknown_without_speed_of_light() -> None:
    d = diagnose_row(_row({"gpu__time_duration.sum": 5.0}))
    assert d.bound == "unknown" and d.limiter is None


def test_thresholds_come_from_the_recipe(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text("name: r\nsummary: s\nset: basic\nthresholds:\n  bound_pct: 30\n")
    assert diagnose_row(_row({SM: 40.0, MEM: 30.0}), recipes.load(p)).bound == "compute-bound"


def test_fixture_kernels(shared_fixture: Callable[[str], Path]) -> None:
    s = read(shared_fixture("attn_tc.ncu-rep"))
    r = recipes.get("tensor-core")
    ds = diagnose(s, r, HOPPER, backend_order=["sdpa-flash", "sdpa-cudnn", "eager"])
    assert [d.backend for d in ds[:3]] == ["sdpa-flash", "sdpa-cudnn", "eager"]
    flash = ds[0]
    assert flash.kernel == "flash_fwd_kernel" and flash.pass_ == "fwd"
    assert flash.tensor_pct == pytest.approx(51.71, abs=0.01)
    assert flash.achieved_occupancy == pytest.approx(12.04, abs=0.01)
    assert flash.theoretical_occupancy == pytest.approx(12.5)
    # the eager path's GEMMs stream the materialised score matrix: DRAM is their limiter
    gemm = next(d for d in ds if d.kernel.startswith("nvjet") and d.first_id == 0)
    assert gemm.bound == "memory-bound" and gemm.limiter == "DRAM" and gemm.limiter_pct == pytest.approx(77.1, 0.01)
    # recipe hint: wgmma-free HMMA kernel on Hopper
    assert any("no wgmma" in n for n in flash.notes) is False  # hmma inst not collected in this fixture
    cudnn = ds[1]
    assert cudnn.tensor_pct == pytest.approx(64.9, abs=0.1)
    sides = by_backend(ds)
    naive = next(b for b in sides if b["backend"] == "eager")
    assert naive["kernels"] == 7 and naive["main_kernel"] == "elementwise_kernel"


def test_speed_of_light_fixture_with_hints(shared_fixture: Callable[[str], Path]) -> None:
    s = read(shared_fixture("flash_sol.ncu-rep"))
    r = recipes.get("speed-of-light")
    ds = diagnose(s, r, HOPPER)
    fwd = next(d for d in ds if d.kernel == "flash_fwd_kernel")
    assert fwd.bound == "latency-bound"
    assert fwd.compute_pct == pytest.approx(41.68, abs=0.01) and fwd.memory_pct == pytest.approx(41.68, abs=0.01)
    assert fwd.limiter == "L1/shared"
    assert any(n.startswith("Latency-bound") for n in fwd.notes)
    convert = next(d for d in ds if d.kernel == "flash_bwd_convert_dq_kernel")
    assert convert.bound == "memory-bound" and convert.limiter == "L2"
    # no "tensor cores idle" note for a kernel that does no MMA at all
    assert not any("tensor pipe busy" in n for n in convert.notes)


def test_backend_of_paths() -> None:
    assert backend_of("profctl@sdpa-flash[b1,sq2048,skv2048,h32,kv32,d128,bf16,full,bhsd]/measure/sdpa-flash.bwd") \
        == ("sdpa-flash", "bwd", "b1,sq2048,skv2048,h32,kv32,d128,bf16,full,bhsd")
    assert backend_of("naive.fwd.it1") == ("eager", "fwd", None)  # canonical names, as every reader
    assert backend_of(None) == (None, None, None)
    # a model step's attention (ncu --model): the case's mode stands for the pass, so modes are told apart
    assert backend_of("profctl@sdpa-flash[llama-7b,l2,decode,b1,s2048,bf16]/measure/attn.core")[:2] == \
        ("sdpa-flash", "decode")


def test_render_tables(shared_fixture: Callable[[str], Path]) -> None:
    s = read(shared_fixture("attn_tc.ncu-rep"))
    r = recipes.get("tensor-core")
    ds = diagnose(s, r, HOPPER)
    md = ncu_view.to_markdown(s, ds, recipe=r, cc=HOPPER)
    assert md is not None
    for title in ("Profiled launches", "Metrics — recipe tensor-core", "Diagnosis", "Backends side by side"):
        assert f"## {title}" in md
    launches = ncu_view.launch_rows(s)
    assert len(launches) == 10 and launches[7]["kernel"] == "flash_fwd_kernel" and launches[7]["grid"] == "16x4x16"
    rows = ncu_view.metric_rows(s, r, HOPPER, ds)
    assert len(rows) == 10 and len({(x["kernel"], x["Duration"]) for x in rows}) == 10
    assert ncu_view.fmt_value(571.43e9, "byte/s") == "571 GB/s" and ncu_view.fmt_value(41.68, "%") == "41.7%"
