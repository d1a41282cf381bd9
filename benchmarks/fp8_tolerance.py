"""The error of FP8 attention that the workload's fp8 tolerance must hold, measured on the CPU in float64.

    python benchmarks/fp8_tolerance.py                 # the table in docs/bench.md ("FP8"); ~40 s on 2 cores
    python benchmarks/fp8_tolerance.py --quick         # s <= 1024 only, seconds

The workload checks an fp8 output against float64 attention of the *dequantized* e4m3 inputs, so input
quantization is not part of the error; what is left is what the kernel rounds: P to e4m3 before P @ V (3 mantissa
bits). workloads/fp8.py ``emulate`` computes the Triton FP8 forward's arithmetic in float64 (key blocks of 128, the
running max, P rounded to e4m3, row sums of the unrounded P, v_descale at the end); ``round_p=False`` is exact
attention of the dequantized inputs. The relative error ``||o - ref|| / ||ref||`` (the workload's) is taken per
(seed, head) on random normal inputs as the workload makes them, on sharper attention (q x 3), with the bf16
output rounding included, and for a 10 % wrong softmax scale (which the tolerance must fail).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from profctl.workloads import fp8  # noqa: E402
from profctl.workloads.attention import TOLERANCE  # noqa: E402

# (seqlen, head_dim, causal, heads, q multiplier)
CASES = [(4096, 128, False, 2, 1.0), (4096, 128, True, 2, 1.0), (4096, 64, False, 2, 1.0), (4096, 64, True, 2, 1.0),
         (1024, 128, False, 4, 1.0), (256, 64, True, 8, 1.0), (4096, 128, False, 2, 3.0), (4096, 128, True, 2, 3.0),
         (37, 16, True, 2, 1.0), (64, 32, False, 2, 1.0)]


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b).norm() / b.norm())


def one(s: int, d: int, causal: bool, h: int, qmul: float, seeds: int) -> dict[str, object]:
    errs, errs_bf16, wrong = [], [], []
    for seed in range(seeds):
        g = torch.Generator().manual_seed(seed)
        q, k, v = (torch.randn(1, h, s, d, generator=g) for _ in range(3))
        (q8, qd), (k8, kd), (v8, vd) = fp8.quantize(q * qmul), fp8.quantize(k), fp8.quantize(v)
        ds, sc, bn = (qd, kd, vd), d ** -0.5, 128 if s >= 256 else 16
        o = fp8.emulate(q8, k8, v8, ds, causal, sc, block_n=bn)
        ref = fp8.emulate(q8, k8, v8, ds, causal, sc, block_n=bn, round_p=False)
        errs += [rel(o[:, i], ref[:, i]) for i in range(h)]
        errs_bf16 += [rel(o[:, i].bfloat16(), ref[:, i]) for i in range(h)]
        if seed == 0:
            bad = fp8.emulate(q8, k8, v8, ds, causal, sc * 1.1, block_n=bn)
            wrong.append(rel(bad, ref))
    return {"seqlen": s, "head_dim": d, "causal": causal, "heads": h, "q_mul": qmul, "samples": len(errs),
            "min": min(errs), "median": statistics.median(errs), "max": max(errs), "max_bf16_out": max(errs_bf16),
            "wrong_scale": wrong[0]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="only sequence lengths up to 1024")
    p.add_argument("--seeds", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(2)
    rows = []
    print(f"tolerance fp8 {TOLERANCE['fp8']}\n| s | d | mask | q x | min | median | max | max, bf16 out | 10 % wrong "
          "scale |\n|---|---|---|---|---|---|---|---|---|")
    for s, d, causal, h, qmul in CASES:
        if a.quick and s > 1024:
            continue
        t0 = time.perf_counter()
        r = one(s, d, causal, h, qmul, a.seeds)
        rows.append(r)
        took = time.perf_counter() - t0
        print(f"| {s} | {d} | {'causal' if causal else 'full'} | {qmul:g} | {r['min']:.4f} | {r['median']:.4f} | "
              f"{r['max']:.4f} | {r['max_bf16_out']:.4f} | {r['wrong_scale']:.4f} |  ({took:.0f} s)", flush=True)
    print(json.dumps({"tolerance": TOLERANCE["fp8"], "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
