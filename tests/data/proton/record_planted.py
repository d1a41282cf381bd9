"""Record the planted Proton traces of tests/data/proton with plain Proton (no profctl): small Triton kernels
whose scopes are placed where the answer is known.

    python tests/data/proton/record_planted.py --out DIR          # every variant, each in a child process
    python tests/data/proton/record_planted.py --out DIR --variant chain

Variants (each writes DIR/<variant>.chrome_trace, or .hatchet for the tree, and DIR/<variant>.log with the
child's output, where Proton prints what it dropped):

* ``chain``: 2 CTAs x 4 warps, a loop of 6 iterations: scope ``produce`` (sleeps ~1 us) then ``consume``, which
  uses produce's value (~0.5 us): on every warp each consume starts after its produce ended.
* ``groups_overlap``: 2 CTAs x 8 warps: scope ``A`` (warps 0-3 sleep ~8 us, warps 4-7 ~1 us), then scope ``B``
  (~2 us) with no barrier between: warps 4-7 run B while warps 0-3 are still in A.
* ``groups_barrier``: the same with ``tl.debug_barrier()`` between A and B. Recorded on the H200 (Triton 3.6),
  warps 4-7 open B right after their A, *before* the barrier's wait (the clock read was scheduled above the
  barrier), so their B holds the wait: every B ends together, after every A.
* ``groups_even``: every warp sleeps ~4 us in A, then ~2 us in B, no barrier: the warps move together, so a B
  overlaps an A of another warp only for the few cycles the warps start apart.
* ``noscopes``: a kernel without a scope under Proton's instrumentation.
* ``tree``: ``chain`` in Proton's tree (hatchet) format (``data="tree"``).
* ``overflow``: ``chain`` with 64 iterations into a 1 KiB shared buffer: Proton drops events and says so.
* ``sampled``: ``chain`` with only warps 0 and 2 recorded (``sampling_strategy="selective"``).
* ``clock32``, ``global``, ``warpgroup``: ``chain`` with 32-bit clocks, a global-memory buffer, warp-group
  granularity.
* ``two_launches``: ``chain`` launched twice, each launch inside a host-side ``proton.scope``.

The sleeps are ``nanosleep`` (approximate by design): the tests never assume a duration, they compare profctl's
figures with the events in the file.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

VARIANTS = ("chain", "groups_overlap", "groups_barrier", "groups_even", "noscopes", "tree", "overflow", "sampled", "clock32",
            "global", "warpgroup", "two_launches")


try:  # the kernels need Triton and Proton (the GPU machine); --help works without them
    import triton
    import triton.language as tl
    import triton.profiler.language as pl
except ImportError:  # pragma: no cover
    triton = None

if triton is not None:

    @triton.jit
    def sleep_by_warp(x, split, low, high):
        """Each thread sleeps `low` ns when its warp is below `split`, else `high` ns; returns x (so what comes
        next depends on it)."""
        return tl.inline_asm_elementwise(
            asm="{ .reg .u32 wid; .reg .pred lt; mov.u32 wid, %tid.x; shr.u32 wid, wid, 5; "
                "setp.lt.u32 lt, wid, $2; selp.u32 wid, $3, $4, lt; nanosleep.u32 wid; mov.b32 $0, $1; }",
            constraints="=r,r,r,r,r", args=[x, split, low, high], dtype=tl.int32, is_pure=False, pack=1)

    @triton.jit
    def chain_kernel(x_ptr, y_ptr, N_ITER: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        zero = tl.zeros_like(x)
        for _ in range(N_ITER):
            with pl.scope("produce"):
                x = sleep_by_warp(x + 1, zero, zero + 1000, zero + 1000)
            with pl.scope("consume"):
                x = sleep_by_warp(x * 3, zero, zero + 500, zero + 500)
        tl.store(y_ptr + offs, x)

    @triton.jit
    def groups_kernel(x_ptr, y_ptr, BARRIER: tl.constexpr, EVEN: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        zero = tl.zeros_like(x)
        with pl.scope("A"):
            if EVEN:
                x = sleep_by_warp(x + 1, zero + 4, zero + 4000, zero + 4000)
            else:
                x = sleep_by_warp(x + 1, zero + 4, zero + 8000, zero + 1000)
        if BARRIER:
            tl.debug_barrier()
        with pl.scope("B"):
            x = sleep_by_warp(x * 3, zero + 4, zero + 2000, zero + 2000)
        tl.store(y_ptr + offs, x)

    @triton.jit
    def plain_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 2)


def run_variant(name: str, out: Path) -> None:
    import torch
    import triton.profiler as proton

    pl.enable_semantic("triton")
    chain, groups, plain = chain_kernel, groups_kernel, plain_kernel
    opts: dict[str, object] = {}
    n_iter, warps, grid = 6, 4, 2
    if name == "overflow":
        n_iter, opts = 64, {"buffer_size": 1024}
    elif name == "sampled":
        opts = {"sampling_strategy": "selective", "sampling_options": "0,2"}
    elif name == "clock32":
        opts = {"optimizations": "clock32"}
    elif name == "global":
        opts = {"buffer_type": "global"}
    elif name == "warpgroup":
        opts = {"granularity": "warp_group"}
    if name.startswith("groups"):
        warps = 8
    block = 32 * warps
    x = torch.arange(grid * block, device="cuda", dtype=torch.int32)
    y = torch.empty_like(x)
    data = "tree" if name == "tree" else "trace"
    proton.start(str(out / name), data=data, backend="instrumentation", mode=proton.mode.Default(**opts))
    if name.startswith("groups"):
        groups[(grid,)](x, y, BARRIER=name == "groups_barrier", EVEN=name == "groups_even", BLOCK=block,
                        num_warps=warps)
    elif name == "noscopes":
        plain[(grid,)](x, y, BLOCK=block, num_warps=warps)
    elif name == "two_launches":
        for where in ("first", "second"):
            with proton.scope(where):
                chain[(grid,)](x, y, N_ITER=n_iter, BLOCK=block, num_warps=warps)
    else:
        chain[(grid,)](x, y, N_ITER=n_iter, BLOCK=block, num_warps=warps)
    torch.cuda.synchronize()
    proton.finalize()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--variant", choices=VARIANTS)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.variant:
        run_variant(a.variant, out)
        return 0
    bad = 0
    for v in VARIANTS:  # a child each: Proton's own messages land in that variant's log
        with open(out / f"{v}.log", "w") as log:
            r = subprocess.run([sys.executable, __file__, "--out", str(out), "--variant", v], stdout=log,
                               stderr=subprocess.STDOUT, timeout=300, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        print(f"{v}: exit {r.returncode}", flush=True)
        bad += r.returncode != 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
