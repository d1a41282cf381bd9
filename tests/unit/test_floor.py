"""The floor of any kernel from its own counters, the bounds it puts on every predicted saving, the healthy verdict,
and the evidence that tells look-alikes apart (issue 43). Real reports recorded with plain ncu on the H200/H100
(tests/data/pairs, tests/data/planted, tests/data/h100-sm90) and, for the cases the issue names that no report here
holds, profiles built from the metrics ncu names (each says which numbers it stands on)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from profctl.analysis import causes
from profctl.analysis.cause_catalog import unit_relief
from profctl.analysis.explanation import explain, explain_one
from profctl.analysis.floor import floor_of, tensor_flops
from profctl.analysis.select import select
from profctl.errors import UsageError
from profctl.schema.profile import KernelProfile, PcSample

pytest.importorskip("ncu_report")

DATA = Path(__file__).resolve().parents[1] / "data"
REPORTS = sorted([*DATA.glob("pairs/*.ncu-rep.xz"), *DATA.glob("planted/*.ncu-rep.xz"),
                  *DATA.glob("h100-sm90/*.ncu-rep.*"), *DATA.glob("fixes/*.ncu-rep.xz"), *DATA.glob("*.ncu-rep.gz")])


@cache
def _profiles(path: Path) -> tuple[KernelProfile, ...]:
    from profctl.readers import ncu_profiles

    return tuple(ncu_profiles.read_profiles(path))


def _k(report: str, name: str) -> KernelProfile:
    return select(list(_profiles(DATA / report)), f"^{name}$", report)[0]


def test_the_floor_is_each_units_share_of_the_kernels_time_and_the_work_is_counted() -> None:
    fa2 = _k("pairs/pairs_sdpa.ncu-rep.xz", "flash_fwd_kernel")
    fl = floor_of(fa2)
    assert fl is not None and fl.binding is not None and fl.binding.key == "tensor"
    t = fa2.duration_ns / 1e3  # type: ignore[operator]
    tensor = fl.get("tensor")
    assert tensor is not None
    assert tensor.floor_us == pytest.approx(t * tensor.pct / 100)
    # b1 h32 s4096 d128 forward: 4 b h s^2 d FLOPs, counted by ncu on the HMMA path, one op a FLOP
    assert tensor_flops(fa2.metrics)["bf16"] == pytest.approx(4 * 32 * 4096**2 * 128)
    assert "bf16" in tensor.work
    assert fl.roofline is not None and fl.roofline.side() == "compute side"
    assert 0 < fl.attainable_us <= t and not fl.at_roof


@pytest.mark.parametrize("report", REPORTS, ids=lambda p: p.name)
def test_no_saving_takes_a_kernel_below_its_floor_on_any_report(report: Path) -> None:
    """Every kernel of every ncu report in tests/data: each cause's fixed time is at least the least time the work
    the fix leaves needs (the floor over the units it does not relieve), and the practical best never exceeds the
    measured time."""
    for p in _profiles(report):
        fl = floor_of(p)
        if fl is None or not fl.units:
            continue
        assert fl.attainable_us <= fl.duration_us * 1.0001
        d = causes.diagnose_one(p)
        for c in [*d.causes, *d.slack]:
            assert c.fixed_us is not None
            assert c.fixed_us >= fl.after(unit_relief(c)) - 1e-6, (p.base_name, c.id)


def test_a_pairs_savings_never_exceed_the_gap() -> None:
    for report in sorted(DATA.glob("pairs/pairs_*.ncu-rep.xz")):
        ps = list(_profiles(report))
        for a, b in zip(ps[::2], ps[1::2], strict=False):
            if not a.duration_ns or not b.duration_ns or a.duration_ns <= b.duration_ns:
                continue
            gap = (a.duration_ns - b.duration_ns) / 1e3
            assert all(c.saving_us <= gap + 1e-6 for c in causes.gap_causes(a, b).causes), (a.base_name, b.base_name)


def test_a_kernel_at_its_roof_with_wasted_work_names_the_waste_not_health() -> None:
    """The uncoalesced gemv is at its L1 roof -- with 4x the sectors it needs: at the roof, but not healthy."""
    a = _k("pairs/pairs_cuda_mem.ncu-rep.xz", "gemv_thread_per_row")
    d = causes.diagnose_one(a)
    assert d.floor is not None and d.floor.at_roof and not d.healthy
    assert d.causes[0].id == "uncoalesced-global"
    v = d.verdict()
    assert v is not None and v.startswith("at the L1/shared memory roof") and "uncoalesced-global" in v


def test_the_fixed_kernel_of_a_coalesced_gemv_is_healthy() -> None:
    b = _k("pairs/pairs_cuda_mem.ncu-rep.xz", "gemv_warp_per_row")
    d = causes.diagnose_one(b)
    assert d.healthy, [(c.id, c.saving_us) for c in d.causes]
    assert d.verdict().startswith("healthy: at the")  # type: ignore[union-attr]
    assert all(c.saving_us <= 0.15 * d.floor.duration_us for c in d.slack)  # type: ignore[union-attr]


# ------------------------------------------------------------ the look-alikes, on constructed profiles
_E = ".avg.pct_of_peak_sustained_elapsed"


def _profile(name: str, t_us: float, units: dict[str, float], *, clock_mhz: float = 1980.0,
             extra: dict[str, float] | None = None, pcs: tuple[PcSample, ...] = (), opcodes: dict[str, float] | None
             = None) -> KernelProfile:
    names = {"tensor": "sm__pipe_tensor_cycles_active", "fma": "sm__pipe_fma_cycles_active",
             "alu": "sm__pipe_alu_cycles_active", "xu": "sm__inst_executed_pipe_xu",
             "lsu": "sm__inst_executed_pipe_lsu", "issue": "sm__inst_issued", "l1": "l1tex__throughput",
             "l2": "lts__throughput", "dram": "dram__throughput"}
    m: dict[str, float] = {"gpu__time_duration.sum": t_us * 1e3, "gpc__cycles_elapsed.avg.per_second": clock_mhz * 1e6,
                           "device__attribute_max_gpu_frequency_khz": 1980000.0,
                           "device__attribute_multiprocessor_count": 132.0,
                           "sm__cycles_active.avg": 1000.0, "sm__cycles_elapsed.avg": 1000.0}
    for k, v in units.items():
        m[names[k] + _E] = v
        act = ".avg.pct_of_peak_sustained_active"
        if k in ("fma", "alu", "tensor"):
            m[names[k] + act] = v
        if k == "xu":
            m["sm__inst_executed_pipe_xu" + act] = v
        if k == "dram":
            m["gpu__dram_throughput" + _E] = v
    m.update(extra or {})
    return KernelProfile(id=0, name=name, base_name=name, device="NVIDIA H200", cc="9.0", metrics=m, pcs=pcs,
                         opcodes=opcodes or {}, has_samples=bool(pcs), report="constructed")


def test_a_streaming_add_at_the_dram_roof_is_healthy_not_l2_thrashing() -> None:
    """The issue's PyTorch fp32 add of 2^28 elements at 90 % of DRAM, every byte read once, L2 hit rate low: the
    DRAM roof first, no l2-thrashing (no re-reads: no matrix work, no shape saying it moves more than it must)."""
    p = _profile("vectorized_elementwise_kernel_add", 700.0, {"dram": 90.0, "l2": 55.0, "l1": 30.0, "issue": 12.0,
                                                               "fma": 3.0, "alu": 6.0},
                 extra={"lts__t_sector_hit_rate.pct": 33.0, "dram__bytes_read.sum": 2 * 2**30,
                        "dram__bytes_write.sum": 2**30, "smsp__pcsamp_warps_issue_stalled_long_scoreboard": 0})
    d = causes.diagnose_one(p)
    assert "l2-thrashing" not in [c.id for c in [*d.causes, *d.slack]]
    assert d.healthy and d.verdict().startswith("healthy: at the DRAM roof")  # type: ignore[union-attr]


def test_a_gemm_with_its_tensor_pipe_busy_at_a_low_clock_is_healthy_and_the_clock_is_a_premise() -> None:
    """cuBLAS bf16 GEMM, tensor pipe 97 % busy at 1611 MHz (ncu's clock) against the 1980 MHz max: not 'compute-bound,
    saves 18 %' -- healthy, and the clock said as a premise."""
    p = _profile("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 1350.0, {"tensor": 97.0, "issue": 30.0, "l1": 40.0,
                                                                               "l2": 35.0, "dram": 20.0},
                 clock_mhz=1611.0)
    e = explain_one(p)
    assert not e.causes and e.verdict and e.verdict.startswith("healthy: at the tensor pipe roof")
    assert any("1611 MHz" in x and "not a fault" in x for x in e.premises)


