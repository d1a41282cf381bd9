"""A planted mma-serialized fault for `profctl explain`, recorded with plain ncu: profctl's FP8 Gluon forward with
the next block's Q·Kᵀ issued ahead of the softmax (workloads/kernels/gluon_fp8_attention.py,
``_gl_fp8_ahead_kernel``) with and without ``CARRY_PV`` -- P_j·V_j left running into the next block, so that the loop
carries a running wgmma's accumulator and ptxas serializes every wgmma of the kernel (``ptxas -v``: C7514; the
fault), against P_j·V_j waited for at the end of its block (the fix). b1 h32 s4096 d128, e4m3, K's keys permuted.

    python3 benchmarks/plant_mma_serialized.py --time          # do_bench medians of both, rounds interleaved
    ncu --set full --import-source yes --nvtx --clock-control none -k regex:_gl_fp8_ahead_kernel -c 2 -o serial \\
        python3 benchmarks/plant_mma_serialized.py             # one launch of each, in plant@serial-carried / -fixed

Then ``profctl explain serial.ncu-rep -k plant@serial-carried`` keeps its prediction, and ``profctl explain
serial.ncu-rep serial.ncu-rep -k plant@serial-carried --vs plant@serial-fixed --changed`` scores it
(benchmarks/RESULTS.md, "Toward cuDNN").
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time", action="store_true", help="time both variants (do_bench medians) instead")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    import torch
    from plant_register_shuffle import inputs, time_variants

    from profctl.workloads.kernels import gluon_fp8_attention as g8

    q8, k8, v8, descales = inputs(128)
    scale = 1.4426950408889634 / math.sqrt(128)

    def call(carry: bool) -> Any:
        return g8.forward(q8, k8, v8, descales, False, 0, scale, ahead=True, carry_pv=carry)

    variants = (("serial-carried", True), ("serial-fixed", False))
    if not a.time:
        import nvtx

        for name, carry in variants:
            with nvtx.annotate(name, domain="plant"):
                call(carry)
                torch.cuda.synchronize()
        return 0
    time_variants(call, variants, a.rounds, 4.0 * 32 * 4096 * 4096 * 128)
    return 0


if __name__ == "__main__":
    sys.exit(main())
