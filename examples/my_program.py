"""A user's own program, as profctl meets it: `profctl nsys|ncu|torch -- python examples/my_program.py`.

It marks its work with its own NVTX ranges -- push/pop ranges in the domain "myapp" (`step`, `attention`, `mlp`),
a start/end range (`warmup`) and a torch.profiler record_function (`loss`) -- and runs a Triton kernel of its
own (a fused scale-and-add) next to PyTorch's attention. On a machine without a GPU it runs on the CPU (Triton
only under TRITON_INTERPRET=1).

    python examples/my_program.py [--steps N] [--seqlen S] [--exit-status K]
"""

from __future__ import annotations

import argparse
import os
import sys

import nvtx
import torch
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the environment
    triton = None


if triton is not None:
    @triton.jit
    def _scale_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        x = tl.load(x_ptr + i, mask=m)
        y = tl.load(y_ptr + i, mask=m)
        tl.store(out_ptr + i, x * alpha + y, mask=m)


def scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """x * alpha + y, with the Triton kernel where it can run, else with PyTorch."""
    use_triton = triton is not None and (x.is_cuda or os.environ.get("TRITON_INTERPRET") == "1")
    if not use_triton:
        return x * alpha + y
    out = torch.empty_like(x)
    n = x.numel()
    _scale_add[(triton.cdiv(n, 1024),)](x, y, out, n, alpha, BLOCK=1024)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--seqlen", type=int, default=256)
    p.add_argument("--exit-status", type=int, default=0, help="exit with this status (to see profctl report it)")
    a = p.parse_args(argv)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dt = torch.bfloat16 if dev == "cuda" else torch.float32
    g = torch.Generator(device="cpu").manual_seed(0)
    q, k, v = (torch.randn(1, 8, a.seqlen, 64, generator=g).to(dev, dt) for _ in range(3))
    w = torch.randn(64, 256, generator=g).to(dev, dt)
    rid = nvtx.start_range("warmup", domain="myapp")
    F.scaled_dot_product_attention(q, k, v, is_causal=True)
    nvtx.end_range(rid)
    for _ in range(a.steps):
        with nvtx.annotate("step", domain="myapp"):
            with nvtx.annotate("attention", domain="myapp"):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            with nvtx.annotate("mlp", domain="myapp"):
                h = torch.relu(o @ w)
                o2 = scale_add(h, h, 0.5)
            with torch.profiler.record_function("loss"):
                loss = o2.float().square().mean()
    if dev == "cuda":
        torch.cuda.synchronize()
    print(f"my_program: {a.steps} steps on {dev}, loss {loss.item():.4f}")
    return a.exit_status


if __name__ == "__main__":
    sys.exit(main())
