"""The per-point NVML clock summary (profctl.nvml.Sampler.take): the busy samples of the point, else its idle-looking
ones, else -- a point that saw no sample at all (shorter than the 20 ms interval, or its start and row events read
in one poll: after issue 31 drew inputs on the GPU, test_bench_gpu_rows found such points with no clocks) -- the
latest sample, marked ``nearest``."""

from __future__ import annotations

from profctl.nvml import Sampler


def test_a_point_gets_its_busy_samples_then_the_nearest_one_when_it_saw_none() -> None:
    s = Sampler(-1)  # no GPU here: samples are fed as the sampling thread would
    assert s.take() == {}  # nothing sampled yet: nothing to say
    s.record(1980, 3201, 500.0, 60, 0, util=90)
    s.record(1755, 3201, 690.0, 62, 1 << 2, util=95)  # sw_power_cap
    busy = s.take()
    assert busy["clock_samples"] == 2 and busy["sm_clock_mhz_min"] == 1755 and busy["gpu_busy"] is True
    assert busy["throttle_reasons"] == ["sw_power_cap"] and "nearest" not in busy
    near = s.take()  # a point between two samples
    assert near["nearest"] is True and near["clock_samples"] == 1 and near["sm_clock_mhz_median"] == 1755
    assert near["gpu_busy"] is True and near["throttle_reasons"] == ["sw_power_cap"]
    s.record(345, 3201, 80.0, 40, 0, util=0)
    idle = s.take()  # only idle-looking samples: kept, marked
    assert idle["gpu_busy"] is False and idle["sm_clock_mhz_median"] == 345 and "nearest" not in idle
    assert s.take()["gpu_busy"] is False  # the nearest one was idle
    s._last_at -= 1.0  # NVML has not answered for a second: no clock is better than a stale one
    assert s.take() == {}
