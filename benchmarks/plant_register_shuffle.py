"""A planted register-shuffle fault for `profctl explain`, recorded with plain ncu: profctl's one-warpgroup FP8 Gluon
forward (workloads/kernels/gluon_fp8_attention.py, ``_gl_fp8_fwd_kernel``) with and without ``CARRY_P8`` -- P made
the e4m3 operand at the end of the iteration that computed it and carried by the loop, which Triton keeps a byte a
register and repacks around every P·V (the fault), against P converted in the iteration that multiplies it (the fix).
b1 h32 s4096 d128 (``--head-dim 64``: d64), e4m3, K's keys permuted in both.

    python3 benchmarks/plant_register_shuffle.py --time          # do_bench medians of both, rounds interleaved
    ncu --set full --import-source yes --nvtx --clock-control none -k regex:_gl_fp8_fwd_kernel -c 2 -o plant \\
        python3 benchmarks/plant_register_shuffle.py             # one launch of each, in plant@carried / plant@fixed

Then ``profctl explain plant.ncu-rep -k plant@carried`` keeps its prediction, and ``profctl explain plant.ncu-rep
plant.ncu-rep -k plant@carried --vs plant@fixed --changed`` scores it (benchmarks/RESULTS.md, "Toward cuDNN").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def inputs(d: int) -> tuple[Any, ...]:
    import torch

    from profctl.workloads import fp8
    from profctl.workloads.kernels import triton_attention as ta

    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(1, 32, 4096, d, device="cuda", generator=g) for _ in range(3))
    (q8, qd), (k8, kd), (v8, vd) = fp8.quantize(q), fp8.quantize(k), fp8.quantize(v)
    q8, k8, v8 = ta.prepare(q8, k8, v8)
    return q8, k8, v8, (qd.reshape(1).float(), kd.reshape(1).float(), vd.reshape(1).float())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time", action="store_true", help="time both variants (do_bench medians) instead")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--head-dim", type=int, default=128, choices=(64, 128))
    a = ap.parse_args()
    import torch

    from profctl.workloads.kernels import gluon_fp8_attention as g8

    d = a.head_dim
    q8, k8, v8, descales = inputs(d)
    scale = 1.4426950408889634 / math.sqrt(d)

    def call(carry: bool) -> Any:
        return g8.forward(q8, k8, v8, descales, False, 0, scale, carry_p8=carry)

    if not a.time:
        import nvtx

        for name, carry in (("carried", True), ("fixed", False)):
            with nvtx.annotate(name if d == 128 else f"d{d}-{name}", domain="plant"):
                call(carry)
                torch.cuda.synchronize()
        return 0
    time_variants(call, (("carried", True), ("fixed", False)), a.rounds, 4.0 * 32 * 4096 * 4096 * d)
    return 0


def time_variants(call: Any, variants: tuple[tuple[str, bool], ...], rounds: int, flop: float) -> None:
    """do_bench medians of a plant's variants (``call(flag)``), interleaved over `rounds`, then the largest output
    difference between the first two, as JSON on stdout (each round on stderr as it comes)."""
    from triton.testing import do_bench

    rows = []
    for _ in range(rounds):
        row = {}
        for name, flag in variants:
            ms = do_bench(lambda flag=flag: call(flag), warmup=10, rep=60, return_mode="median")
            row[name] = {"ms": round(ms, 4), "tflops": round(flop / (ms * 1e-3) / 1e12, 1)}
        rows.append(row)
        print(row, file=sys.stderr, flush=True)
    o1, o2 = call(variants[0][1]), call(variants[1][1])
    print(json.dumps({"rounds": rows, "max_abs_diff": float((o1.float() - o2.float()).abs().max())}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
