"""GPU clock, power and throttle sampling through NVML while a benchmark point runs.

Clocks that drop during a measurement (power cap, thermal slowdown) make a kernel look slower than it is; the
samples go into each bench row and a warning is printed when clocks fell. Without a GPU or NVML this is a no-op.
"""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

#: NVML clocks-event (throttle) reason bits that mean the GPU slowed down for a reason other than idling
THROTTLE_REASONS = {
    0x0000000000000002: "applications_clocks_setting",
    0x0000000000000004: "sw_power_cap",
    0x0000000000000008: "hw_slowdown",
    0x0000000000000010: "sync_boost",
    0x0000000000000020: "sw_thermal_slowdown",
    0x0000000000000040: "hw_thermal_slowdown",
    0x0000000000000080: "hw_power_brake_slowdown",
    0x0000000000000100: "display_clock_setting",
}
#: the reasons that indicate a measurement ran slower than the card can
SLOWDOWN = {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}


@dataclass
class Samples:
    sm_mhz: list[int] = field(default_factory=list)
    mem_mhz: list[int] = field(default_factory=list)
    power_w: list[float] = field(default_factory=list)
    temp_c: list[int] = field(default_factory=list)
    reasons: set[str] = field(default_factory=set)

    def summary(self, max_sm_mhz: int | None, *, busy: bool = True) -> dict[str, Any]:
        """The samples' medians and extremes; `busy` False: taken while NVML read the GPU as idle (a point too
        short for NVML's utilisation window), so a low clock there says nothing about the measurement."""
        if not self.sm_mhz:
            return {}
        out: dict[str, Any] = {
            "gpu_busy": busy,
            "sm_clock_mhz_median": statistics.median(self.sm_mhz),
            "sm_clock_mhz_min": min(self.sm_mhz),
            "sm_clock_mhz_max": max(self.sm_mhz),
            "mem_clock_mhz_median": statistics.median(self.mem_mhz) if self.mem_mhz else None,
            "power_w_median": round(statistics.median(self.power_w), 1) if self.power_w else None,
            "temp_c_max": max(self.temp_c) if self.temp_c else None,
            "throttle_reasons": sorted(self.reasons),
            "clock_samples": len(self.sm_mhz),
        }
        if max_sm_mhz:
            out["sm_clock_mhz_device_max"] = max_sm_mhz
        return out


