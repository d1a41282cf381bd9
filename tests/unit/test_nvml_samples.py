"""Clock samples a bench row records: busy samples describe the measurement; a point shorter than NVML's
utilisation window still gets its (idle-looking) samples, marked, and never a "clock fell" warning from them."""

from __future__ import annotations

from profctl.nvml import Samples, clock_warning


def samples(sm: list[int], reasons: set[str] | None = None) -> Samples:
    return Samples(sm_mhz=sm, mem_mhz=[2619] * len(sm), power_w=[100.0] * len(sm), temp_c=[40] * len(sm),
                   reasons=reasons or set())


def test_busy_samples_that_fell_warn() -> None:
    clk = samples([1980, 1980, 1500]).summary(1980)
    assert clk["gpu_busy"] is True and clk["clock_samples"] == 3 and clk["sm_clock_mhz_min"] == 1500
    assert "SM clock fell to 1500 MHz" in (clock_warning(clk) or "")


def test_idle_looking_samples_are_kept_but_never_warn() -> None:
    clk = samples([345, 1980], {"sw_power_cap"}).summary(1980, busy=False)
    assert clk["gpu_busy"] is False and clk["clock_samples"] == 2
    assert clock_warning(clk) is None


def test_no_samples_is_no_clocks() -> None:
    assert Samples().summary(1980) == {} and clock_warning({}) is None
