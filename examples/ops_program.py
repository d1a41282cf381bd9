"""A small program of matmuls, softmax, elementwise ops and a layer norm, run N steps: what `profctl compare`
must find unchanged between two runs, and where a planted slowdown must be found in exactly one op.

    python examples/ops_program.py [--steps N] [--rows R] [--size D] [--device cpu|cuda]
    OPS_SLOW=softmax python examples/ops_program.py        # the softmax does twice the work, nothing else changes

Every run does the same ops in the same order: the softmax's input is always sliced from a tensor of twice the rows, and
only OPS_SLOW=softmax makes the softmax run over all of them (then its first half is kept), so the planted slowdown
changes the softmax's time and no other op's. profctl's tests run it on the CPU (one thread, for steadier times on a
shared machine); `benchmarks/gpu.sh gate-nsys gate-torch` runs it on the GPU under nsys and torch.profiler.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F


def step(x: torch.Tensor, w: torch.Tensor, xx: torch.Tensor, rows: int, slow: bool) -> torch.Tensor:
    """One step: matmul, softmax (over `rows` rows, or twice that when `slow`), elementwise ops, layer norm."""
    h = x @ w
    s = torch.softmax(xx[: 2 * rows if slow else rows], dim=-1)[:rows]
    e = F.gelu(h) * s + 1.0
    return F.layer_norm(e, e.shape[-1:])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--rows", type=int, default=256)
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args(argv)
    if a.device == "cpu":
        torch.set_num_threads(1)
    slow = os.environ.get("OPS_SLOW", "") == "softmax"
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(a.rows, a.size, generator=g).to(a.device)
    w = torch.randn(a.size, a.size, generator=g).to(a.device) / a.size ** 0.5
    xx = torch.randn(2 * a.rows, a.size, generator=g).to(a.device)
    out = x
    for _ in range(a.steps):
        out = step(x, w, xx, a.rows, slow)
    if a.device == "cuda":
        torch.cuda.synchronize()
    print(f"ops_program: {a.steps} steps on {a.device}{' (softmax slowed 2x)' if slow else ''}, "
          f"checksum {float(out.float().sum()):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
