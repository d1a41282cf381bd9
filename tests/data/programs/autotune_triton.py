"""A program that autotunes a Triton kernel before the launches that matter (issue 31): `scale_add` over eight
configurations, each timed by Triton's autotuner (dozens of launches, with its cache-clearing kernel between
them), then three launches of the winner. Plain script, independent of profctl: tests/gpu/test_ncu_progress_gpu.py
runs it under `profctl ncu`."""

import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (256, 512, 1024, 2048) for w in (2, 4)],
                 key=["n"])
@triton.jit
def scale_add(X, Y, Out, n, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(X + offs, mask=m)
    y = tl.load(Y + offs, mask=m)
    tl.store(Out + offs, x * alpha + y, mask=m)


def main() -> None:
    n = 1 << 22
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.empty_like(x)

    def grid(meta: dict) -> tuple[int]:
        return (triton.cdiv(n, meta["BLOCK"]),)

    for _ in range(3):
        scale_add[grid](x, y, out, n, 2.0)
    torch.cuda.synchronize()
    print("ok", scale_add.best_config, float(out[0]))


if __name__ == "__main__":
    main()