def test_an_exp_polynomial_on_a_full_xu_is_conversions_not_missing_tensor_cores() -> None:
    """Half the exp2 evaluated with an FMA polynomial: the XU pipe is full of its FRND/F2I, not MUFU; no matrix work
    (fma(p, x, c) of constants). Not no-tensor-cores, not 'move exps to a polynomial'."""
    src = {"poly.cu": {10: "float p = fmaf(p, x, c3);", 11: "float n = rintf(x); int e = __float2int_rn(n);",
                       12: "y = ex2_approx(x);"}}
    pcs = (PcSample(0, "FFMA R1, R2, R3, R4", 300, {"math_pipe_throttle": 100}, 4_000_000, "poly.cu", 10),
           PcSample(16, "FRND R5, R6", 300, {"mio_throttle": 200}, 2_000_000, "poly.cu", 11),
           PcSample(32, "F2I.NTZ R7, R5", 300, {"mio_throttle": 200}, 2_000_000, "poly.cu", 11),
           PcSample(48, "MUFU.EX2 R8, R9", 200, {"mio_throttle": 100}, 1_000_000, "poly.cu", 12))
    p = _profile("exp_half_poly", 400.0, {"xu": 92.0, "fma": 55.0, "alu": 20.0, "issue": 45.0, "l1": 5.0},
                 pcs=pcs, opcodes={"FFMA": 4e6, "FRND": 2e6, "F2I": 2e6, "MUFU": 1e6})
    p.source_text.update(src)
    found = [c.id for c in causes.kernel_causes(p)]
    assert "no-tensor-cores" not in found and "sfu-bound" not in found
    d = causes.diagnose_one(p)
    assert "xu-conversions" in [c.id for c in [*d.causes, *d.slack]], found


