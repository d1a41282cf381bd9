"""Validate profctl's bench timing on a GPU against triton.testing.do_bench, and measure NVTX's cost.

For each backend (those available) at batch 1, 32 heads, head dim 128, bf16, seqlen 4096, causal and not:
  - profctl's own timing (profctl.workloads.attention.run_case: CUDA events per iteration, median), NVTX on;
  - the same with NVTX off (its cost: the difference of medians, interleaved rounds);
  - triton.testing.do_bench(fn, return_mode="median") of the same callable on the same inputs, same process.
do_bench zeroes a 256 MiB buffer before each repetition (a cold L2); profctl runs iterations back to back
unless --flush-l2, so both profctl variants are reported.

    python benchmarks/gpu_validate_bench.py --out results.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

from profctl.spec import AttentionSpec
from profctl.workloads import backends
from profctl.workloads.attention import inputs, run_case


def host_enqueue_us(call, n: int = 20) -> float:
    """CPU time to enqueue one call while the GPU is kept busy (so no call waits on the GPU): median, us."""
    import time

    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e9))  # ~1 s of GPU spin: every call below is queued behind it
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        ts.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(ts)


def kernel_ms_per_call(call, n: int = 10) -> float:
    """Sum of the GPU kernels' durations per call, from torch.profiler (no host gaps counted)."""
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            call()
        torch.cuda.synchronize()
    total_us = sum(e.device_time_total for e in prof.key_averages() if e.device_time_total > 0
                   and not e.key.startswith("ProfilerStep"))
    # key_averages counts kernels once each under their own name; the CPU-side ops' device totals are 0
    return total_us / 1e3 / n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", default="sdpa-flash,sdpa-cudnn,sdpa-efficient,sdpa-math,eager,fa4,flash-attn")
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from triton.testing import do_bench

    results = []
    for causal in (False, True):
        for be in a.backends.split(","):
            spec = AttentionSpec(backend=be, batch=1, seqlen_q=a.seqlen, seqlen_kv=a.seqlen, heads=32, kv_heads=32,
                                 head_dim=128, dtype="bf16", causal=causal, pass_="fwd", device="cuda")
            try:
                fn = backends.load(be)
                backends.check(spec, fn)
            except (backends.BackendUnavailable, backends.BadReference) as e:
                results.append({"backend": be, "causal": causal, "status": "unsupported", "reason": str(e)})
                print(f"{be:15s} causal={causal}: unsupported: {e}", flush=True)
                continue
            on, off, flushed = [], [], []
            for _ in range(a.rounds):  # interleave, so drift hits both the same
                r1 = run_case(spec, warmup=5, iters=a.iters, nvtx=True, check=False, flush_l2=False)
                r2 = run_case(spec, warmup=5, iters=a.iters, nvtx=False, check=False, flush_l2=False)
                r3 = run_case(spec, warmup=5, iters=a.iters, nvtx=True, check=False, flush_l2=True)
                if r1["status"] != "ok":
                    break
                on.append(r1["median_ms"])
                off.append(r2["median_ms"])
                flushed.append(r3["median_ms"])
            if not on:
                results.append({"backend": be, "causal": causal, "status": r1["status"], "reason": r1["reason"]})
                print(f"{be:15s} causal={causal}: {r1['status']}: {r1['reason']}", flush=True)
                continue
            q, k, v, _ = inputs(spec, False, 0)

            def call(fn=fn, q=q, k=k, v=v, causal=causal):  # bind this iteration's objects
                return fn(q, k, v, is_causal=causal)

            with torch.no_grad():
                db = [do_bench(call, warmup=25, rep=100, return_mode="median") for _ in range(a.rounds)]
                host_us = host_enqueue_us(call)
                kern_ms = kernel_ms_per_call(call)
            del q, k, v, call
            torch.cuda.empty_cache()
            row = {
                "backend": be, "causal": causal, "status": "ok",
                "profctl_ms": statistics.median(on), "profctl_no_nvtx_ms": statistics.median(off),
                "profctl_flush_l2_ms": statistics.median(flushed), "do_bench_ms": statistics.median(db),
                "rounds": {"nvtx": on, "no_nvtx": off, "flush_l2": flushed, "do_bench": db},
            }
            row["host_enqueue_us"] = host_us
            row["kernel_ms_per_call"] = kern_ms
            row["diff_vs_do_bench_pct"] = 100 * (row["profctl_ms"] / row["do_bench_ms"] - 1)
            row["diff_flush_vs_do_bench_pct"] = 100 * (row["profctl_flush_l2_ms"] / row["do_bench_ms"] - 1)
            row["nvtx_cost_pct"] = 100 * (row["profctl_ms"] / row["profctl_no_nvtx_ms"] - 1)
            from profctl.flops import flops

            row["tflops_profctl"] = flops(spec) / (row["profctl_ms"] * 1e-3) / 1e12
            row["tflops_do_bench"] = flops(spec) / (row["do_bench_ms"] * 1e-3) / 1e12
            results.append(row)
            print(f"{be:15s} causal={causal!s:5s} profctl {row['profctl_ms']:.4f} ms "
                  f"({row['tflops_profctl']:.0f} TFLOP/s)  flushL2 {row['profctl_flush_l2_ms']:.4f}  "
                  f"do_bench {row['do_bench_ms']:.4f} ms ({row['tflops_do_bench']:.0f})  "
                  f"diff {row['diff_vs_do_bench_pct']:+.2f}% / flush {row['diff_flush_vs_do_bench_pct']:+.2f}%  "
                  f"nvtx cost {row['nvtx_cost_pct']:+.2f}%  host {host_us:.0f} us/call  kernels {kern_ms:.4f} ms/call",
                  flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "results": results},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