class Sampler:
    """Samples GPU `index` every `interval_s` in a background thread; `take()` returns and resets the samples."""

    def __init__(self, index: int = 0, interval_s: float = 0.02, *, series: bool = False) -> None:
        self.interval_s = interval_s
        #: with `series`, every sample is also kept with its wall time, for :meth:`window`
        self.series: list[tuple[float, int, frozenset[str]]] | None = [] if series else None
        self._nv: Any = None
        self._h: Any = None
        self.max_sm_mhz: int | None = None
        self.name: str | None = None
        self.driver: str | None = None
        self.util: int | None = None  # the GPU's utilisation at the last sample, percent (progress bars)
        self._cur = Samples()
        self._idle = Samples()  # samples while NVML read 0 % utilisation: kept for points too short to show as busy
        #: the latest sample (sm, mem, power, temperature, reasons, busy) and when it was taken (monotonic)
        self._last: tuple[int, int, float, int, frozenset[str], bool] | None = None
        self._last_at = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nv = pynvml
            self._h = pynvml.nvmlDeviceGetHandleByIndex(index)
            n = pynvml.nvmlDeviceGetName(self._h)
            self.name = n.decode() if isinstance(n, bytes) else n
            d = pynvml.nvmlSystemGetDriverVersion()
            self.driver = d.decode() if isinstance(d, bytes) else d
            self.max_sm_mhz = pynvml.nvmlDeviceGetMaxClockInfo(self._h, pynvml.NVML_CLOCK_SM)
        except Exception:
            self._nv = None

    @property
    def available(self) -> bool:
        return self._nv is not None

    def start(self) -> Sampler:
        if self.available and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="profctl-nvml", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        nv, h = self._nv, self._h
        get_reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        while not self._stop.is_set():
            try:
                sm = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
                mem = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)
                pw = nv.nvmlDeviceGetPowerUsage(h) / 1000.0
                tc = nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)
                bits = get_reasons(h) if get_reasons else 0
                util = nv.nvmlDeviceGetUtilizationRates(h).gpu
            except Exception:
                time.sleep(self.interval_s)
                continue
            self.record(sm, mem, pw, tc, bits, util)
            time.sleep(self.interval_s)

    def record(self, sm: int, mem: int, power_w: float, temp_c: int, reason_bits: int, util: int) -> None:
        """One sample (the sampling thread's; tests call it directly)."""
        reasons = frozenset(n for b, n in THROTTLE_REASONS.items() if reason_bits & b)
        self.util = int(util)
        with self._lock:  # samples while the GPU works describe the measurement; idle ones are the fallback
            into = self._cur if util > 0 else self._idle
            into.sm_mhz.append(sm)
            into.mem_mhz.append(mem)
            into.power_w.append(power_w)
            into.temp_c.append(temp_c)
            into.reasons.update(reasons)
            self._last, self._last_at = (sm, mem, power_w, temp_c, reasons, util > 0), time.monotonic()
            if self.series is not None:
                self.series.append((time.time(), int(sm), reasons))

    def take(self) -> dict[str, Any]:
        """The samples since the last take (and reset): those taken while the GPU was busy, else -- a point
        shorter than NVML's utilisation window -- the idle-looking ones, marked ``gpu_busy: False``; a point that
        saw no sample (shorter than the interval, or its start and end read together) gets the latest one, marked
        ``nearest: True``: a clock of the moment, not none (nothing when that sample is older than a quarter of
        a second: NVML stopped answering)."""
        with self._lock:
            cur, idle, self._cur, self._idle = self._cur, self._idle, Samples(), Samples()
            last = self._last if time.monotonic() - self._last_at <= max(0.25, 5 * self.interval_s) else None
        if cur.sm_mhz:
            return cur.summary(self.max_sm_mhz)
        if idle.sm_mhz or last is None:
            return idle.summary(self.max_sm_mhz, busy=False)
        sm, mem, pw, tc, reasons, busy = last
        return {**Samples([sm], [mem], [pw], [tc], set(reasons)).summary(self.max_sm_mhz, busy=busy), "nearest": True}

    def window(self, t0: float, t1: float) -> dict[str, Any]:
        """The SM clock between wall times `t0` and `t1` (``time.time()``; a stretch shorter than the sampling
        interval gets the nearest sample): median, min, max, throttle reasons and the count; {} without
        samples."""
        with self._lock:
            pts = list(self.series or [])
        inside = [p for p in pts if t0 <= p[0] <= t1]
        if not inside and pts:
            mid = (t0 + t1) / 2
            near = min(pts, key=lambda p: abs(p[0] - mid))
            inside = [near] if abs(near[0] - mid) <= max(self.interval_s * 5, (t1 - t0)) else []
        if not inside:
            return {}
        mhz = [p[1] for p in inside]
        return {"sm_clock_mhz_median": statistics.median(mhz), "sm_clock_mhz_min": min(mhz),
                "sm_clock_mhz_max": max(mhz), "throttle_reasons": sorted(set().union(*(p[2] for p in inside))),
                "clock_samples": len(inside)}

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._nv is not None:
            try:
                self._nv.nvmlShutdown()
            except Exception:
                pass


def clock_warning(clk: dict[str, Any], sweep_max_mhz: float | None = None) -> str | None:
    """A warning when the SM clock fell during a point: a slowdown reason, or a minimum below 90 % of the
    highest clock seen in the sweep."""
    if not clk or clk.get("gpu_busy") is False:  # idle-looking samples: a low clock there is the idle clock
        return None
    slow = sorted(set(clk.get("throttle_reasons", [])) & SLOWDOWN)
    ref = sweep_max_mhz or clk.get("sm_clock_mhz_max")
    low = clk.get("sm_clock_mhz_min")
    parts = []
    if slow:
        parts.append("throttled: " + ", ".join(slow))
    if ref and low and low < 0.9 * ref:
        parts.append(f"SM clock fell to {low} MHz (max seen {ref:.0f} MHz)")
    return "; ".join(parts) or None


