"""Is this process's CPU slow? One JSON line: a pure Python loop's ms, torch.empty's and a tiny CUDA launch's us, the
CPU the process ran on and its clock. Run it in several processes, one after another:

    for i in $(seq 12); do python3 benchmarks/host_probe.py; done

On the H200 machine a process's host speed differs by up to 2x from the next one's (benchmarks/RESULTS.md, "The host's
share of a call"): where a pure Python loop is slow too, the state is the machine's, not profctl's launch path.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path


def main() -> None:
    import torch

    x = torch.empty(16, device="cuda")
    torch.cuda.synchronize()

    def py_loop() -> float:
        t, s = time.perf_counter(), 0
        for i in range(300000):
            s += i
        return (time.perf_counter() - t) * 1e3

    def empties() -> float:
        t = time.perf_counter()
        for _ in range(2000):
            torch.empty(1024, device="cuda")
        return (time.perf_counter() - t) * 1e6 / 2000

    def launches() -> float:
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(2000):
            x.add_(1)
        dt = (time.perf_counter() - t) * 1e6 / 2000
        torch.cuda.synchronize()
        return dt

    py = [py_loop() for _ in range(7)]
    em = [empties() for _ in range(5)]
    la = [launches() for _ in range(5)]
    cpu = int(Path("/proc/self/stat").read_text().split()[38])
    info = Path("/proc/cpuinfo").read_text().splitlines()
    mhz = [ln.split(":")[1].strip() for ln in info if ln.startswith("cpu MHz")]
    print(json.dumps({"py_loop_ms": round(statistics.median(py), 2), "torch_empty_us": round(statistics.median(em), 2),
                      "add_launch_us": round(statistics.median(la), 2), "cpu": cpu,
                      "mhz": mhz[cpu] if cpu < len(mhz) else None, "affinity": len(os.sched_getaffinity(0))}))


if __name__ == "__main__":
    main()
