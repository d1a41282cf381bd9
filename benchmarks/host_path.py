"""Where a `triton_attention.attention()` call spends its host time: per config, the call's own wall time with an
empty queue (a sync before each call), the time a call of a back-to-back loop takes (the host's or the kernel's,
whichever is longer), then cProfile's top functions over the synced calls.

    python3 benchmarks/host_path.py --causal default m128n128w4s3-ws-gl --launch both --calls 300 --top 25

The bench loop waits for the host wherever a call's host time nears its kernel's (bench's ``host_ms``); this says
which lines of the launch path that time is in, and what `workloads.kernels.launch` (``--launch fast``) saves against
Triton's own ``fn[grid]`` path (``--launch triton``) in the same process. JSON lines, then cProfile's tables.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="+", help="forward configs, e.g. m128n128w4s3-ws-gl; 'default' for the default")
    ap.add_argument("--shape", default="1,32,4096,128", help="batch,heads,seqlen,head dim")
    ap.add_argument("--dtype", choices=("bf16", "fp8"), default="bf16")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--top", type=int, default=25, help="cProfile rows (0: no profile)")
    ap.add_argument("--launch", choices=("both", "fast", "triton"), default="both",
                    help="kernels launched through workloads.kernels.launch (fast), by fn[grid] (triton), or both")
    a = ap.parse_args()
    import torch

    from profctl.workloads import fp8
    from profctl.workloads.kernels import launch
    from profctl.workloads.kernels import triton_attention as ta

    shape = tuple(int(x) for x in a.shape.split(","))
    q, k, v = (torch.randn(*shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    kw: dict[str, Any] = {}
    if a.dtype == "fp8":
        (q, kw["q_descale"]), (k, kw["k_descale"]), (v, kw["v_descale"]) = (fp8.quantize(x) for x in (q, k, v))
        q, k, v = ta.prepare(q, k, v)
    modes = {"both": (False, True), "fast": (True,), "triton": (False,)}[a.launch]
    for name, fast in [(n, f) for n in a.configs for f in modes]:
        launch.ENABLED = fast
        forced = {} if name == "default" else {"fwd": ta.parse_configs(f"fwd={name}")["fwd"]}

        def call(forced: dict[str, Any] = forced) -> None:
            with ta.use_configs(**forced), torch.no_grad():
                ta.attention(q, k, v, is_causal=a.causal, **kw)

        row = {"config": name, "launch": "fast" if fast else "triton", "dtype": a.dtype, "calls": a.calls,
               **_walls(call, a.calls, torch.cuda.synchronize)}
        print(json.dumps(row), flush=True)
        if a.top:
            print(f"## {name}, {row['launch']} launch: cProfile over {a.calls} synced calls\n"
                  + _profile(call, a.calls, a.top, torch.cuda.synchronize), flush=True)
    return 0


def _walls(call: Callable[[], None], n: int, sync: Callable[[], None]) -> dict[str, float]:
    """The host's microseconds a call with an empty queue (median, 10th and 90th percentile), and a back-to-back
    loop's microseconds a call."""
    for _ in range(5):
        call()
    sync()
    walls = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        walls.append((time.perf_counter() - t0) * 1e6)
        sync()
    walls.sort()
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    sync()
    loop = (time.perf_counter() - t0) * 1e6 / n
    return {"host_us_median": round(statistics.median(walls), 1), "host_us_p10": round(walls[n // 10], 1),
            "host_us_p90": round(walls[n * 9 // 10], 1), "loop_us_per_call": round(loop, 1)}


def _profile(call: Callable[[], None], n: int, top: int, sync: Callable[[], None]) -> str:
    prof = cProfile.Profile()
    for _ in range(n):
        prof.enable()
        call()
        prof.disable()
        sync()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    lines = buf.getvalue().splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip().startswith("ncalls")), 0)
    out = []
    for ln in lines[start:]:
        head, _, tail = ln.rpartition(" ")
        out.append(f"{head} {'/'.join(tail.split('/')[-2:])}" if "/" in tail else ln)
    return "\n".join(ln for ln in out if ln.strip())


if __name__ == "__main__":
    sys.exit(main())