# ------------------------------------------------------------------------------------------------ device facts
@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML sees it (the index is NVML's, which ignores CUDA_VISIBLE_DEVICES)."""

    index: int
    name: str
    uuid: str | None
    capability: tuple[int, int] | None


@contextlib.contextmanager
def session() -> Iterator[Any | None]:
    """NVML's bindings, initialised for the block and shut down after it; None when pynvml is missing or NVML
    cannot start (no driver)."""
    try:
        import pynvml as nv
    except Exception:
        yield None
        return
    try:
        nv.nvmlInit()
    except Exception:
        yield None
        return
    try:
        yield nv
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()


def gpus() -> list[Gpu] | None:
    """Every GPU NVML sees, in milliseconds and without torch: [] when NVML cannot start (no driver: no GPU),
    None when pynvml itself is missing (nothing can be said)."""
    try:
        import pynvml as nv
    except Exception:
        return None
    try:
        nv.nvmlInit()
    except Exception:
        return []
    out = []
    try:
        for i in range(int(nv.nvmlDeviceGetCount())):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            name = nv.nvmlDeviceGetName(h)
            try:
                uuid = nv.nvmlDeviceGetUUID(h)
                uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
            except Exception:
                uuid = None
            try:
                cc: tuple[int, int] | None = tuple(int(x) for x in nv.nvmlDeviceGetCudaComputeCapability(h))  # type: ignore[assignment]
            except Exception:
                cc = None
            out.append(Gpu(i, name.decode() if isinstance(name, bytes) else str(name), uuid, cc))
    except Exception:
        return []
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass
    return out


def driver_version() -> str | None:
    """The NVIDIA driver's version (NVML), None without NVML or a driver."""
    try:
        import pynvml as nv

        nv.nvmlInit()
    except Exception:
        return None
    try:
        d = nv.nvmlSystemGetDriverVersion()
        return d.decode() if isinstance(d, bytes) else str(d)
    except Exception:
        return None
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass


def here(device: str, env: Mapping[str, str | None] | None = None) -> dict[str, object]:
    """Where a workload started now runs: this host and, on `device` 'cuda', the first visible GPU (the one a
    child with this environment -- `env` on top of it -- uses as cuda:0) with its NVML index, name, UUID and the
    driver. Bench rows and run parts record it, so runs gathered on different machines and GPUs can be told
    apart."""
    out: dict[str, object] = {"host": platform.node()}
    if device != "cuda":
        return out
    vis = visible_gpus(env)
    if vis:
        g = vis[0]
        out.update(gpu_index=g.index, gpu_name=g.name, gpu_uuid=g.uuid, driver=driver_version())
    return out


def visible_gpus(env: Mapping[str, str | None] | None = None) -> list[Gpu] | None:
    """The GPUs a CUDA program started now would see (with `env` on top of this process's environment), in its
    order (CUDA_VISIBLE_DEVICES applied: indices and UUIDs, as CUDA reads them); None when NVML cannot tell."""
    all_gpus = gpus()
    if all_gpus is None:
        return None
    cvd = (env or {}).get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
    if cvd is None:
        return all_gpus
    out: list[Gpu] = []
    for tok in (t.strip() for t in cvd.split(",")):
        if not tok:
            break
        if tok.isdigit() or (tok.startswith("-") and tok[1:].isdigit()):
            i = int(tok)
            if i < 0 or i >= len(all_gpus):
                break  # CUDA stops at the first invalid entry
            out.append(all_gpus[i])
        else:
            match = [g for g in all_gpus if g.uuid and g.uuid.startswith(tok if tok.startswith("GPU-") else
                                                                           "GPU-" + tok)]
            if len(match) != 1:
                break
            out.append(match[0])
    return out
