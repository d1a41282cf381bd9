"""The state of the machine a run timed on: how busy its CPUs were with other work, their frequency and governor,
the torch thread count of the process that timed, other processes on the GPU (issue 39).

Why: on a shared CPU machine one process of an unchanged program can time twice (or 27 times) as long as the
next, because other work took the cores its threads needed. A comparison that does not know the two sides ran in
different states calls that a change; with the state recorded, ``profctl compare`` says so (and does not call a
change measured across different loads a regression).

Everything is read cheaply, from files the kernel already keeps: ``/proc/loadavg`` and ``/proc/stat`` (no
sampling window, no sleep: :func:`at_start` keeps the CPU counters and :func:`over_run` divides what other
processes used between start and end by the wall time), ``/sys/devices/system/cpu/*/cpufreq`` where it exists,
NVML's process list where a GPU and NVML are there. What cannot be read is left out, never guessed.

    start = machine_state.at_start()          # in run_store.new_run: manifest["machine"]
    ...                                        # the run
    machine_state.over_run(start)              # in run_store.finish: busy cores of other work over the run
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from profctl import nvml

PROC = Path("/proc")
SYS_CPU = Path("/sys/devices/system/cpu")
#: busy cores of other work that differ by at least this many cores (or a quarter of the cores, if more) make two
#: runs' states different (a 2-core machine: one busy core more is half the machine)
BUSY_CORES_APART = 0.5


def cpu_count() -> int:
    """CPUs this process may run on (the affinity mask; a container's limit when the kernel applies one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def loadavg(proc: Path = PROC) -> list[float] | None:
    """The 1, 5 and 15 minute load averages (runnable and uninterruptible tasks, this process included)."""
    try:
        return [float(x) for x in (proc / "loadavg").read_text().split()[:3]]
    except (OSError, ValueError):
        return None


def cpu_jiffies(proc: Path = PROC, cpus: Collection[int] | None = None) -> tuple[int, int] | None:
    """(busy, total) clock ticks since boot of all CPUs (the first line of /proc/stat), or with `cpus` of those
    CPUs only (their ``cpuN`` lines: a process pinned to some CPUs, by ``taskset`` or a cpuset, is slowed by other
    work on them, not by work on the rest); idle and iowait are not busy; guest time is already in user time.
    The first line when a CPU of `cpus` has no line."""
    try:
        lines = (proc / "stat").read_text().splitlines()
    except OSError:
        return None
    rows = [line.split() for line in lines if line.startswith("cpu")]
    if cpus is not None:
        want = {f"cpu{c}" for c in cpus}
        mine = [r for r in rows if r[0] in want]
        if want and len(mine) == len(want):
            sums = [_ticks(r) for r in mine]
            if all(x is not None for x in sums):
                return sum(x[0] for x in sums if x), sum(x[1] for x in sums if x)
    first = rows[0] if rows and rows[0][0] == "cpu" else None
    return None if first is None else _ticks(first)


def _ticks(fields: Sequence[str]) -> tuple[int, int] | None:
    """(busy, total) of one /proc/stat cpu line's fields (the name first)."""
    try:
        v = [int(x) for x in fields[1:9]]
    except ValueError:
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v) - idle, sum(v)


