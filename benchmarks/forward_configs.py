"""profctl's forward configs one launch each for plain ncu, or timed four ways: is it the kernel or the host?

    python3 benchmarks/forward_configs.py --time m64n128w4s3 m128n128w4s3-ws-gl --dtype fp8 --rounds 3
    ncu --set full --import-source yes --nvtx --clock-control none -k regex:"_gl_ws_fp8|_fwd_fp8|_gl_fp8" \\
        --launch-skip 2 -c 2 -o split python3 benchmarks/forward_configs.py --dtype fp8 A B

Without --time every config is called once (compiled, warm), then once each inside the NVTX range ``fwd@<config>``
(so ncu skips the first round), for ``profctl explain split.ncu-rep -k fwd@A`` and ``profctl explain split.ncu-rep
split.ncu-rep -k fwd@A --vs fwd@B --changed``.

With --time, per round (fresh seeded inputs) and config, JSON lines of: do_bench's median (L2 flushed, calls queued
back to back: where the host takes longer than the kernel, do_bench times the host), the kernels' own mean time
(torch.profiler over 20 calls), a CUDA graph of 20 calls replayed (no host in it) and a call followed by a sync (the
host and the kernel in series). A Gluon launch builds its TMA descriptors on the host every call.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="+", help="forward configs, e.g. m128n128w4s3-ws-gl")
    ap.add_argument("--dtype", choices=("bf16", "fp8"), default="bf16")
    ap.add_argument("--shape", default="1,32,4096,128", help="batch,heads,seqlen,head dim")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--time", action="store_true", help="time each config (JSON lines) instead of one launch each")
    ap.add_argument("--rounds", type=int, default=1, help="--time: rounds of fresh inputs, configs interleaved")
    a = ap.parse_args()
    import nvtx
    import torch

    from profctl.workloads.kernels import triton_attention as ta

    shape = tuple(int(x) for x in a.shape.split(","))
    cfgs = {c: ta.parse_configs(f"fwd={c}")["fwd"] for c in a.configs}
    for r in range(a.rounds if a.time else 1):
        args, kw = _inputs(shape, a.dtype, r)

        def launch(name: str, args: Any = args, kw: Any = kw) -> None:
            q, k, v = args
            with ta.use_configs(fwd=cfgs[name]):
                ta.attention(q, k, v, is_causal=a.causal, **kw)

        for name in cfgs:
            launch(name)
        torch.cuda.synchronize()
        if a.time:
            for name in cfgs:
                t = _times(lambda name=name: launch(name), shape, a.causal)
                print(json.dumps({"round": r, "config": name, **t}), flush=True)
            continue
        for name in cfgs:
            with nvtx.annotate(name, domain="fwd"):
                launch(name)
                torch.cuda.synchronize()
    return 0


def _inputs(shape: tuple[int, ...], dtype: str, seed: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Seeded (q, k, v) as the workload prepares them (fp8: quantized per tensor, V K-major) and the descales."""
    import torch

    from profctl.workloads import fp8
    from profctl.workloads.kernels import triton_attention as ta

    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(*shape, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    if dtype == "bf16":
        return (q, k, v), {}
    (q8, qd), (k8, kd), (v8, vd) = fp8.quantize(q), fp8.quantize(k), fp8.quantize(v)
    return ta.prepare(q8, k8, v8), {"q_descale": qd, "k_descale": kd, "v_descale": vd}


def _times(call: Any, shape: tuple[int, ...], causal: bool) -> dict[str, float]:
    """TFLOP/s by do_bench, by the kernels' own time, by a replayed CUDA graph; ms of a call with a sync after it."""
    import time

    import torch
    from torch.profiler import ProfilerActivity, profile
    from triton.testing import do_bench

    b, h, s, d = shape
    flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0)

    def tflops(ms: float) -> float:
        return round(flops / ms / 1e9, 1)

    bench_ms = do_bench(call, warmup=10, rep=60, return_mode="median")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            call()
        torch.cuda.synchronize()
    kern = [e for e in prof.events() if e.device_type.name == "CUDA" and ("fwd" in e.name or "fp8" in e.name)]
    kernel_ms = sum(e.device_time for e in kern) / max(1, len(kern)) / 1e3
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        call()  # allocations of the captured calls come from the graph's pool after this
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(20):
                call()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    torch.cuda.synchronize()
    graph_ms = start.elapsed_time(end) / 20
    t0 = time.perf_counter()
    for _ in range(20):
        call()
        torch.cuda.synchronize()
    synced_ms = (time.perf_counter() - t0) / 20 * 1e3
    return {"do_bench": tflops(bench_ms), "kernel": tflops(kernel_ms), "graph": tflops(graph_ms),
            "kernels_seen": len(kern), "call_synced_ms": round(synced_ms, 4), "kernel_ms": round(kernel_ms, 4)}


if __name__ == "__main__":
    sys.exit(main())