def test_same_time_pairs_say_so_first_and_give_each_kernels_own_causes() -> None:
    a = _k("pairs/pairs_sdpa.ncu-rep.xz", "flash_fwd_kernel")
    b = select(list(_profiles(DATA / "pairs/profctl_sdpa_explain_recipe.ncu-rep.xz")), "flash_fwd", "r")[0]
    e = explain(a, b)
    assert e.same_time and e.verdict and e.verdict.startswith("A and B take the same time")
    # no gap to split (issue 47): no cause of a gap, A's own set apart, out of A's time
    assert not e.causes and e.a_own and e.a_own[0].id == "legacy-mma"


def test_a_pattern_matching_two_kernel_names_is_refused_unless_one_is_named_exactly() -> None:
    ps = list(_profiles(DATA / "pairs/pairs_cuda_exec.ncu-rep.xz"))
    with pytest.raises(UsageError, match=r"matches 2 different kernels.*smooth_tree_barriers, smooth_warp_shuffles"):
        select(ps, "smooth_", "r")
    k, _ = select(ps, "smooth_tree_barriers", "r")
    assert k.base_name == "smooth_tree_barriers"
    mixed = list(_profiles(DATA / "pairs/pairs_triton_attn.ncu-rep.xz"))
    names = {p.base_name for p in mixed}
    assert {"attn_fwd_stages1", "attn_fwd_stages3"} <= names
    k, _ = select(mixed, "attn_fwd_stages1", "r")
    assert k.base_name == "attn_fwd_stages1"