def affinity() -> list[int] | None:
    """The CPUs this process may run on, by number (None where the platform does not say)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return None


def procs_running(proc: Path = PROC) -> int | None:
    """Tasks runnable right now (this one included), from /proc/stat."""
    try:
        for line in (proc / "stat").read_text().splitlines():
            if line.startswith("procs_running"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def own_cpu_s() -> float:
    """CPU seconds of this process and of its children that were waited for (the run's own work)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def cpu_frequency(sys_cpu: Path = SYS_CPU) -> dict[str, Any]:
    """The CPUs' current frequency (min, mean, max MHz) and governors, where cpufreq is readable (often not in a
    container or a VM: then {})."""
    mhz: list[float] = []
    governors: set[str] = set()
    for d in sorted(sys_cpu.glob("cpu[0-9]*/cpufreq")):
        with contextlib.suppress(OSError, ValueError):
            mhz.append(int((d / "scaling_cur_freq").read_text().strip()) / 1000.0)
        with contextlib.suppress(OSError):
            governors.add((d / "scaling_governor").read_text().strip())
    out: dict[str, Any] = {}
    if mhz:
        out["cpu_mhz"] = {"min": round(min(mhz)), "mean": round(sum(mhz) / len(mhz)), "max": round(max(mhz))}
    if governors:
        out["governor"] = ",".join(sorted(governors))
    return out


def gpu_processes() -> list[dict[str, Any]] | None:
    """Other processes on the GPUs (compute and graphics), from NVML: pid, GPU index, memory used (MiB); None
    without NVML or a GPU."""

    out: list[dict[str, Any]] = []
    with nvml.session() as nv:
        if nv is None:
            return None
        try:
            for i in range(int(nv.nvmlDeviceGetCount())):
                h = nv.nvmlDeviceGetHandleByIndex(i)
                for name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                    fn = getattr(nv, name, None)
                    if fn is None:
                        continue
                    with contextlib.suppress(Exception):
                        for p in fn(h):
                            pid = int(getattr(p, "pid", -1))
                            if pid == os.getpid():
                                continue
                            used = getattr(p, "usedGpuMemory", None)
                            out.append({"pid": pid, "gpu": i,
                                        "mib": round(int(used) / 2**20) if isinstance(used, int) else None})
        except Exception:
            return None
    return out


def at_start(*, gpu: bool = True) -> dict[str, Any]:
    """The machine now, for the manifest's ``machine``: load averages, tasks running, CPUs, frequency and
    governor, torch's threads (when torch is imported here), other GPU processes (`gpu`: when NVML is there), and
    the counters :func:`over_run` needs (``_counters``)."""
    out: dict[str, Any] = {"cpus": cpu_count()}
    la = loadavg()
    if la is not None:
        out["loadavg"] = la
    pr = procs_running()
    if pr is not None:
        out["others_running"] = max(pr - 1, 0)  # this process is one of them
    out.update(cpu_frequency())
    torch = sys.modules.get("torch")
    if torch is not None:
        with contextlib.suppress(Exception):
            out["torch_threads"] = int(torch.get_num_threads())
    if gpu:
        procs = gpu_processes()
        if procs is not None:
            out["gpu_processes"] = procs
    mask = affinity()
    jf = cpu_jiffies(cpus=mask)
    if jf is not None:
        out["_counters"] = {"busy": jf[0], "total": jf[1], "own_cpu_s": own_cpu_s(), "t": time.time(),
                            "cpu_ids": mask}
    return out


def over_run(start: Mapping[str, Any]) -> dict[str, Any]:
    """What other work did while the run ran: ``busy_cores`` (CPU time used on the CPUs the run may use by every
    process but this one and the children it waited for, over the wall time: 1.0 is one core kept busy by
    something else; a run pinned to 2 of 16 CPUs counts the work on those 2) and the load
    average at the end. A child not yet waited for (a warm worker) counts as other work. {} without counters."""
    out: dict[str, Any] = {}
    la = loadavg()
    if la is not None:
        out["loadavg_end"] = la
    c = start.get("_counters") if isinstance(start, Mapping) else None
    ids = c.get("cpu_ids") if isinstance(c, Mapping) else None
    jf = cpu_jiffies(cpus=ids if isinstance(ids, list) else None)
    if not isinstance(c, Mapping) or jf is None:
        return out
    try:
        hz = os.sysconf("SC_CLK_TCK")
        wall = time.time() - float(c["t"])
        cpus = int(start.get("cpus") or cpu_count())
        busy_s = (jf[0] - int(c["busy"])) / hz
        total_s = (jf[1] - int(c["total"])) / hz
        own = own_cpu_s() - float(c["own_cpu_s"])
    except (KeyError, TypeError, ValueError, OSError):
        return out
    if wall < 0.2 or total_s <= 0:  # too short to say (a tick is 10 ms per CPU)
        return out
    # the CPUs' own clock (total ticks over all CPUs) is the wall time they had; busy share of it, less our own
    others = max(busy_s - own, 0.0) / (total_s / cpus)
    out["busy_cores"] = round(min(others, float(cpus)), 2)
    out["seconds"] = round(wall, 2)
    return out


def finished(machine: Mapping[str, Any] | None, device: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The manifest's ``machine`` at the end of a run: the start's facts, what other work did over the run
    (:func:`over_run`), and torch's threads in the process that timed (the workload child's device event, which
    says ``threads`` on a CPU); the counters dropped. None when the run recorded no start."""
    if not isinstance(machine, Mapping):
        return None
    out = {k: v for k, v in machine.items() if k != "_counters"}
    if "_counters" in machine:
        out.update(over_run(machine))
    threads = (device or {}).get("threads") if isinstance(device, Mapping) else None
    if isinstance(threads, int) and not isinstance(threads, bool):
        out["torch_threads"] = threads
    return out


# ------------------------------------------------------------------------------------------------ comparing
def busy_of(machine: Mapping[str, Any] | None) -> float | None:
    """A run's busy cores of other work, measured over the run (None for a run too short to measure: the tasks
    running at its start are one instant's count, too noisy to compare)."""
    v = machine.get("busy_cores") if isinstance(machine, Mapping) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def load1_of(machine: Mapping[str, Any] | None) -> float | None:
    la = machine.get("loadavg") if isinstance(machine, Mapping) else None
    if isinstance(la, list) and la and isinstance(la[0], (int, float)):
        return float(la[0])
    return None


def _span(xs: list[float], fmt: str = "{:.1f}") -> str:
    lo, hi = min(xs), max(xs)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}..{fmt.format(hi)}"


def differences(base: Sequence[Mapping[str, Any] | None], new: Sequence[Mapping[str, Any] | None]
                ) -> tuple[list[str], bool]:
    """How the two sides' machine states differ, each in a few words ('busy cores of other work 0.1 vs 1.9 of 2',
    'load average 0.1 vs 2.3', 'torch threads 2 vs 1', 'governor ...', 'other processes on the GPU: new only'),
    and whether the CPUs' business differs enough (:data:`BUSY_CORES_APART`) that a CPU timing's change could
    come from it. Each side may be several runs (a range is given)."""
    out: list[str] = []
    cpus = max([int(m.get("cpus") or 0) for m in (*base, *new) if isinstance(m, Mapping)] or [0])
    bb = [x for x in map(busy_of, base) if x is not None]
    bn = [x for x in map(busy_of, new) if x is not None]
    apart = False
    if bb and bn:
        gap = max(min(bn) - max(bb), min(bb) - max(bn), 0.0)
        if gap >= max(BUSY_CORES_APART, 0.25 * cpus):
            apart = True
            out.append(f"busy cores of other work {_span(bb)} vs {_span(bn)}" + (f" of {cpus}" if cpus else ""))
    lb = [x for x in map(load1_of, base) if x is not None]
    ln = [x for x in map(load1_of, new) if x is not None]
    if lb and ln and max(min(ln) - max(lb), min(lb) - max(ln), 0.0) >= max(1.0, 0.5 * cpus):
        out.append(f"load average {_span(lb)} vs {_span(ln)}")

    def facts(side: Sequence[Mapping[str, Any] | None], key: str) -> set[str]:
        return {str(m[key]) for m in side if isinstance(m, Mapping) and m.get(key) is not None}

    for key, words in (("torch_threads", "torch threads"), ("governor", "CPU governor")):
        fb, fn = facts(base, key), facts(new, key)
        if fb and fn and fb != fn:
            out.append(f"{words} {','.join(sorted(fb))} vs {','.join(sorted(fn))}")
    mb = [m["cpu_mhz"]["mean"] for m in base if isinstance(m, Mapping) and isinstance(m.get("cpu_mhz"), dict)
          and isinstance(m["cpu_mhz"].get("mean"), (int, float))]
    mn = [m["cpu_mhz"]["mean"] for m in new if isinstance(m, Mapping) and isinstance(m.get("cpu_mhz"), dict)
          and isinstance(m["cpu_mhz"].get("mean"), (int, float))]
    if mb and mn and abs(sum(mn) / len(mn) / (sum(mb) / len(mb)) - 1) > 0.1:
        out.append(f"CPU frequency {_span(mb, '{:.0f}')} vs {_span(mn, '{:.0f}')} MHz")
    gb = [bool(m.get("gpu_processes")) for m in base if isinstance(m, Mapping) and "gpu_processes" in m]
    gn = [bool(m.get("gpu_processes")) for m in new if isinstance(m, Mapping) and "gpu_processes" in m]
    if gb and gn and any(gb) != any(gn):
        out.append(f"other processes on the GPU: {'base' if any(gb) else 'new'} only")
    return out, apart


def describe(machine: Mapping[str, Any] | None) -> str | None:
    """A run's machine state in a few words ('busy cores of other work 1.9 of 2, load 2.3, torch threads 2')."""
    if not isinstance(machine, Mapping):
        return None
    parts = []
    b = busy_of(machine)
    if b is not None:
        parts.append(f"busy cores of other work {b:.1f}" + (f" of {machine['cpus']}" if machine.get("cpus") else ""))
    la = load1_of(machine)
    if la is not None:
        parts.append(f"load {la:.1f}")
    if machine.get("torch_threads") is not None:
        parts.append(f"torch threads {machine['torch_threads']}")
    if isinstance(machine.get("cpu_mhz"), dict):
        parts.append(f"CPU {machine['cpu_mhz'].get('mean')} MHz")
    if machine.get("governor"):
        parts.append(f"governor {machine['governor']}")
    if machine.get("gpu_processes"):
        parts.append(f"{len(machine['gpu_processes'])} other GPU process(es)")
    return ", ".join(parts) or None
